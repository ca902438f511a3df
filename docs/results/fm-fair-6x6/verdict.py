"""The plan's verdict, applied as PLAN.md (and its amendment 1) fixes it, written before any claim run was read: the
six primary comparisons against the non-interest frontier, which readings are void, which wins are fragile and why,
and the seeds an arm would need.

    python docs/results/fm-fair-6x6/verdict.py docs/results/fm-fair-6x6

Reads what the plan's commands write into the folder, and checks that each was made as the plan says (its settings,
T = 0.0025 from the probe runs, the claim seeds):
- `results.json`: the analysis at T against F1, with the frontier, `--comparisons 6` and the six judged arms (their
  verdicts, the frontier readings, the task table and every run's phases);
- `threshold-1.5T/results.json`: the same at 1.5T (its pre-registered column is the reading at 1.5T);
- `against-gaussian-ppo/results.json`: every arm against G1;
- `probe/faithful/results.json`: G1's faithful floor (amendment 1 judges I1 and I2 only if it is below T).

The plan's rules, as code:
- a **win**: the upper end of the 99.17% CI of y / F(x) below 1, and the task kept (the analysis's `keeps_task`, the
  plan's rule: both phases' IQM return over the last 100k steps at or above the lower end of F1's 95% CI). An arm
  whose task level is below the frontier's lowest is **not judged** (its ratio cannot be made): never a win;
- **void**: a threshold reading (1.5T, 2T) at a threshold at or above half of F1's IQM over the claim runs of the
  highest smoothed changed loss after the change; neither for nor against an arm. T/2 is not a reading;
- **fragile**: a reading that is not void (1.5T, 2T, EMA span 5 and 30, the mean log10 loss over the first 200k steps)
  has a point estimate not below 1 or cannot be made (NaN: the arm outside that reading's frontier), or, for I1 and
  I2, the ratio to G1's re-learning IQM is not below 1 or cannot be made. A fragile win is a win;
- **what n runs can detect**: the largest true ratio whose 99.17% upper bound is below 1 when both arms have n runs
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
from common.frontier import iqm, resampled_iqms

F1, G1 = "ppo-ent-coef-0.01", "ppo-model-gaussian-model-faithful"
FRONTIER = (
    F1, "ppo-ent-coef-0.03", "ppo-ent-coef-0.05", "ppo-ent-coef-0.1", "ppo_poi_progress-interest-noise-int-coef-0.5",
    "ppo_poi_progress-interest-noise-int-coef-1", G1, "ppo_poi_replay-model-data-uniform",
)  # fmt: skip
JUDGED = {
    "I1": "ppo_poi_progress-interest-excess-model-gaussian-model-faithful",
    "I2": "ppo_poi_ensemble-model-gaussian-model-faithful",
    "I3": "ppo_poi_progress-interest-progress-progress-lag-3",
    "I4": "ppo_poi_progress-interest-progress",
    "R2": "ppo_poi_replay-model-data-prioritised",
    "R3": "ppo_poi_replay-model-data-curious",
}
GAUSSIAN = ("I1", "I2")  # judged only below G1's faithful floor, and against G1 too
SEEDS, PLANNED = tuple(range(301, 311)), 10
SETTINGS = {  # what the plan's analysis commands set (and common.analyze's defaults they keep)
    "span": 10, "reps": 5000, "seed": 0, "task_window": 100_000, "robust_window": 200_000, "frontier_loss": "changed",
    "relative": None, "drop_unsuccessful": False, "methods": None,
}  # fmt: skip
T = 0.0025  # the re-learning threshold the probe runs fixed (the page: F1's floor and peak on seeds 401-403)
LEVEL = 1 - 0.05 / 6
READINGS = {  # a robustness reading, and the threshold it is made at in units of T (None: not a threshold reading)
    "threshold x2, span 10": 2.0,
    "span 5": None,
    "span 30": None,
    "mean log10 loss, first 200k": None,
}
AT_15 = "threshold x1.5"  # the second analysis's pre-registered column
SCALES = {name: scale for name, scale in READINGS.items() if scale is not None} | {AT_15: 1.5}
AT_15_DIR, G1_DIR = "threshold-1.5T", "against-gaussian-ppo"  # where the plan's commands write the other analyses
GRID = (10, 15, 20, 30, 40, 60, 80, 100, 150, 200, 300)


def load(path: Path) -> dict:
    if not path.is_file():
        raise ValueError(f"no {path}: run the plan's command that writes it")
    return json.loads(path.read_text())


def check_settings(results: dict, path: Path, **expected) -> None:
    """The analysis was made as the plan's command makes it; ValueError (one line) naming the first difference."""
    settings = results["settings"]
    for key, value in (SETTINGS | expected).items():
        if key not in settings:
            raise ValueError(f"{path}: no setting {key}")
        if isinstance(value, float):
            same = math.isclose(settings[key], value)
        else:  # the arms of --frontier and --judge in any order
            same = sorted(settings[key]) == sorted(value) if isinstance(value, list) else settings[key] == value
        if not same:
            raise ValueError(f"{path}: {key} is {settings[key]!r}, the plan's command sets {value!r}")


def frontier_row(results: dict, method: str, path: Path) -> dict:
    """The method's row against the frontier after the change, at the pre-registered task level (x: the return over
    the last 100k steps; the tool adds rows at the whole phase's return, not pre-registered)."""
    rows = [r for r in results["frontier"] if (r["method"], r["phase"], r["task"]) == (method, 1, "return_window")]
    if len(rows) != 1:
        raise ValueError(f"{path}: {len(rows)} frontier rows of {method} after the change at return_window, not 1")
    return rows[0]


def reading(row: dict, name: str, method: str, path: Path) -> float:
    if name not in row["readings"]:
        raise ValueError(f"{path}: no reading {name!r} of {method} against the frontier")
    return float(row["readings"][name]["ratio"])


def peak(results: dict) -> float:
    """F1's IQM over its claim runs of the highest smoothed changed loss after the change."""
    values = np.array([r["phases"][1]["changed_highest"] for r in results["runs"] if r["method"] == F1], float)
    if not len(values) or not np.isfinite(values).all():
        raise ValueError(f"{F1}'s runs have no finite highest changed loss after the change")
    return float(iqm(values))


def gaussian_floor(probe: dict) -> float:
    """Amendment 1's statistic: the median over G1's faithful probe runs of the lowest smoothed changed loss before
    the change."""
    values = [r["phases"][0]["changed_asymptotic"] for r in probe["runs"] if r["method"] == G1]
    if not values:
        raise ValueError(f"no probe run of {G1}")
    return float(np.median(values))


def largest_detectable(values: np.ndarray, n: int, reps: int = 5000, seed: int = 0) -> float:
    """1 / the 99.17% upper bound of IQM(arm) / IQM(F1), both arms n runs drawn from `values` (a true ratio of 1)."""
    rng = np.random.default_rng(seed)
    num, den = (resampled_iqms(values, reps, rng, n) for _ in range(2))  # the arm's draws, then F1's
    return float(1 / np.nanpercentile(num / den, 100 * (1 - (1 - LEVEL) / 2)))


def shown(ratio: float | None) -> str:
    return "cannot be made" if ratio is None or math.isnan(ratio) else f"{ratio:.2f}"


def judge(folder: Path) -> tuple[list[dict], dict]:
    path_t = folder / "results.json"
    path_15 = folder / AT_15_DIR / "results.json"
    path_g = folder / G1_DIR / "results.json"
    path_probe = folder / "probe" / "faithful" / "results.json"
    at_t, at_15, against_g1, probe = load(path_t), load(path_15), load(path_g), load(path_probe)
    same = {"folders": at_t["settings"]["folders"], "task_baseline": at_t["settings"]["task_baseline"]}
    claim = {"baseline": F1, "frontier": list(FRONTIER), "judge": list(JUDGED.values()), "comparisons": 6}
    check_settings(at_t, path_t, **claim, changed_threshold=T)
    if same["task_baseline"] not in (None, F1):
        raise ValueError(f"{path_t}: the task is judged against {same['task_baseline']}, not {F1}")
    check_settings(at_15, path_15, **claim, **same, changed_threshold=1.5 * T)
    check_settings(against_g1, path_g, baseline=G1, changed_threshold=T, folders=same["folders"])
    for results, path in ((at_t, path_t), (at_15, path_15), (against_g1, path_g)):
        if any(r["seed"] not in SEEDS for r in results["runs"]):
            raise ValueError(f"{path}: a run with a seed outside the claim seeds {SEEDS[0]}-{SEEDS[-1]}")

    half_peak = peak(at_t) / 2
    void = {name: SCALES.get(name, 0) * T >= half_peak for name in (*READINGS, AT_15)}  # 0: never void
    floor = gaussian_floor(probe)
    gaussian_measurable = floor < T  # amendment 1
    verdicts = {v["method"]: v for v in at_t["verdicts"] if v["against"] == "frontier" and v["phase"] == 1}
    task = {(t["method"], t["phase"]): t["return_window"] for t in at_t["task"]}
    to_g1 = {a["method"]: a for a in against_g1["aggregates"] if a["phase"] == 1}
    to_f1 = {a["method"]: a for a in at_t["aggregates"] if a["phase"] == 1}
    rows = []
    for name, method in JUDGED.items():
        if method not in verdicts or method not in to_g1:
            raise ValueError(f"no verdict of {method} in {path_t}, or no row of it in {path_g}")
        v, row = verdicts[method], frontier_row(at_t, method, path_t)
        primary = reading(row, "changed_adaptation", method, path_t)
        readings = {k: reading(row, k, method, path_t) for k in READINGS}
        readings[AT_15] = reading(frontier_row(at_15, method, path_15), "changed_adaptation", method, path_15)
        reasons = [f"{k} {shown(r)}" for k, r in readings.items() if not void[k] and not r < 1]  # NaN: not < 1
        g1 = None  # the tool leaves the ratio out where G1's IQM is 0: it cannot be made
        if name in GAUSSIAN:
            g1 = to_g1[method].get("changed_adaptation_normalised", {}).get("iqm")
            if g1 is None or not g1 < 1:
                reasons.append(f"against G1 {shown(g1)}")
        measurable = name not in GAUSSIAN or gaussian_measurable
        judged = measurable and not math.isnan(primary)
        rows.append({
            "name": name, "method": method, "runs": row["runs"], "ratio": primary, "high": v["corrected_high"],
            "not_judged": row["readings"]["changed_adaptation"]["not_judged_share"], "measurable": measurable,
            "judged": judged, "keeps_task": bool(v["keeps_task"]), "fragile": reasons, "g1": g1,
            "win": judged and v["corrected_high"] < 1 and bool(v["keeps_task"]),
            "to_f1": to_f1[method]["changed_adaptation_normalised"]["iqm"],
            "task": [task[method, k]["iqm"] for k in (0, 1)], "f1_low": [task[F1, k]["low"] for k in (0, 1)],
        })  # fmt: skip
    f1_steps = np.array([r["phases"][1]["changed_adaptation"] for r in at_t["runs"] if r["method"] == F1], float)
    arms = {m: sum(r["method"] == m for r in at_t["runs"]) for m in (*FRONTIER, *JUDGED.values())}
    void_names = [k for k, is_void in void.items() if is_void]
    if T >= half_peak:
        void_names.append("T itself (the pre-registered reading)")
    context = {"T": T, "half_peak": half_peak, "void": void_names, "floor": floor}
    context |= {"notes": at_t["notes"], "gaussian_measurable": gaussian_measurable}
    context["short"] = {m: n for m, n in arms.items() if n < PLANNED}
    context["detect"] = {n: largest_detectable(f1_steps, n) for n in GRID}
    return rows, context


def report(folder: Path) -> str:
    rows, c = judge(folder)
    judged = "I1 and I2 judged" if c["gaussian_measurable"] else "I1 and I2 not measurable at T: not judged"
    lines = [
        f"T {c['T']:g}; half of F1's peak {c['half_peak']:.5f}; void readings: {', '.join(c['void']) or 'none'}",
        f"G1's faithful floor on the probe seeds {c['floor']:.5f} against T {c['T']:g}: {judged} (amendment 1)",
        "runs short of 10: " + (", ".join(f"{m} {n}" for m, n in c["short"].items()) or "none"),
        *(f"note: {note}" for note in c["notes"]),
        "",
        (
            "| arm | runs | y / F(x) | 99.17% CI upper end | resamples not judged | return before / after (F1's lower "
            "end) | keeps the task | / G1 | / F1 | verdict |"
        ),
        "|-|-:|-:|-:|-:|-|-|-:|-:|-|",
    ]
    for r in rows:
        if not r["measurable"]:
            verdict = "not judged (not measurable at T)"
        elif not r["judged"]:
            verdict = "not judged (below the frontier's task levels)"
        else:
            verdict = "**win**" if r["win"] else "no"
        if r["win"] and r["fragile"]:
            verdict += " (fragile: " + "; ".join(r["fragile"]) + ")"
        task = " / ".join(f"{a:.3f} ({b:.3f})" for a, b in zip(r["task"], r["f1_low"]))
        lines.append(
            f"| {r['name']} `{r['method']}` | {r['runs']} | {shown(r['ratio'])} | {r['high']:.2f} | "
            f"{r['not_judged']:.2f} | {task} | {'yes' if r['keeps_task'] else 'no'} | "
            f"{'-' if r['name'] not in GAUSSIAN else shown(r['g1'])} | {shown(r['to_f1'])} | {verdict} |"
        )
    wins = [r["name"] for r in rows if r["win"]]
    lines += ["", f"Wins: {', '.join(wins)}." if wins else "No win: no judged arm beats the non-interest frontier.", ""]
    lines.append(
        "What n runs an arm can show (F1's claim runs; 99.17% CIs): the largest true ratio at the edge "
        + ", ".join(f"n={n}: {r:.2f}" for n, r in c["detect"].items())
    )
    for target in (0.7, 0.8, 0.9):
        n = next((n for n, r in c["detect"].items() if r >= target), None)
        lines.append(f"a true ratio of {target}: " + (f"n={n}" if n else f"more than {GRID[-1]} runs an arm"))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    try:
        print(report(args.folder))
    except ValueError as error:
        sys.exit(f"error: {error}")
    except (KeyError, IndexError, TypeError) as error:  # a file that is not what common.analyze writes
        sys.exit(f"error: an analysis is not shaped as common.analyze writes it ({type(error).__name__}: {error})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
