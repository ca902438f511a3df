"""The plan's verdict, applied as PLAN.md (and its amendment 1) fixes it, written before any claim run was read: the
six primary comparisons against the non-interest frontier, which readings are void, which wins are fragile and why,
and the seeds an arm would need.

    python docs/results/fm-fair-6x6/verdict.py docs/results/fm-fair-6x6

Reads what the plan's analysis commands write into the folder: `results.json` (the analysis at T, with the frontier,
`--comparisons 6` and the six judged arms: their verdicts, the frontier readings and every run's phases),
`threshold-1.5T/results.json` (the same at 1.5T: its pre-registered column is the reading at 1.5T) and
`against-gaussian-ppo/results.json` (every arm against G1: the ratio of I1 and I2 to the Gaussian model alone).

The plan's rules, as code:
- a **win**: the upper end of the 99.17% CI of y / F(x) below 1, and the task kept (common.analyze's verdict row,
  whose `keeps_task` is the plan's: both phases' IQM return at or above the lower end of F1's 95% CI);
- **void**: a threshold reading (1.5T, 2T) at a threshold at or above half of F1's IQM over the claim runs of the
  highest smoothed changed loss after the change; neither for nor against an arm. T/2 is not a reading;
- **fragile**: a reading that is not void (1.5T, 2T, EMA span 5 and 30, the mean log10 loss over the first 200k steps)
  has a point estimate not below 1 or cannot be made, or, for I1 and I2, the ratio to G1's re-learning IQM is not
  below 1. A fragile win is a win;
- **what 10 runs can detect**: the largest true ratio whose 99.17% upper bound is below 1 when both arms have n runs
  drawn from F1's claim runs (the plan's computation, made on these runs), and the smallest n on a grid at which a
  true ratio of 0.7, 0.8 and 0.9 is at that edge.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository: common/
from common.frontier import iqm

F1, G1 = "ppo-ent-coef-0.01", "ppo-model-gaussian-model-faithful"
JUDGED = {
    "I1": "ppo_poi_progress-interest-excess-model-gaussian-model-faithful",
    "I2": "ppo_poi_ensemble-model-gaussian-model-faithful",
    "I3": "ppo_poi_progress-interest-progress-progress-lag-3",
    "I4": "ppo_poi_progress-interest-progress",
    "R2": "ppo_poi_replay-model-data-prioritised",
    "R3": "ppo_poi_replay-model-data-curious",
}
GAUSSIAN = ("I1", "I2")  # judged against G1 too: the Gaussian model alone must not account for a win
LEVEL = 1 - 0.05 / 6
READINGS = {  # a robustness reading, and the threshold it is made at in units of T (None: not a threshold reading)
    "threshold x2, span 10": 2.0,
    "span 5": None,
    "span 30": None,
    "mean log10 loss, first 200k": None,
}
GRID = (10, 15, 20, 30, 40, 60, 80, 100, 150, 200, 300)


def load(path: Path) -> dict:
    if not path.is_file():
        raise ValueError(f"no {path}: run the plan's analysis command that writes it")
    return json.loads(path.read_text())


def frontier_row(results: dict, method: str, path: Path) -> dict:
    """The method's readings against the frontier after the change, at the pre-registered task level (x: the return over
    the last 100k steps; the tool adds rows at the whole phase's return, not pre-registered)."""
    rows = [r for r in results["frontier"] if (r["method"], r["phase"], r["task"]) == (method, 1, "return_window")]
    if len(rows) != 1:
        raise ValueError(f"{path}: {len(rows)} frontier rows of {method} after the change at return_window, not 1")
    return rows[0]["readings"]


def peak(results: dict) -> float:
    """F1's IQM over its claim runs of the highest smoothed changed loss after the change."""
    values = [r["phases"][1]["changed_highest"] for r in results["runs"] if r["method"] == F1]
    if not values:
        raise ValueError(f"no run of {F1} in results.json")
    return float(iqm(np.array(values)))


def largest_detectable(values: np.ndarray, n: int, reps: int = 5000, seed: int = 0) -> float:
    """1 / the 99.17% upper bound of IQM(arm) / IQM(F1), both arms n runs drawn from `values` (a true ratio of 1)."""
    rng = np.random.default_rng(seed)
    num = iqm(values[rng.integers(len(values), size=(reps, n))], axis=1)
    den = iqm(values[rng.integers(len(values), size=(reps, n))], axis=1)
    return float(1 / np.percentile(num / den, 100 * (1 - (1 - LEVEL) / 2)))


def judge(folder: Path) -> tuple[list[dict], dict]:
    path_t, path_15, path_g = (
        folder / "results.json",
        folder / "threshold-1.5T" / "results.json",
        folder / "against-gaussian-ppo" / "results.json",
    )
    at_t, at_15, against_g1 = load(path_t), load(path_15), load(path_g)
    T, T15 = at_t["settings"]["changed_threshold"], at_15["settings"]["changed_threshold"]
    if not math.isclose(T15, 1.5 * T, rel_tol=1e-9):
        raise ValueError(f"{path_15} is at threshold {T15}, not 1.5 x {T}")
    if at_t["settings"].get("comparisons") != 6:
        raise ValueError(f"{path_t} was made with --comparisons {at_t['settings'].get('comparisons')}, not 6")
    half_peak = peak(at_t) / 2
    void = {name: scale is not None and scale * T >= half_peak for name, scale in READINGS.items()}
    void["threshold x1.5"] = 1.5 * T >= half_peak
    verdicts = {v["method"]: v for v in at_t["verdicts"] if v["against"] == "frontier" and v["phase"] == 1}
    if against_g1["settings"]["baseline"] != G1:
        raise ValueError(f"{path_g} is an analysis against {against_g1['settings']['baseline']}, not {G1}")
    g1_ratios = {a["method"]: a["changed_adaptation_normalised"]["iqm"] for a in against_g1["aggregates"] if a["phase"]}
    rows = []
    for name, method in JUDGED.items():
        if method not in verdicts:
            raise ValueError(f"{path_t}: no verdict of {method} against the frontier (run with --judge)")
        v = verdicts[method]
        row = frontier_row(at_t, method, path_t)
        readings = {k: row.get(k, {}).get("ratio") for k in READINGS}  # a reading the tool could not make: None
        readings["threshold x1.5"] = frontier_row(at_15, method, path_15).get("changed_adaptation", {}).get("ratio")
        reasons = [
            f"{k} {'cannot be made' if ratio is None or not np.isfinite(ratio) else f'{ratio:.2f}'}"
            for k, ratio in readings.items()
            if not void.get(k, False) and (ratio is None or not np.isfinite(ratio) or not ratio < 1)
        ]
        g1 = g1_ratios.get(method) if name in GAUSSIAN else None
        if name in GAUSSIAN and (g1 is None or not g1 < 1):
            reasons.append(f"against G1 {'cannot be made' if g1 is None else f'{g1:.2f}'}")
        rows.append({
            "name": name, "method": method, "ratio": v["ratio"], "high": v["corrected_high"],
            "keeps_task": bool(v["keeps_task"]), "win": v["corrected_high"] < 1 and bool(v["keeps_task"]),
            "fragile": reasons, "g1": g1,
        })  # fmt: skip
    f1_steps = np.array([r["phases"][1]["changed_adaptation"] for r in at_t["runs"] if r["method"] == F1], float)
    void_names = [k for k, is_void in void.items() if is_void]
    if T >= half_peak:
        void_names.append("T itself (the pre-registered reading)")
    context = {"T": T, "half_peak": half_peak, "void": void_names}
    context["detect"] = {n: largest_detectable(f1_steps, n) for n in GRID}
    return rows, context


def report(folder: Path) -> str:
    rows, context = judge(folder)
    lines = [
        f"T {context['T']:g}; half of F1's peak {context['half_peak']:.5f}; void readings: "
        + (", ".join(context["void"]) or "none"),
        "",
        "| arm | y / F(x) | 99.17% CI upper end | keeps the task | / G1 | verdict |",
        "|-|-:|-:|-|-:|-|",
    ]
    for r in rows:
        verdict = "**win**" if r["win"] else "no"
        if r["win"] and r["fragile"]:
            verdict += " (fragile: " + "; ".join(r["fragile"]) + ")"
        g1 = "-" if r["g1"] is None else f"{r['g1']:.2f}"
        lines.append(
            f"| {r['name']} `{r['method']}` | {r['ratio']:.2f} | {r['high']:.2f} | "
            f"{'yes' if r['keeps_task'] else 'no'} | {g1} | {verdict} |"
        )
    wins = [r["name"] for r in rows if r["win"]]
    lines += ["", f"Wins: {', '.join(wins)}." if wins else "No win: no judged arm beats the non-interest frontier.", ""]
    detect = context["detect"]
    lines.append(
        "What n runs an arm can show (F1's claim runs; 99.17% CIs): the largest true ratio at the edge "
        + ", ".join(f"n={n}: {r:.2f}" for n, r in detect.items())
    )
    for target in (0.7, 0.8, 0.9):
        n = next((n for n, r in detect.items() if r >= target), None)
        lines.append(f"a true ratio of {target}: " + (f"n={n}" if n else f"more than {GRID[-1]} runs an arm"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    try:
        print(report(args.folder))
    except (ValueError, KeyError) as error:
        sys.exit(f"error: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
