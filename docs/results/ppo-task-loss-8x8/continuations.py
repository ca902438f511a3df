"""The continuation probe's commands (PLAN.md in this folder): which states, which variants, one line each.

    python docs/results/ppo-task-loss-8x8/continuations.py RESULTS_JSON COPIES --code ../study-8x8 \
        --out ../sweeps/task-loss > commands.txt      # then: xargs -P 2 -I{} sh -c {} < commands.txt

RESULTS_JSON is the follow-up's `results.json` (common.analyze), COPIES the folder of its checkpoint copies
(`<run key>/<milestone>.pt`). A state is a run's copy `1900000.pt` taken before the change (its global step below
the first change step); the runs read are those of the arms at entropy 0.01 (`ARMS`) that did the task before the
change (a mean return of at least 0.8 over the phase's last 100k steps): the ones that lost it after the change get
every variant; of those that kept it, PPO's (`ppo-ent-coef-0.01`) get the control only, the others nothing. Each run
passed over is named on stderr with the reason.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from continue_run import read_header  # noqa: E402

ARMS = ("ppo-ent-coef-0.01", "ppo_poi_progress-interest-noise-int-coef-1", "ppo_poi_progress-interest-error")
KEPT_ARM = "ppo-ent-coef-0.01"  # the arm whose runs that kept the task get the control (the base rate)
MILESTONE = "1900000.pt"
TASK = 0.8
END = 3_000_000  # every continuation's budget: 1M steps after the change at 2M
VARIANTS = {  # label: flags changed; each continuation re-seeded with 1 (the control too: the same stream for all)
    "v0": [],
    "ent-0.03": ["ent_coef=0.03"],
    "ent-0": ["ent_coef=0.0"],
}


def states(results: dict, copies: Path, change: int) -> tuple[list[tuple[Path, str]], list[str]]:
    """(copy, outcome) of every run that qualifies, and a note on each run of the arms that does not."""
    chosen, notes = [], []
    for run in sorted(results["runs"], key=lambda r: (r["method"], r["seed"])):
        if run["method"] not in ARMS:
            continue
        before, after = (phase["return_window"] for phase in run["phases"][:2])
        key = f"{run['env']}__{run['method']}__{run['seed']}"
        if not before >= TASK:
            notes.append(f"{key}: did not do the task before the change ({before:.3f})")
            continue
        copy = copies / key / MILESTONE
        if not copy.is_file():
            notes.append(f"{key}: no copy {MILESTONE}")
            continue
        step = int(read_header(copy)["values"]["global_step"])
        if step >= change:
            notes.append(f"{key}: its copy {MILESTONE} is from step {step:,}, after the change")
            continue
        chosen.append((copy, "kept" if after >= TASK else "lost"))
    return chosen, notes


def commands(chosen: list[tuple[Path, str]], code: Path, out: Path) -> list[str]:
    script = Path(__file__).resolve().parent / "continue_run.py"
    lines = []
    for copy, outcome in chosen:
        for label, sets in VARIANTS.items():
            if outcome == "kept" and (label != "v0" or f"__{KEPT_ARM}__" not in copy.parent.name):
                continue
            flags = [f"--set={s}" for s in [*sets, f"total_timesteps={END}"]]
            argv = ["python", script, copy, "--code", code, "--out", out, "--label", label, "--reseed", "1", *flags]
            lines.append(shlex.join(map(str, argv)))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", type=Path)
    parser.add_argument("copies", type=Path)
    parser.add_argument("--code", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--change", type=int, default=2_000_000, help="the runs' change step")
    args = parser.parse_args(argv)
    if not args.results.is_file() or not args.copies.is_dir():
        sys.exit(f"error: need a results.json and a folder of copies, got {args.results} and {args.copies}")
    chosen, notes = states(json.loads(args.results.read_text()), args.copies, args.change)
    for note in notes:
        print(f"skipped {note}", file=sys.stderr)
    print("\n".join(commands(chosen, args.code, args.out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
