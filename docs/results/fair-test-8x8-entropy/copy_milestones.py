"""Copy the checkpoints that behaviour.py reads, while a sweep's runs go on (the runs untouched).

    python docs/results/fair-test-8x8-entropy/copy_milestones.py ../sweeps/fair8e/runs /work/diag8/copies

For each run folder under RUNS and each milestone step, OUT/<run>/<milestone>.pt is the checkpoint the run had
last written when its step passed the milestone: the last one at or before it (a run writes one every
--checkpoint-every iterations, 204,800 steps on 8x8). <run> is the folder's name without its time stamp
(`ColorDoorKey-8x8__ppo-ent-coef-0.01__218`). It polls every --every seconds and copies each new checkpoint.pt
before reading its step, so a run that writes the next one meanwhile is not misread; a milestone that passes before
the first checkpoint it sees of a run (started late) is left out. Runs until stopped.
"""

import argparse
import pickle
import shutil
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from behaviour import _pickle_module  # reads a checkpoint without the algorithm file's classes

MILESTONES = (1_900_000, 2_300_000, 2_700_000, 3_800_000)


def identity(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_ino, stat.st_mtime_ns


def global_step(path: Path) -> int:
    checkpoint = torch.load(path, map_location="cpu", pickle_module=_pickle_module(None), weights_only=False)
    return checkpoint["values"]["global_step"]


def poll(runs: Path, out: Path, milestones, seen: dict, last: dict) -> list[str]:
    """One look at every run folder under `runs`: each checkpoint.pt not read before is copied and read, and a
    milestone it passes gets the copy kept from the run's checkpoint before it. `seen` (which file each run's
    checkpoint.pt was when last read: a new checkpoint is a new file renamed over it) and `last` (the step of its
    copy kept as last.pt) carry over between polls. Returns what it did, a line each."""
    done = []
    for run in sorted(runs.iterdir()):
        checkpoint = run / "checkpoint.pt"
        if not checkpoint.is_file():
            continue
        file = identity(checkpoint)
        if seen.get(run) == file:
            continue
        copies = out / run.name.rsplit("__", 1)[0]
        copies.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copyfile(checkpoint, copies / "new.pt")
            step = global_step(copies / "new.pt")
        except (OSError, EOFError, RuntimeError, pickle.UnpicklingError) as error:  # replaced while copied
            done.append(f"{run.name}: {error}; read again at the next poll")
            continue
        seen[run] = file
        for milestone in milestones:
            target = copies / f"{milestone}.pt"
            if not target.exists() and run in last and last[run] <= milestone < step:
                shutil.copyfile(copies / "last.pt", target)
                done.append(f"{copies.name} {milestone}: the checkpoint of {last[run]}")
        (copies / "new.pt").replace(copies / "last.pt")
        last[run] = step
    return done


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", type=Path, help="the sweep's runs folder")
    parser.add_argument("out", type=Path)
    parser.add_argument("--milestones", type=int, nargs="+", default=MILESTONES)
    parser.add_argument("--every", type=float, default=15.0, help="seconds between polls")
    args = parser.parse_args()
    if not args.runs.is_dir():
        parser.error(f"no folder {args.runs}")
    seen, last = {}, {}
    while True:
        for line in poll(args.runs, args.out, args.milestones, seen, last):
            print(f"{time.strftime('%H:%M')} {line}", flush=True)
        time.sleep(args.every)


if __name__ == "__main__":
    main()
