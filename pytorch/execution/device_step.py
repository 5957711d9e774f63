"""One device's executable training step over a traced graph (:class:`DeviceStep`): the
interpreter a worker process runs each step (docs/execution.md, "The step that runs",
"Timing", "Message timeline"); :mod:`dnnplace.pytorch.execution.worker` builds one per plan
and device.
"""

from __future__ import annotations

import time
from typing import Any

from dnnplace.pytorch.capture.ops import apply_update

__all__ = ["DeviceStep"]


class DeviceStep:
    """One device's executable step over a traced graph."""

    def __init__(self, cap: Any, prog: Any, bound: dict[str, Any], rank_of_device: list[int], model: Any,
                 device: str = "cpu"):
        from dnnplace.pytorch.execution.program import grad_values, step_outputs
        self.cap, self.prog, self.bound, self.model = cap, prog, bound, model
        self.device = device
        self.cuda = device.startswith("cuda")
        self.consts: dict[str, Any] = {}
        self.nodes = {nd.name: nd for nd in cap.gm.graph.nodes}
        self.body: dict[int, list[Any]] = {}
        from dnnplace.pytorch.capture.ops import is_view
        for nd in cap.gm.graph.nodes:
            v = cap.rep.get(nd.name, -1)
            if v >= 0 and (nd.op == "placeholder" or (nd.op == "call_function" and not is_view(nd))):
                self.body.setdefault(v, []).append(nd)
        self.is_view = is_view
        self.grad_of_apply = {a: grad_values(cap).get(p) for p, a in cap.apply_of.items()}
        self.param_of_apply = {a: p for p, a in cap.apply_of.items()}
        self.ph_of = {cap.rep[nd.name]: nd.name for nd in cap.gm.graph.nodes if nd.op == "placeholder"}
        self.loss_node, self.grad_nodes = step_outputs(cap)
        self.rank_of_device = rank_of_device
        self.holds_loss = cap.rep.get(self.loss_node.name, -1) in set(prog.order)
        self.loss_value = float("nan")
        self.opt_state: dict[int, dict] = {}
        self.updates: list[tuple[Any, Any]] = []
        self.sent: list[list] = []       # the last step's messages (see run)
        self.received: list[list] = []
        self.buffers = {nd.name for nd, k in zip((x for x in cap.gm.graph.nodes if x.op == "placeholder"),
                                                  cap.arg_kinds) if k == "buffer"}
        self.calls: dict[str, Any] = {}
        # per graph node, its body as (fx name, env -> value), None for a placeholder (bound)
        self.steps_of = {v: [(nd.name, None if nd.op == "placeholder" else self._call_of(nd)) for nd in body]
                         for v, body in self.body.items()}
        # views (and nodes without a graph node) run where and when they are read
        self.lazy = {nd.name: self._call_of(nd) for nd in cap.gm.graph.nodes
                     if nd.op == "call_function" and (is_view(nd) or cap.rep.get(nd.name, -1) < 0)}
        self.free_after = self._last_reads()
        self.pack_of = {t.tag: p for p in prog.packs_in for t in p.transfers}
        self.nbytes_of = {t.tag: t.nbytes for t in prog.recvs}

    def _last_reads(self) -> dict[int, list[str]]:
        """Per graph node of this device's order, the values no later node or send reads
        (dropped from the environment after it, so memory is reused within the step as in an
        eager step). A value read through a view not yet replayed counts as read there too;
        the loss and the gradients (read after the step) are kept."""
        def reads(name: str, acc: set[str]) -> None:
            if name not in acc:
                acc.add(name)
                if name in self.lazy:
                    for w in self.nodes[name].all_input_nodes:
                        reads(w.name, acc)

        last: dict[str, int] = {}
        for i, v in enumerate(self.prog.order):
            acc: set[str] = set()
            if v in self.param_of_apply and self.grad_of_apply[v] is not None:
                reads(self.grad_of_apply[v].name, acc)
            for nd in self.body.get(v, ()):
                acc.add(nd.name)
                for w in nd.all_input_nodes:
                    reads(w.name, acc)
            for p in self.prog.packs_out.get(v, ()):
                for t in p.transfers:
                    reads(t.value, acc)
            for name in acc:
                last[name] = i
        keep: set[str] = set()
        for nd in (self.loss_node, *self.grad_nodes):
            if nd is not None:
                reads(nd.name, keep)
        out: dict[int, list[str]] = {}
        for name, i in last.items():
            if name not in keep:
                out.setdefault(self.prog.order[i], []).append(name)
        return out

    def _call_of(self, nd: Any) -> Any:
        call = self.calls.get(nd.name)
        if call is None:
            call = self.calls[nd.name] = self._compile(nd)
        return call

    def get(self, env: dict, name: str) -> Any:
        """The value of fx node ``name``: computed, received, a view replayed on first read,
        or a traced constant."""
        if name in env:
            return env[name]
        call = self.lazy.get(name)
        if call is not None:
            val = env[name] = call(env)
            return val
        nd = self.nodes[name]
        if nd.op == "get_attr":
            if name not in self.consts:   # a traced constant, moved to this device once
                c = getattr(self.cap.gm, nd.target)
                self.consts[name] = c.to(self.device) if self.cuda and hasattr(c, "to") else c
            val = self.consts[name]
        elif nd.op == "call_function" and (self.is_view(nd) or self.cap.rep.get(name, -1) < 0):
            val = self._call(env, nd)
        else:
            v = self.cap.rep.get(name, -1)
            raise RuntimeError(f"value {name!r} of operator {self.cap.ids[v] if v >= 0 else name!r} is not on "
                               f"device {self.prog.device}: a transfer is missing or the order is wrong")
        env[name] = val
        return val

    def _call(self, env: dict, nd: Any) -> Any:
        return self._call_of(nd)(env)

    def _compile(self, nd: Any) -> Any:
        """``env -> value`` of fx node ``nd``: its operator on its arguments read from the
        environment (``get``: views replayed where they are read). Arguments that are fx nodes
        at the top level are filled into a copy of a prepared list, the interpreter's cost per
        operator (``map_arg`` walks every argument); others go through ``map_arg``."""
        import torch
        fx_node = torch.fx.Node
        target, get = nd.target, self.get
        if isinstance(target, torch._ops.OpOverload):
            target = target._op   # what OpOverload.__call__ calls, one Python frame less per operator
        kwargs = dict(nd.kwargs)
        if self.cuda and "device" in kwargs:   # factory operators were traced on the CPU
            kwargs["device"] = torch.device(self.device)

        def nested(a: Any) -> bool:   # an fx node inside a list, tuple, dict or slice
            found: list = []
            torch.fx.node.map_arg(a, found.append)
            return bool(found) and not isinstance(a, fx_node)

        template = list(nd.args)
        slots = [(i, a.name) for i, a in enumerate(template) if isinstance(a, fx_node)]
        lists = [(i, list(a), [(j, x.name) for j, x in enumerate(a) if isinstance(x, fx_node)])
                 for i, a in enumerate(template) if nested(a) and isinstance(a, (list, tuple))
                 and not any(nested(x) for x in a)]   # e.g. cat's list of tensors
        if (sum(nested(a) for a in template) > len(lists)
                or any(isinstance(a, fx_node) or nested(a) for a in kwargs.values())):
            args0, kwargs0 = nd.args, kwargs

            def call(env: dict) -> Any:
                args = torch.fx.node.map_arg(args0, lambda a: get(env, a.name))
                kw = torch.fx.node.map_arg(kwargs0, lambda a: get(env, a.name))
                return target(*args, **kw)
            return call

        def call_flat(env: dict) -> Any:
            args = template.copy()
            for i, name in slots:
                args[i] = env[name] if name in env else get(env, name)
            for i, elems, names in lists:
                xs = elems.copy()
                for j, name in names:
                    xs[j] = env[name] if name in env else get(env, name)
                args[i] = xs
            return target(*args, **kwargs)
        return call_flat

    def run_node(self, env: dict, v: int) -> None:
        if v in self.param_of_apply:
            g = self.grad_of_apply[v]
            if g is not None:
                # the update is a new tensor installed after the step: the graph has no edge
                # from a parameter's other readers to its update, so it may run before them
                ph = self.ph_of[self.param_of_apply[v]]
                new = apply_update(self.model.optimizer, self.bound[ph], self.get(env, g.name),
                                   self.opt_state.setdefault(v, {}), self.model.lr)
                self.updates.append((ph, new))
            return
        bound = self.bound
        for name, call in self.steps_of[v]:
            env[name] = bound[name] if call is None else call(env)

    def _receive(self, env: dict, p: Any, posted: Any) -> tuple | None:
        """Wait for pack ``p`` (``posted``: its ``(work, buffer)``, ``None`` when it has no
        bytes) and put its tensors into ``env``; ``(wait start, wait end, ready)`` or ``None``."""
        import torch
        clock = time.perf_counter
        if posted is not None:
            w0 = clock()
            posted[0].wait()
            w1 = clock()
            buf = posted[1]
        ts = p.transfers
        if posted is None:
            vals = [torch.empty(t.shape, dtype=t.dtype) for t in ts]
        elif len(ts) == 1:
            vals = [buf]
        else:   # the tensors' bytes, concatenated in order
            vals, off = [], 0
            for t in ts:
                vals.append(buf[off:off + t.nbytes].view(_wire(torch, t.dtype)).view(t.shape))
                off += t.nbytes
        for t, val in zip(ts, vals):
            if t.dtype == torch.bool:
                val = val.view(torch.bool)   # sent as uint8 (gloo has no bool)
            if self.cuda:
                val = val.to(self.device)
            if t.stride:  # the views replayed on it may need the producer's layout
                val = torch.empty_strided(t.shape, t.stride, dtype=t.dtype, device=val.device).copy_(val)
            env[t.value] = val
        return None if posted is None else (w0, w1, clock())

    def _send(self, dist: Any, env: dict, p: Any, pending: list, sent: list) -> None:
        """Send pack ``p``: one tensor as it is (contiguous), several as their bytes concatenated."""
        import torch
        s0 = time.perf_counter()
        vals = []
        for t in p.transfers:
            val = self.get(env, t.value)
            if self.cuda:   # through host memory (a copy, so buffers updated later do not matter)
                val = val.to("cpu").contiguous()
            elif len(p.transfers) == 1 and t.value in self.buffers:
                val = val.clone()   # buffers may be updated in place (running statistics) before the send completes
            else:
                val = val.contiguous()
            vals.append(val.view(torch.uint8) if val.dtype == torch.bool else val)
        if len(vals) == 1:
            wire = vals[0]
        else:   # a copy: later in-place updates of buffers do not matter
            wire = torch.cat([x.reshape(-1).view(torch.uint8) for x in vals])
        if wire.numel():
            pending.append((dist.isend(wire, dst=self.rank_of_device[p.dst], tag=p.id), wire))
            sent.append([p.id, s0, time.perf_counter()])

    def run(self, dist: Any, record: bool) -> tuple[float, float, list, dict]:
        """One step: (t0, t_end, [(node, start, end)], outputs of step for the check).

        The messages of the step are left in ``self.sent`` (``[pack, start, end]``: before the
        pack's values are made ready to send, after ``isend`` returned) and ``self.received``
        (``[tag, consumer node, wait start, wait end, ready]`` per tensor, the times of its
        pack: around ``wait()`` and after the pack's values are in the environment),
        zero-element tensors (no message) left out."""
        import torch
        env: dict[str, Any] = {}
        dist.barrier()
        clock = time.perf_counter
        t0 = clock()
        posted = {}
        for p in self.prog.packs_in:
            if p.nbytes:
                ts = p.transfers
                buf = (torch.empty(ts[0].shape, dtype=_wire(torch, ts[0].dtype)) if len(ts) == 1
                       else torch.empty(p.nbytes, dtype=torch.uint8))
                posted[p.id] = (dist.irecv(buf, src=self.rank_of_device[p.src], tag=p.id), buf)
        pack_of, nbytes = self.pack_of, self.nbytes_of
        opened: dict[int, Any] = {}
        got: set[int] = set()
        pending: list = []
        times = []
        self.sent, self.received = sent, received = [], []
        waits, packs_out, run_node = self.prog.waits, self.prog.packs_out, self.run_node
        cuda, free_after = self.cuda, self.free_after
        for v in self.prog.order:
            tags = waits.get(v)
            if tags:
                for tag in tags:
                    if tag in got:
                        continue
                    p = pack_of[tag]
                    if p.id not in opened:
                        opened[p.id] = self._receive(env, p, posted.get(p.id))
                    got.add(tag)
                    when = opened[p.id]
                    if when is not None and nbytes[tag]:
                        received.append([tag, v, *when])
            ts = clock()
            run_node(env, v)
            if cuda:
                torch.cuda.synchronize(self.device)
            te = clock()
            for p in packs_out.get(v, ()):
                self._send(dist, env, p, pending, sent)
            for name in free_after.get(v, ()):
                env.pop(name, None)
            times.append((v, ts, te))
        for w, _ in pending:
            w.wait()
        for ph, new in self.updates:
            self.bound[ph] = new
        self.updates.clear()
        t_end = clock()
        if self.holds_loss:
            self.loss_value = float(self.get(env, self.loss_node.name))
        outs = self._outputs(env) if record else {}
        return t0, t_end, times, outs

    def _outputs(self, env: dict) -> dict:
        """The gradients this device holds."""
        out: dict[str, Any] = {"grads": {}}
        names = [n.removeprefix("model.") for n, k in zip(self.cap.arg_names, self.cap.arg_kinds) if k == "param"]
        mine = set(self.prog.order)
        for name, g in zip(names, self.grad_nodes):
            if g is not None and self.cap.rep.get(g.name, -1) in mine:
                out["grads"][name] = self.get(env, g.name).detach().cpu().clone()
        return out


def _wire(torch: Any, dtype: Any) -> Any:
    """The dtype a tensor travels as: ``uint8`` for booleans (gloo has no bool)."""
    return torch.uint8 if dtype == torch.bool else dtype
