"""Per-run learning summary of finished runs: when the task is solved in each phase, and how
the external model's held-out loss moves across a phase change.

    python -m common.learning_summary runs/ColorDoorKey-8x8__ppo__* --threshold 0.9

Solved: the mean return of the last `--window` episodes first reaches `--threshold`
(counted from the phase start, episodes of the phase only); return_end: that mean at the
phase's end. Eval loss around the first
change: the mean of the last `--tail` evaluations before it, the highest after it, the
mean of the last `--tail` of the run, and the steps from the change until the moving mean
of `--tail` evaluations is back within `--tolerance` of the level before the change; with
`--eval-threshold`, per phase, the steps until that moving mean first reaches the threshold.
Runs are grouped by (env, exp_name): the median of each column over the seeds where it
exists, and how many those are (k/n).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

from common.console import OneLineParser
from common.tb import read_scalars


def phase_starts(scalars: dict) -> list[int]:
    """Global steps at which each phase begins (the first step logged in it); phase 0 at 0."""
    starts, current = [0], 0
    for step, phase in scalars.get("charts/phase", []):
        if phase != current:
            starts.append(step)
            current = phase
    return starts


def run_end(scalars: dict) -> int:
    """The step after the run's last logged one (1 when nothing was logged): where its last phase ends."""
    return max((step for points in scalars.values() for step, _ in points), default=0) + 1


def phase_spans(scalars: dict) -> list[tuple[int, int]]:
    """Each phase's [start, end): from its first logged step to the next phase's first, the last to `run_end`. The
    analysis (common.analyze), the series (common.series) and the studies' own scripts cut phases by this."""
    starts = phase_starts(scalars)
    return list(zip(starts, [*starts[1:], run_end(scalars)]))


def steps_to_return(returns: list[tuple[int, float]], start: int, end: float, threshold: float, window: int) -> float:
    """Steps from `start` until the mean of the last `window` episodic returns in [start, end)
    first reaches `threshold`; nan when it never does. The project's one definition of solved."""
    values, steps = [], []
    for step, value in returns:
        if start <= step < end:
            values.append(value)
            steps.append(step)
            if len(values) >= window and np.mean(values[-window:]) >= threshold:
                return steps[-1] - start
    return math.nan


def recovery_steps(evals: list[tuple[int, float]], change: int, level: float, tail: int, tolerance: float) -> float:
    """Steps from `change` until the mean of the last `tail` evaluations after it is back at
    most `(1 + tolerance) * level`; nan when it never is."""
    return steps_below(evals, change, math.inf, (1 + tolerance) * level, tail)


def steps_below(evals: list[tuple[int, float]], start: int, end: float, threshold: float, tail: int) -> float:
    """Steps from `start` until the mean of the last `tail` evaluations in (start, end] is at
    most `threshold`; nan when it never is. (This summary's own windows, older than common.analyze's [start, end):
    kept, as the summaries committed with earlier studies were made by them.)"""
    inside = [(step, value) for step, value in evals if start < step <= end]
    for k in range(tail, len(inside) + 1):
        if np.mean([v for _, v in inside[k - tail : k]]) <= threshold:
            return inside[k - 1][0] - start
    return math.nan


def summarize(
    run_dir: Path, threshold: float, window: int, tail: int, tolerance: float = 0.1, eval_threshold: float | None = None
) -> dict:
    scalars = read_scalars(run_dir)
    if "charts/episodic_return" not in scalars:
        raise ValueError(f"{run_dir} has no charts/episodic_return")
    starts = phase_starts(scalars)
    last_step = scalars["charts/SPS"][-1][0]
    ends = starts[1:] + [last_step]
    row = {"run": run_dir.name}
    for phase, (start, end) in enumerate(zip(starts, ends)):
        row[f"solved_phase{phase}"] = steps_to_return(scalars["charts/episodic_return"], start, end, threshold, window)
    for phase, (start, end) in enumerate(zip(starts, ends)):
        returns = [v for step, v in scalars["charts/episodic_return"] if start < step <= end]
        row[f"return_end_phase{phase}"] = float(np.mean(returns[-window:])) if returns else math.nan
    evals = scalars.get("external_model/eval_loss", [])
    if eval_threshold is not None and evals:
        for phase, (start, end) in enumerate(zip(starts, ends)):
            row[f"eval_below_phase{phase}"] = steps_below(evals, start, end, eval_threshold, tail)
    if len(starts) > 1 and evals:
        before = [v for s, v in evals if s < starts[1]]
        after = [v for s, v in evals if starts[1] <= s < ends[1]]
        row["eval_before_change"] = float(np.mean(before[-tail:])) if before else math.nan
        row["eval_peak_after"] = float(np.max(after)) if after else math.nan  # a change after the last evaluation
        row["eval_end"] = float(np.mean([v for _, v in evals][-tail:]))
        row["eval_recovery"] = recovery_steps(evals, starts[1], row["eval_before_change"], tail, tolerance)
    return row


def main() -> None:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dirs", nargs="+", type=Path)
    parser.add_argument("--threshold", type=float, default=0.9)
    parser.add_argument("--window", type=int, default=100, help="episodes in the moving mean of the return")
    parser.add_argument("--tail", type=int, default=5, help="evaluations averaged before the change and at the end")
    parser.add_argument("--tolerance", type=float, default=0.1, help="relative margin of a recovered eval loss")
    parser.add_argument(
        "--eval-threshold",
        type=float,
        default=None,
        help="also: steps from each phase start until the moving eval loss is at most this",
    )
    args = parser.parse_args()
    rows = []
    for run_dir in args.run_dirs:
        try:
            rows.append(summarize(run_dir, args.threshold, args.window, args.tail, args.tolerance, args.eval_threshold))
        except (ValueError, FileNotFoundError) as error:
            sys.exit(f"error: {error}")
    print_table(rows)
    groups: dict[str, list[dict]] = {}
    for row in rows:
        env, exp_name = row["run"].split("__")[:2]
        groups.setdefault(f"{env}__{exp_name}", []).append(row)
    print()
    print_table(
        [
            {"runs": f"{name} ({len(members)} seeds)"}
            | {key: median_of_finite([m.get(key, math.nan) for m in members]) for key in members[0] if key != "run"}
            for name, members in groups.items()
        ]
    )


def median_of_finite(values: list[float]) -> str:
    """Median over the seeds where the value exists (a phase solved, a loss recovered), with their count."""
    finite = [v for v in values if np.isfinite(v)]
    median = (
        "-" if not finite else f"{np.median(finite):,.0f}" if np.median(finite) >= 1000 else f"{np.median(finite):.4g}"
    )
    return f"{median} ({len(finite)}/{len(values)})"


def print_table(rows: list[dict]) -> None:
    columns = list(dict.fromkeys(key for row in rows for key in row))
    print("| " + " | ".join(columns) + " |\n|" + "-|" * len(columns))
    for row in rows:
        cells = [
            f"{row[c]:,.0f}"
            if isinstance(row.get(c), float) and c.startswith(("solved", "eval_recovery", "eval_below"))
            else f"{row[c]:.4g}"
            if isinstance(row.get(c), float)
            else str(row.get(c, ""))
            for c in columns
        ]
        print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
