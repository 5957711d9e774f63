"""FastT Tables 1-2 ablation: FastT's speed-up over our DP baseline and over TF-slim's (variables on the CPU).

The cause named in results/fastt/README.md for the speed-ups we do not reproduce: our DP
baseline (``dp-baseline``: parameters, gradient sums and updates on GPU 0) scales where the
paper's did not, and TF-slim's ``model_deploy`` (the paper's DP, Sec. 6) keeps the variables and
the gradient sum on ``CPU:0``. This reruns the DP baseline of every cell of ``fastt-scaling``
with ``variables="cpu"`` on the same graphs and GPUs plus the host's CPU
(``Cluster.single_host(..., with_cpu=True)``: GPU<->CPU over PCIe 3.0 x16, 12 GB/s, a link per
GPU; or, the other bound, ``ports="shared"``: every transfer into or out of a device queues on
its one port, so the host's reads and gradients share one x16 link) and sets FastT against both
baselines, from the table's records (``table.csv``; FastT is not rerun): FastT as run (started
from our GPU-0 deployment, which it keeps unless its own schedule is faster), and FastT started
from the CPU baseline instead (the better of OS-DPOS's own schedule, strict replay, and that
baseline: what ``keep_start`` returns from that start, the incumbent aside). Our graphs have GPU
costs only; a parameter (no compute) and an update get a CPU cost of their GPU time times
``PEAK_BW / host bandwidth``: the updates are memory-bound (roofline of
:mod:`dnnplace.experiments.fastt_models`). Two hosts: ``cpu = gpu`` (factor 1: only the
transfers differ) and one socket of the paper's Xeon Platinum 8163 (6 x DDR4-2666, 128 GB/s:
factor 7.0), the latter also with one host port. The gradient sums (AddN) follow their update.

    .venv/bin/python -m benchmarks fastt-dp-baseline [--models lenet,rnnlm-2x2048] [--gpus 1 2 4 8]

Writes results/fastt/fastt-scaling/dp-baseline-ablation.md (``--out``).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time

import numpy as np

from benchmarks.machine import machine_load, utc_now
from benchmarks.options import add_shared
from benchmarks.paths import REPO

TABLE = REPO / "results" / "fastt" / "fastt-scaling"
HOST_BW = 128e9
"""One Xeon Platinum 8163 socket (the paper's servers, Sec. 6): 6 channels of DDR4-2666, bytes/s."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_shared(parser, out=TABLE / "dp-baseline-ablation.md", models=None, gpus=None,
               help={"models": "families of experiments/fastt-scaling.toml (default: all of them)",
                     "gpus": "GPU counts (default: the config's; 1 is always run, the speed-up's base)"})


def with_cpu_costs(g, factor: float):
    """``g`` with a ``cpu`` compute column: ``factor`` x the GPU time on parameters and updates,
    NaN (cannot run there) on every other node."""
    roles = np.asarray(g.roles, dtype=object)
    gpu = g.compute[:, g.kind_index("gpu")]
    cpu = np.where(np.isin(roles, ("param", "apply")), gpu * factor, np.nan)
    return g.with_(kinds=("gpu", "cpu"), compute=np.column_stack([gpu, cpu]))


def dp_throughput(g, k: int, cfg, variables: str, ports: str = "per_link") -> float:
    """Samples/s of the DP baseline of ``g`` (at its global batch) on ``k`` GPUs plus the host CPU,
    scored by the evaluator (fifo, link congestion)."""
    from dnnplace.graphs import Cluster
    from dnnplace.graphs.instance import Instance
    from dnnplace.methods.base import SolveRequest
    from dnnplace.registry import solve

    cl = Cluster.single_host(k, with_cpu=True, **{"gpu_memory": 16e9, **cfg.cluster})
    if ports != cl.ports:
        cl = dataclasses.replace(cl, ports=ports)
    res = solve(Instance(g, cl), "dp-baseline",
                SolveRequest(problem="makespan", params={"half_batch": float(cfg.options["half_batch"]),
                                                         "variables": variables}))
    if res.status != "feasible":
        raise RuntimeError(f"{g.name} on {k} GPUs, variables={variables}: {res.status}: {res.message}")
    return g.meta["batch"] / res.objective * 1e3


def _recorded() -> dict[tuple[str, str, int], tuple[float, float, float]]:
    """(scaling, family, GPUs) -> (DP, FastT, OS-DPOS's own schedule) samples/s of the committed table."""
    from dnnplace.experiments.fastt_tables import read_rows

    return {(r[0], r[1], int(r[2])): (float(r[3]), float(r[4]), float(r[5])) for r in read_rows(TABLE)
            if r[2] != "speedup"}


def run(args) -> None:
    from dnnplace.experiments.config import load
    from dnnplace.experiments.fastt import PRINTED_SPEEDUP
    from dnnplace.experiments.fastt_models import PEAK_BW, family_graph
    from dnnplace.experiments.fastt_tables import fmt, speedup

    cfg = load("fastt-scaling", module="fastt")
    fams = args.models or list(cfg.options["families"])
    counts = sorted({1, *(args.gpus or cfg.options["gpus"])})
    rec = _recorded()
    host = f"host {HOST_BW / 1e9:.0f} GB/s"
    hosts = {"cpu = gpu": (1.0, "per_link"), host: (PEAK_BW / HOST_BW, "per_link"),
             f"{host}, one port": (PEAK_BW / HOST_BW, "shared")}
    t0, load0 = time.process_time(), machine_load()
    rows, summary = [], []
    for mode in ("strong", "weak"):
        for fam in fams:
            dp: dict[str, dict[int, float]] = {"gpu0": {}, **{h: {} for h in hosts}}
            ft: dict[int, float] = {}
            own: dict[int, float] = {}
            for k in counts:
                batch = int(cfg.options["batch"][fam]) * (k if mode == "weak" else 1)
                g, _ = family_graph(fam, batch, half_batch=float(cfg.options["half_batch"]))
                dp["gpu0"][k] = dp_throughput(with_cpu_costs(g, 1.0), k, cfg, "gpu0")
                for h, (factor, ports) in hosts.items():
                    dp[h][k] = dp_throughput(with_cpu_costs(g, factor), k, cfg, "cpu", ports)
                ft[k], own[k] = rec[mode, fam, k][1:]
                if not np.isclose(dp["gpu0"][k], rec[mode, fam, k][0], rtol=1e-6):
                    raise RuntimeError(f"{mode} {fam} {k} GPUs: DP on GPU 0 {dp['gpu0'][k]:.6g} samples/s, the table "
                                       f"{rec[mode, fam, k][0]:.6g}: the graphs or the cluster differ from the table's")
                rows.append([mode, fam, k, *(dp[b][k] for b in dp), ft[k], own[k],
                             *(ft[k] / dp[b][k] for b in dp)])
                print(mode, fam, k, *(fmt(r) for r in rows[-1][3:]), file=sys.stderr, flush=True)
            more = [k for k in counts if k > 1]
            as_run = [speedup(dp[b][1], [dp[b][k] for k in more], [ft[k] for k in more]) for b in dp]
            started = [speedup(dp[h][1], [dp[h][k] for k in more], [max(own[k], dp[h][k]) for k in more])
                       for h in hosts]
            paper = PRINTED_SPEEDUP[mode][fam]
            scale = [dp[b][max(counts)] / dp[b][1] for b in dp]
            summary.append([mode, fam, as_run, started, paper, scale])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(_markdown(rows, summary, list(hosts), counts, t0, load0))
    print(args.out)


def _tally(pairs) -> str:
    """``n reproduced, n trend, n not reproduced; n below the paper's, n above`` of ``(ours, paper)`` speed-ups."""
    from dnnplace.experiments import verdicts as V

    verdicts = [V.judge(paper, ours, abs_tol=0.01, neutral=0.0) for ours, paper in pairs]
    off = [ours - paper for (ours, paper), v in zip(pairs, verdicts) if v != V.REPRODUCED]
    return (f"{V.count(verdicts)}; outside the tolerance {sum(d < 0 for d in off)} below the paper's, "
            f"{sum(d > 0 for d in off)} above")


def _markdown(rows, summary, hosts, counts, t0, load0) -> str:
    from dnnplace.experiments.fastt_tables import fmt

    def pct(x):
        return f"{100 * x:+.1f} %"

    base = ["DP vars GPU 0 (ours)", *(f"DP vars CPU, {h}" for h in hosts)]
    cmd = ".venv/bin/python -m benchmarks fastt-dp-baseline" + ("" if counts == [1, 2, 4, 8] else
                                                                " --gpus " + " ".join(map(str, counts)))
    lines = [
        "# FastT Tables 1-2: FastT's speed-up over our DP baseline and over TF-slim's (variables on the CPU)", "",
        f"Run {utc_now()}, {load0} at the start; {time.process_time() - t0:.0f} s CPU. Command: `{cmd}` "
        "(benchmarks/bench_fastt_dp_baseline.py: its docstring has the model). Simulation, as the table it "
        "ablates (fastt-scaling/table.md): FastT's throughputs are that table's (FastT not rerun); only the DP "
        "baseline changes. Our DP with the variables on GPU 0 was rerun on the cluster with the CPU added and "
        "equals the table's DP column on every row (checked).",
        "",
        "DP vars CPU: `dp-baseline --param variables=cpu`: parameters, gradient sums (AddN) and updates on cpu0, "
        "as TF-slim's model_deploy places them (`variables_device` and `optimizer_device` are CPU:0), the replicas "
        "on the GPUs; every replica reads the weights and sends its gradients over PCIe (12 GB/s, queued). "
        "`cpu = gpu`: a CPU update as fast as on the GPU (only the transfers differ), a link per GPU; "
        f"`{hosts[1]}`: memory-bound updates at one Xeon 8163 socket's bandwidth (7x the V100's time); "
        "`one port`: and every device's transfers in (out) queue on one port, so all reads and gradients share "
        "one x16 host link (the other bound; the GPUs of this baseline exchange nothing but with the host).",
        "",
        "## Speed-up of FastT (best over 2-8 GPUs) over the best baseline (1 GPU included), per model", "",
        "FastT as run: started from (and keeping) our GPU-0 deployment. FastT from this start: the better of "
        "OS-DPOS's own schedule and the CPU baseline, row by row (FastT started from TF-slim's deployment, as in "
        "the paper).", "",
        "| scaling | model | " + " | ".join(f"FastT as run over {b}" for b in base) + " | "
        + " | ".join(f"FastT from {b}" for b in base[1:]) + f" | paper (printed) | DP {max(counts)} GPUs / 1 GPU: "
        + " / ".join(["GPU 0", *hosts]) + " |",
        "|" + "---|" * (3 + 2 * len(base)),
    ]
    for mode, fam, as_run, started, paper, scale in summary:
        lines.append(f"| {mode} | {fam} | " + " | ".join(pct(u) for u in as_run + started) + f" | {pct(paper)} | "
                     + " / ".join(f"{x:.2f}x" for x in scale) + " |")
    lines += ["", "Each speed-up against the paper's printed one by the tables' rule (experiments/verdicts.py: within "
              "25 % or 1 point; trend: the same side of 0), over the models (the figure alone: table.md's speed-up "
              "rows also weigh their per-GPU rows, so its counts differ):", ""]
    for i, b in enumerate(base):
        lines.append(f"- FastT as run over {b}: {_tally([(s[2][i], s[4]) for s in summary])}")
    for i, b in enumerate(base[1:]):
        lines.append(f"- FastT from {b}: {_tally([(s[3][i], s[4]) for s in summary])}")
    lines += ["", "## Per row (samples/s; FastT/DP)", "",
              "| scaling | model | GPUs | " + " | ".join(base) + " | FastT (table) | OS-DPOS own, strict (table) | "
              + " | ".join(f"FastT / {b}" for b in base) + " |", "|" + "---|" * (5 + 2 * len(base))]
    lines += ["| " + " | ".join(fmt(x) for x in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"
