"""The continuous interest study's reading of where the agents go (PLAN.md, Amendment 4): the share of an arm's steps
taken in the region the change acts on (Pendulum below the horizontal with positive torque,
`external_model/rollout_changed_share`, which the env counts in every phase), per run the mean of the points logged
in three windows: the last BEFORE steps before the change, the first AFTER steps from it, and the run's last BEFORE
steps; per arm, the IQM over its runs with a 95% stratified-bootstrap CI (common.analyze, 5,000 resamples, seed 0),
from the study's series (finished runs alone). The change is where common.analyze starts the second phase (its first
logged step) and the run ends one step after its last logged one (common.learning_summary.phase_spans); a point
logged at step s covers the steps since the point before, and counts in the window that holds s. A description
beside the verdict, not a gate. Prints a markdown table. `--tag TAG` first reads another tag of the series in the
same windows, to 3 significant digits (SAC's `losses/alpha` and losses, the diagnosis's `poi/changed_region_interest`:
the page's readings beside the plan's).

    python docs/results/continuous-interest/where.py docs/results/continuous-interest/ppo-series.jsonl.gz \
        50000 50000 ppo_continuous_poi_ensemble-int-coef-0 ppo_continuous_poi_ensemble
    python docs/results/continuous-interest/where.py --tag losses/alpha SERIES 6000 10000 ARM [ARM ...]
"""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from common import analyze  # noqa: E402
from common.learning_summary import phase_spans  # noqa: E402

TAG = "external_model/rollout_changed_share"
REPS, SEED = 5_000, 0


def windows(scalars: dict, before: int, after: int) -> dict[str, tuple[int, int]]:
    """The three windows of a run, [start, end) in global steps."""
    spans = phase_spans(scalars)
    if len(spans) != 2:
        raise ValueError(f"{len(spans)} phases, not 2")
    (_, change), (_, end) = spans
    return {
        "before the change": (change - before, change),
        "after it": (change, change + after),
        "end": (end - before, end),
    }


def window_means(scalars: dict, before: int, after: int, tag: str = TAG) -> dict[str, tuple[float, int]]:
    """{window: (the mean of the tag's points logged in it, how many)} for one run; ValueError for a window with
    none."""
    points = scalars.get(tag, [])
    out = {}
    for name, (start, end) in windows(scalars, before, after).items():
        inside = [value for step, value in points if start <= step < end]
        if not inside:
            raise ValueError(f"no {tag} logged at steps {start:,}-{end - 1:,}")
        out[name] = float(np.mean(inside)), len(inside)
    return out


def readings(series: Path, before: int, after: int, arms: list[str], tag: str = TAG) -> dict[str, dict[str, tuple]]:
    """{arm: {window: (IQM, CI low, CI high, runs, (fewest, most) points in a run)}} over each arm's runs in the series
    file `series`."""
    runs, _ = analyze.find_runs([series])
    found = {}
    for arm in arms:
        of_arm = [run for run in runs if run.method == arm and run.finished]
        if not of_arm:
            raise ValueError(f"no finished runs of {arm} in {series}")
        try:
            per_run = [window_means(run.scalars, before, after, tag) for run in of_arm]
        except ValueError as error:
            raise ValueError(f"{arm}: {error}") from None
        found[arm] = {}
        for window in per_run[0]:
            scores = np.array([[run[window][0]] for run in per_run])
            iqm, low, high = analyze.interval_estimates({arm: scores}, REPS, SEED)[arm]
            points = [run[window][1] for run in per_run]
            found[arm][window] = (iqm, low, high, len(of_arm), (min(points), max(points)))
    return found


def main(argv: list[str]) -> int:
    tag = TAG
    if argv[:1] == ["--tag"] and len(argv) > 1:
        tag, argv = argv[1], argv[2:]
    counts = [int(value) if value.isdigit() else 0 for value in argv[1:3]]
    if len(argv) < 4 or min(counts) <= 0 or any(arm.startswith("--") for arm in argv[3:]):
        print(
            "usage: where.py [--tag TAG] SERIES BEFORE AFTER ARM [ARM ...]  (BEFORE, AFTER: positive step counts)",
            file=sys.stderr,
        )
        return 1
    before, after = counts
    try:
        found = readings(Path(argv[0]), before, after, argv[3:], tag)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    label = "arm" if tag == TAG else f"arm ({tag})"
    print(
        f"| {label} | runs | last {before:,} before the change | first {after:,} after it | last {before:,} of the run "
        "| points in a run: before, after, end |"
    )
    print("|-|-:|-|-|-|-|")
    form = ".3f" if tag == TAG else "#.3g"  # the plan's share to 3 places; another tag (a loss, alpha) to 3 digits
    for arm, by_window in found.items():
        cells = [f"{iqm:{form}} [{low:{form}}, {high:{form}}]" for iqm, low, high, *_ in by_window.values()]
        counts = ", ".join(f"{a}" if a == b else f"{a}-{b}" for *_, (a, b) in by_window.values())
        print(f"| {arm} | {next(iter(by_window.values()))[3]} | {' | '.join(cells)} | {counts} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
