"""A run's plumbing, out of the algorithm files: its flags (`parse_args`), its folder, writer, checkpoints
and ending (`Run`), naming and locking, hyperparameter logging, saving and the console progress line.

An algorithm file's main block reads:

    args, checkpoint = parse_args(Args, RANGES, fill_in_defaults)
    with Run(args, checkpoint) as run:   # the run folder (locked), the writer, Ctrl-C and SIGTERM
        run.callback(envs.close)         # closed at the end, whatever happens (an ExitStack)
        ...
        run.start_loop(global_step)      # SPS counts from here; Ctrl-C now finishes the iteration first
        for iteration in ...:
            ...
            run.end_iteration(iteration, global_step, stateful, loop_state)  # checkpoint when due; stop if asked
        if args.save_model:
            run.save_models(agent, obs_dim, policy_meta, agent=agent, external_model=model)
    # leaving the block: finished.json if the loop ended; one line and exit 130/143 on Ctrl-C/SIGTERM, exit 1
    # on a non-finite loss; the writer closed and everything logged kept in every case
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import io
import json
import math
import os
import platform
import re
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch
import tyro
from torch.utils.tensorboard import SummaryWriter

from common.checkpoint import CHECKPOINT, PREVIOUS_CHECKPOINT, read_checkpoint, save_checkpoint
from common.checks import check_and_fill, note_whole_batches
from common.console import reader_gone, say
from common.evaluate import save_policy


@dataclasses.dataclass
class RunArgs:
    """The flags of a run's plumbing, shared by every algorithm file's `Args` (which inherits them)."""

    torch_threads: int = 1
    """threads torch may use (small MLPs run fastest on one; sweeps run one process per core)"""
    track: bool = False
    """if toggled, this experiment will be tracked with Weights and Biases"""
    wandb_project_name: str = "emma-rl"
    """the wandb's project name"""
    wandb_entity: str | None = None
    """the entity (team) of wandb's project"""
    capture_video: bool = False
    """whether to capture videos of the agent performances (check out `videos` folder)"""
    save_model: bool = False
    """whether to save the agent (its policy exported for common.evaluate) and the external model into the run folder"""
    runs_dir: str = "runs"
    """folder that holds the run folders"""
    checkpoint_every: int = 100
    """write checkpoint.pt into the run folder every this many iterations and on Ctrl-C or SIGTERM; 0: never"""
    resume: str | None = None
    """continue the run in this folder from its checkpoint.pt, with its own flags, to the end the uninterrupted run reaches"""


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
    try:
        folder.mkdir(parents=True, exist_ok=True)
        lock = open(folder / LOCK, "a+")
    except OSError as error:  # a file where the folder should be, no permission, a full disk
        raise SystemExit(f"error: cannot work in {folder}: {error.strerror or error}") from None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.seek(0)
        holder = lock.read().strip() or "?"
        lock.close()
        raise SystemExit(
            f"error: {folder} is in use by another process (pid {holder} holds {folder / LOCK}); "
            f"wait for it to end or stop it first"
        ) from None
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


MACHINE_TAG = "machine"
"""the text a run logs at each start, new or resumed, at the first step that start logs (`machine`)"""


def machine(cuda: bool = False) -> str:
    """What a run's rounding depends on beside its seed and flags (docs/runs.md: a seed fixes a run on one machine):
    the CPU (with `cuda`, the GPU too), the vector code torch picks on it, the system and the versions of Python, torch
    and numpy. Never raises: what cannot be read is left out or named by what platform knows."""
    name, numbers = "", ""
    with contextlib.suppress(OSError, UnicodeDecodeError):  # Linux describes each core here: the first one's
        fields = {}
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
        name = fields.get("model name", "")  # ARM's cpuinfo has none: the architecture stands in
        numbers = ", ".join(f"{key} {fields[key]}" for key in ("cpu family", "model", "stepping") if key in fields)
    cpu = (name or platform.machine() or "an unnamed CPU") + (f" ({numbers})" if numbers else "")
    device = f"{cpu}, {os.cpu_count()} cores, torch's CPU code {torch.backends.cpu.get_cpu_capability()}"
    if cuda:
        with contextlib.suppress(RuntimeError, AssertionError):  # a GPU busy elsewhere, a torch without CUDA
            device += f"; {torch.cuda.get_device_name()}"
    versions = f"Python {platform.python_version()}, torch {torch.__version__}, numpy {np.__version__}"
    return f"{device}; {platform.system()} {platform.release()}; {versions}"


def hparams_markdown(args) -> str:
    rows = "\n".join(f"|{key}|{value}|" for key, value in vars(args).items())
    return f"|param|value|\n|-|-|\n{rows}"


def save_args(args, path: Path) -> None:
    path.write_text(json.dumps(dataclasses.asdict(args), indent=2, default=str))


def progress_line(global_step: int, total: int, sps: float, episodic_return: float, model_loss: float) -> str:
    """One console line per iteration: step, SPS, mean return of the episodes that ended, model loss, time left; a
    return or loss not there yet (no episode ended, a model not trained yet: NaN) shows as -."""
    left = (total - global_step) / max(sps, 1e-9)
    ret = "     -" if math.isnan(episodic_return) else f"{episodic_return:6.3f}"
    loss = "-" if math.isnan(model_loss) else f"{model_loss:.4g}"
    return (
        f"step {global_step:>10,}/{total:,} | SPS {sps:6.0f} | return {ret} | "
        f"model loss {loss} | left {time.strftime('%H:%M:%S', time.gmtime(left))}"
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


def parse_args(args_class, ranges: dict[str, str], fill_in_defaults, argv: list[str] | None = None):
    """The run's flags and, with --resume, its checkpoint (whose flags replace the command line's):
    checked against `ranges` and filled in (`common.checks.check_and_fill`). A bad value or a
    checkpoint that cannot be read: one line and exit 1, before anything is written."""
    try:
        args = parse_flags(args_class, argv)
        checkpoint = read_checkpoint(args) if args.resume else None
        args = check_run_args(checkpoint["args"] if checkpoint else args, ranges, fill_in_defaults)
    except ValueError as error:
        sys.exit(f"error: {error}")
    return args, checkpoint


def parse_flags(args_class, argv: list[str] | None = None):
    """Tyro's parse of `argv` (the command line's flags when None) into `args_class`; flags that do not parse:
    ValueError, one line (`unframed`: what tyro would print in a frame). --help prints and exits as tyro's does."""
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):  # tyro prints its errors there (its help: on stdout)
            args = tyro.cli(args_class, args=argv)
    except SystemExit as stop:
        if not stop.code:  # --help
            raise
        raise ValueError(unframed(said.getvalue())) from None
    except BrokenPipeError:  # --help into a reader that went away (`| head`): it read what it wanted
        reader_gone(sys.stdout)
        sys.exit(0)
    sys.stderr.write(said.getvalue())  # anything else tyro had to say
    return args


def unframed(message: str) -> str:
    """Tyro's framed error as one line: its parts (between the frame's rules) joined by "; ", without its title, its
    colours (tyro colours the frame when stdout is a terminal), the flag's help text and its pointer to --help."""
    parts, part = [], []
    message = re.sub(r"\x1b\[[0-9;]*m", "", message)
    for line in [line.strip(" │╭╮╰╯") for line in message.splitlines()][1:]:  # the first: the frame's title
        if line.startswith("For full helptext"):
            break
        if line and set(line) <= set("-─"):  # a rule between parts
            parts, part = parts + [" ".join(part)], []
        elif line:
            part.append(" ".join(line.split()))
    kept = [text for text in parts + [" ".join(part)] if text and not text.startswith("Argument helptext:")]
    return "; ".join(kept) or " ".join(message.split()) or "the flags do not parse (see --help)"


def check_run_args(args, ranges: dict[str, str], fill_in_defaults):
    """A run's flags checked as `parse_args` checks them, without a checkpoint (a sweep checks its runs' flags so
    before it starts them): --track's wandb, then `common.checks.check_and_fill`; ValueError naming the first
    problem; returns `args` filled in."""
    if args.track:
        try:
            import wandb  # noqa: F401  (imported only with --track)
        except ImportError:
            raise ValueError("--track needs wandb: pip install wandb") from None
    return check_and_fill(args, ranges, fill_in_defaults)


class Run(contextlib.ExitStack):
    """One run's folder, TensorBoard writer, checkpoints and ending, as a context manager.

    Building it locks the run folder (`open_run_dir`), opens the writer (a resumed run drops what was
    logged after its checkpoint: TensorBoard's purge_step), logs the hyperparameters of a new run and
    starts wandb with --track. Inside the block Ctrl-C and SIGTERM stop the setup at once; from
    `start_loop` on they ask for a stop at the end of the iteration, after its checkpoint (a second
    one stops at once). Leaving the block closes what was registered with `callback` and the writer,
    then: after the loop's end, writes finished.json; after a stop, one line and exit 130 or 143;
    after a non-finite loss, one line and exit 1; all that was logged and checkpointed is kept."""

    def __init__(self, args, checkpoint: dict | None):
        super().__init__()
        self.args = args
        self.dir = (
            Path(args.resume) if args.resume else Path(args.runs_dir) / run_name(args.env, args.exp_name, args.seed)
        )
        self.global_step = checkpoint["values"]["global_step"] if checkpoint else 0
        # resumed from checkpoint.prev.pt (checkpoint.pt could not be read): the first checkpoint keeps it
        self.keep_previous = bool(checkpoint) and checkpoint.get("read_from") == PREVIOUS_CHECKPOINT
        self.start_step, self.start_time = self.global_step, time.time()
        open_run_dir(self.dir)  # before anything is written into it
        if hasattr(args, "num_iterations"):  # a run of whole batches (PPO's; SAC's batch size is its minibatch)
            note_whole_batches(args.total_timesteps, args.batch_size)
        if args.track:
            import wandb  # parse_args checked that it imports

            wandb.init(
                project=args.wandb_project_name,
                entity=args.wandb_entity,
                sync_tensorboard=True,
                config=vars(args),
                name=self.dir.name,
                monitor_gym=True,
                save_code=True,
            )
        purge_step = self.global_step + 1 if checkpoint else None
        self.writer = SummaryWriter(str(self.dir), flush_secs=30, purge_step=purge_step)
        self.callback(self.writer.close)  # closed last
        if not checkpoint:
            self.writer.add_text("hyperparameters", hparams_markdown(args))
        # each start's machine, at the first step it logs (a resume: purge_step, so a later start from the same
        # checkpoint drops it with the rest of what this one logged)
        cuda = getattr(args, "cuda", False) and torch.cuda.is_available()  # the device the algorithm files pick
        self.writer.add_text(MACHINE_TAG, machine(cuda), purge_step or 0)

    def __enter__(self):
        stop_on_signals(at_once=True)  # the setup has nothing to save: a stop is a stop
        return super().__enter__()

    def __exit__(self, kind, error, traceback) -> bool:
        super().__exit__(None, None, None)  # what was registered, then the writer: everything logged is kept
        if error is None:
            mark_finished(self.dir, self.global_step, time.time() - self.start_time)
        elif isinstance(error, NonFinite):  # stopped before the update that would have used it
            sys.exit(
                f"error: {error} after global step {self.global_step}; {self.dir} keeps everything logged before it"
            )
        elif isinstance(error, (KeyboardInterrupt, Terminated)):  # no traceback: one line, exit 130 or 143
            sys.exit(interrupted(self.dir, error))
        return False  # any other error goes on, with its traceback

    def start_loop(self, global_step: int) -> None:
        """The training loop starts (at `global_step`, a resumed run's checkpoint's): the clock of `sps`
        and of finished.json starts, and Ctrl-C and SIGTERM now ask for a stop at the end of the
        iteration (its checkpoint written first) instead of stopping at once."""
        self.start_step, self.start_time = global_step, time.time()
        stop_on_signals()

    def sps(self, global_step: int) -> float:
        """Steps per second since the loop started in this process (a resumed run: since it resumed)."""
        return (global_step - self.start_step) / (time.time() - self.start_time)

    def end_iteration(self, iteration: int, global_step: int, stateful: dict, loop_state) -> None:
        """After an iteration's logging: the checkpoint (`stateful` by state dict, `loop_state()` as
        values) every --checkpoint-every iterations and when a stop was asked; then the stop."""
        self.global_step = global_step
        every = self.args.checkpoint_every
        if every and (iteration % every == 0 or stop_requested()):
            save_checkpoint(self.dir, self.args, stateful, loop_state(), self.keep_previous)
            self.keep_previous = False
        if stop_requested():
            raise_stop()

    def save_models(self, policy, obs_dim: int, policy_meta: dict, **networks) -> None:
        """--save-model: each of `networks` as `<name>.pt` (with its `save` if it has one: an external
        model keeps its config and loads without the algorithm file, else its state dict), `policy`
        exported for `common.evaluate` with `policy_meta`, and the flags as args.json."""
        for name, network in networks.items():
            if hasattr(network, "save"):
                network.save(self.dir / f"{name}.pt")
            else:
                torch.save(network.state_dict(), self.dir / f"{name}.pt")
        save_policy(self.dir, policy, obs_dim, policy_meta)
        save_args(self.args, self.dir / "args.json")
        say(f"models saved to {self.dir}")
