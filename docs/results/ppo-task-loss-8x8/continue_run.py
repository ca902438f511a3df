"""Go on from a copy of a run's checkpoint in a new run folder, with flags changed and the random streams re-seeded:
paired continuations of one state, to see what changes whether the run keeps the task.

    python docs/results/ppo-task-loss-8x8/continue_run.py /work/diag8/<run>/1900000.pt --code ../study-8x8 \
        --out ../sweeps/task-loss --label ent-0.03 --reseed 1 --set ent_coef=0.03 --set total_timesteps=3000000

The new folder, `<out>/<env>__<the run's exp name>-<label>__<seed>__<time>`, gets the checkpoint and a
`continuation.json` (the source, its step, the changes, the code's commit). Then the algorithm file of the `--code`
checkout resumes it (`--resume`), with the checkpoint's arguments changed by each `--set name=value` (the value read
as the field's type; the flags the file derives from others, the seed and `--resume` cannot be set) and, with
`--reseed K`, the random streams of the run re-seeded from K: python's, numpy's and torch's global states and every
torch generator the file checkpoints (a noise reward's, a held-out evaluation's). The envs' own generators stay as
they were: the worlds of each env are drawn as in the original run. Without `--set` and `--reseed` the run goes on
exactly as the original did. The same command on a folder that exists resumes it where it stopped (its own
checkpoint) or, finished, leaves it; a different `--set`, `--reseed` or source with the same label is refused.
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


FIXED = ("seed", "resume", "batch_size", "minibatch_size", "num_iterations")  # kept, or derived from other flags


def typed(args, name: str, text: str):
    """`text` as the value of `args`' field `name`, of the type of its current value."""
    if name not in vars(args):
        raise ValueError(f"--set {name}: the run has no such flag")
    if name in FIXED:
        raise ValueError(f"--set {name}: cannot be set (the seed is the state's; the others are derived)")
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
    """The checkpoint with its arguments changed and its random streams re-seeded (in place; returned): the global
    states seeded with `reseed`, the i-th torch generator it keeps (a state as `Generator.get_state` gives it, in the
    order of `stateful`) with `reseed` * 1000 + i."""
    args = checkpoint["args"]
    changes = {name: typed(args, name, text) for name, text in sets.items()}
    checkpoint["args"] = dataclasses.replace(args, **changes)
    if reseed is not None:
        checkpoint["rng"] = seeded_states(reseed)
        generators = [name for name, state in checkpoint["stateful"].items() if is_generator_state(state)]
        for i, name in enumerate(generators):
            checkpoint["stateful"][name] = torch.Generator().manual_seed(reseed * 1000 + i).get_state()
    return checkpoint


def is_generator_state(state) -> bool:
    """A torch generator's state as a checkpoint keeps it (networks and optimisers keep dicts)."""
    return isinstance(state, torch.Tensor) and state.dtype == torch.uint8 and state.dim() == 1


def commit_of(code: Path) -> str:
    result = subprocess.run(["git", "-C", str(code), "rev-parse", "HEAD"], capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def read_header(source: Path) -> dict:
    """The checkpoint as a process without the algorithm file's classes reads it (`stub_pickle`). This script does
    not import `common` before `run` (whose checkout's `common` the resumed file must get), so it does not share
    behaviour.py's stub unpickler or a helper of `common.checkpoint`."""
    return torch.load(source, map_location="cpu", weights_only=False, pickle_module=stub_pickle())


def prepare(source: Path, header: dict, code: Path, out: Path, label: str, sets: dict, reseed: int | None) -> Path:
    """The continuation's folder: made, with the checkpoint (`header`: as `read_header` read it) and
    continuation.json, unless one with this label exists already (then it must have been made from the same source
    with the same changes)."""
    args = header["args"]
    prefix = f"{args.env}__{args.exp_name}-{label}__{args.seed}__"
    record = dict(source=str(source.resolve()), global_step=int(header["values"]["global_step"]), sets=sets)
    record |= dict(reseed=reseed, code=str(code.resolve()), commit=commit_of(code), algorithm=header["file"])
    existing = sorted(out.glob(prefix + "*"))
    if existing:
        made = json.loads((existing[-1] / "continuation.json").read_text())
        keys = ("source", "global_step", "sets", "reseed", "algorithm")
        if any(made[key] != record[key] for key in keys):
            raise ValueError(f"{existing[-1]} was made with other changes or from another checkpoint: another --label")
        return existing[-1]
    folder = out / f"{prefix}{int(time.time())}"
    folder.mkdir(parents=True)
    (folder / "checkpoint.pt").write_bytes(source.read_bytes())
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
        values = {name: typed(header["args"], name, text) for name, text in sets.items()}  # a bad --set fails here
        step = int(header["values"]["global_step"])
        if values.get("total_timesteps", header["args"].total_timesteps) <= step:
            raise ValueError(f"--set total_timesteps: the checkpoint is at step {step:,} already")
        folder = prepare(args.checkpoint, header, args.code, args.out, args.label, sets, args.reseed)
    except (ValueError, OSError, RuntimeError) as error:
        sys.exit(f"error: {error}")
    if (folder / "finished.json").is_file():
        print(f"continuation: {folder} finished already")
        return 0
    print(f"continuation: {folder}", flush=True)
    run(folder, args.code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
