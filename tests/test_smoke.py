"""End-to-end runs of the algorithm files (forked from the test process: tests/forked.py, or in a fresh interpreter),
with their TensorBoard scalars read back."""

from pathlib import Path

import numpy as np
import pytest
import torch

from common.tb import read_scalars
from common.checks import check_and_fill
from tests import forked
from tests.reference import by_reference, group, reference

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--num-envs", "2", "--num-steps", "128", "--num-minibatches", "2", "--eval-steps", "64"]
DESIGN_METRICS = {
    "charts/episodic_return",
    "charts/episodic_length",
    "charts/SPS",
    "charts/phase",
    "charts/learning_rate",
    "losses/value_loss",
    "losses/policy_loss",
    "losses/entropy",
    "losses/old_approx_kl",
    "losses/approx_kl",
    "losses/clipfrac",
    "losses/explained_variance",
    "external_model/train_loss",
    "external_model/eval_loss",
}


def run(tmp_path, *flags, script="algos/ppo.py", check=True, fresh=False):
    """`python script --runs-dir tmp_path/runs *flags` in `tmp_path`, forked from the test process, or with `fresh`
    in a new interpreter (its own start-up, hash seed and import-time warnings)."""
    proc = forked.run([ROOT / script, "--runs-dir", tmp_path / "runs", *flags], tmp_path, fresh=fresh)
    if check:
        assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def only_run_dir(tmp_path):
    (run_dir,) = (tmp_path / "runs").iterdir()
    return run_dir


@pytest.mark.slow
def test_default_env_logs_design_metrics_and_changes_phase(tmp_path):
    # ColorDoorKey (8x8, max 640 steps): 2 envs x 1024 steps end episodes by the step limit
    proc = run(tmp_path, *SMALL, "--total-timesteps", "2048")
    scalars = read_scalars(only_run_dir(tmp_path))
    assert DESIGN_METRICS <= set(scalars)
    phases = dict(scalars["charts/phase"])
    assert phases[1024] == 0 and phases[2048] == 1  # the default change sits at the midpoint
    assert len(scalars["external_model/train_loss"]) == 8
    lines = proc.stdout.strip().splitlines()
    run_dir = only_run_dir(tmp_path)
    assert lines[0] == f"run folder: {run_dir}" and lines[-1] == f"finished: run folder {run_dir}"
    assert len(lines) == 10  # and one console line per iteration
    assert "SPS" in proc.stdout and "model loss" in proc.stdout and "left" in proc.stdout


@pytest.mark.slow
def test_change_steps_and_three_phases(tmp_path):
    run(
        tmp_path,
        *SMALL,
        "--total-timesteps",
        "1536",
        "--change-steps",
        "500",
        "1000",
        "--correct-key-colors",
        "red",
        "blue",
        "red",
    )
    phases = read_scalars(only_run_dir(tmp_path))["charts/phase"]
    assert phases == [(256, 0), (512, 1), (768, 1), (1024, 2), (1280, 2), (1536, 2)]


def test_save_model_then_load_and_predict(tmp_path):
    import gymnasium as gym

    from algos.ppo import Agent, ExternalModel
    from common.heldout import heldout_set
    from envs import OneHotFlatObs, view_columns

    run(
        tmp_path,
        *SMALL,
        "--env",
        "ColorDoorKey-6x6",
        "--total-timesteps",
        "512",
        "--model-target",
        "forward",
        "--save-model",
    )
    run_dir = only_run_dir(tmp_path)
    assert {"agent.pt", "external_model.pt", "args.json"} <= {p.name for p in run_dir.iterdir()}
    model = ExternalModel.load(run_dir / "external_model.pt")
    # the model saved is the model the run evaluated last: its error on the last phase's held-out set, worked out
    # here without the run's evaluation code, is the last eval_loss logged
    data, _ = heldout_set("ColorDoorKey-6x6-v0", ["red", "blue"], 1, "forward", num_steps=64, episode_steps=80)
    obs, actions = torch.tensor(data["obs"]), torch.tensor(data["actions"])
    error = ((model.predict(obs, actions) - torch.tensor(data["next_obs"])) ** 2).mean().item()
    (last_step, last_error) = read_scalars(run_dir)["external_model/eval_loss"][-1]
    assert last_step == 512 and error == pytest.approx(last_error, rel=1e-5)
    env = OneHotFlatObs(gym.make("ColorDoorKey-6x6-v0"))
    obs = torch.tensor(np.stack([env.reset(seed=s)[0] for s in range(4)]))
    agent = Agent(obs.shape[1], 7, columns=view_columns("ColorDoorKey-6x6-v0"))  # the run's first layers
    agent.load_state_dict(torch.load(run_dir / "agent.pt"))
    assert agent.get_action_and_value(obs)[0].shape == (4,)


@pytest.mark.parametrize("target", ["key_distance", "agent_dir"])
def test_info_target_model(tmp_path, target):
    run(
        tmp_path,
        *SMALL,
        "--env",
        "ColorDoorKey-6x6",
        "--total-timesteps",
        "1024",
        "--model-target",
        target,
        "--model-gaussian",
    )
    scalars = read_scalars(only_run_dir(tmp_path))
    assert np.isfinite([v for _, v in scalars["external_model/eval_loss"]]).all()
    if target == "key_distance":  # a target the colour change moves: how much of each rollout it moves
        shares = [v for _, v in scalars["external_model/rollout_changed_share"]]
        assert len(shares) == 2 and all(0 <= v <= 1 for v in shares) and max(shares) > 0  # eval every 2 of 4 iterations
    else:
        assert "external_model/rollout_changed_share" not in scalars


def test_minigrid_id_runs(tmp_path):
    run(tmp_path, *SMALL, "--env", "MiniGrid-Empty-5x5-v0", "--total-timesteps", "512")
    scalars = read_scalars(only_run_dir(tmp_path))
    assert {v for _, v in scalars["charts/phase"]} == {0}
    assert len(scalars["charts/episodic_return"]) > 0  # 100-step episodes end


def test_capture_video(tmp_path):
    run(tmp_path, *SMALL, "--env", "ColorDoorKey-6x6", "--total-timesteps", "512", "--capture-video")
    assert list((only_run_dir(tmp_path) / "videos").glob("*.mp4"))


@pytest.mark.slow
@pytest.mark.parametrize("key", by_reference(["ppo.py"]))
def test_same_seed_gives_identical_scalars(tmp_path, shared_run, key):
    """The reference run (forked from the test process) and the same flags in a fresh interpreter (another hash
    seed): the same scalars; another seed: others."""
    script, flags = reference(key)
    for name, seed in (("same", []), ("other", ["--seed", "4"])):
        (tmp_path / name).mkdir()
        run(tmp_path / name, *flags, *seed, script=script, fresh=not seed)
    logs = []
    for run_dir in (shared_run(script, *flags), only_run_dir(tmp_path / "same"), only_run_dir(tmp_path / "other")):
        logs.append(read_scalars(run_dir))
        logs[-1].pop("charts/SPS")
    assert logs[0] == logs[1]
    assert logs[2]["losses/value_loss"] != logs[0]["losses/value_loss"]


BAD_INPUT = [
    (["--env", "ColorDoorKey-7x7"], "unknown env 'ColorDoorKey-7x7'; known names: ColorDoorKey,"),
    (["--correct-key-colors", "red", "pink"], "unknown colour 'pink'"),
    (["--num-minibatches", "3"], "not divisible by --num-minibatches=3"),
    (["--num-envs", "0"], "--num-envs must be positive"),
    (["--total-timesteps=-5"], "--total-timesteps must be positive"),
    (["--change-steps", "600", "300", "--correct-key-colors", "red", "blue", "red"], "strictly increasing"),
    (["--total-timesteps", "2048", "--change-steps", "5000"], "must lie in (0, total-timesteps=2048)"),
    (["--change-steps", "500", "--correct-key-colors", "red", "blue", "red"], "1 change step(s) make 2 phase(s)"),
    (["--env", "MiniGrid-Empty-5x5-v0", "--model-target", "key_distance"], "needs a ColorDoorKey env"),
    (["--total-timesteps", "100"], "smaller than one batch"),
    (["--model-dropout", "1.0"], "--model-dropout must be a finite number in [0, 1), got 1.0"),
    (["--eval-episode-steps", "0"], "--eval-episode-steps must be positive"),
    (["--model-hidden-sizes", "256", "0"], "--model-hidden-sizes must be positive sizes"),
    (["--env", "MiniGrid-Empty-5x5-v0", "--vector-env", "batched"], "--vector-env batched needs a ColorDoorKey env"),
    (["--vector-env", "batched", "--capture-video"], "--capture-video needs --vector-env minigrid"),
    (["--checkpoint-every=-1"], "--checkpoint-every must be a finite number in [0, inf)"),
]


@pytest.mark.parametrize("flags, message", BAD_INPUT)
def test_bad_input_is_rejected_with_a_message_naming_it(flags, message):
    import tyro

    from algos import ppo

    with pytest.raises(ValueError) as error:
        check_and_fill(tyro.cli(ppo.Args, args=flags), ppo.RANGES, ppo.fill_in_defaults)
    assert message in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("flags, message", [BAD_INPUT[0], BAD_INPUT[6]])
def test_bad_input_fails_fast_with_one_line(tmp_path, flags, message):
    """The command-line path of the cases above, in a fresh interpreter: one line on stderr, a non-zero exit, no run
    started."""
    proc = run(tmp_path, *flags, check=False, fresh=True)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1 and lines[0].startswith("error: ")
    assert message in lines[0]
    assert not (tmp_path / "runs").exists()  # nothing started


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--model-target", "colour"], "invalid choice 'colour' for argument '--model-target'. Expected one of"),
        (["--num-envs", "abc"], "Error parsing --num-envs: invalid literal for int() with base 10: 'abc'"),
        (["--ent-coeff", "0.1"], "Unrecognized options: --ent-coeff, 0.1; Perhaps you meant: --ent-coef FLOAT"),
    ],
)
def test_flags_that_do_not_parse_fail_with_one_line(tmp_path, flags, message):
    """What tyro refuses (an unknown flag, a value of the wrong type, a choice not offered): its framed message as
    one line, a non-zero exit, no run started; --help still prints whole."""
    proc = run(tmp_path, *flags, check=False)
    assert proc.returncode != 0 and proc.stderr.strip().splitlines() == [proc.stderr.strip()], proc.stderr
    assert proc.stderr.startswith("error: " + message), proc.stderr
    assert not (tmp_path / "runs").exists()
    helped = run(tmp_path, "--help", check=False)
    assert helped.returncode == 0 and "--ent-coef FLOAT" in helped.stdout and not helped.stderr


def test_a_flag_that_does_not_parse_is_one_plain_line_where_tyro_colours_its_frame(monkeypatch):
    """On a terminal tyro colours its frame (ANSI codes, here forced): the line keeps the words, without the codes,
    the frame, the flag's help text or the pointer to --help."""
    import tyro._fmtlib

    from algos import ppo
    from common.runs import parse_flags

    monkeypatch.setattr(tyro._fmtlib, "_FORCE_ANSI", True)
    with pytest.raises(ValueError) as error:
        parse_flags(ppo.Args, ["--num-envs", "abc"])
    assert str(error.value) == "Error parsing --num-envs: invalid literal for int() with base 10: 'abc'"


POI_FILES = [
    "algos/ppo_poi_disagreement.py",
    "algos/ppo_poi_ensemble.py",
    "algos/ppo_poi_grad.py",
    "algos/ppo_poi_progress.py",
    "algos/ppo_poi_policy.py",
]
POI_METRICS = {
    "poi/mean",
    "poi/max",
    "poi/intrinsic_reward_mean",
    "poi/eval_mean",
    "poi/int_weight",
    "losses/int_value_loss",
}


POI_KEYS = [script.removeprefix("algos/") for script in POI_FILES]


@pytest.mark.parametrize(
    "target, key",
    [pytest.param("forward", key, id=f"forward-{key}") for key in POI_KEYS]
    + [pytest.param("key_distance", key, id=f"key_distance-{key}", marks=group(key)) for key in POI_KEYS],
)
def test_poi_files_log_everything_ppo_logs_and_poi(tmp_path, shared_run, target, key):
    """With the key-distance model the file's reference run (tests/reference.py) is read; with the forward model a
    run of two iterations, saved with --save-model. Its held-out sets are not topped up with door-opening
    transitions (--eval-changed-min 0: thousands of random steps per phase), which the POI files do not read:
    common.heldout's search runs in test_save_model_then_load_and_predict and tests/test_heldout.py."""
    script, flags = reference(key)
    if target == "forward":
        flags = (*SMALL, "--env", "ColorDoorKey-6x6", "--total-timesteps", "512", "--model-target", "forward")
        run(tmp_path, *flags, "--eval-changed-min", "0", "--save-model", script=script)
        run_dir, iterations = only_run_dir(tmp_path), 2
    else:
        run_dir, iterations = shared_run(script, *flags), 7
    scalars = read_scalars(run_dir)
    assert (DESIGN_METRICS - {"charts/episodic_return", "charts/episodic_length"}) | POI_METRICS <= set(scalars)
    poi = [v for _, v in scalars["poi/mean"]]
    assert len(poi) == iterations and np.isfinite(poi).all() and min(poi) > 0
    if script != "algos/ppo_poi_policy.py":  # its interest is the observation's, not the transition's
        assert len(scalars["poi/by_action/turn"]) == len(scalars["poi/by_action/forward"]) == iterations
    assert all(m >= p for (_, m), p in zip(scalars["poi/max"], poi))


@pytest.mark.slow
def test_reward_flags_change_the_update(tmp_path, script="algos/ppo_poi_ensemble.py"):
    """The reward flags and the mixing they set are the same code in every POI file; one file is run.
    On MiniGrid-Empty-5x5 a random policy is rewarded within the first rollout. --int-coef mixes the
    intrinsic advantage into the first update when the interest counts from the start (--int-after-return 0);
    by default it waits for a mean return of 0.8 over 100 episodes, which this run never has, so it trains as
    with --int-coef 0; --no-task-reward changes the run once a task reward comes (which is still logged),
    and leaves --ext-coef without effect (the task advantage is then only critic noise);
    with both weights 0 nothing is left to follow: the policy loss is 0. The weights mix as shares of their
    sum, so only their ratio counts, and with the intrinsic weight 0 --ext-coef changes nothing (the update
    keeps PPO's scale against the entropy bonus). --int-scale reward divides the same interest by another std."""
    flags = (*SMALL, "--env", "MiniGrid-Empty-5x5-v0", "--total-timesteps", "768", "--seed", "3")

    def scalars(*extra):
        folder = tmp_path / ("_".join(extra) or "defaults")
        folder.mkdir()
        run(folder, *flags, *extra, script=script)
        return read_scalars(only_run_dir(folder))

    def policy_losses(logged):
        return [v for _, v in logged["losses/policy_loss"]]

    from_start = scalars("--int-after-return", "0")
    assert max(v for _, v in from_start["charts/episodic_return"]) > 0  # task rewards came
    assert {v for _, v in from_start["poi/int_weight"]} == {1.0}
    assert policy_losses(scalars("--int-after-return", "0", "--int-coef", "0.5"))[0] != policy_losses(from_start)[0]
    assert policy_losses(scalars("--int-after-return", "0", "--int-coef", "3", "--ext-coef", "6")) == policy_losses(
        from_start
    )
    by_reward = scalars("--int-after-return", "0", "--int-scale", "reward")  # the same interest, another divisor
    assert by_reward["poi/mean"][0] == from_start["poi/mean"][0]
    assert by_reward["poi/intrinsic_reward_mean"][0] != from_start["poi/intrinsic_reward_mean"][0]
    assert policy_losses(by_reward)[0] != policy_losses(from_start)[0]
    gated = scalars()
    assert {v for _, v in gated["poi/int_weight"]} == {0.0}
    assert policy_losses(gated) == policy_losses(scalars("--int-coef", "0"))
    assert policy_losses(gated) == policy_losses(scalars("--ext-coef", "0.5"))
    no_task = scalars("--no-task-reward")
    assert max(v for _, v in no_task["charts/episodic_return"]) > 0
    assert no_task["losses/value_loss"] != gated["losses/value_loss"]
    assert {v for _, v in no_task["poi/int_weight"]} == {1.0}  # nothing to wait for
    # without a task reward its advantage is critic noise and carries no weight, whatever --ext-coef says
    assert policy_losses(scalars("--no-task-reward", "--ext-coef", "5")) == policy_losses(no_task)
    assert policy_losses(scalars("--int-coef", "0", "--ext-coef", "0")) == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("key", by_reference(["ppo.py", "ppo_poi_ensemble.py"]))
def test_batched_vector_env_gives_the_same_run(tmp_path, shared_run, key):
    """The batched env is step-equal to the minigrid one, so a whole run logs the same scalars: the reference run
    (tests/reference.py, batched) and the same flags with --vector-env minigrid (the last value of a flag counts)."""
    script, flags = reference(key)
    assert flags[flags.index("--vector-env") + 1] == "batched"
    run(tmp_path, *flags, "--vector-env", "minigrid", script=script)
    logs = []
    for run_dir in (shared_run(script, *flags), only_run_dir(tmp_path)):
        scalars = read_scalars(run_dir)
        scalars.pop("charts/SPS")
        logs.append(scalars)
    assert logs[0] == logs[1]


EVALUATED = [
    "ppo.py",
    "ppo_poi_replay.py",
    *POI_KEYS,
    "ppo_poi_progress.py --model-data uniform",  # the error interest, and the buffer's draws
    "ppo_poi_progress.py --interest noise",  # draws from a generator of its own, the held-out set's from another
    "ppo_poi_diayn.py",
    "ppo_poi_emb.py",
]


@pytest.mark.parametrize("key", by_reference(EVALUATED))
def test_evaluation_and_logging_never_change_training(tmp_path, shared_run, key):
    """Evaluating every iteration (the reference run, tests/reference.py: the held-out losses, and poi/eval_mean
    drawing MC-dropout masks or gradient signs) or almost never: the same seed trains the same run."""
    script, flags = reference(key)
    run(tmp_path, *flags, "--eval-every", "1000", script=script)  # the last value of a flag counts
    logs = []
    for run_dir in (shared_run(script, *flags), only_run_dir(tmp_path)):
        scalars = read_scalars(run_dir)
        logs.append({k: v for k, v in scalars.items() if k.startswith(("losses/", "poi/mean", "external_model/train"))})
    assert len(logs[0]["losses/policy_loss"]) == 7 and logs[0] == logs[1]
    if "--interest noise" in key:  # the file draws the noise interest: 128 uniform draws a rollout
        assert all(0.4 < value < 0.6 for _, value in logs[0]["poi/mean"])


def test_a_terminated_run_exits_with_one_line_and_keeps_its_logs(tmp_path, signal_name="SIGTERM", code=143):
    """SIGTERM (a sweep's timeout, `kill`) to a forked run (tests/forked.py); Ctrl-C and resuming:
    tests/test_checkpoint.py."""
    import signal

    cmd = [
        str(ROOT / "algos/ppo.py"),
        "--runs-dir",
        str(tmp_path / "runs"),
        *SMALL,
        "--env",
        "ColorDoorKey-6x6",
        "--model-target",
        "key_distance",
        "--total-timesteps",
        "10240000",
    ]
    process = forked.start(cmd, tmp_path)
    assert process.stdout.readline().startswith("run folder: ")
    for _ in range(3):  # three iterations logged
        assert process.stdout.readline().startswith("step")
    process.send_signal(getattr(signal, signal_name))
    _, err = process.communicate(timeout=60)
    lines = err.strip().splitlines()
    assert process.returncode == code and len(lines) == 1 and f"exit {code}" in lines[0], err
    run_dir = only_run_dir(tmp_path)
    assert len(read_scalars(run_dir)["losses/policy_loss"]) >= 3 and not (run_dir / "finished.json").exists()


@pytest.mark.parametrize(
    "flags, quantity",
    [
        (["--model-learning-rate", "1e30"], "the external model's loss is"),
        (["--learning-rate", "1e30"], "the PPO loss"),
    ],
)
def test_a_non_finite_loss_stops_the_run_with_one_line_naming_it(tmp_path, flags, quantity):
    proc = run(
        tmp_path,
        *SMALL,
        "--env",
        "ColorDoorKey-6x6",
        "--model-target",
        "key_distance",
        "--total-timesteps",
        "4096",
        *flags,
        check=False,
    )
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: " + quantity), proc.stderr
    assert "after global step" in lines[0] and not (only_run_dir(tmp_path) / "finished.json").exists()
