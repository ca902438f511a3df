"""The continuous interest study's thresholds (PLAN.md, Amendment 1), from F1's runs alone and from their first
phase alone, before any other arm is read: for each loss, FACTOR x the IQM over F1's finished runs of its level
before the change (`level`: the median of its logged values over the second half of the first phase's evaluations;
SAC's first phase has 20, and an average seeded with the first, untrained one stays above the level), rounded up to 2
significant digits. Prints them as common.analyze's flags (and on stderr how many runs gave them); the changed
loss's is T, the one the verdict reads.

    python docs/results/continuous-interest/threshold.py docs/results/continuous-interest/ppo-series.jsonl.gz \
        ppo_continuous_poi_ensemble-int-coef-0
"""

import math
import sys
from pathlib import Path

import numpy as np
from rliable import metrics

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from common import analyze  # noqa: E402

FACTOR = 3.0


def round_up(value: float, digits: int = 2) -> float:
    """`value` rounded up to `digits` significant digits (a value already at them stays)."""
    unit = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return float(f"{math.ceil(round(value / unit, 6)) * unit:.{digits}g}")


def level(values: np.ndarray) -> float:
    """The median of the last ceil(n/2) of a phase's n values (an odd count keeps the middle one)."""
    return float(np.median(values[len(values) // 2 :]))


def thresholds(series: Path, f1: str) -> dict[str, float]:
    """{loss kind: threshold} from the first phase of `f1`'s finished runs in `series`."""
    runs, _ = analyze.find_runs([series])
    runs = [run for run in runs if run.method == f1 and run.finished]
    if not runs:
        raise ValueError(f"no finished runs of {f1} in {series}")
    levels = {kind: [] for kind in analyze.LOSSES}
    for run in runs:
        starts = analyze.phase_starts(run.scalars)
        if len(starts) < 2:
            raise ValueError(f"{run.path.name} has no change")
        for kind, tag in analyze.LOSSES.items():
            _, values = analyze.in_phase(run.scalars.get(tag, []), starts[0], starts[1])  # the first phase
            if len(values) == 0:
                raise ValueError(f"{run.path.name} logged no {tag} before the change")
            levels[kind].append(level(values))
    print(f"threshold.py: {len(runs)} finished runs of {f1}", file=sys.stderr)
    return {kind: round_up(FACTOR * metrics.aggregate_iqm(values)) for kind, values in levels.items()}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: threshold.py SERIES F1_LABEL", file=sys.stderr)
        return 1
    try:
        found = thresholds(Path(argv[0]), argv[1])
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(" ".join(f"--{kind}-threshold {value:g}" for kind, value in found.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
