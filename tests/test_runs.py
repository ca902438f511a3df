"""common.runs.Run, in-process: what leaving the block does after the loop's end, a stop, a non-finite
loss and any other error, the checkpoint it writes when due, and what --save-model writes
(the subprocess paths of every algorithm file are in test_smoke, test_checkpoint and test_run_safety)."""

import dataclasses
import json
import os
import signal

import pytest
import torch

import common.runs as runs

from common.checkpoint import CHECKPOINT, PREVIOUS_CHECKPOINT, read_checkpoint, save_checkpoint
from common.runs import COMPLETION_MARKER, NonFinite, Run, RunArgs, Terminated, check_finite, parse_args
from common.tb import read_scalars


@dataclasses.dataclass
class Args(RunArgs):
    exp_name: str = "test"
    seed: int = 3
    env: str = "ColorDoorKey-6x6"
    total_timesteps: int = 40
    batch_size: int = 8


@pytest.fixture(autouse=True)
def keep_signal_handlers():
    """Run installs SIGINT and SIGTERM handlers in this process: put pytest's back, and forget the stops asked."""
    handlers = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    yield
    signal.signal(signal.SIGINT, handlers[0])
    signal.signal(signal.SIGTERM, handlers[1])
    runs._requested.clear()


def only_run_dir(tmp_path):
    (run_dir,) = tmp_path.iterdir()
    return run_dir


def test_the_loops_end_writes_finished_json_with_the_last_step_and_closes_what_was_registered(tmp_path):
    closed = []
    with Run(Args(runs_dir=str(tmp_path)), None) as run:
        run.callback(closed.append, "envs")
        run.writer.add_scalar("charts/x", 1.0, 8)
        for iteration in range(1, 6):
            run.end_iteration(iteration, 8 * iteration, {}, dict)
    marker = json.loads((only_run_dir(tmp_path) / COMPLETION_MARKER).read_text())
    assert marker["global_step"] == 40 and closed == ["envs"]
    assert read_scalars(run.dir)["charts/x"] == [(8, 1.0)]  # the writer flushed and closed


@pytest.mark.parametrize("stop, code", [(KeyboardInterrupt, 130), (Terminated, 143)])
def test_a_stop_exits_with_its_code_and_no_finished_json(tmp_path, stop, code):
    closed = []
    with pytest.raises(SystemExit) as exit_:
        with Run(Args(runs_dir=str(tmp_path)), None) as run:
            run.callback(closed.append, "envs")
            raise stop
    assert exit_.value.code == code and closed == ["envs"]
    assert not (only_run_dir(tmp_path) / COMPLETION_MARKER).exists()


def test_a_non_finite_loss_exits_with_one_line_naming_it_and_the_step(tmp_path):
    with pytest.raises(SystemExit) as exit_:
        with Run(Args(runs_dir=str(tmp_path)), None) as run:
            run.end_iteration(1, 8, {}, dict)
            check_finite("PPO loss", torch.tensor(float("nan")))
    message = str(exit_.value.code)
    assert message.startswith("error: the PPO loss is nan after global step 8;") and "\n" not in message
    assert not (only_run_dir(tmp_path) / COMPLETION_MARKER).exists()


def test_any_other_error_goes_on_with_its_traceback_and_closes_everything(tmp_path):
    closed = []
    with pytest.raises(ZeroDivisionError):
        with Run(Args(runs_dir=str(tmp_path)), None) as run:
            run.callback(closed.append, "envs")
            1 / 0
    assert closed == ["envs"] and not (only_run_dir(tmp_path) / COMPLETION_MARKER).exists()
    assert not issubclass(ZeroDivisionError, NonFinite)


def test_the_checkpoint_is_written_every_checkpoint_every_iterations_with_the_loop_values(tmp_path):
    weights = torch.nn.Linear(2, 1)
    written = []
    with Run(Args(runs_dir=str(tmp_path), checkpoint_every=2), None) as run:
        for iteration in range(1, 4):
            run.end_iteration(iteration, 8 * iteration, dict(net=weights), lambda: dict(global_step=8 * iteration))
            path = run.dir / CHECKPOINT
            written.append(torch.load(path, weights_only=False) if path.exists() else None)
    assert written[0] is None  # after iteration 2 only: the one there still holds step 16 after the third
    assert [checkpoint["values"]["global_step"] for checkpoint in written[1:]] == [16, 16]
    assert torch.equal(written[1]["stateful"]["net"]["weight"], weights.weight)
    assert not (run.dir / CHECKPOINT).exists()  # the finished run's checkpoint goes


def test_a_run_resumed_from_the_checkpoint_before_the_last_keeps_it_until_it_has_written_its_own(tmp_path, capsys):
    """checkpoint.pt cannot be read, the run went on from checkpoint.prev.pt: its first checkpoint replaces the
    unreadable one and leaves checkpoint.prev.pt as it was (linked over, the one good checkpoint would be lost); the
    next one keeps the first as the one before, as every checkpoint does."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for step in (8, 9):
        save_checkpoint(run_dir, Args(checkpoint_every=1), {}, dict(global_step=step))
    (run_dir / CHECKPOINT).write_bytes(b"cut short")
    previous = (run_dir / PREVIOUS_CHECKPOINT).read_bytes()
    checkpoint = read_checkpoint(Args(resume=str(run_dir)))
    assert checkpoint["values"]["global_step"] == 8 and "cannot be read" in capsys.readouterr().err
    steps = []
    with Run(checkpoint["args"], checkpoint) as run:
        for iteration in (1, 2):
            run.end_iteration(iteration, 8 + 8 * iteration, {}, lambda: dict(global_step=8 + 8 * iteration))
            read = lambda name: torch.load(run_dir / name, weights_only=False)["values"]["global_step"]  # noqa: E731
            steps.append((read(CHECKPOINT), read(PREVIOUS_CHECKPOINT)))
            if iteration == 1:
                assert (run_dir / PREVIOUS_CHECKPOINT).read_bytes() == previous
    assert steps == [(16, 8), (24, 16)]


def test_save_models_writes_each_network_the_policy_and_the_flags(tmp_path):
    class Policy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(3, 2)

        def act(self, x, noise):
            return (self.layer(x) + noise).argmax(-1)

    class Model(torch.nn.Linear):
        def save(self, path):
            torch.save({"config": "kept"}, path)

    policy, model = Policy(), Model(3, 1)
    meta = dict(env="ColorDoorKey-6x6", observation="one_hot_view", noise="gumbel", noise_size=2)
    with Run(Args(runs_dir=str(tmp_path)), None) as run:
        run.save_models(policy, 3, meta, agent=policy, external_model=model)
    names = {p.name for p in run.dir.iterdir()}
    assert {"agent.pt", "external_model.pt", "args.json", "policy.pt2", COMPLETION_MARKER} <= names
    assert json.loads((run.dir / "policy.json").read_text()) == meta  # what common.evaluate reads to run it
    assert torch.load(run.dir / "external_model.pt") == {"config": "kept"}  # the network's own save
    assert torch.load(run.dir / "agent.pt").keys() == policy.state_dict().keys()
    assert json.loads((run.dir / "args.json").read_text())["seed"] == 3


def test_parse_args_exits_with_one_line_on_a_bad_value(capsys):
    def fill_in_defaults(args):
        if args.batch_size > args.total_timesteps:
            raise ValueError("--total-timesteps is smaller than one batch")

    args, checkpoint = parse_args(Args, {"positive": "total_timesteps"}, fill_in_defaults, argv=[])
    assert checkpoint is None and args.total_timesteps == 40
    for argv, message in [
        (["--total-timesteps", "0"], "error: --total-timesteps must be positive, got 0"),
        (["--total-timesteps", "4"], "error: --total-timesteps is smaller than one batch"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            parse_args(Args, {"positive": "total_timesteps"}, fill_in_defaults, argv=argv)
        assert exit_.value.code == message


def test_a_signal_during_the_setup_stops_at_once_and_in_the_loop_after_the_iterations_checkpoint(tmp_path):
    """SIGTERM before start_loop: no iteration to finish, exit 143 at once; after it: the iteration goes on to
    end_iteration, which writes the checkpoint and then stops."""
    with pytest.raises(SystemExit) as exit_:
        with Run(Args(runs_dir=str(tmp_path / "setup")), None) as run:
            os.kill(os.getpid(), signal.SIGTERM)
            reached = "after the signal"  # not reached: the handler raises
    assert exit_.value.code == 143 and "reached" not in locals()
    assert not (run.dir / CHECKPOINT).exists()

    weights = torch.nn.Linear(2, 1)
    steps = []
    with pytest.raises(SystemExit) as exit_:
        with Run(Args(runs_dir=str(tmp_path / "loop"), checkpoint_every=100), None) as run:
            run.start_loop(0)
            for iteration in range(1, 4):
                if iteration == 2:
                    os.kill(os.getpid(), signal.SIGTERM)
                steps.append(iteration)  # the iteration goes on after the signal
                run.end_iteration(iteration, 8 * iteration, dict(net=weights), lambda: dict(global_step=8 * iteration))
    assert exit_.value.code == 143 and steps == [1, 2]
    assert (run.dir / CHECKPOINT).exists() and not (run.dir / COMPLETION_MARKER).exists()


def test_each_start_logs_its_machine_and_the_series_keeps_them_with_the_run(tmp_path, monkeypatch):
    """A run stopped after its checkpoint at step 16, resumed from it on "machine B" (runs.machine patched) and stopped
    before its next checkpoint, then resumed from it again on "machine C": its event files hold A from step 0 and C from
    17 (B's start is dropped with the rest of what B logged), and its series record (made from the folder, then merged
    from the series file) keeps both; a series record of a run that logged none has no `machines`."""
    from common import series
    from common.tb import read_scalars, read_scalars_and_texts

    line = runs.machine()
    assert torch.__version__ in line and torch.backends.cpu.get_cpu_capability() in line and "\n" not in line
    monkeypatch.setattr(runs, "lock_folder", lambda folder: folder.mkdir(parents=True, exist_ok=True))  # one process

    def iterations(run, first, last, stop_after=None):
        for iteration in range(first, last + 1):
            run.writer.add_scalar("charts/phase", 0, 8 * iteration)
            run.end_iteration(iteration, 8 * iteration, {}, lambda: dict(global_step=8 * iteration))
            if iteration == stop_after:
                raise KeyboardInterrupt

    monkeypatch.setattr(runs, "machine", lambda cuda: "machine A")
    with pytest.raises(SystemExit):
        with Run(Args(runs_dir=str(tmp_path / "runs"), checkpoint_every=2), None) as run:
            iterations(run, 1, 5, stop_after=3)  # after step 24: the checkpoint holds step 16
    checkpoint = torch.load(run.dir / CHECKPOINT, weights_only=False)
    resume = Args(runs_dir=str(tmp_path / "runs"), resume=str(run.dir), checkpoint_every=2)
    monkeypatch.setattr(runs, "machine", lambda cuda: "machine B")
    with pytest.raises(SystemExit):
        with Run(resume, checkpoint) as resumed:
            iterations(resumed, 3, 5, stop_after=3)  # stopped before its first checkpoint (at step 32)
    monkeypatch.setattr(runs, "machine", lambda cuda: "machine C")
    with Run(resume, checkpoint) as resumed:
        iterations(resumed, 3, 5)
    scalars, texts = read_scalars_and_texts(run.dir, (runs.MACHINE_TAG, "absent"))
    assert texts == {runs.MACHINE_TAG: [(0, "machine A"), (17, "machine C")], "absent": []}
    assert scalars == read_scalars(run.dir) and [step for step, _ in scalars["charts/phase"]] == [8, 16, 24, 32, 40]

    out = tmp_path / "series.jsonl.gz"
    assert series.main([str(tmp_path / "runs"), "--out", str(out)]) == 0
    assert series.main([str(out), "--out", str(out)]) == 0  # a merge from the series file keeps them
    (rec,) = series.read(out)
    assert rec["machines"] == [[0, "machine A"], [17, "machine C"]]
    del rec["machines"]
    series.write([rec], out)
    assert series.main([str(out), "--out", str(out)]) == 0 and "machines" not in series.read(out)[0]
