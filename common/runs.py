"""Run naming and locking, hyperparameter logging, saving and the console progress line."""

from __future__ import annotations

import dataclasses
import fcntl
import json
import math
import os
import re
import signal
import sys
import time
from pathlib import Path

from common.checkpoint import CHECKPOINT, PREVIOUS_CHECKPOINT
from common.console import say


COMPLETION_MARKER = "finished.json"
"""written into a run folder when its run reached the end; sweeps skip runs that have it"""


def run_name(env: str, exp_name: str, seed: int) -> str:
    return f"{env}__{exp_name}__{seed}__{int(time.time())}"


RUN_NAME = re.compile(r"^(?P<env>.+?)__(?P<exp_name>.+)__(?P<seed>-?\d+)__(?P<time>\d+)$")
"""`run_name`'s format read back: groups env, exp_name, seed, time"""


LOCK = ".lock"
"""the lock file of a run folder or a sweep folder, held (flock) by the one process working in it"""

_held_locks = []  # open lock files: each lock lasts until this process ends, when the kernel drops it


def lock_folder(folder: Path) -> None:
    """Hold `folder`'s lock for the rest of this process (the folder is created if need be). If
    another process holds it: SystemExit with one line, and nothing is written into the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    lock = open(folder / LOCK, "a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "?"
        lock.close()
        raise SystemExit(f"error: {folder} is in use by another process (pid {holder} holds {folder / LOCK}); "
                         f"wait for it to end or stop it first") from None  # fmt: skip
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n")
    lock.flush()
    _held_locks.append(lock)


def open_run_dir(run_dir: Path) -> None:
    """Lock the run folder before anything is written into it (two processes in one folder, two
    --resume of one run or two new runs named in the same second, would mix their logs and
    checkpoints), and say where the run is."""
    lock_folder(run_dir)
    say(f"run folder: {run_dir}")


def mark_finished(run_dir: Path, global_step: int, seconds: float) -> None:
    """Last act of a run that reached its end (after its event files are flushed); its
    checkpoints go (--save-model keeps the agent and the external model)."""
    (run_dir / COMPLETION_MARKER).write_text(json.dumps({"global_step": global_step, "seconds": round(seconds, 1)}))
    (run_dir / CHECKPOINT).unlink(missing_ok=True)
    (run_dir / PREVIOUS_CHECKPOINT).unlink(missing_ok=True)
    say(f"finished: run folder {run_dir}")


def hparams_markdown(args) -> str:
    rows = "\n".join(f"|{key}|{value}|" for key, value in vars(args).items())
    return f"|param|value|\n|-|-|\n{rows}"


def save_args(args, path: Path) -> None:
    path.write_text(json.dumps(dataclasses.asdict(args), indent=2, default=str))


def progress_line(global_step: int, total: int, sps: float, episodic_return: float, model_loss: float) -> str:
    """One console line per iteration: step, SPS, mean return of the episodes that ended, model loss, time left."""
    left = (total - global_step) / max(sps, 1e-9)
    ret = "     -" if math.isnan(episodic_return) else f"{episodic_return:6.3f}"
    return (
        f"step {global_step:>10,}/{total:,} | SPS {sps:6.0f} | return {ret} | "
        f"model loss {model_loss:.4g} | left {time.strftime('%H:%M:%S', time.gmtime(left))}"
    )


class Terminated(Exception):
    """SIGTERM, raised in the main thread once `stop_on_signals` is in place."""


_requested: list[int] = []  # the stop signals received (SIGINT, SIGTERM)


def stop_on_signals(at_once: bool = False) -> None:
    """Ctrl-C (SIGINT) and SIGTERM (`kill`, a sweep's timeout) ask the run to stop: the loop checks
    `stop_requested()` after each iteration, writes its checkpoint and calls `raise_stop()`. A second
    signal, or any with `at_once`, raises at once: KeyboardInterrupt for SIGINT, `Terminated`
    for SIGTERM, so that the process unwinds through its `finally`. Also in a process started
    with SIGINT ignored (a background job: Python then leaves it ignored)."""

    def on_signal(signum, frame):
        if at_once or _requested:
            raise KeyboardInterrupt if signum == signal.SIGINT else Terminated
        _requested.append(signum)

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)


def stop_requested() -> bool:
    return bool(_requested)


def raise_stop() -> None:
    """Raise what the first stop signal asked for (after the loop saved its checkpoint)."""
    raise KeyboardInterrupt if _requested[0] == signal.SIGINT else Terminated


def interrupted(run_dir: Path, stop: BaseException) -> int:
    """One line on stderr for a run stopped by Ctrl-C or SIGTERM, with the command that resumes
    it if it has a checkpoint; returns its exit code, 130 or 143."""
    how, code = ("SIGTERM", 143) if isinstance(stop, Terminated) else ("Ctrl-C", 130)
    if (run_dir / CHECKPOINT).is_file():
        then = f"resume with: python {sys.argv[0]} --resume {run_dir}"
    else:
        then = f"{run_dir} keeps everything logged so far (no checkpoint)"
    say(f"stopped by {how} (exit {code}); {then}", sys.stderr)
    return code


class NonFinite(ArithmeticError):
    """A loss or gradient norm that is NaN or infinite; raised before the update that would use it."""


def check_finite(name: str, value) -> None:
    """Raise NonFinite naming `value` (a number or a one-element tensor) if it is NaN or infinite."""
    value = float(value.detach()) if hasattr(value, "detach") else float(value)
    if not math.isfinite(value):
        raise NonFinite(f"the {name} is {value}")
