"""A study's per-run series: what `common.analyze` needs of each run, compact enough to commit.

    python -m common.series sweeps/fair6 --out docs/results/fair-test-6x6/series.jsonl.gz
    python -m common.series sweeps/more docs/results/fair-test-6x6/series.jsonl.gz \\
        --out docs/results/fair-test-6x6/series.jsonl.gz    # add runs to a committed series
    python -m common.analyze docs/results/fair-test-6x6/series.jsonl.gz ...    # the tables, from the repo alone
    python -m common.series sweeps/probe --tags poi/mean poi/intrinsic_reward_mean --out probe.jsonl.gz

One JSON line per run (gzip): its name, env, method, seed, whether it finished; every logged point
of the tags in `SERIES_TAGS` and of those starting with one of `SERIES_PREFIXES` (the losses as the
float32 values TensorBoard stores, so a table re-made from the series equals the one made from the
event files; the tags of `ROUNDED` and the prefixed ones to 4 significant digits), and of those a study
names (`--tags poi/mean ...`, to 4 digits too); and its episodes,
which are too many to keep one by one (some 20,000 in an 800k-step 6x6 run), as sums per bin of
`BIN` global steps (count, return, length) plus, per phase, what only single episodes give: the mean
return of its last 100 episodes and the step at which that mean first reached 0.8 (`solved_at`); and,
of a run that logs them, its interest per kind of transition over the phase's last 100k steps and over the whole
phase (`interest_by_action`, `interest_by_action_whole`: `common.interest_by_action`); and, of a run that logged it,
the machine it ran on from each start (`machines`: `common.runs.machine`).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import math
import os
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np

from common.console import OneLineParser, first_line
from common.interest_by_action import WINDOW, phase_means
from common.learning_summary import phase_spans, run_end, steps_to_return

RETURN, LENGTH = "charts/episodic_return", "charts/episodic_length"
SERIES_TAGS = (
    "charts/phase",
    "external_model/train_loss",
    "external_model/eval_loss",
    "external_model/eval_loss_changed",
    "losses/entropy",
    "external_model/rollout_changed_share",
    "charts/episodic_success",  # a goal-conditioned task's (sac_forward_model.py): 0 or 1 per episode
    "diayn/disc_accuracy_fresh",  # the skill agent's (ppo_poi_diayn.py): how distinct its skills are
    "diayn/weight",  # and the DIAYN reward's weight in the update (0 while --diayn-after-return holds it back)
    "diayn/skill_env_return",  # and the mean return of a rollout's episodes in the envs with skills,
    "diayn/skill_env_episodes",  # and how many ended there,
    "diayn/reward_mean",  # and the skill reward per step,
    "diayn/skill_share",  # and the share of the rollout's steps with a skill (--skill-then-task)
    "poi/old_world_rows",  # sac_forward_model.py on a world that changes: the batch's rows from an earlier world,
    "poi/old_world_interest",  # and the share of its interest they take
)
SERIES_PREFIXES = ("skills/prob_",)  # and every tag that starts so: the DIAYN file's skill distribution
ROUNDED = (  # kept to 4 significant digits
    "losses/entropy",
    "external_model/rollout_changed_share",
    "diayn/disc_accuracy_fresh",
    "diayn/weight",
    "diayn/skill_env_return",
    "diayn/skill_env_episodes",
    "diayn/reward_mean",
    "diayn/skill_share",
    "poi/old_world_rows",
    "poi/old_world_interest",
)
BIN = 2000  # global steps per bin of episodes: a window is cut to the whole bins inside it (window_mean)
LAST_EPISODES, SOLVED = 100, 0.8


def episode_bins(scalars: dict, bin_width: int = BIN) -> dict:
    """Episodes summed per bin of global steps: bin i holds those logged at steps [i w, (i+1) w)."""
    returns, lengths = scalars.get(RETURN, []), scalars.get(LENGTH, [])
    if lengths and len(returns) != len(lengths):
        raise ValueError(f"{len(returns)} episodic returns but {len(lengths)} episodic lengths")
    lengths = lengths or [(step, math.nan) for step, _ in returns]
    count, total, length = (np.zeros((run_end(scalars) - 1) // bin_width + 1) for _ in range(3))
    for (step, value), (_, steps_long) in zip(returns, lengths):  # logged in pairs, in the same order
        count[step // bin_width] += 1
        total[step // bin_width] += value
        length[step // bin_width] += steps_long
    return {"bin": bin_width, "count": count.astype(int).tolist(), "return": total.tolist(), "length": length.tolist()}


def window_mean(bins: dict, start: float, end: float, quantity: str = "return") -> float:
    """Mean `quantity` per episode over the episodes logged in [start, end), from the whole bins inside
    it (a window whose ends are not multiples of the bin is cut to the bins it holds whole, so that a
    phase's window never takes episodes of the next); nan when none ended there."""
    width = bins["bin"]
    first, stop = math.ceil(max(start, 0) / width), math.floor(end / width)
    count = sum(bins["count"][first:stop])
    return sum(bins[quantity][first:stop]) / count if count else math.nan


def episode_summary(scalars: dict) -> list[dict]:
    """Per phase: the mean return of its last 100 episodes and the step it first reached 0.8."""
    returns = scalars.get(RETURN, [])
    summary = []
    for start, end in phase_spans(scalars):
        inside = [value for step, value in returns if start <= step < end][-LAST_EPISODES:]
        solved = steps_to_return(returns, start, end, SOLVED, LAST_EPISODES)
        summary.append(
            {
                "start": start,
                "last_100_episodes": float(np.mean(inside)) if inside else None,
                "solved_at": None if math.isnan(solved) else start + solved,
            }
        )
    return summary


def encode(scalars: dict, more: tuple[str, ...] = ()) -> dict:
    """The tags of `SERIES_TAGS`, those starting with one of `SERIES_PREFIXES` and those of `more` (a study's
    own, `--tags`), as [steps, values]: the losses exact (the shortest text of each float32), those of `ROUNDED`
    (the entropy, the share of a rollout the change alters, the skills' accuracy, weight, return and probabilities)
    and of `more` to 4 significant digits, the phase only where it changes."""
    tags = {}
    kept = (*SERIES_TAGS, *sorted(tag for tag in scalars if tag.startswith(SERIES_PREFIXES)))
    more = tuple(dict.fromkeys(tag for tag in more if tag not in kept))
    for tag in (*kept, *more):
        points = scalars.get(tag, [])
        if tag == "charts/phase":
            points = [(s, v) for i, (s, v) in enumerate(points) if i == 0 or v != points[i - 1][1]]
        rounded = tag in ROUNDED or tag.startswith(SERIES_PREFIXES) or tag in more
        text = (lambda v: float(f"{v:.4g}")) if rounded else (lambda v: float(str(np.float32(v))))
        if tag in scalars:
            tags[tag] = [[s for s, _ in points], [text(v) for _, v in points]]
    return tags


def decode(tags: dict) -> dict:
    """`encode`'s tags back to {tag: [(step, value)]}, each value the float32 TensorBoard holds."""
    return {
        tag: list(zip(steps, np.asarray(values, dtype=np.float32).astype(float).tolist()))
        for tag, (steps, values) in tags.items()
    }


def record(run, scalars: dict, more: tuple[str, ...] = (), machines: list | None = None) -> dict:
    """The series of one run (`run` has path, env, method, seed, finished; see common.analyze.RunInfo),
    with its scalars as a reader of the file gets them back (`scalars`; `more`: tags kept besides `encode`'s own)
    and the machine it ran on from each start, as [step, text] (`machines`: the run's `common.runs.MACHINE_TAG`
    texts; left out of the record when the run logged none). A run read from a series file brings its episodes,
    per-phase summary and machines along (its scalars hold no single episodes) and keeps every tag that file kept."""
    if run.episodes is None:
        episodes = episode_bins(scalars)
        episodes["return"] = [round(v, 6) for v in episodes["return"]]
        episodes["length"] = [v if math.isnan(v) else int(v) for v in episodes["length"]]
        phases = episode_summary(scalars)
        for key, window in (("interest_by_action", WINDOW), ("interest_by_action_whole", 0)):
            for phase, means in zip(phases, phase_means(scalars, window)):
                if means:
                    phase[key] = {kind: float(f"{value:.4g}") for kind, value in means.items()}
    else:
        episodes, phases, machines = run.episodes, run.summary, run.machines
        more = (*more, *scalars)  # and every tag its series kept: a merge keeps a study's own tags
    tags = encode(scalars, more)
    rec = {
        "run": run.path.name,
        "env": run.env,
        "method": run.method,
        "seed": run.seed,
        "finished": run.finished,
        "tags": tags,
        "scalars": decode(tags),
        "episodes": episodes,
        "phases": phases,
    }
    if machines:
        rec["machines"] = [[step, text] for step, text in machines]
    return rec


def write(records: list[dict], path: Path) -> None:
    """Into a temporary file of its own beside `path`, synced and renamed over it once complete: a series that is
    also one of the inputs (runs added to a committed series) is never left cut short by a crash or Ctrl-C while it is
    written, and two writers of one series never write into one file."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with open(handle, "wb") as raw:
            umask = os.umask(0)  # read by setting it (the only way); set back at once
            os.umask(umask)
            os.fchmod(handle, 0o666 & ~umask)  # as open() would make it (mkstemp's file is private)
            with gzip.GzipFile(path.name, "wb", 9, raw) as zipped, io.TextIOWrapper(zipped) as f:
                for rec in records:
                    f.write(json.dumps({k: v for k, v in rec.items() if k != "scalars"}, separators=(",", ":")) + "\n")
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


RECORD = {"run": str, "env": str, "method": str, "seed": int, "finished": bool, "episodes": dict, "phases": list}
"""what a run's record holds beside its tags, and of which type (`whole_runs`)"""


def read(path: Path) -> list[dict]:
    """The records of a series file, each tag's values back to the float32 values TensorBoard holds; ValueError
    (one line naming the file) for a file that is not one."""
    try:
        with gzip.open(path, "rt") as f:
            records = [json.loads(line) for line in f if line.strip()]
    except (OSError, EOFError, zlib.error, ValueError) as error:  # not gzip, cut short, damaged, not JSON
        raise ValueError(f"{path} is not a series file that can be read ({first_line(error)})") from None
    for number, rec in enumerate(records, 1):
        if not (isinstance(rec, dict) and isinstance(rec.get("tags"), dict)):
            raise ValueError(f"{path} is not a series file: its record {number} has no tags")
        rec["scalars"] = decode(rec["tags"])
    return records


def whole_runs(path: Path, records: list[dict]) -> list[dict]:
    """`records` (of the series file `path`), each checked to hold a run's parts beside its tags (`RECORD`), as the
    analysis and a sweep's --done read them; ValueError, one line naming the file, for one that does not."""
    for number, rec in enumerate(records, 1):
        wrong = [key for key, kind in RECORD.items() if not isinstance(rec.get(key), kind)]
        if wrong:
            raise ValueError(f"{path} is not a series file: its record {number} lacks or mistypes {', '.join(wrong)}")
    return records


def main(argv: list[str] | None = None) -> int:
    from common.analyze import find_runs
    from common.runs import MACHINE_TAG
    from common.tb import read_scalars_and_texts

    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="sweep folders, folders of run folders, or series files")
    parser.add_argument("--out", type=Path, required=True, help="the series file to write (.jsonl.gz)")
    parser.add_argument(
        "--tags", nargs="+", default=[], help="more tags to keep, to 4 significant digits (e.g. poi/mean)"
    )
    args = parser.parse_args(argv)
    if {RETURN, LENGTH} & set(args.tags):
        print(f"error: --tags cannot name {RETURN} or {LENGTH}: the series keeps the episodes in bins", file=sys.stderr)
        return 1
    if not args.out.name.endswith(".jsonl.gz"):
        print(f"error: --out must end in .jsonl.gz, got {args.out}", file=sys.stderr)
        return 1
    if not args.out.parent.is_dir() or args.out.is_dir():
        what = f"{args.out} is a folder" if args.out.is_dir() else f"--out's folder {args.out.parent} does not exist"
        print(f"error: {what}", file=sys.stderr)
        return 1
    try:
        runs, notes = find_runs(args.folders)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    finished = [run for run in runs if run.finished]
    if not finished:
        print(
            f"error: no finished run in {' '.join(map(str, args.folders))} ({len(runs)} unfinished): nothing written",
            file=sys.stderr,
        )
        return 1
    more = tuple(args.tags)
    records = []
    for run in finished:
        if run.episodes is None:  # a run folder
            scalars, texts = read_scalars_and_texts(run.path, (MACHINE_TAG,))
            records.append(record(run, scalars, more, texts[MACHINE_TAG]))
        else:
            records.append(record(run, run.scalars, more))
    write(records, args.out)
    notes += [f"no run logged --tags {tag} (a typo?)" for tag in more if not any(tag in rec["tags"] for rec in records)]
    for note in notes:
        print(f"note: {note}")
    print(
        f"wrote {args.out}: {len(records)} finished runs ({len(runs) - len(records)} unfinished left out), "
        f"{args.out.stat().st_size / 1024:.0f} KiB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
