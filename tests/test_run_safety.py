"""Runs that protect their data: a reader of their output that goes away, two processes in one
folder, a checkpoint that cannot be read, a resume with the wrong file."""

import contextlib
import fcntl
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import forked

ROOT = Path(__file__).resolve().parents[1]
TINY = [
    "--num-envs",
    "2",
    "--num-steps",
    "64",
    "--num-minibatches",
    "2",
    "--eval-steps",
    "64",
    "--env",
    "ColorDoorKey-6x6",
    "--model-target",
    "key_distance",
]


def start(tmp_path, *flags, script="ppo.py"):
    cmd = [sys.executable, str(ROOT / "algos" / script), "--runs-dir", str(tmp_path / "runs"), *flags]
    return subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def only_run_dir(tmp_path):
    (run_dir,) = (tmp_path / "runs").iterdir()
    return run_dir


def one_error_line(proc):
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    return lines[0]


def snapshot(folder):
    """Every file under `folder` with its size and modification time."""
    return {p.relative_to(folder): (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*")}


@contextlib.contextmanager
def held(*folders):
    """Another process's locks on `folders` (flock on folder/.lock), for the time of the block."""
    with contextlib.ExitStack() as stack:
        for folder in folders:
            folder.mkdir(parents=True, exist_ok=True)
            fcntl.flock(stack.enter_context(open(folder / ".lock", "a")), fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """A ppo.py run stopped by Ctrl-C in its third iteration, with a checkpoint every iteration
    (checkpoint.pt and the one before it), and the same run uninterrupted, both forked (tests/forked.py): their run
    folders. The tests that read them are in one xdist group: one test process makes them."""
    base = tmp_path_factory.mktemp("stopped")
    flags = [*TINY, "--total-timesteps", "1536", "--checkpoint-every", "1"]
    for name in ("reference", "stopped"):
        (base / name).mkdir()
    reference = forked.run([ROOT / "algos/ppo.py", "--runs-dir", base / "reference/runs", *flags], base / "reference")
    process = forked.start([ROOT / "algos/ppo.py", "--runs-dir", base / "stopped/runs", *flags], base / "stopped")
    steps = 0
    while steps < 2:
        steps += process.stdout.readline().startswith("step")
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=120)
    assert process.returncode == 130 and reference.returncode == 0
    return only_run_dir(base / "stopped"), only_run_dir(base / "reference")


STOPPED = pytest.mark.xdist_group("stopped")


def resume(run_dir, script="ppo.py"):
    """`python algos/<script> --resume run_dir`, forked from the test process (tests/forked.py)."""
    return forked.run([ROOT / "algos" / script, "--resume", run_dir], run_dir.parent, timeout=120)


def copy_of(run_dir, tmp_path):
    return Path(shutil.copytree(run_dir, tmp_path / run_dir.name))


def test_a_run_piped_into_head_goes_on_to_its_end(tmp_path):
    """`python algos/ppo.py | head -1`: after the first line nobody reads; the run finishes, exit 0, no
    traceback. It runs 5 whole batches of 128 steps, and says so."""
    process = start(tmp_path, *TINY, "--total-timesteps", "700")
    first = process.stdout.readline()
    process.stdout.close()  # head exits
    err = process.stderr.read()
    note = "note: --total-timesteps 700 is not a whole number of batches of 128: the run takes 640 steps (5 iterations)"
    assert process.wait(timeout=120) == 0 and err == note + "\n", err
    run_dir = only_run_dir(tmp_path)
    assert first == f"run folder: {run_dir}\n" and (run_dir / "finished.json").is_file()


def test_help_piped_into_a_reader_that_goes_away_exits_without_a_traceback(tmp_path):
    """`python algos/ppo.py --help | head -1`: the reader is gone before the help is printed; exit 0, nothing on
    stderr (tyro's print raised BrokenPipeError)."""
    process = subprocess.Popen([sys.executable, str(ROOT / "algos/ppo.py"), "--help"], cwd=tmp_path,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    process.stdout.close()
    assert process.wait(timeout=120) == 0 and process.stderr.read() == ""


def test_ctrl_c_after_the_reader_went_away_still_writes_the_checkpoint(tmp_path):
    """`python algos/ppo.py | tee log`, then Ctrl-C: tee is gone before the run's next line."""
    process = start(tmp_path, *TINY, "--total-timesteps", "10000000")
    while not process.stdout.readline().startswith("step"):  # in the loop, where Ctrl-C asks for a checkpoint
        pass
    process.stdout.close()
    process.send_signal(signal.SIGINT)
    err = process.stderr.read()
    lines = err.strip().splitlines()
    assert process.wait(timeout=120) == 130 and len(lines) == 1 and "resume with:" in lines[0], err
    assert (only_run_dir(tmp_path) / "checkpoint.pt").is_file()


@STOPPED
def test_a_resume_in_a_folder_another_process_works_in_exits_with_one_line_and_writes_nothing(tmp_path, stopped):
    run_dir = copy_of(stopped[0], tmp_path)
    with held(run_dir):
        before = snapshot(run_dir)
        assert "is in use by another process" in one_error_line(resume(run_dir))
        assert snapshot(run_dir) == before


@STOPPED
def test_two_resumes_of_one_run_at_once(tmp_path, stopped):
    run_dir = copy_of(stopped[0], tmp_path)
    first = subprocess.Popen(
        [sys.executable, str(ROOT / "algos/ppo.py"), "--resume", str(run_dir)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert first.stdout.readline() == f"run folder: {run_dir}\n"  # it holds the folder
    first.send_signal(signal.SIGSTOP)  # and keeps it while the second one starts
    try:
        assert "is in use by another process" in one_error_line(resume(run_dir))
    finally:
        first.send_signal(signal.SIGCONT)
    out, _ = first.communicate(timeout=120)
    assert first.returncode == 0 and (run_dir / "finished.json").is_file()
    assert out.splitlines()[-1] == f"finished: run folder {run_dir}"


def test_a_new_run_named_like_a_folder_in_use_writes_nothing_there(tmp_path):
    """Two runs of one env and seed started in the same second get the same folder name."""
    now = int(time.time())
    folders = [tmp_path / "runs" / f"ColorDoorKey-6x6__ppo__1__{t}" for t in range(now, now + 90)]
    with held(*folders):
        proc = subprocess.run(
            [
                sys.executable,
                str(ROOT / "algos/ppo.py"),
                "--runs-dir",
                str(tmp_path / "runs"),
                *TINY,
                "--total-timesteps",
                "256",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert "is in use by another process" in one_error_line(proc)
    assert sorted(tmp_path.rglob("*")) == sorted([*folders, *(f / ".lock" for f in folders), tmp_path / "runs"])


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--runs-dir", "afile"], "error: cannot work in afile/ColorDoorKey-6x6__ppo__4294967295__"),
        (["--runs-dir", "runs", "--seed", str(2**32)], "error: --seed must be a finite number in [0, 4294967295]"),
    ],
)
def test_a_runs_dir_that_is_a_file_or_a_seed_numpy_refuses_exits_with_one_line_and_writes_nothing(
    tmp_path, flags, message
):
    (tmp_path / "afile").write_text("kept\n")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "algos/ppo.py"), "--seed", str(2**32 - 1), *flags, *TINY],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert one_error_line(proc).startswith(message)
    assert [p.name for p in tmp_path.iterdir()] == ["afile"] and (tmp_path / "afile").read_text() == "kept\n"


def test_a_second_sweep_on_a_folder_exits_with_one_line_and_writes_nothing(tmp_path):
    (tmp_path / "noop.py").write_text("")
    out = tmp_path / "sweep"
    with held(out):
        proc = subprocess.run(
            [sys.executable, "-m", "common.sweep", "--algos", str(tmp_path / "noop.py"), "--out", str(out)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert "is in use by another process" in one_error_line(proc)
    assert [p.name for p in out.iterdir()] == [".lock"]


@STOPPED
def test_a_resume_from_a_cut_short_checkpoint_goes_on_from_the_one_before(tmp_path, stopped):
    from common.tb import read_scalars

    run_dir = copy_of(stopped[0], tmp_path)
    checkpoint = run_dir / "checkpoint.pt"
    checkpoint.write_bytes(checkpoint.read_bytes()[:5000])
    proc = resume(run_dir)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 0 and len(lines) == 1 and lines[0].startswith(f"warning: {checkpoint} cannot be read")
    assert (run_dir / "finished.json").is_file() and not list(run_dir.glob("checkpoint*"))
    scalars, reference = read_scalars(run_dir), read_scalars(stopped[1])
    scalars.pop("charts/SPS"), reference.pop("charts/SPS")
    assert scalars == reference


@STOPPED
def test_a_resume_with_no_readable_checkpoint_exits_with_one_line_and_writes_nothing(tmp_path, stopped):
    run_dir = copy_of(stopped[0], tmp_path)
    for name in ("checkpoint.pt", "checkpoint.prev.pt"):
        (run_dir / name).write_bytes((run_dir / name).read_bytes()[:5000])
    before = snapshot(run_dir)
    assert "neither checkpoint.pt" in one_error_line(resume(run_dir))
    assert snapshot(run_dir) == before


@STOPPED
def test_a_resume_with_another_file_exits_with_one_line_and_writes_nothing(tmp_path, stopped):
    run_dir = copy_of(stopped[0], tmp_path)
    before = snapshot(run_dir)
    assert "a run of ppo.py, not of ppo_poi_grad.py" in one_error_line(resume(run_dir, script="ppo_poi_grad.py"))
    assert snapshot(run_dir) == before
