"""The null-arm rule: does a change that can alter results differ from the current code no more than the
current code differs from itself on other seeds? Read off a `common.analyze` results.json.

    python -m common.analyze A.jsonl.gz B.jsonl.gz --baseline CURRENT --methods CURRENT CHANGE NULL ... --out X
    python -m common.null_arm X/results.json --current CURRENT --change CHANGE --null NULL

Three arms: the current code (CURRENT), the change on the same seeds (CHANGE), the current code on other seeds
(NULL). Three measures, those of the fair test (docs/results/fair-test-6x6/PLAN.md): the re-learning of the
changed views after the first change (steps to the changed-loss threshold, as a ratio of IQMs to CURRENT's, the
analysis's `--baseline`), and the task (the return over the last `--task-window` steps) before the first change
and at the end of the run. A measure passes when either
- CURRENT's point estimate lies inside CHANGE's 95% CI (for the ratio: CHANGE / CURRENT's CI contains 1), or
- CHANGE's point estimate is no further from CURRENT's than NULL's is (for the ratio: |log CHANGE / CURRENT| <=
  |log NULL / CURRENT|).
Beside them, with no verdict: each arm's mean log10 changed loss over the first `--robust-window` steps after
the change, its episode length and its policy entropy over the last 100k steps of each phase.

`--calibrate TRIALS`: how often identical code fails the rule. The runs of CURRENT and NULL (the same code) are
pooled; each trial draws three arms of as many runs as CURRENT has from the pool, with replacement, and applies
the rule to them with percentile-bootstrap CIs (`--reps` resamples) of the same IQMs. Approximate: arms drawn
from one pool share runs, and the resampling streams are not the analysis's.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from common.analyze import interval_estimates
from common.console import OneLineParser
from common.frontier import iqm, resampled_iqms


def as_tuple(estimate: dict) -> tuple[float, float, float]:
    """An analysis's {iqm, low, high} as (point, low, high)."""
    return estimate["iqm"], estimate["low"], estimate["high"]


def passes(current: float, change: tuple[float, float, float], null: float, ratio: bool = False) -> tuple[bool, bool]:
    """The rule's two readings of one measure: (CURRENT inside CHANGE's CI, CHANGE no further than NULL).
    `change` is (point, low, high); for a ratio to CURRENT, `current` is 1 and distances are taken in logs."""
    point, low, high = change

    def distance(x):
        if not ratio:
            return abs(x - current)
        return abs(math.log(x / current)) if x > 0 else math.inf  # a ratio of 0: no steps at all, unboundedly far

    closer = distance(point) <= distance(null) or math.isclose(distance(point), distance(null))  # a tie passes
    return low <= current <= high, closer


def readings(results: dict, current: str, change: str, null: str) -> list[dict]:
    """One row per measure: the three arms' estimates and the rule's readings (a single env)."""
    phases = sorted({row["phase"] for row in results["task"]})
    aggregate = {(row["phase"], row["method"]): row for row in results["aggregates"]}
    task = {(row["phase"], row["method"]): row["return_window"] for row in results["task"]}
    missing = {current, change, null} - {method for _, method in task}
    if missing:
        raise ValueError(f"not among the analysis's methods: {', '.join(sorted(missing))}")
    if results["settings"]["baseline"] != current:
        raise ValueError(f"the re-learning ratio needs the analysis run with --baseline {current}")
    if len({row["env"] for row in results["task"]}) > 1:
        raise ValueError("the analysis holds several envs: analyse one env at a time (--methods, a sweep per env)")
    if len(phases) < 2:
        raise ValueError("the runs have no change of the world (one phase)")
    if "changed_adaptation_normalised" not in aggregate[(1, change)]:
        raise ValueError(f"no re-learning ratio to {current} (its IQM of steps is 0, or no changed-view loss)")
    rows = []
    relearn = {m: aggregate[(1, m)]["changed_adaptation_normalised"] for m in (change, null)}
    rows.append(
        dict(
            measure="re-learning of the changed views (ratio to current)",
            current=(1.0, math.nan, math.nan),
            change=as_tuple(relearn[change]),
            null=as_tuple(relearn[null]),
            readings=passes(1.0, as_tuple(relearn[change]), relearn[null]["iqm"], ratio=True),
        )
    )
    for name, phase in (("task before the change", phases[0]), ("task at the end", phases[-1])):
        arms = {m: as_tuple(task[(phase, m)]) for m in (current, change, null)}
        rows.append(
            dict(
                measure=f"{name} (return, phase {phase})",
                current=arms[current],
                change=arms[change],
                null=arms[null],
                readings=passes(arms[current][0], arms[change], arms[null][0]),
            )
        )
    return rows


def beside(results: dict, methods: list[str], reps: int, seed: int) -> list[dict]:
    """Per arm, no verdict: the mean log10 changed loss just after the first change, and per phase the episode
    length and the policy entropy over its last 100k steps (IQM [95% CI] over runs)."""
    key = f"mean log10 loss, first {results['settings']['robust_window'] // 1000}k"
    scores = {
        m: np.array([[run["phases"][1]["robust"][key]] for run in results["runs"] if run["method"] == m])
        for m in methods
    }
    loss = interval_estimates(scores, reps, seed)
    task = {(row["phase"], row["method"]): row for row in results["task"]}
    phases = sorted({phase for phase, _ in task})
    return [
        dict(
            method=m,
            loss=loss[m],
            length=[as_tuple(task[(p, m)]["length_window"]) for p in phases],
            entropy=[as_tuple(task[(p, m)]["entropy_window"]) for p in phases],
        )
        for m in methods
    ]


def per_run(results: dict, methods: list[str]) -> np.ndarray:
    """Per run of `methods` (rows): the steps to re-learn after the first change, the task before it, at the end."""
    return np.array(
        [
            [
                run["phases"][1]["changed_adaptation"],
                run["phases"][0]["return_window"],
                run["phases"][-1]["return_window"],
            ]
            for run in results["runs"]
            if run["method"] in methods
        ]
    )


def calibrate(pool: np.ndarray, runs: int, trials: int, reps: int, seed: int) -> np.ndarray:
    """How often identical code fails each measure of the rule, and any of them (the last entry): per trial, three
    arms of `runs` runs drawn with replacement from `pool` (per_run's rows), read as current, change and null."""
    rng = np.random.default_rng(seed)
    fails = np.zeros((trials, 3), dtype=bool)
    tail = [2.5, 97.5]
    for trial in range(trials):
        current, change, null = (pool[rng.integers(len(pool), size=runs)] for _ in range(3))
        resampled = [resampled_iqms(change[:, k], reps, rng) for k in range(3)]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratios = resampled[0] / resampled_iqms(current[:, 0], reps, rng)
        low, high = np.nanpercentile(ratios, tail)
        base = iqm(current[:, 0])
        fails[trial, 0] = not any(passes(1.0, (iqm(change[:, 0]) / base, low, high), iqm(null[:, 0]) / base, True))
        for k in (1, 2):
            low, high = np.percentile(resampled[k], tail)
            fails[trial, k] = not any(passes(iqm(current[:, k]), (iqm(change[:, k]), low, high), iqm(null[:, k])))
    return np.append(fails.mean(axis=0), fails.any(axis=1).mean())


def estimate(value: tuple[float, float, float], digits: int = 4) -> str:
    """`point [low, high]`, or the point alone where it has no interval (the current code's ratio to itself)."""
    point, low, high = value
    return f"{point:.{digits}g}" if math.isnan(low) else f"{point:.{digits}g} [{low:.{digits}g}, {high:.{digits}g}]"


def markdown(rows: list[dict], side: list[dict], current: str, change: str, null: str) -> str:
    """The readings' table, the verdict, and the side table."""
    lines = [
        f"current: `{current}`; change: `{change}` (same seeds); null: `{null}` (the current code, other seeds)",
        "",
        "| measure | current | change | null | current inside change's CI | change no further than null | passes |",
        "|-|-|-|-|-|-|-|",
    ]
    for row in rows:
        inside, closer = row["readings"]
        lines.append(
            f"| {row['measure']} | {estimate(row['current'])} | {estimate(row['change'])} | {estimate(row['null'])} "
            f"| {'yes' if inside else 'no'} | {'yes' if closer else 'no'} | {'yes' if inside or closer else '**no**'} |"
        )
    verdict = all(any(row["readings"]) for row in rows)
    lines += ["", f"**The change differs no more than the null arm: {'yes' if verdict else 'no'}.**", ""]
    lines += [
        "| arm | mean log10 changed loss after the change | episode length by phase | entropy by phase |",
        "|-|-|-|-|",
    ]
    for row in side:
        length = "; ".join(estimate(x, 3) for x in row["length"])
        entropy = "; ".join(estimate(x, 3) for x in row["entropy"])
        lines.append(f"| `{row['method']}` | {estimate(row['loss'], 3)} | {length} | {entropy} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path, help="a common.analyze results.json")
    parser.add_argument("--current", required=True, help="the current code's method (the analysis's --baseline)")
    parser.add_argument("--change", required=True, help="the change's method, on the current code's seeds")
    parser.add_argument("--null", required=True, help="the current code's method on other seeds")
    parser.add_argument("--reps", type=int, default=5000, help="bootstrap resamples (the side table, --calibrate)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    parser.add_argument("--calibrate", type=int, default=0, metavar="TRIALS", help="how often identical code fails")
    args = parser.parse_args(argv)
    if not args.results.is_file():
        parser.exit(2, f"error: {args.results} is not a file (a common.analyze results.json)\n")
    if args.reps < 1 or args.calibrate < 0:
        parser.exit(2, "error: --reps must be positive and --calibrate at least 0\n")
    if len({args.current, args.change, args.null}) < 3:
        parser.exit(
            2, "error: --current, --change and --null must be three different methods (the rule compares them)\n"
        )
    try:
        results = json.loads(args.results.read_text())
        rows = readings(results, args.current, args.change, args.null)
        side = beside(results, [args.current, args.change, args.null], args.reps, args.seed)
        pool = per_run(results, [args.current, args.null])
    except (ValueError, KeyError, IndexError) as error:
        what = error if isinstance(error, ValueError) else f"not an analysis of runs with a change ({error} missing)"
        parser.exit(2, f"error: {args.results}: {what}\n")
    sys.stdout.write(markdown(rows, side, args.current, args.change, args.null))
    if args.calibrate:
        runs = sum(run["method"] == args.current for run in results["runs"])
        rates = calibrate(pool, runs, args.calibrate, args.reps, args.seed)
        sys.stdout.write(
            f"\nIdentical code ({args.current} and {args.null} pooled, {len(pool)} runs; {args.calibrate} trials of "
            f"three arms of {runs} drawn with replacement) fails: re-learning {rates[0]:.0%}, task before the change "
            f"{rates[1]:.0%}, task at the end {rates[2]:.0%}; at least one of the three {rates[3]:.0%}.\n"
        )
    return 0 if all(any(row["readings"]) for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
