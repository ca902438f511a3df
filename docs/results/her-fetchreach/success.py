"""The HER study's tables (PLAN.md) from its committed per-run series: per run, the success rate of the training
episodes in each window of 2,000 global steps, the first window at 0.9 or more, the last window's rate; per arm, how
many runs reach 0.9 and the median rate per window over seeds.

    python docs/results/her-fetchreach/success.py docs/results/her-fetchreach/series.jsonl.gz
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # run as a script from anywhere

from common.series import read  # noqa: E402

SUCCESS, WINDOW, REACHED = "charts/episodic_success", 2000, 0.9


def window_rates(points: list[tuple[int, float]], total_steps: int, window: int = WINDOW) -> list[float]:
    """The mean of the episodes' successes logged in each window (i w, (i + 1) w] of the global steps (1-based: an
    episode ending at step s falls in window (s - 1) // w, one ending at 2,000 in the first); nan where none ended."""
    sums, counts = np.zeros(total_steps // window), np.zeros(total_steps // window)
    for step, value in points:
        sums[(step - 1) // window] += value
        counts[(step - 1) // window] += 1
    with np.errstate(invalid="ignore"):
        return (sums / counts).tolist()


def first_reaching(rates: list[float], level: float = REACHED, window: int = WINDOW) -> int | None:
    """The end step of the first window whose rate is at least `level`; None if none is."""
    return next(((i + 1) * window for i, rate in enumerate(rates) if rate >= level), None)


def tables(records: list[dict], total_steps: int) -> str:
    runs = sorted(((rec["method"], rec["seed"], window_rates(rec["scalars"][SUCCESS], total_steps)) for rec in records))
    lines = ["| arm | seed | first window at >= 0.9 (ends at step) | last window's rate |", "|-|-|-|-|"]
    for method, seed, rates in runs:
        first = first_reaching(rates)
        lines.append(f"| {method} | {seed} | {'never' if first is None else f'{first:,}'} | {rates[-1]:.2f} |")
    windows = total_steps // WINDOW
    header = " | ".join(f"{(i + 1) * WINDOW // 1000}k" for i in range(windows))
    lines += ["", f"| arm | runs reaching 0.9 | median rate per window ending at: {header} |", "|-|-|" + "-|" * windows]
    for method in sorted({method for method, _, _ in runs}):
        rates = np.array([r for m, _, r in runs if m == method])
        reached = sum(first_reaching(list(r)) is not None for r in rates)
        medians = " | ".join(f"{value:.2f}" for value in np.nanmedian(rates, axis=0))
        lines.append(f"| {method} | {reached} of {len(rates)} | {medians} |")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python docs/results/her-fetchreach/success.py SERIES.jsonl.gz")
    print(tables(read(Path(sys.argv[1])), total_steps=20_000))
