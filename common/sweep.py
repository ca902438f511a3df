"""Run many (algorithm, env, seed) runs, one process each, on this machine or a Ray cluster.

    python -m common.sweep --algos ppo ppo_poi_ensemble --envs ColorDoorKey-6x6 --seeds 1 2 3 \\
        --out sweeps/demo --extra "--total-timesteps 200000 --model-target key_distance"
    python -m common.sweep ... --backend ray                         # a local Ray instance
    python -m common.sweep ... --backend ray --ray-address auto      # a running Ray cluster

An algorithm is a file name in algos/ (`ppo_poi_ensemble`) or a path to a script, optionally
followed by arguments of its own: "ppo_poi_ensemble --int-coef 0.1". Every run gets
`--env`, `--seed`, `--runs-dir <out>/runs`, `--exp-name <label>` and then `--extra`; the
label is the algorithm's name followed by its own arguments
(`ppo_poi_ensemble-int-coef-0.1`), and the run folder is `<env>__<label>__<seed>__<time>`.

A run whose folder holds the completion marker (common/runs.COMPLETION_MARKER) is skipped
when the sweep is started again, and so is a run that a study's committed series holds as finished
(`--done docs/results/<study>/series.jsonl.gz`: a study that spans machines goes on where it was);
a run that fails is recorded in `<out>/logs/<run>.failed.json` (exit code and the tail of its
log) while the others go on, and is tried again on the next
start: from its checkpoint (`--resume <run folder>`) if it left one, as an interrupted or
timed-out run does, else from the start. One Ctrl-C stops the sweep: the running runs get
SIGTERM, write their checkpoints and stop; the queued ones do not start. On a machine lent for a
set time, `--start-for MINUTES` starts no run after that many minutes: those under way finish, the
others wait for the next start (exit status 1, as with a failed run). Each run's output
goes to `<out>/logs/<run>.log`; `<out>/sweep.json` lists the planned
runs for the analysis (python -m common.analyze <out>). A sweep started on a folder that
another sweep is working in (it holds `<out>/.lock`) exits with one line.

Ray: every node must see this repository and `<out>` at the same paths (a shared file
system), and have the requirements installed; each run asks Ray for one CPU.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import glob
import importlib
import io
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path

from common.checkpoint import CHECKPOINT
from common.console import OneLineParser
from common.runs import COMPLETION_MARKER, Terminated, check_run_args, lock_folder, parse_flags

ROOT = Path(__file__).resolve().parents[1]
LOG_TAIL_LINES = 20


@dataclass(frozen=True)
class Run:
    label: str
    env: str
    seed: int
    command: tuple[str, ...]

    @property
    def key(self) -> str:
        return f"{self.env}__{self.label}__{self.seed}"


def resolve_algo(spec: str) -> tuple[str, Path, list[str]]:
    """`name [args...]` -> (label, script path, the algorithm's own args)."""
    name, *own_args = shlex.split(spec)
    path = Path(name) if name.endswith(".py") else ROOT / "algos" / f"{name}.py"
    if not path.is_file():
        known = " ".join(sorted(p.stem for p in (ROOT / "algos").glob("*.py")))
        raise ValueError(f"unknown algorithm {name!r}: not a file; known: {known}")
    label = "-".join([path.stem, *(arg.lstrip("-") for arg in own_args)])
    label = re.sub(r"_{2,}", "_", re.sub(r"[^A-Za-z0-9._=+-]+", "-", label))  # "__" separates name parts
    return label, path.resolve(), own_args


def plan_runs(algos: list[str], envs: list[str], seeds: list[int], extra: list[str], out: Path) -> list[Run]:
    """Seed-major order: a sweep cut short has the same seeds of every method and env. The flags the sweep sets for
    each run (its env, seed, folder and label) cannot come from an algorithm's arguments or `extra` too: the run
    would take the last one given and the sweep would never find it (ValueError, one line)."""
    resolved = [resolve_algo(spec) for spec in algos]
    for given in [extra, *(own_args for _, _, own_args in resolved)]:
        taken = sorted(
            {arg.split("=")[0].replace("_", "-") for arg in given} & {"--env", "--seed", "--runs-dir", "--exp-name"}
        )
        if taken:
            raise ValueError(
                f"{' '.join(taken)}: the sweep sets these for each run (--envs, --seeds, --out, the label)"
            )
    runs = []
    for seed in seeds:
        for env in envs:
            for label, path, own_args in resolved:
                command = (
                    sys.executable,
                    str(path),
                    "--env",
                    env,
                    "--seed",
                    str(seed),
                    "--runs-dir",
                    str(out / "runs"),
                    "--exp-name",
                    label,
                    *own_args,
                    *extra,
                )
                runs.append(Run(label, env, seed, command))
    keys = [run.key for run in runs]
    if len(set(keys)) != len(keys):
        twice = sorted({key for key in keys if keys.count(key) > 1})
        raise ValueError(f"two runs of the sweep are the same, {twice[0]} (an algorithm spec, env or seed given twice)")
    return runs


def check_command(algo: str, argv: list[str]) -> None:
    """The flags `argv` of `algos/<algo>.py` of this checkout, checked in this process as a new run of it checks them
    (`common.runs.parse_flags`, then `check_run_args`: `parse_args` without --resume): ValueError, one line, for flags
    that do not parse or that the file refuses. What the check would print (what --bf16 auto resolves to here) stays
    off the console. For a tool that starts runs (a sweep, a benchmark), before it starts any."""
    module = importlib.import_module(f"algos.{algo}")
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            check_run_args(parse_flags(module.Args, argv), module.RANGES, module.fill_in_defaults)
    except SystemExit:  # tyro's --help (-h) or another request of tyro's for output: no run
        raise ValueError("--help (or another of tyro's own flags) asks for output, not a run") from None


def check_flags(runs: list[Run]) -> None:
    """ValueError (one line naming the run) for a run of this checkout's algorithm files whose flags the file would
    refuse, checked as a new run of it checks them (`check_command`), once for each method and env (the seeds:
    `main`). Files elsewhere (another checkout, another project) are not imported: their runs check their own."""
    checked = set()
    for run in runs:
        script = Path(run.command[1])
        if script.parent != ROOT / "algos" or (run.label, run.env) in checked:
            continue
        checked.add((run.label, run.env))
        try:
            check_command(script.stem, list(run.command[2:]))
        except ValueError as error:
            raise ValueError(f"{run.key}: {error}") from None


def attempt_with(run: Run, out: Path, file_name: str, latest: bool = False) -> Path | None:
    """The run folder of an attempt of `run` (the first, or the latest) that holds `file_name`, if any."""
    folders = [d for d in sorted((out / "runs").glob(f"{glob.escape(run.key)}__*")) if (d / file_name).is_file()]
    return (folders[-1] if latest else folders[0]) if folders else None


def finished_run_dir(run: Run, out: Path) -> Path | None:
    """The run folder of a finished attempt of `run`, if any."""
    return attempt_with(run, out, COMPLETION_MARKER)


def resumable_run_dir(run: Run, out: Path) -> Path | None:
    """The run folder of the latest attempt of `run` that stopped with a checkpoint, if any."""
    return attempt_with(run, out, CHECKPOINT, latest=True)


def done_in_series(paths: list[Path]) -> dict[str, str]:
    """{run key: where it finished} of the finished runs of series files (common.series)."""
    from common.series import read, whole_runs

    done = {}
    for path in paths:
        if not path.is_file():
            raise ValueError(f"--done: no series file at {path}")
        for rec in whole_runs(path, read(path)):
            if rec["finished"]:
                done[f"{rec['env']}__{rec['method']}__{rec['seed']}"] = f"{path} ({rec['run']})"
    return done


GRACE = 30.0
"""seconds a run stopped by the sweep has to write its checkpoint and exit before SIGKILL"""


def execute(
    command: tuple[str, ...],
    log_path: str,
    timeout: float | None,
    stop: threading.Event | None = None,
    grace: float = GRACE,
    start_by: float | None = None,
) -> tuple[int | None, float]:
    """Run one command with one thread for its numerics, output appended to `log_path`;
    returns (exit code, seconds). A run over `timeout`, or running when `stop` is set (the
    sweep was interrupted), gets SIGTERM (it writes its checkpoint, closes its logs and exits
    143), SIGKILL after `grace` seconds; a run not started when `stop` is set, or when its
    turn comes after the time `start_by` (seconds since the epoch), never starts (exit code None)."""
    if stop is not None and stop.is_set() or start_by is not None and time.time() > start_by:
        return None, 0.0
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    start = time.time()
    with open(log_path, "a") as log:
        log.write(f"$ {shlex.join(command)}\n")
        log.flush()
        # a session of its own: a Ctrl-C in the terminal reaches the sweep alone, which stops the run once
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT, start_new_session=True
        )
        while process.poll() is None:
            if stop is not None and stop.is_set() or timeout is not None and time.time() - start > timeout:
                reason = (
                    "the sweep was interrupted" if stop is not None and stop.is_set() else f"--run-timeout {timeout} s"
                )
                process.terminate()
                try:
                    process.wait(timeout=grace)
                except subprocess.TimeoutExpired:
                    process.kill()
                log.write(f"stopped: {reason}\n")
                break
            time.sleep(0.2)
        code = process.wait()
    return code, time.time() - start


def log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.is_file() else ""


class Progress:
    """Counts and the console line: done / running / failed / skipped / ETA (and the runs --start-for left)."""

    def __init__(self, total: int, skipped: int, workers: int):
        self.total, self.skipped, self.workers = total, skipped, workers
        self.done, self.failed, self.running, self.durations, self.not_started = 0, 0, 0, [], 0

    def line(self) -> str:
        left = self.total - self.skipped - self.done - self.failed - self.not_started
        if self.durations and not self.not_started:  # the mean run time so far, spread over the workers
            eta = sum(self.durations) / len(self.durations) * left / self.workers
            eta_text = time.strftime("%H:%M:%S", time.gmtime(eta))
        else:  # nothing to go by, or the runs left wait for the next start
            eta_text = "-"
        not_started = f" | not started {self.not_started}" if self.not_started else ""
        return (
            f"[sweep] done {self.done + self.skipped}/{self.total} (skipped {self.skipped}) | "
            f"running {self.running} | failed {self.failed}{not_started} | ETA {eta_text}"
        )


def record(run: Run, code: int | None, seconds: float, out: Path, progress: Progress) -> None:
    if code is None:  # its turn came after --start-for: it waits for the next start
        progress.not_started += 1
        return
    log_path = out / "logs" / f"{run.key}.log"
    failed_path = out / "logs" / f"{run.key}.failed.json"
    if code == 0 and finished_run_dir(run, out) is not None:
        progress.done += 1
        progress.durations.append(seconds)
        failed_path.unlink(missing_ok=True)
        print(f"[sweep] finished {run.key} in {seconds:.0f} s", flush=True)
    else:
        progress.failed += 1
        tail = log_tail(log_path)
        failed_path.write_text(
            json.dumps(
                {"exit_code": code, "seconds": round(seconds, 1), "command": shlex.join(run.command), "log_tail": tail},
                indent=2,
            )
        )
        then = "resumes from its checkpoint" if resumable_run_dir(run, out) else "starts over"
        print(
            f"[sweep] FAILED {run.key} (exit code {code}; {then} on the next start); log {log_path}:\n{tail}",
            flush=True,
        )
    print(progress.line(), flush=True)


def stop_once() -> None:
    """Ctrl-C or SIGTERM stops the sweep: KeyboardInterrupt or `Terminated` in the main thread, on which `run_local`
    stops its runs and records them. A further signal while it does so (GNU `timeout` sends two) is answered with a
    line, not obeyed, as obeyed it would lose the records (SIGKILL still ends the sweep at once); the answer is in place
    before the first signal raises, so that no second one slips in between."""

    def answer(signum, frame):
        line = (
            f"[sweep] stopping already: the runs under way are being stopped (SIGKILL after {GRACE:g} s) and recorded"
        )
        try:  # one unbuffered write: a print here could land inside the main thread's own print
            os.write(sys.stdout.fileno(), f"{line}\n".encode())
        except OSError:  # the reader has gone
            pass

    def stop(signum, frame):
        signal.signal(signal.SIGINT, answer)
        signal.signal(signal.SIGTERM, answer)
        raise KeyboardInterrupt if signum == signal.SIGINT else Terminated

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)


def run_local(
    todo: list[Run], out: Path, workers: int, timeout: float | None, start_by: float | None, progress: Progress
) -> None:
    """Up to `workers` runs at a time, none started after `start_by`. Ctrl-C (or SIGTERM) stops the whole sweep:
    queued runs do not start, running ones are stopped (recorded as failed, so a re-run resumes them)."""
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=workers)
    pending = {
        pool.submit(execute, run.command, str(out / "logs" / f"{run.key}.log"), timeout, stop, start_by=start_by): run
        for run in todo
    }
    progress.running = min(workers, len(todo))
    print(progress.line(), flush=True)
    try:
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                code, seconds = future.result()
                run = pending.pop(future)
                progress.running = min(workers, len(pending))
                record(run, code, seconds, out, progress)
    except (KeyboardInterrupt, Terminated) as interruption:
        stop.set()
        pool.shutdown(wait=True, cancel_futures=True)
        stopped = [(run, *future.result()) for future, run in pending.items() if not future.cancelled()]
        for run, code, seconds in stopped:
            if code is not None:
                record(run, code, seconds, out, progress)
        print(
            f"[sweep] stopped: {sum(code is not None for _, code, _ in stopped)} running run(s) stopped and recorded, "
            f"the queued ones not started; start the sweep again to go on",
            flush=True,
        )
        raise SystemExit(143 if isinstance(interruption, Terminated) else 130) from None
    pool.shutdown()


def run_ray(
    todo: list[Run],
    out: Path,
    address: str | None,
    workers: int,
    timeout: float | None,
    start_by: float | None,
    progress: Progress,
) -> None:
    import ray

    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    try:
        remote = ray.remote(num_cpus=1, max_retries=0)(execute)
        pending = {
            remote.remote(run.command, str(out / "logs" / f"{run.key}.log"), timeout, start_by=start_by): run
            for run in todo
        }
        capacity = int(ray.cluster_resources().get("CPU", workers))
        progress.workers = capacity
        progress.running = min(capacity, len(todo))
        print(progress.line(), flush=True)
        while pending:
            finished, _ = ray.wait(list(pending), num_returns=1)
            for ref in finished:
                try:
                    code, seconds = ray.get(ref)
                except ray.exceptions.RayError as error:  # the task or its node died: a failed run
                    print(f"[sweep] ray: {error}", flush=True)
                    code, seconds = -1, 0.0
                run = pending.pop(ref)
                progress.running = min(capacity, len(pending))
                record(run, code, seconds, out, progress)
    finally:
        ray.shutdown()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--algos", nargs="+", required=True, help="algorithm files, each optionally with its own args")
    parser.add_argument("--envs", nargs="+", default=["ColorDoorKey"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--extra", default="", help="arguments passed to every run, as one string")
    parser.add_argument("--out", required=True, help="sweep folder: runs/, logs/, sweep.json")
    parser.add_argument("--backend", choices=["local", "ray"], default="local")
    parser.add_argument("--workers", type=int, default=os.cpu_count(), help="parallel runs (local; local Ray)")
    parser.add_argument("--ray-address", default=None, help="address of a running Ray cluster (default: start one)")
    parser.add_argument("--run-timeout", type=float, default=None, help="seconds after which a run is killed")
    parser.add_argument(
        "--start-for",
        type=float,
        default=None,
        metavar="MINUTES",
        help="start runs only this many minutes from now (by the clock of the machine that would start each run); "
        "the runs under way then finish, the others wait for the next start",
    )
    parser.add_argument(
        "--done",
        nargs="+",
        type=Path,
        default=[],
        help="series files (common.series) whose finished runs are not run again",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the commands and exit")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = Path(args.out).resolve()
    try:
        if args.workers <= 0:
            raise ValueError(f"--workers must be positive, got {args.workers}")
        if args.run_timeout is not None and not args.run_timeout > 0:  # NaN too
            raise ValueError(f"--run-timeout must be positive, got {args.run_timeout}")
        if args.start_for is not None and not args.start_for > 0:
            raise ValueError(f"--start-for must be positive, got {args.start_for}")
        if not all(0 <= seed < 2**32 for seed in args.seeds):
            raise ValueError(
                f"--seeds must be in [0, 4294967295] (numpy's seeds), got {' '.join(map(str, args.seeds))}"
            )
        runs = plan_runs(args.algos, args.envs, args.seeds, shlex.split(args.extra), out)
        done = done_in_series(args.done)
        finished = {run: done.get(run.key) or finished_run_dir(run, out) for run in runs}
        resume_from = {run: resumable_run_dir(run, out) for run in runs if finished[run] is None}  # the runs to do
        check_flags([run for run, run_dir in resume_from.items() if run_dir is None])  # a resumed one: its checkpoint
        if args.backend == "ray":
            try:
                import ray  # noqa: F401
            except ImportError:
                raise ValueError("--backend ray needs ray: pip install 'ray[default]'") from None
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.dry_run:
        print("\n".join(shlex.join(run.command) for run in runs))
        return 0

    lock_folder(out)  # one sweep at a time in a folder: two would start the same runs twice
    (out / "logs").mkdir(parents=True, exist_ok=True)
    (out / "runs").mkdir(exist_ok=True)
    manifest = {
        "algos": args.algos,
        "envs": args.envs,
        "seeds": args.seeds,
        "extra": args.extra,
        "runs": [asdict(run) | {"key": run.key} for run in runs],
    }
    (out / "sweep.json").write_text(json.dumps(manifest, indent=2))

    todo = []
    for run, run_dir in resume_from.items():
        if run_dir is not None:
            run = dataclasses.replace(run, command=(*run.command, "--resume", str(run_dir)))
            print(f"[sweep] resume {run.key} from {run_dir / CHECKPOINT}")
        todo.append(run)
    progress = Progress(len(runs), len(runs) - len(todo), args.workers)
    for run in runs:
        if finished[run] is not None:
            print(f"[sweep] skip {run.key}: finished in {finished[run]}")
    stop_once()
    start_by = None if args.start_for is None else time.time() + 60 * args.start_for
    if todo and args.backend == "ray":
        run_ray(todo, out, args.ray_address, args.workers, args.run_timeout, start_by, progress)
    elif todo:
        run_local(todo, out, args.workers, args.run_timeout, start_by, progress)
    if progress.failed:
        failed = sorted(p.name[: -len(".failed.json")] for p in (out / "logs").glob("*.failed.json"))
        print(f"[sweep] {progress.failed} run(s) failed: {' '.join(failed)}; start the sweep again to retry them")
    if progress.not_started:
        print(progress.line())
        print(
            f"[sweep] {progress.not_started} run(s) not started: their turn came after --start-for "
            f"{args.start_for:g} min; start the sweep again to go on"
        )
    if progress.failed or progress.not_started:
        return 1
    print(f"[sweep] all {len(runs)} runs finished; analyse with: python -m common.analyze {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
