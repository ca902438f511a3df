"""The skill study's verdicts, applied as PLAN.md fixes them (written before any of its runs): the task gates, the
comparators, each interest arm against each of them, the first of the six outcomes that applies to each, issue 34's
target read literally, and whether the probe's way becomes the DIAYN file's default.

    python docs/results/skills-band-8x8/verdict.py --flags "$WAY"          # the way's flags (exit 3: no way)
    python docs/results/skills-band-8x8/verdict.py FOLDER --way "$WAY"    # the verdicts and the DIAYN runs' table
    python docs/results/skills-band-8x8/verdict.py FOLDER --way "$WAY" --against   # or --judged, --non-interest,
                                                                                  # --skill-arms: labels, one line

`$WAY` is the decision of the probe that sends a way (the last line `docs/results/diayn-stronger-skills-8x8/choose.py`
prints, by the plan's Amendment 3; the first probe's `choose.py` prints the same kind of line) or a way's label.
FOLDER holds `results.json` (common.analyze against F1: each finished run's return per phase), `series.jsonl.gz`
(the DIAYN runs' return in the envs with skills and their skill readings, judged by the first probe's `choose.judge`)
and, for each comparator A and for plain DIAYN, `against-A/results.json` (common.analyze --baseline A --comparisons 2
--judge-against-baseline, the plan's settings, checked here): each interest arm's row of the robustness table after
the change. The DIAYN arms are judged by the row's `corrected` interval (97.5%: two tries at one question), the
embedding by its pre-registered reading's 95% interval. A planned run that did not finish counts as not doing the
task; an arm without finished runs fails its gate.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("choose", HERE.parent / "diayn-ways-8x8" / "choose.py")
choose = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(choose)  # the probe's reading of a DIAYN run (choose.judge); it puts the repo on sys.path
from common.series import read as read_series

FLAGS = {  # the first probe's ways (choose.WAYS), the fourth probe's that goes on (Amendment 3), and their flags
    "ppo_poi_diayn": "",
    "ppo_poi_diayn-diayn-coef-0.25": "--diayn-coef 0.25",
    "ppo_poi_diayn-skill-envs-8": "--skill-envs 8",
    "ppo_poi_diayn-diayn-after-return-0.9": "--diayn-after-return 0.9",
    "ppo_poi_diayn-skill-then-task-diayn-coef-2": "--skill-then-task --diayn-coef 2",
}
NO_WAY = "no skill study on these ways"  # the end of choose.decide's line when no way goes on
F1, F2A, F2, F6 = (
    "ppo-ent-coef-0.01",
    "ppo-ent-coef-0.02",
    "ppo-ent-coef-0.03",
    "ppo_poi_progress-interest-noise-int-coef-1",
)
E1 = "ppo_poi_emb"
PLANNED, TASK, READING, DEFAULT_BAR = 10, 0.8, "threshold x1, span 10", 8
SEEDS = tuple(range(541, 551))
SETTINGS = {  # what every analysis of the plan's commands was made with (`settings` in its results.json)
    "span": 10,
    "changed_threshold": 1.0,
    "reps": 5000,
    "task_window": 100_000,
    "relative": None,
    "drop_unsuccessful": False,
    "methods": None,
    "frontier_loss": "changed",
    "robust_factors": [0.5, 1.0, 2.0],  # the readings the fragile rule reads: analyze's defaults
    "robust_spans": [5, 10, 30],
    "robust_window": 200_000,
    "seed": 0,
}
OUTCOMES = {
    1: "a win against more than F1: {x} re-learns the changed views faster than every non-interest arm that does the "
    "task about as often",
    2: "a win against F1 alone: {x} re-learns faster than PPO at its default entropy, the only non-interest arm that "
    "did the task as often; not a win over breadth or over plain DIAYN",
    3: "{x} fails its gate: its re-learning is not judged",
    4: "{x} is not faster than PPO: its ratio to F1 has an interval that includes 1 or lies above it",
    5: "matched: {x} is at most 25% faster than a comparator other than F1, or slower",
    6: "10 seeds cannot tell {x}'s gain from the comparators'",
}


def way_of(decision: str) -> str | None:
    """The way the probe sends to the skill study, from its decision line (or a way's label); None when the line says
    no way goes on; ValueError for anything else (a crashed choose.py leaves a table row or nothing)."""
    if decision in FLAGS:
        return decision
    chosen = re.match(r"chosen: (\S+?)[;\s(]", decision + " ")
    if chosen and decision.rstrip().endswith(f"{NO_WAY})"):
        return None
    uses = re.search(r"the skill study's plan uses (\S+?)[\s()]", decision + " ")
    if chosen is None or uses is None:
        raise ValueError(f"not a decision line of the probe's choose.py: {decision!r}")
    way = chosen.group(1) if uses.group(1) == "it" else uses.group(1)
    if way not in FLAGS:
        raise ValueError(f"not one of the probe's ways: {way!r}")
    return way


def arms(way: str | None) -> dict[str, str]:
    """Each arm's role and the label the sweep gives it (the file's stem and its flags without the dashes); without a
    way, no DIAYN arms."""
    skills = {} if way is None else {
        "D1": way,
        "D2": f"{way}-state-sampler-rollouts-skill-interest-error",
        "D0": f"{way}-uniform-prior-weight-1",
    }  # fmt: skip
    return {**skills, "E1": E1, "F1": F1, "F2a": F2A, "F2": F2, "F6": F6}


def labels(way: str | None, roles: tuple[str, ...]) -> list[str]:
    names = arms(way)
    return [names[role] for role in roles if role in names]


def non_interest(way: str | None) -> list[str]:
    return labels(way, ("F1", "F2a", "F2", "F6", "D0"))


def interest(way: str | None) -> list[str]:
    return labels(way, ("D1", "D2", "E1"))


def skill_arms(way: str | None) -> list[str]:
    return labels(way, ("D1", "D2", "D0"))


def judged_runs(folder: Path, way: str | None) -> dict[str, list[dict]]:
    """Each arm's finished runs: per phase whether it does the task (the DIAYN arms by the probe's `choose.judge`,
    which also needs the return in the envs with skills, and its readings). More than the planned 10 runs of an arm,
    or a seed outside 541-550, is an error."""
    results = json.loads((folder / "results.json").read_text())
    check_settings(folder / "results.json", results["settings"], {**SETTINGS, "baseline": F1, "comparisons": 1})
    planned = [*non_interest(way), *interest(way)]
    runs = [r for r in results["runs"] if r.get("finished", True) and r["method"] in planned]
    if any(r["seed"] not in SEEDS for r in runs):
        raise ValueError(f"a run with a seed outside {SEEDS[0]}-{SEEDS[-1]} in results.json")
    skills = set(skill_arms(way))
    scalars = {}
    if any(r["method"] in skills for r in runs):
        if not (folder / "series.jsonl.gz").is_file():
            raise ValueError(f"no series.jsonl.gz in {folder}: the DIAYN runs' task needs it")
        scalars = {rec["run"]: rec["scalars"] for rec in read_series(folder / "series.jsonl.gz")}
    judged = {label: [] for label in planned}
    for run in runs:
        if run["method"] in skills:
            if run["run"] not in scalars:
                raise ValueError(f"run {run['run']} is in results.json but not in the series")
            phases = choose.judge(run, scalars[run["run"]])["phases"]
            judged[run["method"]].append({"seed": run["seed"], "task": [p["solved"] for p in phases], "phases": phases})
        else:
            judged[run["method"]].append(
                {"seed": run["seed"], "task": [p["return_window"] >= TASK for p in run["phases"]]}
            )
    too_many = {arm: len(v) for arm, v in judged.items() if len(v) > PLANNED}
    if too_many:
        raise ValueError(f"more than {PLANNED} finished runs of an arm in results.json: {too_many}")
    return judged


def counts(judged: dict[str, list[dict]]) -> dict[str, list[int]]:
    """Each arm's runs doing the task per phase."""
    return {arm: [sum(r["task"][k] for r in runs) for k in (0, 1)] for arm, runs in judged.items()}


def gates(doing: dict[str, list[int]], way: str | None, finished: set[str]) -> tuple[list[str], dict[str, bool]]:
    """The comparators (F1, and each non-interest arm within two runs of F1 in each phase and doing the task in at
    least 6 of 10 before the change) and whether each interest arm passes (within one run of F1 in each phase, and
    some finished run: `finished`, the arms that have one)."""
    f1 = doing[F1]
    comparators = [
        a for a in non_interest(way) if a == F1 or (doing[a][0] >= max(f1[0] - 2, 6) and doing[a][1] >= f1[1] - 2)
    ]
    passes = {x: all(c >= b - 1 for c, b in zip(doing[x], f1)) and x in finished for x in interest(way)}
    return comparators, passes


def against(folder: Path, baseline: str, x: str) -> dict:
    """X's ratio to `baseline` after the change (the pre-registered reading), its 95% and corrected intervals, and
    whether a win would be fragile (a robustness reading's point estimate not below 1). ValueError when the analysis
    is missing, was made with other settings than the plan's, or has no row of X."""
    path = folder / f"against-{baseline}" / "results.json"
    if not path.is_file():
        raise ValueError(f"no {path}: run the plan's command for {baseline}")
    analysis = json.loads(path.read_text())
    check_settings(path, analysis["settings"], {**SETTINGS, "baseline": baseline, "comparisons": 2})
    rows = [r for r in analysis["robustness"] if r["method"] == x and r["phase"] == 1]
    if len(rows) != 1:
        raise ValueError(f"{path}: {len(rows)} rows of {x} after the change in its robustness table, not 1")
    reading = rows[0]["readings"][READING]
    return {
        "ratio": reading["iqm"],
        "ci": [reading["low"], reading["high"]],
        "corrected": rows[0]["corrected"],
        "fragile": any(not v["iqm"] < 1 for v in rows[0]["readings"].values()),
    }


def check_settings(path: Path, settings: dict, wanted: dict) -> None:
    """ValueError unless the analysis at `path` was made with the plan's settings, from the study's series alone."""
    wrong = {k: settings.get(k) for k, v in wanted.items() if settings.get(k) != v}
    if wrong:
        raise ValueError(f"{path} was made with {wrong}, not the plan's { ({k: wanted[k] for k in wrong}) }")
    folders = settings.get("folders") or [""]
    if len(folders) != 1 or Path(folders[0]).name != "series.jsonl.gz":
        raise ValueError(f"{path} was made from {folders}, not from the study's series.jsonl.gz alone")


def interval(x: str, reading: dict) -> list[float]:
    """The interval the plan judges X by: 97.5% for the DIAYN arms (two tries), 95% for the embedding."""
    return reading["ci"] if x == E1 else reading["corrected"]


def outcome(x: str, comparators: list[str], passes: bool, ratios: dict[str, dict]) -> int:
    """The first of the plan's six outcomes that applies to interest arm X (every interval X's family's)."""
    if not passes:
        return 3
    ci = {a: interval(x, ratios[a]) for a in comparators}
    if all(ci[a][1] < 1 for a in comparators):
        return 1 if any(a != F1 for a in comparators) else 2
    if ci[F1][1] >= 1:
        return 4
    if any(a != F1 and ci[a][0] >= 0.75 and ci[a][1] >= 1 for a in comparators):
        return 5
    return 6


def skill_table(judged: dict[str, list[dict]], role: dict[str, str], way: str | None) -> list[str]:
    """Each DIAYN run's readings per phase (before / after the change): the probe's table."""
    lines = [
        "| arm | seed | return (all envs) | return (envs with skills) | fresh accuracy | largest skill probability "
        "| distinct skills |",
        "|-|-|-|-|-|-|-|",
    ]
    for label in skill_arms(way):
        for run in sorted(judged[label], key=lambda r: r["seed"]):
            cells = [" / ".join(f"{p[k]:.3f}" for p in run["phases"]) for k in ("ret", "skill_ret", "acc", "largest")]
            distinct = " / ".join("yes" if p["distinct"] else "no" for p in run["phases"])
            lines.append(f"| {role[label]} | {run['seed']} | {' | '.join(cells)} | {distinct} |")
    return lines


def report(folder: Path, way: str | None, judged: dict[str, list[dict]]) -> str:
    """The verdicts' tables and lines; `judged`: `judged_runs(folder, way)`."""
    doing = counts(judged)
    comparators, passes = gates(doing, way, {arm for arm, runs in judged.items() if runs})
    role = {label: name for name, label in arms(way).items()}
    skills = skill_arms(way)
    d0 = arms(way).get("D0")
    lines = [
        f"The way: {way} ({FLAGS[way] or 'no flags'})" if way else "No way: the DIAYN arms were not run",
        "",
        "| arm | label | finished runs | doing the task before / after the change | 8 of 10 in each | distinct skills "
        "before / after | role |",
        "|-|-|-:|-|-|-|-|",
    ]
    for label, runs in judged.items():
        if label in passes:
            part = "passes its gate" if passes[label] else "fails its gate"
        else:
            part = "comparator" if label in comparators else "not a comparator"
        distinct = (
            " / ".join(str(sum(r["phases"][k]["distinct"] for r in runs)) for k in (0, 1)) if label in skills else ""
        )
        bar = "yes" if min(doing[label]) >= DEFAULT_BAR else "no"
        lines.append(
            f"| {role[label]} | {label} | {len(runs)} of {PLANNED} | {doing[label][0]} / {doing[label][1]} | {bar} | "
            f"{distinct} | {part} |"
        )
    verdicts = []
    for x in interest(way):
        baselines = comparators + ([d0] if x != E1 and d0 not in comparators else [])
        ratios = {}
        for a in baselines:
            try:
                ratios[a] = against(folder, a, x)
            except ValueError:
                if passes[x]:
                    raise
                # an arm that fails its gate is not judged: its ratios are shown where they were made
        level = "95%" if x == E1 else "97.5%"
        lines += ["", f"| {role[x]} against | ratio | 95% CI | {level} CI (judged) | fragile |", "|-|-:|-|-|-|"]
        for a, r in ratios.items():
            judged_ci = interval(x, r)
            lines.append(
                f"| {role[a]}{'' if a in comparators else ' (not a comparator)'} | {r['ratio']:.2f} | "
                f"[{r['ci'][0]:.2f}, {r['ci'][1]:.2f}] | [{judged_ci[0]:.2f}, {judged_ci[1]:.2f}] | "
                f"{'yes' if r['fragile'] else 'no'} |"
            )
        number = outcome(x, comparators, passes[x], ratios)
        fragile = number in (1, 2) and any(ratios[a]["fragile"] for a in comparators)
        line = f"{role[x]}: outcome {number}{' (fragile)' if fragile else ''}: {OUTCOMES[number].format(x=role[x])}"
        if number == 1 and x != E1:
            line += f"; plain DIAYN {'is' if d0 in comparators else 'is not'} among them"
        if x != E1:
            met = passes[x] and all(interval(x, ratios[a])[1] < 1 for a in (F1, d0))
            line += f". Issue 34's target read literally (the gate passed, faster than D0 and F1 at 97.5%): "
            line += "met" if met else "not met"
        verdicts.append(line + ".")
    lines += ["", *verdicts]
    if way:
        d1 = arms(way)["D1"]
        default = passes[d1] and doing[d1][0] >= DEFAULT_BAR
        lines.append(
            f"The way becomes ppo_poi_diayn.py's default (D1 passes its gate and does the task in at least "
            f"{DEFAULT_BAR} of {PLANNED} runs before the change): {'yes' if default else 'no'}."
        )
        lines += ["", *skill_table(judged, role, way)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, nargs="?")
    parser.add_argument("--flags", metavar="WAY", help="print the way's flags and stop (exit 3: the probe sends none)")
    parser.add_argument("--way", help="the probe's decision line, or the way's label")
    lists = parser.add_mutually_exclusive_group()
    lists.add_argument("--against", action="store_true", help="the comparators and plain DIAYN: the analyses to make")
    lists.add_argument("--judged", action="store_true", help="the interest arms with finished runs")
    lists.add_argument("--non-interest", action="store_true", help="the non-interest arms' labels")
    lists.add_argument("--skill-arms", action="store_true", help="the DIAYN arms' labels (the maps)")
    args = parser.parse_args(argv)
    try:
        if args.flags is not None:
            way = way_of(args.flags)
            if way is None:
                print("the probe sends no way: the study runs without the DIAYN arms", file=sys.stderr)
                return 3
            print(FLAGS[way])
            return 0
        if args.way is None or args.folder is None:
            raise ValueError("give FOLDER and --way (or --flags WAY)")
        way = way_of(args.way)
        if args.non_interest or args.skill_arms:
            print(" ".join(non_interest(way) if args.non_interest else skill_arms(way)))
            return 0
        if not (args.folder / "results.json").is_file():
            raise ValueError(f"no results.json in {args.folder}: run the plan's first analysis command")
        judged = judged_runs(args.folder, way)
        if args.judged:
            print(" ".join(x for x in interest(way) if judged[x]))
        elif args.against:
            comparators, _ = gates(counts(judged), way, {arm for arm, runs in judged.items() if runs})
            print(" ".join(comparators + [a for a in labels(way, ("D0",)) if a not in comparators]))
        else:
            print(report(args.folder, way, judged))
    except (ValueError, KeyError) as error:
        sys.exit(f"error: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
