"""Checkpoints and resume: an interrupted run, resumed, ends as the uninterrupted run would."""

import signal
import subprocess
import time
from pathlib import Path

import pytest
from torch.utils.tensorboard import SummaryWriter

from common.checkpoint import CHECKPOINT
from common.tb import read_scalars
from tests import forked
from tests.reference import FLAGS, by_reference, reference

ROOT = Path(__file__).resolve().parents[1]


def accumulator_scalars(run_dir):
    """TensorBoard's own reader, the reference for common.tb.read_scalars."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def scalars_without_timing(run_dir):
    return {tag: values for tag, values in read_scalars(run_dir).items() if tag != "charts/SPS"}


def start(script, runs_dir, *flags):
    """The run, forked from the test process (tests/forked.py), going on."""
    return forked.start([ROOT / script, "--runs-dir", runs_dir, *flags], runs_dir.parent)


def stopped(script, runs_dir, flags, progress_lines, pause=0.05):
    """The run started in `runs_dir` and sent Ctrl-C `pause` seconds after its `progress_lines`-th progress line: its
    ended process, its stderr and its run folder."""
    interrupted = start(script, runs_dir, *flags)
    assert interrupted.stdout.readline().startswith("run folder: ")
    for _ in range(progress_lines):
        assert interrupted.stdout.readline().startswith("step")
    time.sleep(pause)
    interrupted.send_signal(signal.SIGINT)
    _, err = interrupted.communicate(timeout=120)
    (run_dir,) = runs_dir.iterdir()
    return interrupted, err, run_dir


@pytest.mark.parametrize(
    "key",
    by_reference([k for k in sorted(FLAGS) if not k.startswith("sac")])
    + by_reference(["sac_forward_model.py"], marks=[pytest.mark.slow]),
)
def test_an_interrupted_run_resumed_ends_as_the_uninterrupted_run(tmp_path, shared_run, key):
    """A key names the file, and flags after it for a variant with state of its own (tests/reference.py); the
    uninterrupted run is the key's reference run. The interrupted run is forked from the test process; the resume
    is the command line the run printed, in a fresh interpreter: every file's start-up from the command line
    (forked for a variant, whose file starts afresh under its own key)."""
    script, flags = reference(key)
    # an iteration prints its line, then checkpoints if asked to stop; the signal comes a little after the last line
    # read, so the stop comes at the end of the next iteration. A discrete file stops after its fifth of seven
    # iterations (at 640, after the change at 320: the checkpoint holds the new colour, pending in the worlds whose
    # episodes began before it; the next iteration ends the first episodes, at 720, so the embedding file draws from
    # the pool it restored), continuous PPO after its second (a late signal: an iteration later, still before the
    # end). SAC stops only where it logs, every 1,000 steps: the signal goes at once, while it writes its checkpoint
    # at step 2,000 of 2,400 (each after a change, before another).
    progress_lines = 1 if key.startswith("ppo_continuous") else 2 if key.startswith("sac") else 4
    pause = 0 if key.startswith("sac") else 0.05
    interrupted, err, run_dir = stopped(script, tmp_path / "interrupted", flags, progress_lines, pause)
    last_step, phase = read_scalars(run_dir)["charts/phase"][-1]
    total = int(flags[flags.index("--total-timesteps") + 1])
    assert phase >= 1 and last_step < total  # stopped after a change, with iterations left to resume
    lines = err.strip().splitlines()
    assert interrupted.returncode == 130 and len(lines) == 1, err
    assert lines[0].endswith(f"--resume {run_dir}") and (run_dir / CHECKPOINT).is_file()
    assert not (run_dir / "finished.json").exists()

    command = lines[0].split("resume with: ")[1].split()
    if " " in key:
        resume = forked.run(command[1:], tmp_path / "interrupted", timeout=120)
    else:
        resume = subprocess.run(command, cwd=tmp_path / "interrupted", capture_output=True, text=True, timeout=120)
    assert resume.returncode == 0, resume.stderr[-2000:]
    assert (run_dir / "finished.json").is_file() and not (run_dir / CHECKPOINT).exists()
    assert scalars_without_timing(run_dir) == scalars_without_timing(shared_run(script, *flags))
    assert read_scalars(run_dir) == accumulator_scalars(run_dir)  # two event files, the second one purging


@pytest.mark.parametrize("key", by_reference(["ppo.py"]))
def test_a_resume_from_the_checkpoint_before_a_damaged_one_ends_as_the_uninterrupted_run(tmp_path, shared_run, key):
    """Checkpoints every iteration, the last one cut short after the stop: the resume warns in one line, goes on
    from checkpoint.prev.pt (an iteration earlier), drops what was logged after it (purge_step) and ends as the
    reference run, which checkpointed at its default (never, in 7 iterations)."""
    from common.checkpoint import PREVIOUS_CHECKPOINT

    script, flags = reference(key)
    interrupted, _, run_dir = stopped(script, tmp_path / "interrupted", [*flags, "--checkpoint-every", "1"], 4)
    assert interrupted.returncode == 130 and (run_dir / PREVIOUS_CHECKPOINT).is_file()
    # charts/phase is logged every iteration: the stop's checkpoint is at its last step, the one before at the one
    # before it
    previous_step = read_scalars(run_dir)["charts/phase"][-2][0]
    data = (run_dir / CHECKPOINT).read_bytes()
    (run_dir / CHECKPOINT).write_bytes(data[: len(data) // 2])
    resume = forked.run([ROOT / script, "--resume", run_dir], tmp_path / "interrupted", timeout=120)
    assert resume.returncode == 0, resume.stderr[-2000:]
    (warning,) = resume.stderr.splitlines()
    assert warning.startswith(f"warning: {run_dir / CHECKPOINT} cannot be read (")
    assert warning.endswith(f"(step {previous_step})")
    assert scalars_without_timing(run_dir) == scalars_without_timing(shared_run(script, *flags))
    assert read_scalars(run_dir) == accumulator_scalars(run_dir)


def test_a_resumed_run_drops_what_was_logged_after_its_checkpoint(tmp_path):
    """A run killed after its checkpoint logged steps past it: purge_step drops them on resume, in
    common.tb's reader as in TensorBoard's."""
    writer = SummaryWriter(str(tmp_path))
    for step in range(1, 9):
        writer.add_scalar("x", step, step)
    writer.close()
    writer = SummaryWriter(str(tmp_path), purge_step=6)  # the checkpoint was at step 5
    for step in range(6, 9):
        writer.add_scalar("x", 10 * step, step)
    writer.close()
    assert read_scalars(tmp_path)["x"] == [(s, s) for s in range(1, 6)] + [(s, 10 * s) for s in range(6, 9)]
    assert read_scalars(tmp_path) == accumulator_scalars(tmp_path)


def test_resume_refuses_a_missing_checkpoint_and_other_flags(tmp_path):
    from algos.ppo import Args
    from common.checkpoint import read_checkpoint, save_checkpoint

    with pytest.raises(ValueError, match="no checkpoint.pt"):
        read_checkpoint(Args(resume=str(tmp_path)))
    with pytest.raises(ValueError, match=f"^--resume {tmp_path / 'nope'}: no such run folder$"):
        read_checkpoint(Args(resume=str(tmp_path / "nope")))
    save_checkpoint(tmp_path, Args(seed=3, learning_rate=1e-3), {}, dict(global_step=0))
    given = tmp_path / "checkpoint.pt"  # the file, not its folder
    with pytest.raises(ValueError, match=f"no such run folder \\(--resume takes the run folder: {tmp_path}\\)$"):
        read_checkpoint(Args(resume=str(given)))
    assert read_checkpoint(Args(resume=str(tmp_path), seed=3))["args"].learning_rate == 1e-3
    with pytest.raises(ValueError, match="--seed is 3 there, 4 given"):
        read_checkpoint(Args(resume=str(tmp_path), seed=4))


def test_the_reader_leaves_out_a_record_still_being_written(tmp_path):
    writer = SummaryWriter(str(tmp_path))
    for step in range(1, 4):
        writer.add_scalar("x", step, step)
    writer.close()
    (events,) = tmp_path.glob("*tfevents*")
    data = events.read_bytes()
    events.write_bytes(data[:-7])  # the last record cut short, as by a writer mid-flush
    assert read_scalars(tmp_path)["x"] == [(1, 1.0), (2, 2.0)]


def test_an_env_state_carries_the_worlds_and_leaves_the_vector_env_open():
    import gymnasium as gym
    import numpy as np

    from common.checkpoint import env_state, set_env_state
    from envs import OneHotFlatObs, resolve_env_id

    def make():
        return gym.vector.SyncVectorEnv(
            [lambda: OneHotFlatObs(gym.make(resolve_env_id("ColorDoorKey-6x6")))] * 2,
            autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        )

    first, second = make(), make()
    first.reset(seed=1)
    rng = np.random.default_rng(0)
    for _ in range(30):
        first.step(rng.integers(0, 3, 2))
    set_env_state(second, env_state(first))
    assert not second.closed
    for _ in range(200):  # the same worlds, the same random generators: the same steps
        action = rng.integers(0, 7, 2)
        a, b = first.step(action), second.step(action)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_resume_refuses_a_checkpoint_from_another_version_in_one_line(tmp_path):
    """A checkpoint written before the first layers dropped the view's dead columns: weights of another shape."""
    import torch

    from algos.ppo import Agent, Args
    from common.checkpoint import read_checkpoint, restore_checkpoint, save_checkpoint
    from envs import view_columns

    save_checkpoint(tmp_path, Args(), dict(agent=Agent(980, 7)), dict(global_step=0))
    checkpoint = read_checkpoint(Args(resume=str(tmp_path)))
    with pytest.raises(SystemExit) as stop:
        restore_checkpoint(checkpoint, dict(agent=Agent(980, 7, columns=view_columns("ColorDoorKey-6x6-v0"))), "cpu")
    message = str(stop.value.code)
    assert message.startswith("error: the checkpoint's agent does not fit") and "\n" not in message
    assert "size mismatch" in message or "Unexpected key" in message
    restore_checkpoint(checkpoint, dict(agent=Agent(980, 7)), torch.device("cpu"))  # the same version loads


def test_the_checkpoint_before_the_last_is_kept_and_read_when_the_last_cannot_be(tmp_path, capsys):
    from algos.ppo import Args
    from common.checkpoint import PREVIOUS_CHECKPOINT, read_checkpoint, save_checkpoint

    save_checkpoint(tmp_path, Args(), {}, dict(global_step=1))
    assert [p.name for p in tmp_path.iterdir()] == [CHECKPOINT]
    save_checkpoint(tmp_path, Args(), {}, dict(global_step=2))
    assert {p.name for p in tmp_path.iterdir()} == {CHECKPOINT, PREVIOUS_CHECKPOINT}
    assert read_checkpoint(Args(resume=str(tmp_path)))["values"]["global_step"] == 2
    assert capsys.readouterr().err == ""
    data = (tmp_path / CHECKPOINT).read_bytes()
    for length in (0, 10, len(data) // 2, len(data) - 10):  # cut short anywhere
        (tmp_path / CHECKPOINT).write_bytes(data[:length])
        assert read_checkpoint(Args(resume=str(tmp_path)))["values"]["global_step"] == 1
        (warning,) = capsys.readouterr().err.splitlines()
        assert warning.startswith(f"warning: {tmp_path / CHECKPOINT} cannot be read (") and "(step 1)" in warning

    # the run goes on from the one before: its next checkpoint keeps that one, not the unreadable last one
    assert read_checkpoint(Args(resume=str(tmp_path)))["read_from"] == PREVIOUS_CHECKPOINT
    save_checkpoint(tmp_path, Args(), {}, dict(global_step=3), keep_previous=True)
    assert read_checkpoint(Args(resume=str(tmp_path)))["values"]["global_step"] == 3
    (tmp_path / CHECKPOINT).write_bytes(b"")
    assert read_checkpoint(Args(resume=str(tmp_path)))["values"]["global_step"] == 1
    capsys.readouterr()

    (tmp_path / PREVIOUS_CHECKPOINT).write_bytes(b"")
    with pytest.raises(ValueError, match="neither checkpoint.pt .* nor checkpoint.prev.pt .* can be read") as error:
        read_checkpoint(Args(resume=str(tmp_path)))
    (tmp_path / PREVIOUS_CHECKPOINT).unlink()
    with pytest.raises(ValueError, match="checkpoint.pt cannot be read .* and there is no checkpoint.prev.pt") as other:
        read_checkpoint(Args(resume=str(tmp_path)))
    assert "\n" not in str(error.value) + str(other.value)


def test_a_checkpoint_that_cannot_be_opened_is_named_and_not_read_around(tmp_path, monkeypatch, capsys):
    """A permission error (as root, which reads any file, made by refusing the open) says nothing about the file's
    bytes: a run gone on from checkpoint.prev.pt would replace a checkpoint.pt that may be whole with its own. The
    resume stops before anything is written, in one line."""
    import builtins

    from algos import ppo
    from common.checkpoint import PREVIOUS_CHECKPOINT, read_checkpoint, save_checkpoint
    from common.runs import parse_args

    save_checkpoint(tmp_path, ppo.Args(), {}, dict(global_step=1))
    save_checkpoint(tmp_path, ppo.Args(), {}, dict(global_step=2))
    real_open, refused = builtins.open, tmp_path / CHECKPOINT

    def open_refusing(file, *args, **kwargs):
        if isinstance(file, (str, Path)) and Path(file) == refused:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", open_refusing)
    with pytest.raises(SystemExit) as stop:
        parse_args(ppo.Args, ppo.RANGES, ppo.fill_in_defaults, ["--resume", str(tmp_path)])
    message = str(stop.value.code)
    assert message.startswith(f"error: --resume {tmp_path}: {CHECKPOINT} cannot be opened (") and "\n" not in message
    assert "Permission denied" in message and message.endswith(f"move it aside to resume from {PREVIOUS_CHECKPOINT}")
    assert capsys.readouterr().err == ""  # no fallback warning
    refused = tmp_path / PREVIOUS_CHECKPOINT  # the last one opens: the one before is not needed
    assert read_checkpoint(ppo.Args(resume=str(tmp_path)))["values"]["global_step"] == 2


def test_resume_refuses_a_checkpoint_of_another_file(tmp_path):
    from algos import ppo, ppo_poi_grad
    from common.checkpoint import read_checkpoint, save_checkpoint

    save_checkpoint(tmp_path, ppo.Args(), {}, dict(global_step=0))
    with pytest.raises(ValueError, match="a run of ppo.py, not of ppo_poi_grad.py"):
        read_checkpoint(ppo_poi_grad.Args(resume=str(tmp_path)))


@pytest.mark.parametrize("content", ["text", "torch list", "torch dict"])
def test_a_file_that_is_no_checkpoint_is_read_as_unreadable(tmp_path, capsys, content):
    """Text (unpickling raises ValueError, not one of torch.load's usual errors) or a torch file of something else:
    the one before is read, and without one the error is one line naming the file."""
    import torch

    from algos.ppo import Args
    from common.checkpoint import PREVIOUS_CHECKPOINT, read_checkpoint, save_checkpoint

    def spoil(path):
        if content == "text":
            path.write_text("garbage\n")
        else:
            torch.save([1, 2] if content == "torch list" else {"values": {}}, path)

    save_checkpoint(tmp_path, Args(), {}, dict(global_step=1))
    save_checkpoint(tmp_path, Args(), {}, dict(global_step=2))
    spoil(tmp_path / CHECKPOINT)
    assert read_checkpoint(Args(resume=str(tmp_path)))["values"]["global_step"] == 1
    assert capsys.readouterr().err.startswith(f"warning: {tmp_path / CHECKPOINT} cannot be read (")
    spoil(tmp_path / PREVIOUS_CHECKPOINT)
    with pytest.raises(ValueError, match="neither checkpoint.pt .* nor checkpoint.prev.pt .* can be read") as error:
        read_checkpoint(Args(resume=str(tmp_path)))
    assert "\n" not in str(error.value)
    if content != "text":
        assert "not a checkpoint" in str(error.value)
