"""The continuation probe's commands (PLAN.md in this folder): which states, which variants, one line each.

    python docs/results/ppo-task-loss-8x8/continuations.py SERIES COPIES --expect 50 --code ../study-8x8 \
        --out ../sweeps/task-loss > commands.txt      # then: xargs -P 2 -I{} sh -c '{} > /dev/null' < commands.txt

SERIES is the follow-up's series file (common.series; it must hold `--expect` finished runs), COPIES the folder of
its checkpoint copies (`<run key>/<milestone>.pt`). A state is a run's copy `1900000.pt` taken before the change
(its global step below the first step logged in the second phase). The runs read are those of the arms at entropy
0.01 (`ARMS`) that did the task before the change (a mean return of at least 0.8 over the last 100k steps before
it); each is *lost* or *kept* by the same mean over the last 100k steps before `END`, the continuations' own end.
A lost state gets every variant, a kept state of PPO (`KEPT_ARM`) the control only. Each run of the arms is listed on
stderr with its returns (before the change, before `END`, at the run's end) and what it gets, or why nothing.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[3]))  # the checkout's common/
from continue_run import read_header  # noqa: E402

from common.learning_summary import phase_starts, run_end  # noqa: E402
from common.series import read, window_mean  # noqa: E402

ARMS = ("ppo-ent-coef-0.01", "ppo_poi_progress-interest-noise-int-coef-1", "ppo_poi_progress-interest-error")
KEPT_ARM = "ppo-ent-coef-0.01"  # the arm whose states that kept the task get the control (the base rate)
MILESTONE = "1900000.pt"
TASK, WINDOW = 0.8, 100_000
END = 3_000_000  # every continuation's budget: 1M steps after the change at 2M
VARIANTS = {  # label: (flags changed, reseed); the lost states get all, the kept ones the first
    "v0": ([], 1),
    "v0-r2": ([], 2),
    "ent-0.03": (["ent_coef=0.03"], 1),
    "ent-0": (["ent_coef=0.0"], 1),
}


def states(records: list[dict], copies: Path) -> tuple[list[tuple[Path, list[str]]], list[str]]:
    """(copy, the labels of its variants) of every run that qualifies, and a line on each run of the arms."""
    chosen, lines = [], []
    for rec in sorted(records, key=lambda r: (r["method"], r["seed"])):
        if rec["method"] not in ARMS:
            continue
        key = f"{rec['env']}__{rec['method']}__{rec['seed']}"
        change = phase_starts(rec["scalars"])[1]
        before = window_mean(rec["episodes"], change - WINDOW, change)
        at_end, at_last = (window_mean(rec["episodes"], end - WINDOW, end) for end in (END, run_end(rec["scalars"])))
        returns = f"{before:.3f} / {at_end:.3f} / {at_last:.3f}"
        copy = copies / key / MILESTONE
        if not before >= TASK:
            lines.append(f"{key} {returns}: did not do the task before the change")
        elif not copy.is_file():
            lines.append(f"{key} {returns}: no copy {MILESTONE}")
        elif (step := int(read_header(copy)["values"]["global_step"])) >= change:
            lines.append(f"{key} {returns}: its copy {MILESTONE} is from step {step:,}, after the change")
        else:
            outcome = "kept" if at_end >= TASK else "lost"
            gets = "every variant" if outcome == "lost" else "the control" if rec["method"] == KEPT_ARM else "nothing"
            lines.append(f"{key} {returns}: {outcome} by {END:,}, gets {gets}")
            labels = {"every variant": list(VARIANTS), "the control": ["v0"], "nothing": []}[gets]
            if labels:
                chosen.append((copy, labels))
    return chosen, lines


def commands(chosen: list[tuple[Path, list[str]]], code: Path, out: Path) -> list[str]:
    script = Path(__file__).resolve().parent / "continue_run.py"
    lines = []
    for copy, labels in chosen:
        for label in labels:
            sets, reseed = VARIANTS[label]
            flags = [f"--set={s}" for s in [*sets, f"total_timesteps={END}"]]
            argv = ["python", script, copy, "--code", code, "--out", out, "--label", label, "--reseed", reseed, *flags]
            lines.append(shlex.join(map(str, argv)))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("series", type=Path)
    parser.add_argument("copies", type=Path)
    parser.add_argument("--expect", type=int, required=True, help="the finished runs the series must hold")
    parser.add_argument("--code", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if not args.series.is_file() or not args.copies.is_dir():
        sys.exit(f"error: need a series file and a folder of copies, got {args.series} and {args.copies}")
    records = [rec for rec in read(args.series) if rec["finished"]]
    if len(records) != args.expect:
        sys.exit(f"error: the series holds {len(records)} finished runs, not {args.expect}: the study has not finished")
    chosen, lines = states(records, args.copies)
    for line in lines:
        print(line, file=sys.stderr)
    print("\n".join(commands(chosen, args.code, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
