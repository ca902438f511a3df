"""The DIAYN ways probe's choice (PLAN.md), from the committed series and results alone.

    python docs/results/diayn-ways-8x8/choose.py

Per run and phase, over the phase's last 100k steps: the task return (every env's episodes,
`return_window`), the return in the envs with skills (the rollouts' `diayn/skill_env_return` weighted by
their `diayn/skill_env_episodes`, so each episode counts once, as in `return_window`), the
skills' fresh accuracy (`diayn/disc_accuracy_fresh`) and the largest probability of the skill
distribution (the largest `skills/prob_<k>` of each iteration). A phase is solved when both returns
are at least 0.8; the skills are distinct when the accuracy is at least 0.25 and at least 0.1 above
the largest probability (a discriminator that ignores the state and names the likeliest skill scores
about that probability; a run without `skills/prob_<k>` in its series fails this). A run passes when
both phases are solved with distinct skills; it *qualifies* (amendment 1) when the first phase is solved
and the skills are distinct in both. A planned run missing from the series fails, and counts with
accuracy 0 in the median. Prints a markdown table of the runs, then each way's counts, the choice (ties
after the median accuracy go to the earlier way in `WAYS`, the defaults first) and what goes to the skill
study: the chosen way if it passes in 2 of 3 runs, or qualifies in 2 of 3 with at least one run solving
both phases; else the way with the most qualifying runs (ties as in the choice) if it meets that; else none.
"""

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from common.series import read  # noqa: E402

HERE = Path(__file__).resolve().parent
WAYS = (
    "ppo_poi_diayn",
    "ppo_poi_diayn-diayn-coef-0.25",
    "ppo_poi_diayn-skill-envs-8",
    "ppo_poi_diayn-diayn-after-return-0.9",
)
SEEDS, WINDOW, SOLVED, CHANCE_BAR, MARGIN = (531, 532, 533), 100_000, 0.8, 0.25, 0.1


def window_mean(points: list, end: float) -> float:
    """The mean of the (step, value) points logged in [end - 100k, end), the phase's last 100k steps (the point
    at `end` is the next phase's first, as `common.analyze` cuts phases)."""
    values = [v for s, v in points if end - WINDOW <= s < end]
    return float(np.mean(values)) if values else float("nan")


def episode_weighted_return(scalars: dict, end: float) -> float:
    """The mean return of the episodes that ended in envs with skills in [end - 100k, end)."""
    counts = dict(scalars.get("diayn/skill_env_episodes", []))
    pairs = [(v, counts.get(s, 0)) for s, v in scalars.get("diayn/skill_env_return", []) if end - WINDOW <= s < end]
    total = sum(n for _, n in pairs)
    return sum(v * n for v, n in pairs) / total if total else float("nan")


def largest_probability(scalars: dict, end: float) -> float:
    """The mean over the window's iterations of the skill distribution's largest probability."""
    largest = {}  # step: the largest probability logged at that step
    for tag in (tag for tag in scalars if tag.startswith("skills/prob_")):
        for s, v in scalars[tag]:
            if end - WINDOW <= s < end:
                largest[s] = max(largest.get(s, v), v)
    return float(np.mean(list(largest.values()))) if largest else float("nan")


def judge(run: dict, scalars: dict) -> dict:
    """A run's readings per phase (its `results.json` entry and its series' scalars), whether it passes and whether it
    qualifies."""
    phases = []
    for phase in run["phases"]:
        end = phase["start"] + phase["length"]
        skill_return = episode_weighted_return(scalars, end)
        accuracy = window_mean(scalars.get("diayn/disc_accuracy_fresh", []), end)
        largest = largest_probability(scalars, end)
        solved = phase["return_window"] >= SOLVED and skill_return >= SOLVED
        distinct = accuracy >= CHANCE_BAR and accuracy >= largest + MARGIN  # False where either is nan
        phases.append(
            dict(
                ret=phase["return_window"],
                skill_ret=skill_return,
                acc=accuracy,
                largest=largest,
                solved=solved,
                distinct=distinct,
            )
        )
    passes = all(p["solved"] and p["distinct"] for p in phases)
    qualifies = phases[0]["solved"] and all(p["distinct"] for p in phases)
    return dict(phases=phases, passes=passes, qualifies=qualifies)


def main() -> None:
    results = {r["run"]: r for r in json.loads((HERE / "results.json").read_text())["runs"]}
    judged = {}
    for rec in read(HERE / "series.jsonl.gz"):
        if rec["finished"] and rec["run"] in results:  # common.analyze passes over a run without losses: missing
            judged[rec["method"], rec["seed"]] = judge(results[rec["run"]], rec["scalars"])
    print(
        "| way | seed | return (all envs) | return (skill envs) | fresh accuracy | largest skill probability | passes |"
    )
    print("|-|-|-|-|-|-|-|")
    for way in WAYS:
        for seed in SEEDS:
            if (way, seed) not in judged:
                print(f"| {way} | {seed} | missing | | | | no |")
                continue
            run = judged[way, seed]
            cells = [
                " / ".join(f"{p[key]:.3f}" for p in run["phases"]) for key in ("ret", "skill_ret", "acc", "largest")
            ]
            print(f"| {way} | {seed} | {' | '.join(cells)} | {'yes' if run['passes'] else 'no'} |")
    print()
    ranks, qualifying = {}, {}
    for way in WAYS:
        runs = [judged.get((way, seed)) for seed in SEEDS]
        passes = sum(bool(r and r["passes"]) for r in runs)
        solved = sum(bool(r and all(p["solved"] for p in r["phases"])) for r in runs)
        accuracy = float(np.median([np.nan_to_num(r["phases"][1]["acc"]) if r else 0.0 for r in runs]))
        ranks[way] = (passes, solved, accuracy)
        qualifying[way] = sum(bool(r and r["qualifies"]) for r in runs)
        print(
            f"{way}: passes {passes}/3, solves both phases {solved}/3, qualifies {qualifying[way]}/3, "
            f"median fresh accuracy after the change {accuracy:.3f}"
        )
    print(decide(ranks, qualifying))


def decide(ranks: dict, qualifying: dict) -> str:
    """The choice (most passing runs, then most solving both phases, then the median accuracy, then `WAYS` order) and
    what goes to the skill study (amendment 1)."""
    order = sorted(WAYS, key=lambda way: (ranks[way], -WAYS.index(way)), reverse=True)
    chosen = order[0]
    if ranks[chosen][0] >= 2:
        return f"chosen: {chosen} (passes in {ranks[chosen][0]} of 3: the skill study's plan uses it)"

    def goes(way):  # qualifies in 2 of 3, and at least one run solves both phases
        return qualifying[way] >= 2 and ranks[way][1] >= 1

    if goes(chosen):
        return f"chosen: {chosen} (qualifies in {qualifying[chosen]} of 3: the skill study's plan uses it)"
    best = max(order, key=lambda way: (goes(way), qualifying[way]))  # max keeps the first of equals: the choice's order
    if goes(best):
        return f"chosen: {chosen}; the skill study's plan uses {best} (qualifies in {qualifying[best]} of 3)"
    return f"chosen: {chosen} (no way passes or qualifies in 2 of 3: no skill study on these ways)"


if __name__ == "__main__":
    main()
