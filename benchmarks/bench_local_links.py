"""The ``local-cpu-N`` preset's link defaults, measured: gloo send/recv between two CPU processes.

Two one-thread CPU processes of this host (``graphs.presets.LOCAL_CPU_LINK``).

Each run starts a fresh pair of processes (:func:`~dnnplace.pytorch.capture.links.time_p2p_pairs`,
``threads=1``) and times every size as the median of ``--repeats`` round trips (halved)
after 3 warm-ups; a size's figure is the median over ``--runs`` runs (runs differ more
than repeats within a run on a shared machine), fitted by relative-weighted least squares.
Prints a Markdown table and the fit; ``--out`` also writes it::

    .venv/bin/python -m benchmarks local-links --runs 7 --repeats 20 --out results/local-cpu-links.md

The processes are spawned (``torch.multiprocessing``); their worker function lives in
:mod:`dnnplace.pytorch.capture.links`, and the harness's ``__main__`` guard keeps the
spawned interpreters from rerunning the benchmark.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import statistics

from benchmarks.options import add_shared


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--min-log2", type=int, default=10, help="smallest size 2**k bytes (default 1 KiB)")
    parser.add_argument("--max-log2", type=int, default=26, help="largest size 2**k bytes (default 64 MiB)")
    add_shared(parser, out=None, help={"out": "write the table here too"})


def run(args) -> None:
    from dnnplace.pytorch.capture.links import fit_profile, time_p2p_pairs

    sizes = [2 ** k for k in range(args.min_log2, args.max_log2 + 1)]
    runs = []
    for r in range(args.runs):
        prof = time_p2p_pairs(2, sizes, backend="gloo", repeats=args.repeats, threads=1)[(0, 1)]
        runs.append(prof.seconds)
        print(f"run {r + 1}/{args.runs}: 1 KiB {prof.seconds[0] * 1e6:.0f} us, "
              f"largest {prof.seconds[-1] * 1e3:.2f} ms", flush=True)
    med = [statistics.median(col) for col in zip(*runs)]
    fit = fit_profile("p2p(gloo)", sizes, med)
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    lines = ["# local-cpu links: gloo send/recv between two one-thread CPU processes",
             "",
             f"{datetime.date.today().isoformat()}, {platform.node() or 'host'} ({platform.machine()}, "
             f"{os.cpu_count()} CPUs), torch {__import__('torch').__version__}, load average after "
             f"{load[0]:.1f}; {args.runs} runs x median of {args.repeats} round trips (halved).",
             "",
             "| bytes | " + " | ".join(f"run {r + 1} us" for r in range(args.runs)) + " | median us | fit us |",
             "|---:|" + "---:|" * (args.runs + 2)]
    for i, b in enumerate(sizes):
        lines.append(f"| {b} | " + " | ".join(f"{run[i] * 1e6:.0f}" for run in runs)
                     + f" | {med[i] * 1e6:.0f} | {(fit.fit.beta0 + fit.fit.beta1 * b) * 1e6:.0f} |")
    lines += ["", f"fit: beta0 = {fit.fit.beta0:.4g} s, bandwidth = {1 / fit.fit.beta1:.4g} B/s "
                  f"(beta1 = {fit.fit.beta1:.4g} s/B), r2 = {fit.fit.r2:.4f}, max |relative residual| = "
                  f"{abs(fit.residuals).max():.3f}",
              f"in ms (the captured graphs' unit): beta0 = {fit.fit.beta0 * 1e3:.4g} ms, "
              f"beta1 = {fit.fit.beta1 * 1e3:.4g} ms/B"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text)
