"""The plan's verdict, applied as PLAN.md fixes it (written before any of the runs were read): the task gates, the
comparators, I3 against each, and the first of the six outcomes that applies.

    python docs/results/fair-test-8x8-entropy/verdict.py docs/results/fair-test-8x8-entropy

Reads the folder's `results.json` (common.analyze against F1: each finished run's task per phase) and, for each
comparator A, `against-<A>/results.json` (common.analyze --baseline A --judge-against-baseline I3): I3's row of the
robustness table (its ratio to A at threshold x1, span 10, the pre-registered reading, with the CI the tool's verdict
uses) and its other readings (a win is *fragile* when one of their point estimates is not below 1). A run that did
not finish counts as not doing the task: every arm has 10 planned runs (seeds 211-220).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

F1 = "ppo-ent-coef-0.01"
NON_INTEREST = (F1, "ppo-ent-coef-0.02", "ppo-ent-coef-0.03", "ppo_poi_progress-interest-noise-int-coef-1")
I3 = "ppo_poi_progress-interest-error"
PLANNED, TASK, READING = 10, 0.8, "threshold x1, span 10"
SEEDS = tuple(range(211, 221))
OUTCOMES = {
    1: "a win, against more than PPO at its default entropy: the error interest re-learns the changed views faster "
    "than every non-interest arm tried that does the task about as often",
    2: "a win against F1 alone: faster than PPO at its default entropy, the only non-interest arm that did the task "
    "as often; not a win over breadth",
    3: "I3 fails its gate: its re-learning is not judged",
    4: "the gain over PPO did not replicate: I3 / F1 has a CI that includes 1 or lies above it",
    5: "breadth that keeps the task matches the interest: a comparator other than F1 is at most 25% slower than I3, "
    "or faster",
    6: "10 seeds cannot tell the interest's gain from that of breadth here",
}


def doing(results: dict) -> dict[str, list[int]]:
    """Each arm's runs doing the task (return over the phase's last 100k steps at least 0.8) per phase."""
    counts = {arm: [0, 0] for arm in (*NON_INTEREST, I3)}
    for run in results["runs"]:
        if run["method"] in counts and run.get("finished", True):
            for k in (0, 1):
                counts[run["method"]][k] += run["phases"][k]["return_window"] >= TASK
    return counts


def finished(results: dict) -> dict[str, int]:
    """Each arm's finished runs; more than the planned 10, or a seed outside 211-220, is an error."""
    runs = [r for r in results["runs"] if r.get("finished", True) and r["method"] in (*NON_INTEREST, I3)]
    if any(r["seed"] not in SEEDS for r in runs):
        raise ValueError(f"a run with a seed outside {SEEDS[0]}-{SEEDS[-1]} in results.json")
    counts = {arm: sum(r["method"] == arm for r in runs) for arm in (*NON_INTEREST, I3)}
    if max(counts.values()) > PLANNED:
        raise ValueError(f"more than {PLANNED} runs of an arm in results.json: {counts}")
    return counts


def gates(counts: dict[str, list[int]]) -> tuple[list[str], bool]:
    """The comparators (F1, and each non-interest arm within two runs of F1 in each phase and doing the task in at
    least 6 of 10 before the change) and whether I3 passes (within one run of F1 in each phase)."""
    f1 = counts[F1]
    comparators = [
        a for a in NON_INTEREST if a == F1 or (counts[a][0] >= max(f1[0] - 2, 6) and counts[a][1] >= f1[1] - 2)
    ]
    return comparators, all(c >= b - 1 for c, b in zip(counts[I3], f1))


def against(folder: Path, comparator: str) -> dict:
    """I3's pre-registered ratio to `comparator`, its CI, and whether a win would be fragile."""
    path = folder / f"against-{comparator}" / "results.json"
    if not path.is_file():
        raise ValueError(f"no {path}: run the plan's command for comparator {comparator}")
    rows = [r for r in json.loads(path.read_text())["robustness"] if r["method"] == I3 and r["phase"] == 1]
    if len(rows) != 1:
        raise ValueError(f"{path}: {len(rows)} rows of {I3} after the change in its robustness table, not 1")
    row = rows[0]
    reading = row["readings"][READING]
    return {
        "ratio": reading["iqm"],
        "ci": [reading["low"], reading["high"]],
        "verdict_ci": row["corrected"],
        "fragile": any(not v["iqm"] < 1 for v in row["readings"].values()),
    }


def outcome(comparators: list[str], passes: bool, ratios: dict[str, dict]) -> int:
    """The first of the plan's six outcomes that applies."""
    if not passes:
        return 3
    if all(ratios[a]["verdict_ci"][1] < 1 for a in comparators):
        return 1 if any(a != F1 for a in comparators) else 2
    if ratios[F1]["ci"][1] >= 1:
        return 4
    if any(a != F1 and ratios[a]["ci"][0] >= 0.75 and ratios[a]["ci"][1] >= 1 for a in comparators):
        return 5
    return 6


def report(folder: Path) -> str:
    results = json.loads((folder / "results.json").read_text())
    counts, done = doing(results), finished(results)
    comparators, passes = gates(counts)
    ratios = {}
    for a in comparators:  # an I3 that fails its gate is not judged: its ratios are shown where they were made
        if passes or (folder / f"against-{a}" / "results.json").is_file():
            ratios[a] = against(folder, a)
    number = outcome(comparators, passes, ratios)
    lines = ["| arm | finished runs | doing the task before / after the change | role |", "|-|-:|-|-|"]
    for arm in (*NON_INTEREST, I3):
        if arm == I3:
            role = "passes its gate" if passes else "fails its gate"
        else:
            role = "comparator" if arm in comparators else "not a comparator"
        lines.append(f"| {arm} | {done[arm]} of {PLANNED} | {counts[arm][0]} / {counts[arm][1]} | {role} |")
    lines += ["", "| I3 against | ratio | 95% CI | the verdict's CI | fragile |", "|-|-:|-|-|-|"]
    for a, r in ratios.items():
        lines.append(
            f"| {a} | {r['ratio']:.2f} | [{r['ci'][0]:.2f}, {r['ci'][1]:.2f}] | "
            f"[{r['verdict_ci'][0]:.2f}, {r['verdict_ci'][1]:.2f}] | {'yes' if r['fragile'] else 'no'} |"
        )
    fragile = number in (1, 2) and any(ratios[a]["fragile"] for a in comparators)
    lines += ["", f"Outcome {number}{' (fragile)' if fragile else ''}: {OUTCOMES[number]}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    try:
        if not (args.folder / "results.json").is_file():
            raise ValueError(f"no results.json in {args.folder}: run the plan's first analysis command")
        print(report(args.folder))
    except (ValueError, KeyError) as error:
        sys.exit(f"error: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
