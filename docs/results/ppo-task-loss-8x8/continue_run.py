"""Go on from a copy of a run's checkpoint in a new run folder, with flags changed and the random streams re-seeded:
paired continuations of one state, to see what changes whether the run keeps the task.

    python docs/results/ppo-task-loss-8x8/continue_run.py /work/diag8/<run>/1900000.pt --code ../study-8x8 \
        --out ../sweeps/task-loss --label ent-0.03 --reseed 1 --set ent_coef=0.03 --set total_timesteps=3000000

The new folder, `<out>/<env>__<the run's exp name>-<label>__<seed>__<time>`, gets the checkpoint and a
`continuation.json` (the source, its step, the changes, the code's commit). Then the algorithm file of the `--code`
checkout resumes it (`--resume`), with the checkpoint's arguments changed by each `--set name=value` (the value read
as the field's type; what the file fills in from other flags, such as the batch size, is filled in again) and, with `--reseed K`, the global
random states of python, numpy and torch replaced by those seeded with K (the envs' own states stay: the same worlds
go on). Without `--set` and `--reseed` the run goes on exactly as the original did. A folder that exists already
resumes where it stopped (its own checkpoint), so a stopped continuation goes on with the same command; a finished
one is left as it is.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import runpy
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch


def parse_sets(pairs: list[str]) -> dict[str, str]:
    sets = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--set takes name=value, got {pair!r}")
        sets[name.replace("-", "_")] = value
    return sets


def typed(args, name: str, text: str):
    """`text` as the value of `args`' field `name`, of the type of its current value."""
    if name not in vars(args):
        raise ValueError(f"--set {name}: the run has no such flag")
    current = getattr(args, name)
    if isinstance(current, bool):
        if text not in ("True", "False"):
            raise ValueError(f"--set {name}: True or False, got {text!r}")
        return text == "True"
    if not isinstance(current, (int, float, str)):
        raise ValueError(f"--set {name}: only a flag with a number, a string or a bool can be set here")
    try:
        return type(current)(text)
    except ValueError:
        raise ValueError(f"--set {name}: {text!r} is not a {type(current).__name__}") from None


def seeded_states(seed: int) -> dict:
    """The global random states of python, numpy and torch, each seeded with `seed`, as a checkpoint keeps them."""
    state = random.getstate(), np.random.get_state(), torch.get_rng_state()
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    seeded = dict(python=random.getstate(), numpy=np.random.get_state(), torch=torch.get_rng_state())
    random.setstate(state[0])
    np.random.set_state(state[1])
    torch.set_rng_state(state[2])
    return seeded


def edit(checkpoint: dict, sets: dict[str, str], reseed: int | None) -> dict:
    """The checkpoint with its arguments changed and its global random states re-seeded (in place; returned)."""
    args = checkpoint["args"]
    changes = {name: typed(args, name, text) for name, text in sets.items()}
    checkpoint["args"] = dataclasses.replace(args, **changes)
    if reseed is not None:
        checkpoint["rng"] = seeded_states(reseed)
    return checkpoint


def commit_of(code: Path) -> str:
    result = subprocess.run(["git", "-C", str(code), "rev-parse", "HEAD"], capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def read_header(source: Path) -> dict:
    """The checkpoint as a process without the algorithm file's classes reads it (`stub_pickle`)."""
    return torch.load(source, map_location="cpu", weights_only=False, pickle_module=stub_pickle())


def prepare(source: Path, code: Path, out: Path, label: str, sets: dict, reseed: int | None) -> Path:
    """The continuation's folder: made, with the checkpoint and continuation.json, unless one exists already."""
    header = read_header(source)
    args = header["args"]
    prefix = f"{args.env}__{args.exp_name}-{label}__{args.seed}__"
    existing = sorted(out.glob(prefix + "*"))
    if existing:
        return existing[-1]
    folder = out / f"{prefix}{int(time.time())}"
    folder.mkdir(parents=True)
    (folder / "checkpoint.pt").write_bytes(source.read_bytes())
    record = dict(source=str(source), global_step=int(header["values"]["global_step"]), sets=sets, reseed=reseed)
    record |= dict(code=str(code), commit=commit_of(code), algorithm=header["file"])
    (folder / "continuation.json").write_text(json.dumps(record, indent=1) + "\n")
    return folder


def stub_pickle():
    """A pickle module that reads a checkpoint without the classes of the file that wrote it: each unknown class
    becomes a plain object holding its state (enough to read the file's name, the arguments' fields and the step)."""
    import pickle
    import types

    class Stub:
        def __setstate__(self, state):
            self.__dict__.update(state if isinstance(state, dict) else {"state": state})

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            try:
                return super().find_class(module, name)
            except (AttributeError, ModuleNotFoundError):
                return type(name, (Stub,), {})

    return types.SimpleNamespace(Unpickler=Unpickler, load=pickle.load, __name__="stub_pickle")


def run(folder: Path, code: Path) -> None:
    """Resume `folder` with the code checkout's algorithm file, in this process, the copied checkpoint edited as it
    is read: a continuation that has written a checkpoint of its own goes on from that one as it is."""
    record = json.loads((folder / "continuation.json").read_text())
    sys.path.insert(0, str(code.resolve()))
    import common.checkpoint
    import common.runs

    read = common.checkpoint.read_checkpoint

    def read_edited(args):
        checkpoint = read(args)
        if int(checkpoint["values"]["global_step"]) == record["global_step"]:  # the copy: not yet gone on from
            edit(checkpoint, record["sets"], record["reseed"])
        return checkpoint

    common.checkpoint.read_checkpoint = common.runs.read_checkpoint = read_edited
    path = code.resolve() / "algos" / record["algorithm"]
    sys.argv = [str(path), "--resume", str(folder)]
    runpy.run_path(str(path), run_name="__main__")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", type=Path, help="a copy of a run's checkpoint.pt")
    parser.add_argument("--code", type=Path, required=True, help="the checkout whose algorithm file wrote it")
    parser.add_argument("--out", type=Path, required=True, help="where the continuation's run folder goes")
    parser.add_argument("--label", required=True, help="added to the run's exp name in the folder's name")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--reseed", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        if not args.checkpoint.is_file():
            raise ValueError(f"no checkpoint at {args.checkpoint}")
        if not (args.code / "algos").is_dir():
            raise ValueError(f"--code {args.code}: no algos/ there")
        sets = parse_sets(args.sets)
        header = read_header(args.checkpoint)
        for name, text in sets.items():
            typed(header["args"], name, text)  # a bad --set fails here, before a folder is made
    except (ValueError, OSError, RuntimeError) as error:
        sys.exit(f"error: {error}")
    folder = prepare(args.checkpoint, args.code, args.out, args.label, sets, args.reseed)
    if (folder / "finished.json").is_file():
        print(f"continuation: {folder} finished already")
        return 0
    print(f"continuation: {folder}", flush=True)
    run(folder, args.code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
