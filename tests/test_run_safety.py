"""Runs that protect their data: a reader of their output that goes away, two processes in one
folder, a checkpoint that cannot be read, a resume with the wrong file."""

import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TINY = ["--num-envs", "2", "--num-steps", "64", "--num-minibatches", "2", "--eval-steps", "64", "--env",
        "ColorDoorKey-6x6", "--model-target", "key_distance"]  # fmt: skip


def start(tmp_path, *flags, script="ppo.py"):
    cmd = [sys.executable, str(ROOT / "algos" / script), "--runs-dir", str(tmp_path / "runs"), *flags]
    return subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def only_run_dir(tmp_path):
    (run_dir,) = (tmp_path / "runs").iterdir()
    return run_dir


def test_a_run_piped_into_head_goes_on_to_its_end(tmp_path):
    """`python algos/ppo.py | head -1`: after the first line nobody reads; the run finishes, exit 0, no traceback."""
    process = start(tmp_path, *TINY, "--total-timesteps", "640")
    process.stdout.readline()
    process.stdout.close()  # head exits
    err = process.stderr.read()
    assert process.wait(timeout=120) == 0 and err == "", err
    assert (only_run_dir(tmp_path) / "finished.json").is_file()


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
