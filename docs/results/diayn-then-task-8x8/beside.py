"""The then-task probe's readings beside the choice (PLAN.md with its Amendment 1), from the committed series and
results alone: the first probe's `beside.py` on this folder, its two ways and the diagnostic arm TS; per run the share
of steps with a skill (`diayn/skill_share`, the mean of its rollouts in each phase's last 100k steps, before / after
the change); per way, by the first probe's `judge`, how many runs solve the first phase, how many have distinct skills
there, and how many both (the count the amendment's reading is judged on); and TS's runs by `choose.py`'s readings of
a way (`choose.py` does not read TS): whether its skills, with no skill reward, pass the distinct-skills bar for
nothing. A later probe calls `main` with its own `choose` script, and its own extra arm (or none) and that arm's name.

    python docs/results/diayn-then-task-8x8/beside.py
"""

import importlib.util
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))
from common.series import read  # noqa: E402

DIAGNOSTIC = "ppo_poi_diayn-skill-then-task-diayn-coef-0"  # TS: the skill input for the first steps, no DIAYN weight


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHOOSE = load("then_task_choose", HERE / "choose.py")
RULES = CHOOSE.rules()  # the first probe's choose.py on this probe's folder: its judge and its window
window_share = RULES.window_mean  # a rollout series' mean over [end - 100k, end), nan when none was logged


def readings(choose=CHOOSE, diagnostic: str | None = DIAGNOSTIC):
    """The first probe's beside.py, reading a probe's folder, ways (and its diagnostic arm, if any) and seeds (from
    its `choose` script: this probe's by default; a later probe passes its own)."""
    module = load("first_probe_beside", HERE.parent / "diayn-ways-8x8" / "beside.py")
    module.HERE = choose.HERE
    module.WAYS, module.SEEDS = (*choose.WAYS, *([diagnostic] if diagnostic else [])), choose.SEEDS
    return module


def first_phase_counts(judged: list) -> tuple[int, int, int]:
    """Of a way's runs (the first probe's `judge` of each, None where missing): how many solve the first phase, how
    many have distinct skills in it, and how many both."""
    first = [r["phases"][0] for r in judged if r is not None]
    return (
        sum(p["solved"] for p in first),
        sum(p["distinct"] for p in first),
        sum(p["solved"] and p["distinct"] for p in first),
    )


def main(choose=CHOOSE, diagnostic: str | None = DIAGNOSTIC, role: str = "diagnostic arm") -> None:
    module = readings(choose, diagnostic)
    module.main()
    here, rules = module.HERE, choose.rules()
    results = {r["run"]: r for r in json.loads((here / "results.json").read_text())["runs"]}
    records = {(rec["method"], rec["seed"]): rec for rec in read(here / "series.jsonl.gz") if rec["finished"]}
    print("\n| way | seed | share of steps with a skill, last 100k |")
    print("|-|-|-|")
    for way in module.WAYS:
        for seed in module.SEEDS:
            rec = records.get((way, seed))
            if rec is None or rec["run"] not in results:
                print(f"| {way} | {seed} | missing |")
                continue
            ends = [p["start"] + p["length"] for p in results[rec["run"]]["phases"]]
            shares = rec["scalars"].get("diayn/skill_share", [])
            print(f"| {way} | {seed} | {' / '.join(f'{window_share(shares, end):.3f}' for end in ends)} |")
    judged = {
        way: [
            rules.judge(results[r["run"]], r["scalars"]) if r is not None and r["run"] in results else None
            for r in (records.get((way, seed)) for seed in module.SEEDS)
        ]
        for way in module.WAYS
    }
    print()
    for way in module.WAYS:
        solved, distinct, both = first_phase_counts(judged[way])
        n = len(module.SEEDS)
        print(f"{way}: first phase solved {solved}/{n}, distinct skills there {distinct}/{n}, both {both}/{n}")
    if not diagnostic:
        return
    print(f"\n| {role} | seed | return (all envs) | fresh accuracy | largest skill probability | distinct skills |")
    print("|-|-|-|-|-|-|")
    for seed, run in zip(module.SEEDS, judged[diagnostic]):
        if run is None:
            print(f"| {diagnostic} | {seed} | missing | | | |")
            continue
        cells = [" / ".join(f"{p[key]:.3f}" for p in run["phases"]) for key in ("ret", "acc", "largest")]
        distinct = " / ".join("yes" if p["distinct"] else "no" for p in run["phases"])
        print(f"| {diagnostic} | {seed} | {' | '.join(cells)} | {distinct} |")


if __name__ == "__main__":
    main()
