"""The continuous interest study's old-world reading (PLAN.md, Amendment 2): how much of SAC's interest falls on the
transitions of the world before the change, beyond their share of the batch. Per run of an arm with an interest, the
mean of `poi/old_world_interest - poi/old_world_rows` over its logged points at steps 27,000-40,000 (each point's
interest is under the model retrained 1,000 steps before; from the model of 26,000 on, its window holds the new
motor's transitions alone) and, beside it, at 22,000-26,000 (models whose windows mix the two motors); every point of
a window must be there (one each 1,000 steps); per arm, the IQM over its runs with a 95% stratified-bootstrap CI
(common.analyze, 5,000 resamples, seed 0), from the study's series (common.series keeps finished runs alone: a missing
run is left out). A description, not a gate. Prints a markdown table.

    python docs/results/continuous-interest/oldworld.py docs/results/continuous-interest/sac-series.jsonl.gz \
        sac_forward_model-int-coef-0.1 sac_forward_model-interest-noise-int-coef-0.1
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from common import analyze  # noqa: E402

WINDOWS = {"27,000-40,000": (27_000, 40_000), "22,000-26,000 (beside)": (22_000, 26_000)}  # steps, both ends in
EVERY = 1_000  # sac_forward_model logs the shares every 1,000 steps
REPS, SEED = 5_000, 0


def excess(scalars: dict, start: int, end: int) -> float:
    """The mean over the points logged at steps `start`..`end` of the interest's share on the old world's rows less
    those rows' share of the batch."""
    expected = set(range(start, end + 1, EVERY))
    rows = {step: value for step, value in scalars.get("poi/old_world_rows", []) if start <= step <= end}
    interest = {step: value for step, value in scalars.get("poi/old_world_interest", []) if start <= step <= end}
    if rows.keys() != expected or interest.keys() != expected:
        missing = sorted(expected - (rows.keys() & interest.keys()))
        raise ValueError(f"old-world shares missing at steps {start:,}-{end:,}: {', '.join(map(str, missing))}")
    return float(np.mean([interest[step] - rows[step] for step in sorted(expected)]))


def readings(series: Path, arms: list[str]) -> dict[str, dict[str, tuple[float, float, float, int]]]:
    """{arm: {window: (IQM, CI low, CI high, runs)}} over each arm's runs in the series file `series`."""
    runs, _ = analyze.find_runs([series])
    found = {}
    for arm in arms:
        of_arm = [run for run in runs if run.method == arm]
        if not of_arm:
            raise ValueError(f"no runs of {arm} in {series}")
        found[arm] = {}
        for window, (start, end) in WINDOWS.items():
            try:
                scores = np.array([[excess(run.scalars, start, end)] for run in of_arm])
            except ValueError as error:
                raise ValueError(f"{arm}: {error}") from None
            iqm, low, high = analyze.interval_estimates({arm: scores}, REPS, SEED)[arm]
            found[arm][window] = (iqm, low, high, len(of_arm))
    return found


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: oldworld.py SERIES ARM [ARM ...]", file=sys.stderr)
        return 1
    try:
        found = readings(Path(argv[0]), argv[1:])
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print("| arm | steps | runs | old-world interest - rows: IQM [95% CI] |")
    print("|-|-|-:|-|")
    for arm, by_window in found.items():
        for window, (iqm, low, high, n) in by_window.items():
            print(f"| {arm} | {window} | {n} | {iqm:+.3f} [{low:+.3f}, {high:+.3f}] |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
