"""``--method auto`` for the exact problems: the DP or the IP by the graph's ideal count and
structure, or both within the time limit (docs/guide.md, "Time and memory limits" and the
method list); the record says which one proved the answer and why.
"""

from __future__ import annotations

from dnnplace.methods.base import MethodOutput, Options, SolveRequest
from dnnplace.methods.tarnawski import DPOptions, _dp, run_dp
from dnnplace.methods.tarnawski_ip import IPOptions, run_ip
from dnnplace.runtime.deadline import NO_DEADLINE
from dnnplace.runtime.termination import Termination

__all__ = ["run_auto", "AUTO_MAX_IDEALS", "AUTO_DP_SHARE"]


AUTO_MAX_IDEALS = 2_000_000
"""``auto`` tries the exact DP only on a DP graph of at most this many ideals (counted by the DP as
it enumerates them, and at once from an antichain's width, :func:`~dnnplace.heuristics.ideals.antichain_width`);
past it, the IP."""

AUTO_DP_SHARE = 0.5
"""The share of the run's time ``auto`` gives the exact DP; what is left goes to the IP if the DP
did not prove its split."""


def _auto_rule(inst, req: SolveRequest) -> str | None:
    """Why ``auto`` goes straight to the IP (the DP cannot prove this request's optimum), or ``None``."""
    if req.problem != "maxload":
        return "the DP is exact for max-load only (for latency it is the Sec. 7 baseline); the latency IP is exact"
    if req.contiguity not in (None, "both"):
        return f"the DP finds contiguous splits (contiguity 'both'), not {req.contiguity!r}"
    if req.objective not in ("pipedream", "overlap"):
        return f"the DP does not take the {req.objective!r} objective"
    return None


def run_auto(inst, req: SolveRequest, opts: Options) -> MethodOutput:
    """The exact method for the request: the DP where its ideals are few (at most
    :data:`AUTO_MAX_IDEALS`; it gets :data:`AUTO_DP_SHARE` of the time), else, or where the DP did
    not prove its split, the IP (warm started from the DP's split, with the time left; never on a
    cluster without a CPU, through which the IPs route every transfer: there the DP has all the
    time). Latency,
    a contiguity other than ``both`` and the GPipe objective go to the IP at once
    (:func:`_auto_rule`). ``extra``: ``auto_choice`` (the method whose answer is returned),
    ``auto_reason``, ``proved_by`` (the method that proved it optimal, ``None`` if neither did)
    and the DP's attempt (``auto_dp``)."""
    import dataclasses

    from dnnplace.methods.base import WarmStart

    direct = _auto_rule(inst, req)
    if direct is None and inst.require_cluster().meta.get("hierarchy"):
        out = run_dp(inst, req, DPOptions())
        return _auto_out(out, "dp", "a cluster of servers: the hierarchical DP (Tarnawski App. C.3)")
    if direct is not None:
        return _auto_out(run_ip(inst, req, IPOptions()), "ip", direct)
    no_host = inst.require_cluster().devices_of_kind("cpu").size == 0  # the IPs route transfers through a host CPU
    deadline = req.deadline or NO_DEADLINE
    dp_req = dataclasses.replace(req, deadline=None if req.deadline is None or no_host
                                 else deadline.share(AUTO_DP_SHARE), warm=None)
    dp = _dp(inst, dp_req, linearized=False, max_ideals=AUTO_MAX_IDEALS)
    dp_proved = dp.status == "optimal"
    attempt = {"status": dp.status, "objective": dp.objective, "bound": dp.bound,
               "termination": None if dp.termination is None else str(dp.termination),
               "ideals": dp.extra.get("ideals"), "stopped_because": dp.extra.get("stopped_because")}
    if dp_proved:
        return _auto_out(dp, "dp", f"{dp.extra.get('ideals')} ideals (at most {AUTO_MAX_IDEALS}): the DP proved "
                                   "its split", attempt)
    why = {Termination.IDEAL_LIMIT: f"more than {AUTO_MAX_IDEALS} ideals", Termination.MEMORY_LIMIT:
           "the DP's lattice is over the memory budget", Termination.TIME_LIMIT: "the DP ran out of its share of "
           "the time"}.get(dp.termination, f"the DP ended {dp.status}")
    if no_host:
        return _auto_out(dp, "dp", f"{why}; the IP needs a host CPU and the cluster has none", attempt)
    if deadline.expired():
        return _auto_out(dp, "dp", f"{why}; no time left for the IP", attempt)
    warm = WarmStart(dp.placement, "method dp (auto)") if dp.placement is not None else req.warm
    ip = run_ip(inst, dataclasses.replace(req, warm=warm), IPOptions())
    if dp.bound is not None and (ip.bound is None or dp.bound > ip.bound):
        ip.bound = dp.bound  # both are valid lower bounds; an IP stopped before its first bound keeps the DP's
    if ip.placement is None or (dp.placement is not None and dp.objective is not None and ip.objective is not None
                                and dp.objective < ip.objective):
        if dp.placement is not None:
            bounds = [b for b in (dp.bound, ip.bound) if b is not None]
            dp.bound = max(bounds) if bounds else None
            return _auto_out(dp, "dp", f"{why}; the IP found no better split ({ip.status})", attempt)
    return _auto_out(ip, "ip", f"the DP stopped: {why}; then the IP", attempt)


def _auto_out(out: MethodOutput, choice: str, reason: str, attempt: dict | None = None) -> MethodOutput:
    """``out`` as ``auto``'s answer, with its choice and why (see :func:`run_auto`)."""
    proved = out.status == "optimal" or (out.bound is not None and out.objective is not None
                                         and out.objective <= out.bound * (1 + 1e-9) + 1e-12)
    out.extra = {**out.extra, "auto_choice": choice, "auto_reason": reason, "proved_by": choice if proved else None}
    if attempt is not None:
        out.extra["auto_dp"] = attempt
    if proved and out.status == "feasible":
        out.status = "optimal"
    return out
