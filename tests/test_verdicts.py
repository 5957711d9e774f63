"""The one verdict rule of every reproduction's table (dnnplace.experiments.verdicts), on constructed cells."""

import math

from dnnplace.experiments import verdicts as V


def test_values_reproduced_trend_not_reproduced():
    assert V.judge(3.0, 2.5, neutral=1.0) == V.REPRODUCED            # within 25 %
    assert V.judge(3.0, 1.03, neutral=1.0) == V.TREND                # above 1 like the paper, not ~3
    assert V.judge(3.0, 0.32, neutral=1.0) == V.NOT_REPRODUCED       # the other side of 1
    assert V.judge(0.09, 0.096, neutral=0.0) == V.REPRODUCED         # a speed-up within 25 %
    assert V.judge(0.459, 0.107, neutral=0.0) == V.TREND
    assert V.judge(0.0455, 0.0, neutral=0.0) == V.NOT_REPRODUCED     # 0 is no side
    assert V.judge(0.0, 0.004, abs_tol=0.01) == V.REPRODUCED          # the absolute floor
    assert V.judge(0.223, 0.002, abs_tol=0.01, neutral=0.0) == V.NOT_REPRODUCED  # same side, within the noise floor
    assert V.judge(10.0, 20.0) == V.NOT_REPRODUCED                    # no neutral value: no trend
    assert V.judge(None, 1.0) == "" and V.judge(1.0, math.nan) == ""


def test_rankings_directions_bounds_and_causes():
    paper = ["celeritas", "order-place", "m-topo", "hrl"]
    assert V.judge_ranking(paper, ["celeritas", "order-place", "metis", "m-topo"]) == V.REPRODUCED  # common items
    assert V.judge_ranking(paper, ["celeritas", "m-topo", "order-place"]) == V.TREND
    assert V.judge_ranking(paper, ["order-place", "celeritas", "m-topo"]) == V.NOT_REPRODUCED
    assert V.judge_ranking(paper, ["celeritas", "metis"]) == ""
    values = {"order-place": 1639.0, "celeritas": 1655.0, "m-topo": 6784.0}
    assert V.judge_ranking(paper, values) == V.NOT_REPRODUCED
    assert V.judge_ranking(paper, values, tie=0.01) == V.REPRODUCED           # within 1 %: tied
    assert V.judge_ranking(paper, {**values, "celeritas": 9229.0, "m-topo": 3918.0}, tie=0.01) == V.NOT_REPRODUCED
    assert V.judge_ranking(paper, {"celeritas": 1.0, "order-place": 3.0, "m-topo": 2.0}) == V.TREND
    fig6 = {"DFS-TOPO": 4.22, "Celeritas": 4.32, "M-TOPO": 6.0}  # the paper's 2 % apart: no order asked
    ours = {"DFS-TOPO": 6775.0, "Celeritas": 1655.0, "M-TOPO": 6732.0}  # DFS within 5 % of M-TOPO: tied
    assert V.judge_ranking(fig6, ours, tie=0.05) == V.REPRODUCED
    assert V.judge_ranking(fig6, {**ours, "M-TOPO": 5000.0}, tie=0.05) == V.NOT_REPRODUCED
    assert V.judge_direction([0.1, 0.2, 0.3], increasing=True) == V.REPRODUCED
    assert V.judge_direction([0.1, 0.3, 0.25, 0.4], increasing=True) == V.TREND
    assert V.judge_direction([0.1, 0.3, 0.295, 0.4], increasing=True, abs_tol=0.01) == V.REPRODUCED
    assert V.judge_direction([0.38, 0.32, 0.23], increasing=True) == V.NOT_REPRODUCED
    assert V.judge_direction([0.38, 0.32, 0.23], increasing=False) == V.REPRODUCED
    assert V.judge_direction([0.2, None], increasing=True) == ""
    assert V.judge_at_most(7.2, 0.02) == V.REPRODUCED and V.judge_at_most(1.0, 2.0) == V.NOT_REPRODUCED
    assert V.with_cause(V.NOT_REPRODUCED, "a stand-in") == "not reproduced: a stand-in"
    assert V.with_cause(V.TREND, "a stand-in") == V.TREND
    assert V.count([V.REPRODUCED, "not reproduced: x", "", V.TREND, V.REPRODUCED]) == \
        "2 reproduced, 1 trend, 1 not reproduced"
    lines = V.summary_table([("Fig. 5", "~3", "1.03", V.TREND)])
    assert lines[0] == "| figure | paper | ours | verdict |" and lines[-1] == "| Fig. 5 | ~3 | 1.03 | trend |"
    assert "25%" in V.TOLERANCE


def test_fastt_rows_carry_their_verdicts():
    from dnnplace.experiments import fastt_tables as fx

    # Table 3 rows: the same OOM cells within 25 % / the same OOM cells off by more / a fit where the paper's OOM
    assert fx.memory_verdict([0.17, 0.13, 0.13], [0.19, 0.14, 0.12]) == V.REPRODUCED
    assert fx.memory_verdict(["OOM", "OOM", 0.39], ["OOM", "OOM", 0.29]) == V.TREND
    assert fx.memory_verdict([0.2, 0.1, 0.1], ["OOM", 0.1, 0.1]).startswith("not reproduced: fits where")
    # Tables 1-2: per GPU count FastT/DP - 1, per model the speedup with the cause measured in its rows
    rows = [["strong", "m", 1, 100.0, 100.0, 100.0, 100.0, 1.0, 50.0, 50.0, 1.0, ""],
            ["strong", "m", 2, 190.0, 190.0, 150.0, 140.0, 1.0, 60.0, 80.0, 80 / 60, ""],
            ["strong", "m: generated; paper: M", "speedup", None, None, None, None, 0.0, None, None, 0.6, ""]]
    fx.scaling_verdicts(rows)
    assert rows[0][-1] == ""
    assert rows[1][-1] == "not reproduced: OS-DPOS's own schedule (strict replay) differs from DP's throughput by -21%"
    assert rows[2][-1].startswith("not reproduced: OS-DPOS's own schedule (strict replay) differs from DP's "
                                  "throughput by -21% to -21% at 2-2 GPUs")
    assert "our DP scales 1.90x from 1 to 2 GPUs, the paper's 1.20x" in rows[2][-1]


def test_celeritas_rows_carry_their_verdicts():
    from dnnplace.experiments import celeritas_tables as ce

    rows = [{"model": "Tensor Holography", "method": k, "paper": p, "ours": o}
            for k, p, o in (("Metis", 6.591, 963.0), ("m-TOPO", 2.22, "OOM"), ("Order-Place", 1.52, 9219.0),
                            ("Celeritas", 1.461, 9229.0), ("HRL", 3.683, "not run (quoted)"))]
    rows += [{"model": "Tensor Holography", "method": "speed up (C12)", "paper": ">34.2%", "ours": "-858.0%"},
             {"model": "Tensor Holography", "method": "ranking (feasible)", "paper": "", "ours": ""},
             {"model": "NMT", "method": "Metis", "paper": "OOM", "ours": "OOM"},
             {"model": "NMT", "method": "m-SCT", "paper": "OOM", "ours": 6603.0}]
    ce.table3_verdicts(rows)
    v = {(r["model"], r["method"]): r["verdict"] for r in rows}
    assert v["Tensor Holography", "speed up (C12)"].startswith("not reproduced: our stand-in is a random layered DAG")
    assert v["Tensor Holography", "ranking (feasible)"].startswith("not reproduced: our stand-in")
    assert v["Tensor Holography", "m-TOPO"].startswith("not reproduced: OOM under our GPU memory share")
    assert v["NMT", "Metis"] == V.REPRODUCED and v["NMT", "m-SCT"].startswith("not reproduced: fits here")
    assert v["Tensor Holography", "HRL"] == "" and v["Tensor Holography", "Celeritas"] == ""
    fig6 = [{"model": "Inception_V3", "placement": p, "paper": t, "ours": o}
            for p, t, o in (("sequential fill, M-TOPO", "6.0 min", 6732.0), ("sequential fill, DFS-TOPO", "4.22 min",
                                                                            6775.0),
                            ("sequential fill, CPD-TOPO", "", 1678.0), ("Celeritas", "DFS-TOPO + 6 s", 1655.0))]
    ce.fig6_verdicts(fig6)
    assert [r["verdict"] for r in fig6] == ["", "", "", V.REPRODUCED]
    assert abs(ce._fig6_minutes("DFS-TOPO + 6 s", 4.22) - 4.32) < 1e-12
    assert ce._fig6_minutes("OOM", None) == float("inf")


def test_pardnn_rows_carry_their_verdicts():
    from dnnplace.experiments import pardnn as pd

    row = {"PARDNN II+I ms": 100.0, "CP ms": 150.0, "LC+GLB ms": 120.0, "ccr": 12.7, "paper_ccr": 1.12, "dop": 3.5,
           "paper_dop": 3.3}
    assert pd.speedup_verdict(row, "PARDNN II+I") == V.REPRODUCED
    assert pd.speedup_verdict({**row, "LC+GLB ms": 99.5}, "PARDNN II+I") == V.REPRODUCED  # within 1 %: a tie
    assert pd.speedup_verdict({**row, "LC+GLB ms": 80.0}, "PARDNN II+I") == (
        "not reproduced: LC+GLB 0.80x PARDNN's makespan; our graph's CCR 12.70 (paper 1.12), DoP 3.50 (paper 3.3)")
    assert pd.memory_verdict({"gpus": 1, "x_dp": 1.0, "paper_x_dp": 1}) == ""
    assert pd.memory_verdict({"gpus": 4, "x_dp": 14.0, "paper_x_dp": 16}) == V.REPRODUCED
    assert pd.memory_verdict({"gpus": 2, "x_dp": 1.0, "paper_x_dp": 16}).startswith("not reproduced: superlinear")
