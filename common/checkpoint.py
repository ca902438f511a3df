"""Checkpoints: what a run's loop carries from one iteration to the next, written atomically
and read back, so that `--resume RUN_DIR` ends as the uninterrupted run would.

A checkpoint holds the state dicts of the run's stateful objects (networks, optimisers, torch
generators), the loop's values (step, phase, the vector env's worlds, running statistics...),
the run's arguments and the global random states of python, numpy and torch. It is pickled
(torch.save): it can hold objects of the algorithm file, and is read only by that file.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import pickle
import random
import sys
from pathlib import Path

import cloudpickle
import numpy as np
import torch

from common.console import first_line, say

CHECKPOINT = "checkpoint.pt"
"""the checkpoint's file name in a run folder; a finished run has none (common.runs.mark_finished removes it)"""
PREVIOUS_CHECKPOINT = "checkpoint.prev.pt"
"""the checkpoint before the last one, read when the last one cannot be"""
CHECKPOINT_KEYS = ("args", "stateful", "values", "rng")
"""what `save_checkpoint` writes (and `file`, the algorithm file's name, since it was kept)"""


def env_state(envs) -> bytes:
    """A vector env's state: its worlds, their random generators, the wrappers' statistics
    (episode returns, observation normalisers), pickled by cloudpickle, which also takes the
    lambdas that wrappers keep; not the env factories of a SyncVectorEnv (not needed)."""
    return cloudpickle.dumps({name: value for name, value in vars(envs).items() if name != "env_fns"})


def set_env_state(envs, state: bytes) -> None:
    """Put `env_state`'s worlds into `envs`, whose own are closed first (a video recorder warns
    otherwise); the vector env itself stays open."""
    for env in getattr(envs, "envs", ()):
        env.close()
    vars(envs).update(pickle.loads(state))


def save_checkpoint(run_dir: Path, args, stateful: dict, values: dict, keep_previous: bool = False) -> None:
    """Write run_dir/checkpoint.pt: `stateful` objects by their state dict (or a generator's
    state), `values` as they are, and the name of the algorithm file. Written to a temporary
    file, synced to disk and renamed over the last one, which stays as checkpoint.prev.pt (a
    hard link: checkpoint.pt never goes missing): a crash while writing keeps the last one, and
    a last one that cannot be read (a full disk, a power cut) the one before. With
    `keep_previous` checkpoint.prev.pt stays as it is: the last one could not be read, and the
    run went on from the one before (`read_checkpoint`), the only one to keep."""
    state = {
        name: obj.state_dict() if hasattr(obj, "state_dict") else obj.get_state() for name, obj in stateful.items()
    }
    rng = dict(python=random.getstate(), numpy=np.random.get_state(), torch=torch.get_rng_state())
    run_dir = Path(run_dir)
    path, new, previous = run_dir / CHECKPOINT, run_dir / "checkpoint.tmp", run_dir / "checkpoint.prev.tmp"
    with open(new, "wb") as file:
        torch.save(dict(file=algorithm_file(args), args=args, stateful=state, values=values, rng=rng), file)
        file.flush()
        os.fsync(file.fileno())
    if path.is_file() and not keep_previous:
        previous.unlink(missing_ok=True)
        os.link(path, previous)
        os.replace(previous, run_dir / PREVIOUS_CHECKPOINT)
    os.replace(new, path)


def algorithm_file(args) -> str:
    """The name of the file that defines `args`' class: the algorithm file of the run."""
    return Path(inspect.getfile(type(args))).name


def load_checkpoint(path: Path) -> dict:
    """The checkpoint in `path`; ValueError, naming what is wrong in one line, for a file that cannot be read (cut
    short, damaged: torch.load raises one of many errors then) or that holds something other than a checkpoint;
    OSError for one that cannot be opened (permissions): it may be whole, so no one should replace it."""
    with open(path, "rb") as file:
        try:
            checkpoint = torch.load(file, map_location="cpu", weights_only=False)
        except Exception as error:  # noqa: BLE001 (unpickling a damaged file can raise almost anything)
            raise ValueError(first_line(error)) from None
    if not (isinstance(checkpoint, dict) and all(key in checkpoint for key in CHECKPOINT_KEYS)):
        raise ValueError(f"not a checkpoint: no {', '.join(CHECKPOINT_KEYS)}")
    return checkpoint


def read_checkpoint(args) -> dict:
    """`args.resume`'s checkpoint, its arguments in place of `args`' (with `resume` kept); the one
    before it, with a warning, if the last one cannot be read (then its `read_from` is
    checkpoint.prev.pt: the run's next checkpoint must not replace it with the unreadable one). Raises
    ValueError if there is none, if the last one cannot be opened (not damaged: left for the user to
    mend), if neither can be read, if another algorithm file wrote it (checked
    before anything is written into the run folder), or if a flag given with --resume differs from the
    run's own (a flag left at its default is not given: a sweep may repeat the run's command; nor is
    `auto`, which the run resolved to what it saved)."""
    run_dir = Path(args.resume)
    path, previous = run_dir / CHECKPOINT, run_dir / PREVIOUS_CHECKPOINT
    if not run_dir.is_dir():
        hint = f" (--resume takes the run folder: {run_dir.parent})" if run_dir.is_file() else ""
        raise ValueError(f"--resume {args.resume}: no such run folder{hint}")
    if not path.is_file():
        raise ValueError(
            f"--resume {args.resume}: no {CHECKPOINT} there (a run writes one every --checkpoint-every "
            f"iterations and deletes it when it finishes)"
        )
    try:
        checkpoint = load_checkpoint(path)
    except OSError as error:  # not shown to be damaged: the run's next checkpoint must not replace it
        raise ValueError(
            f"--resume {args.resume}: {CHECKPOINT} cannot be opened ({first_line(error)}): mend that, or move it aside "
            f"to resume from {PREVIOUS_CHECKPOINT}"
        ) from None
    except ValueError as error:
        if not previous.is_file():
            raise ValueError(
                f"--resume {args.resume}: {CHECKPOINT} cannot be read ({error}) and there is no {PREVIOUS_CHECKPOINT}"
            ) from None
        try:
            checkpoint = load_checkpoint(previous)
        except (OSError, ValueError) as previous_error:
            raise ValueError(
                f"--resume {args.resume}: neither {CHECKPOINT} ({error}) nor {PREVIOUS_CHECKPOINT} ({previous_error}) "
                f"can be read"
            ) from None
        say(
            f"warning: {path} cannot be read ({error}); resuming from {previous}, the checkpoint before it (step "
            f"{checkpoint['values']['global_step']})",
            sys.stderr,
        )
        checkpoint["read_from"] = PREVIOUS_CHECKPOINT
    written_by = checkpoint.get("file", algorithm_file(args))  # checkpoints from before the name was kept: not checked
    if written_by != algorithm_file(args):
        raise ValueError(
            f"--resume {args.resume}: a run of {written_by}, not of {algorithm_file(args)}: resume it with {written_by}"
        )
    saved, defaults = checkpoint["args"], type(args)()
    for field in dataclasses.fields(args):
        given = getattr(args, field.name)
        if field.name != "resume" and given not in (getattr(defaults, field.name), getattr(saved, field.name), "auto"):
            raise ValueError(
                f"--resume continues a run with its own flags: --{field.name.replace('_', '-')} is "
                f"{getattr(saved, field.name)!r} there, {given!r} given"
            )
    checkpoint["args"] = dataclasses.replace(saved, resume=args.resume)
    return checkpoint


def restore_checkpoint(checkpoint: dict, stateful: dict, device) -> dict:
    """Load the state of each `stateful` object in place and the global random states; returns
    the loop's values (tensors moved to `device`). Call it last before the loop: building the
    networks draws from the random states it restores."""
    for name, obj in stateful.items():
        if hasattr(obj, "load_state_dict"):
            try:
                obj.load_state_dict(checkpoint["stateful"][name])
            except (KeyError, RuntimeError, ValueError) as error:  # one line, not torch's list of every tensor
                raise SystemExit(
                    f"error: the checkpoint's {name} does not fit this version of the file (written by "
                    f"another?): {str(error).strip().splitlines()[-1].strip()}"
                ) from None
        else:
            obj.set_state(checkpoint["stateful"][name])
    random.setstate(checkpoint["rng"]["python"])
    np.random.set_state(checkpoint["rng"]["numpy"])
    torch.set_rng_state(checkpoint["rng"]["torch"])
    return {name: value.to(device) if torch.is_tensor(value) else value for name, value in checkpoint["values"].items()}
