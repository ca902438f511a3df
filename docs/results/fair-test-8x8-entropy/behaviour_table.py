"""The behaviour diagnosis's tables: what each run's policy does at each milestone, beside whether the run does the
task after the change.

    python docs/results/fair-test-8x8-entropy/behaviour_table.py docs/results/fair-test-8x8-entropy

Reads the folder's behaviour.jsonl (behaviour.py's rows, the last of each checkpoint's), random.jsonl (a uniformly
random policy on the same layouts, the same number of episodes, blue correct) and results.json (common.analyze's:
each run's mean return over the last 100k steps of each phase). A checkpoint's milestone is its file name: the
checkpoint the run had last written when its log passed that step (a run writes one every 204,800 steps; seeds
211-217 copied every 30 s by a script lost with that machine, 218-220 by copy_milestones.py), so its own step, in the
table, can lie up to about 200k before the milestone or, where the copying began late, after it; the phase's correct
key is beside it. Prints one table per milestone, a row per run, and the medians, after the change, of the runs
that do the task after it (a return of at least 0.8 there) beside those that do not.
"""

import json
import sys
from collections import defaultdict
from pathlib import Path
from statistics import median

TASK_BAR = 0.8  # the plan's "does the task": the mean return over a phase's last 100k steps
COLUMNS = {  # a column's title, and how to read it from a row
    "success": lambda r: r["success"],
    "first key red / blue / none": lambda r: tuple(r["first_key"][k] for k in ("red", "blue", "none")),
    "carried blue": lambda r: r["episodes_carrying"]["blue"],
    "failed toggles with red": lambda r: r["failed_toggles_per_episode"]["red"],
    "steps facing the locked door with red / blue / nothing": lambda r: tuple(
        r["steps_facing_the_locked_door_carrying"][k] for k in ("red", "blue", "none")
    ),
    "steps the change alters": lambda r: r["steps_the_change_alters"],
    "p(pickup) facing red / blue": lambda r: tuple(r["pickup_probability_facing_a_key"][k] for k in ("red", "blue")),
    "steps facing a red / blue key": lambda r: tuple(r["steps_facing_a_key"][k] for k in ("red", "blue")),
}


def cell(value) -> str:
    if isinstance(value, tuple):
        return " / ".join(cell(v) for v in value)
    if value is None:
        return "-"
    return f"{value:.1f}" if value >= 10 else f"{value:.2f}"


def medians(rows: list[dict]):
    """Each column's median over `rows` (a tuple column: each part's, over the rows that have it)."""
    out = []
    for read in COLUMNS.values():
        values = [read(r) for r in rows]
        if isinstance(values[0], tuple):
            parts = [[v[k] for v in values if v[k] is not None] for k in range(len(values[0]))]
            out.append(tuple(median(p) if p else None for p in parts))
        else:
            out.append(median(values))
    return out


def main(folder: Path) -> None:
    rows = {}  # by checkpoint: its last row
    for line in (folder / "behaviour.jsonl").read_text().splitlines():
        row = json.loads(line)
        rows[row["checkpoint"]] = row
    (random,) = [json.loads(line) for line in (folder / "random.jsonl").read_text().splitlines()]
    for row in rows.values():  # the reference must play what the checkpoints played, blue correct
        if random["color"] != "blue" or any(row[k] != random[k] for k in ("env", "layout_seed", "episodes")):
            where = f"{row['checkpoint']}'s env, layouts and episodes, blue correct"
            sys.exit(f"error: the random policy's row is not on {where}")
    after = {
        (run["method"], run["seed"]): run["phases"][1]["return_window"]
        for run in json.loads((folder / "results.json").read_text())["runs"]
    }
    by_milestone = defaultdict(list)
    for row in rows.values():
        by_milestone[int(Path(row["checkpoint"]).stem)].append(row)
    header = "| run | step | correct key | return after the change | " + " | ".join(COLUMNS) + " |"
    rule = "|" + "-|" * (4 + len(COLUMNS))
    for milestone, group in sorted(by_milestone.items()):
        print(f"\n### Milestone {milestone:,}\n\n{header}\n{rule}")
        print(
            "| a random policy | - | blue | - | " + " | ".join(cell(read(random)) for read in COLUMNS.values()) + " |"
        )
        kept, lost = [], []
        for row in sorted(group, key=lambda r: (r["label"], r["seed"])):
            task = after.get((row["label"], row["seed"]))
            if task is None:  # not among the analysed runs (unfinished)
                continue
            if row["color"] == "blue":  # after the change
                (kept if task >= TASK_BAR else lost).append(row)
            cells = " | ".join(cell(read(row)) for read in COLUMNS.values())
            print(f"| {row['label']} {row['seed']} | {row['global_step']:,} | {row['color']} | {task:.3f} | {cells} |")
        for name, part in (("after the change, doing the task", kept), ("after the change, not doing it", lost)):
            if part:
                cells = " | ".join(cell(value) for value in medians(part))
                runs = f"{len(part)} run" + ("s" if len(part) > 1 else "")
                print(f"| median, {runs} {name} | - | blue | - | {cells} |")


if __name__ == "__main__":
    if len(sys.argv) != 2 or not Path(sys.argv[1]).is_dir():
        sys.exit("usage: behaviour_table.py FOLDER (with behaviour.jsonl, random.jsonl and results.json)")
    main(Path(sys.argv[1]))
