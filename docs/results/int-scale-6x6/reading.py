"""The intrinsic-scale probe's reading (PLAN.md), from its committed series and analysis alone.

    python docs/results/int-scale-6x6/reading.py

Prints what the scale does at the change, per run of the interest arms: the interest (the rollout's mean and its
largest), the concentration (largest over mean, which no scale changes), the scale (the reward's divisor: mean
interest over mean reward, one number a rollout) and the reward of the rollout's most interesting transition
(largest interest over the scale), each as its mean over the first 10 and the next 30 logged iterations from the
change over its mean over the last 10 before; then the re-learning and the task per arm (common.analyze's
results.json, made with the plan's settings, checked here) and the decision line last.
"""

import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from common.series import read  # noqa: E402

HERE = Path(__file__).resolve().parent
S0 = "ppo_poi_progress-interest-error"
CANDIDATES = (f"{S0}-int-scale-decay-0", f"{S0}-int-scale-reward", f"{S0}-int-scale-reward-int-scale-decay-0")
ARMS = (S0, *CANDIDATES, "ppo-ent-coef-0.05")
NAMES = dict(zip(ARMS, ("S0", "S1", "S2", "S3", "F05")))
SEEDS = (901, 902, 903, 904, 905)
BEFORE, FIRST, NEXT = 10, 10, 30  # logged iterations: the last before the change; the first and the next after it
RATIO_BAR, TASK_MARGIN = 0.85, 0.02  # a candidate's re-learning over S0's at most this; its task at most 0.02 less
READING = "threshold x1, span 10"  # the plan's reading of common.analyze's robustness table
QUANTITIES = ("interest", "largest interest", "concentration", "scale", "reward at the largest")
TAGS = ("poi/mean", "poi/max", "poi/intrinsic_reward_mean")  # what the series keeps of each interest run (--tags)
SETTINGS = {  # what the plan's analysis command makes (`settings` in its results.json)
    "span": 10,
    "changed_threshold": 1.0,
    "relative": None,
    "reps": 5000,
    "seed": 0,
    "task_window": 100_000,
    "drop_unsuccessful": False,
    "methods": None,
    "baseline": S0,
    "frontier": ["ppo-ent-coef-0.05"],
    "frontier_loss": "changed",
}


def change_step(scalars: dict) -> int:
    """The first step the run logged in its second phase."""
    step = next((step for step, value in scalars["charts/phase"] if value >= 1), None)
    if step is None:
        raise ValueError("no second phase")
    return step


def ratios(points: list, change: int) -> tuple[float, float]:
    """Mean over the first FIRST points at or after `change`, and over the NEXT after those, each over the mean of
    the last BEFORE points before it."""
    before = [value for step, value in points if step < change][-BEFORE:]
    after = [value for step, value in points if step >= change]
    if len(before) < BEFORE or len(after) < FIRST + NEXT:
        raise ValueError(f"too few points around the change: {len(before)} before, {len(after)} after")
    base = np.mean(before)
    return float(np.mean(after[:FIRST]) / base), float(np.mean(after[FIRST : FIRST + NEXT]) / base)


def per_iteration(scalars: dict) -> dict:
    """{quantity: [(step, value)]}: the interest, its largest, their ratio, the scale (the divisor of every
    transition's interest: mean interest over mean reward) and the reward of the largest interest."""
    interest, largest = scalars["poi/mean"], scalars["poi/max"]
    reward = dict(scalars["poi/intrinsic_reward_mean"])
    concentration = [(step, top / mean) for (step, mean), (_, top) in zip(interest, largest)]
    scale = [(step, value / reward[step]) for step, value in interest]
    at_largest = [(step, value / divisor) for (step, value), (_, divisor) in zip(largest, scale)]
    return dict(zip(QUANTITIES, (interest, largest, concentration, scale, at_largest)))


def signal(records: list[dict]) -> dict:
    """{arm: [(seed, {quantity: (first, next)})]} of the interest arms' finished runs."""
    table = {arm: [] for arm in ARMS[:4]}
    for rec in sorted(records, key=lambda rec: rec["seed"]):
        if rec["method"] in table and rec["finished"]:
            lacking = [tag for tag in TAGS if tag not in rec["scalars"]]
            if lacking:
                raise ValueError(f"{rec['run']} lacks {', '.join(lacking)}: make the series with the plan's --tags")
            try:
                change = change_step(rec["scalars"])
                read_off = {name: ratios(points, change) for name, points in per_iteration(rec["scalars"]).items()}
            except (ValueError, KeyError, ZeroDivisionError) as error:  # a run cut short, a point missing, a zero
                raise ValueError(f"{rec['run']}: {error!r}") from None
            table[rec["method"]].append((rec["seed"], read_off))
    return table


def by_method(rows: list, phase: int) -> dict:
    return {row["method"]: row for row in rows if row["phase"] == phase}


def decide(results: dict) -> tuple[list[str], str]:
    """The per-arm lines and the decision: the candidate (S1, S2, S3) whose IQM re-learning over S0's is at most
    RATIO_BAR and whose task in each phase is at most TASK_MARGIN below S0's, the lowest ratio first."""
    wrong = {
        key: results["settings"].get(key) for key, value in SETTINGS.items() if results["settings"].get(key) != value
    }
    if wrong:
        raise ValueError(f"the analysis was made with {wrong}, not the plan's settings")
    folders = results["settings"].get("folders") or []
    if len(folders) != 1 or Path(folders[0]).name != "series.jsonl.gz":
        raise ValueError(f"the analysis was made from {folders}, not from the probe's series.jsonl.gz alone")
    relearn = by_method(results["robustness"], 1)
    task = [by_method(results["task"], phase) for phase in (0, 1)]
    if S0 not in relearn or any(S0 not in rows for rows in task):
        raise ValueError(f"the analysis has no re-learning or task of S0 ({S0}): not the plan's analysis")
    lines, qualifying = [], []
    for arm in ARMS:
        if arm not in relearn:
            lines.append(f"{NAMES[arm]} ({arm}): no runs in the analysis")
            continue
        reading = relearn[arm]["readings"][READING]
        returns = [task[phase][arm]["return_window"]["iqm"] for phase in (0, 1)]
        kept = all(returns[phase] >= task[phase][S0]["return_window"]["iqm"] - TASK_MARGIN for phase in (0, 1))
        passes = arm in CANDIDATES and reading["iqm"] <= RATIO_BAR and kept
        lines.append(
            f"{NAMES[arm]} ({arm}): re-learning over S0's {reading['iqm']:.3f} [{reading['low']:.3f}, "
            f"{reading['high']:.3f}]; task before {returns[0]:.3f}, after {returns[1]:.3f}"
            + (" (qualifies)" if passes else "")
        )
        if passes:
            qualifying.append((reading["iqm"], NAMES[arm], arm))
    if not qualifying:
        return lines, "decision: no claim study (no candidate re-learns 15% faster than S0 at its task)"
    _, name, arm = min(qualifying)
    return lines, f"decision: a claim study of {name} ({arm})"


def main() -> None:
    missing = [name for name in ("series.jsonl.gz", "results.json") if not (HERE / name).exists()]
    if missing:
        sys.exit(f"{' and '.join(missing)} missing in {HERE}: run the plan's commands first (PLAN.md)")
    try:
        table = signal(read(HERE / "series.jsonl.gz"))
        lines, decision = decide(json.loads((HERE / "results.json").read_text()))
    except ValueError as error:
        sys.exit(f"error: {error}")
    print("| arm | seed | " + " | ".join(f"{name}, first 10 | next 30" for name in QUANTITIES) + " |")
    print("|-|-:|" + "-:|" * 2 * len(QUANTITIES))
    for arm, rows in table.items():
        for seed, read_off in rows:
            cells = [f"{value:.3g}" for name in QUANTITIES for value in read_off[name]]
            print(f"| {NAMES[arm]} | {seed} | " + " | ".join(cells) + " |")
    for arm, rows in table.items():
        damped = sum(1 for _, r in rows if r["largest interest"][0] > 1 and r["reward at the largest"][0] < 1)
        print(f"{NAMES[arm]}: the largest interest rose and its reward fell (first 10) in {damped} of {len(rows)} runs")
    print("\n".join(lines))
    print(decision)


if __name__ == "__main__":
    main()
