"""Every discrete file's check_args rejects what a flag's meaning rules out, in-process, with
one line naming the flag (the subprocess path is tested in test_smoke)."""

import importlib
import math
import re

import pytest

from common.checks import check_range

DISCRETE = ["ppo", "ppo_poi_replay", "ppo_poi_disagreement", "ppo_poi_ensemble", "ppo_poi_grad", "ppo_poi_progress",
            "ppo_poi_diayn", "ppo_poi_emb", "ppo_poi_policy"]
POI = ["ppo_poi_disagreement", "ppo_poi_ensemble", "ppo_poi_grad", "ppo_poi_progress", "ppo_poi_emb", "ppo_poi_policy"]
BAD = [
    ({"learning_rate": math.nan}, "--learning-rate must be a finite number in (0, inf)"),
    ({"learning_rate": -1.0}, "--learning-rate must be a finite number in (0, inf)"),
    ({"model_learning_rate": math.nan}, "--model-learning-rate"),
    ({"ent_coef": math.nan}, "--ent-coef must be a finite number in [0, inf)"),
    ({"gamma": 1.5}, "--gamma must be a finite number in (0, 1]"),
    ({"gamma": 0.0}, "--gamma must be a finite number in (0, 1]"),
    ({"gae_lambda": -0.1}, "--gae-lambda"),
    ({"clip_coef": 0.0}, "--clip-coef"),
    ({"max_grad_norm": math.inf}, "--max-grad-norm"),
    ({"seed": -1}, "--seed must be a finite number in [0, inf), got -1"),
    ({"target_kl": 0.0}, "--target-kl"),
    ({"eval_changed_min": -1}, "--eval-changed-min must be a finite number in [0, inf), got -1"),
    ({"correct_key_colors": ("green", "purple")}, "correct key colour 'green' is not among the keys ('red', 'blue')"),
]


@pytest.mark.parametrize("name", DISCRETE)
@pytest.mark.parametrize("flags, message", BAD)
def test_check_args_rejects_out_of_domain_flags(name, flags, message):
    module = importlib.import_module(f"algos.{name}")
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        module.check_args(module.Args(**flags))


@pytest.mark.parametrize("name", POI)
@pytest.mark.parametrize("flags", [{"int_coef": math.nan}, {"ext_coef": -1.0}, {"int_gamma": 1.01},
                                   {"int_scale_decay": 1.0}])  # fmt: skip
def test_poi_files_reject_bad_reward_flags(name, flags):
    module = importlib.import_module(f"algos.{name}")
    with pytest.raises(ValueError, match="must be a finite number"):
        module.check_args(module.Args(**flags))


@pytest.mark.parametrize("name", DISCRETE)
def test_defaults_and_edges_pass(name):
    module = importlib.import_module(f"algos.{name}")
    module.check_args(module.Args())
    module.check_args(module.Args(gamma=1.0, gae_lambda=0.0, ent_coef=0.0, seed=0))


def test_check_range_edges():
    class A:
        x = 1.0

    check_range(A, "x", 0.0, 1.0)
    with pytest.raises(ValueError, match=r"--x must be a finite number in \[0, 1\), got 1.0"):
        check_range(A, "x", 0.0, 1.0, high_open=True)
    A.x = math.nan
    with pytest.raises(ValueError):
        check_range(A, "x")


@pytest.mark.parametrize("flags", [{"diayn_coef": math.nan}, {"ext_coef": -1.0}, {"disc_learning_rate": 0.0},
                                   {"skill_temperature": 0.0}])  # fmt: skip
def test_diayn_rejects_bad_skill_flags(flags):
    module = importlib.import_module("algos.ppo_poi_diayn")
    with pytest.raises(ValueError, match="must be a finite number"):
        module.check_args(module.Args(**flags))


@pytest.mark.parametrize("name, flags", [("ppo_poi_disagreement", {"mc_samples": 1}), ("ppo_poi_ensemble", {"ensemble_size": 1})])
def test_interest_fields_need_two_samples_to_disagree(name, flags):
    module = importlib.import_module(f"algos.{name}")
    with pytest.raises(ValueError):
        module.check_args(module.Args(**flags))


def test_replay_buffer_holds_at_least_one_rollout():
    module = importlib.import_module("algos.ppo_poi_replay")
    with pytest.raises(ValueError, match="--replay-size=1024 must hold at least one rollout"):
        module.check_args(module.Args(replay_size=1024))


@pytest.mark.parametrize("name, flags, message", [
    ("sac_forward_model", {"total_timesteps": 500, "learning_starts": 1000}, "--learning-starts must be in [0, total-timesteps=500)"),
    ("sac_forward_model", {"q_lr": math.nan}, "--q-lr must be a finite number in (0, inf)"),
    ("sac_forward_model", {"tau": 0.0}, "--tau must be a finite number in (0, 1]"),
    ("ppo_continuous_poi_ensemble", {"gamma": 1.5}, "--gamma must be a finite number in (0, 1]"),
    ("ppo_continuous_poi_ensemble", {"learning_rate": math.nan}, "--learning-rate must be a finite number in (0, inf)"),
    ("ppo_continuous_poi_ensemble", {"seed": -1}, "--seed must be a finite number in [0, inf)"),
])  # fmt: skip
def test_continuous_files_check_their_flags(name, flags, message):
    module = importlib.import_module(f"algos.{name}")
    module.check_args(module.Args())
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        module.check_args(module.Args(**flags))


def test_runtime_sizes_are_not_flags():
    import tyro

    module = importlib.import_module("algos.ppo")
    with pytest.raises(SystemExit):
        tyro.cli(module.Args, args=["--batch-size", "4096"])


@pytest.mark.parametrize("name", DISCRETE)
def test_model_target_auto_is_the_envs_studied_target(name):
    """The default target: the key distance where the env reports it, the forward model elsewhere;
    a target given is kept."""
    module = importlib.import_module(f"algos.{name}")
    for env, resolved in [("ColorDoorKey", "key_distance"), ("ColorDoorKey-6x6", "key_distance"),
                          ("MiniGrid-Empty-5x5-v0", "forward")]:  # fmt: skip
        args = module.Args(env=env)
        module.check_args(args)
        assert args.model_target == resolved
    args = module.Args(env="ColorDoorKey-6x6", model_target="forward")
    module.check_args(args)
    assert args.model_target == "forward"


@pytest.mark.parametrize("target, given, resolved", [
    ("key_distance", "auto", "error"), ("agent_dir", "auto", "error"), ("forward", "auto", "progress"),
    ("forward", "error", "error"), ("key_distance", "progress", "progress"), ("forward", "noise", "noise"),
])  # fmt: skip
def test_progress_interest_auto_follows_the_target(target, given, resolved):
    module = importlib.import_module("algos.ppo_poi_progress")
    args = module.Args(env="ColorDoorKey-6x6", model_target=target, interest=given)
    module.check_args(args)
    assert args.interest == resolved
    args = module.Args(env="MiniGrid-Empty-5x5-v0")  # no info there: the forward model, so progress
    module.check_args(args)
    assert (args.model_target, args.interest) == ("forward", "progress")


def test_a_total_that_is_not_a_whole_number_of_batches_is_noted_in_one_line(capsys):
    from common.checks import note_whole_batches

    note_whole_batches(20000, 2048)
    assert capsys.readouterr().err == ("note: --total-timesteps 20000 is not a whole number of batches of 2048: the run "
                                       "takes 18432 steps (9 iterations)\n")  # fmt: skip
    note_whole_batches(20480, 2048)
    assert capsys.readouterr().err == ""
