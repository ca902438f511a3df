"""The continuous interest study's thresholds (PLAN.md, Amendment 1), from F1's runs alone and from their first
phase alone, before any other arm is read: for each loss, FACTOR x the IQM over F1's finished runs of its lowest
smoothed value (EMA span SPAN, as common.analyze smooths it) before the change, rounded up to 2 significant digits.
Prints them as common.analyze's flags; the changed loss's is T, the one the verdict reads.

    python docs/results/continuous-interest/threshold.py docs/results/continuous-interest/ppo-series.jsonl.gz \
        ppo_continuous_poi_ensemble-int-coef-0
"""

import math
import sys
from pathlib import Path

from rliable import metrics

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from common import analyze  # noqa: E402

FACTOR, SPAN = 3.0, 10


def round_up(value: float, digits: int = 2) -> float:
    """`value` rounded up to `digits` significant digits (a value already at them stays)."""
    unit = 10.0 ** (math.floor(math.log10(value)) - digits + 1)
    return float(f"{math.ceil(round(value / unit, 6)) * unit:.{digits}g}")


def thresholds(series: Path, f1: str) -> dict[str, float]:
    """{loss kind: threshold} from the first phase of `f1`'s finished runs in `series`."""
    runs, _ = analyze.find_runs([series])
    runs = [run for run in runs if run.method == f1 and run.finished]
    if not runs:
        raise ValueError(f"no finished runs of {f1} in {series}")
    lowest = {kind: [] for kind in analyze.LOSSES}
    for run in runs:
        starts = analyze.phase_starts(run.scalars)
        if len(starts) < 2:
            raise ValueError(f"{run.path.name} has no change")
        for kind, tag in analyze.LOSSES.items():
            _, values = analyze.in_phase(run.scalars.get(tag, []), starts[0], starts[1])  # the first phase
            if len(values) == 0:
                raise ValueError(f"{run.path.name} logged no {tag} before the change")
            lowest[kind].append(float(analyze.ema(values, SPAN).min()))
    return {kind: round_up(FACTOR * metrics.aggregate_iqm(values)) for kind, values in lowest.items()}


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
