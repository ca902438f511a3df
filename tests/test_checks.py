"""Every discrete file's check_args rejects what a flag's meaning rules out, in-process, with
one line naming the flag (the subprocess path is tested in test_smoke)."""

import importlib
import math
import re

import pytest

from common.checks import check_and_fill, check_range

DISCRETE = [
    "ppo",
    "ppo_poi_replay",
    "ppo_poi_disagreement",
    "ppo_poi_ensemble",
    "ppo_poi_grad",
    "ppo_poi_progress",
    "ppo_poi_diayn",
    "ppo_poi_emb",
    "ppo_poi_policy",
]
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
    ({"seed": -1}, "--seed must be a finite number in [0, 4294967295], got -1"),
    ({"seed": 2**32}, "--seed must be a finite number in [0, 4294967295], got 4294967296"),
    ({"target_kl": 0.0}, "--target-kl"),
    ({"eval_changed_min": -1}, "--eval-changed-min must be a finite number in [0, inf), got -1"),
    ({"correct_key_colors": ("green", "purple")}, "correct key colour 'green' is not among the keys ('red', 'blue')"),
    ({"model_faithful": True}, "--model-faithful needs --model-gaussian"),
]


@pytest.mark.parametrize("name", DISCRETE)
@pytest.mark.parametrize("flags, message", BAD)
def test_check_args_rejects_out_of_domain_flags(name, flags, message):
    module = importlib.import_module(f"algos.{name}")
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        check_and_fill(module.Args(**flags), module.RANGES, module.fill_in_defaults)


@pytest.mark.parametrize("name", POI)
@pytest.mark.parametrize(
    "flags", [{"int_coef": math.nan}, {"ext_coef": -1.0}, {"int_gamma": 1.01}, {"int_scale_decay": 1.0}]
)
def test_poi_files_reject_bad_reward_flags(name, flags):
    module = importlib.import_module(f"algos.{name}")
    with pytest.raises(ValueError, match="must be a finite number"):
        check_and_fill(module.Args(**flags), module.RANGES, module.fill_in_defaults)


@pytest.mark.parametrize("name", DISCRETE)
def test_defaults_and_edges_pass(name):
    module = importlib.import_module(f"algos.{name}")
    check_and_fill(module.Args(), module.RANGES, module.fill_in_defaults)
    check_and_fill(module.Args(gamma=1.0, gae_lambda=0.0, ent_coef=0.0, seed=0), module.RANGES, module.fill_in_defaults)
    check_and_fill(module.Args(seed=2**32 - 1), module.RANGES, module.fill_in_defaults)  # numpy's largest seed


def test_check_range_edges():
    class A:
        x = 1.0

    check_range(A, "x", 0.0, 1.0)
    with pytest.raises(ValueError, match=r"--x must be a finite number in \[0, 1\), got 1.0"):
        check_range(A, "x", 0.0, 1.0, high_open=True)
    A.x = math.nan
    with pytest.raises(ValueError):
        check_range(A, "x")
    A.x = 5
    with pytest.raises(ValueError, match=r"--x must be a finite number in \[0, 1\], got 5"):  # int bounds print too
        check_range(A, "x", 0, 1)


@pytest.mark.parametrize(
    "flags", [{"diayn_coef": math.nan}, {"ext_coef": -1.0}, {"disc_learning_rate": 0.0}, {"skill_temperature": 0.0}]
)
def test_diayn_rejects_bad_skill_flags(flags):
    module = importlib.import_module("algos.ppo_poi_diayn")
    with pytest.raises(ValueError, match="must be a finite number"):
        check_and_fill(module.Args(**flags), module.RANGES, module.fill_in_defaults)


@pytest.mark.parametrize(
    "name, flags", [("ppo_poi_disagreement", {"mc_samples": 1}), ("ppo_poi_ensemble", {"ensemble_size": 1})]
)
def test_interest_fields_need_two_samples_to_disagree(name, flags):
    module = importlib.import_module(f"algos.{name}")
    with pytest.raises(ValueError):
        check_and_fill(module.Args(**flags), module.RANGES, module.fill_in_defaults)


def test_replay_buffer_holds_at_least_one_rollout():
    module = importlib.import_module("algos.ppo_poi_replay")
    with pytest.raises(ValueError, match="--replay-size=1024 must hold at least one rollout"):
        check_and_fill(module.Args(replay_size=1024), module.RANGES, module.fill_in_defaults)


@pytest.mark.parametrize(
    "name, flags, message",
    [
        (
            "sac_forward_model",
            {"total_timesteps": 500, "learning_starts": 1000},
            "--learning-starts must be in [0, total-timesteps=500)",
        ),
        ("sac_forward_model", {"q_lr": math.nan}, "--q-lr must be a finite number in (0, inf)"),
        ("sac_forward_model", {"tau": 0.0}, "--tau must be a finite number in (0, 1]"),
        ("ppo_continuous_poi_ensemble", {"gamma": 1.5}, "--gamma must be a finite number in (0, 1]"),
        (
            "ppo_continuous_poi_ensemble",
            {"learning_rate": math.nan},
            "--learning-rate must be a finite number in (0, inf)",
        ),
        ("ppo_continuous_poi_ensemble", {"seed": -1}, "--seed must be a finite number in [0, 4294967295]"),
        ("sac_forward_model", {"seed": 2**32}, "--seed must be a finite number in [0, 4294967295]"),
    ],
)
def test_continuous_files_check_their_flags(name, flags, message):
    module = importlib.import_module(f"algos.{name}")
    check_and_fill(module.Args(), module.RANGES, module.fill_in_defaults)
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        check_and_fill(module.Args(**flags), module.RANGES, module.fill_in_defaults)


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
    for env, resolved in [
        ("ColorDoorKey", "key_distance"),
        ("ColorDoorKey-6x6", "key_distance"),
        ("MiniGrid-Empty-5x5-v0", "forward"),
    ]:
        args = module.Args(env=env)
        check_and_fill(args, module.RANGES, module.fill_in_defaults)
        assert args.model_target == resolved
    args = module.Args(env="ColorDoorKey-6x6", model_target="forward")
    check_and_fill(args, module.RANGES, module.fill_in_defaults)
    assert args.model_target == "forward"


@pytest.mark.parametrize(
    "target, given, resolved",
    [
        ("key_distance", "auto", "error"),
        ("agent_dir", "auto", "error"),
        ("forward", "auto", "progress"),
        ("forward", "error", "error"),
        ("key_distance", "progress", "progress"),
        ("forward", "noise", "noise"),
    ],
)
def test_progress_interest_auto_follows_the_target(target, given, resolved):
    module = importlib.import_module("algos.ppo_poi_progress")
    args = module.Args(env="ColorDoorKey-6x6", model_target=target, interest=given)
    check_and_fill(args, module.RANGES, module.fill_in_defaults)
    assert args.interest == resolved
    args = module.Args(env="MiniGrid-Empty-5x5-v0")  # no info there: the forward model, so progress
    check_and_fill(args, module.RANGES, module.fill_in_defaults)
    assert (args.model_target, args.interest) == ("forward", "progress")


def test_a_total_that_is_not_a_whole_number_of_batches_is_noted_in_one_line(capsys):
    from common.checks import note_whole_batches

    note_whole_batches(20000, 2048)
    assert capsys.readouterr().err == (
        "note: --total-timesteps 20000 is not a whole number of batches of 2048: the run "
        "takes 18432 steps (9 iterations)\n"
    )
    note_whole_batches(20480, 2048)
    assert capsys.readouterr().err == ""


def test_check_ranges_reads_a_table_of_ranges():
    """A hand-worked table: "positive" for integers and for each of a tuple's, intervals with open and
    closed ends, None passing, and a range that is neither, named."""
    from common.checks import check_ranges

    class A:
        n, sizes, rate, share, kl = 3, (4, 5), 0.5, 1.0, None

    table = {"positive": "n sizes", "(0, 1)": "rate", "[0, 1]": "share", "(0, inf)": "kl"}
    check_ranges(A, table)
    for name, value, message in [
        ("n", 0, "--n must be positive, got 0"),
        ("sizes", (4, 0), "--sizes must be positive sizes"),
        ("sizes", (), "--sizes must be positive sizes"),
        ("rate", 1.0, "--rate must be a finite number in (0, 1)"),
        ("share", 1.5, "--share must be a finite number in [0, 1]"),
        ("kl", 0.0, "--kl must be a finite"),
    ]:
        bad = type("B", (A,), {name: value})
        with pytest.raises(ValueError, match="^" + re.escape(message)):
            check_ranges(bad, table)
    with pytest.raises(ValueError, match="neither 'positive' nor an interval"):
        check_ranges(A, {"0 < x": "rate"})


CHECKED_IN_FILL_IN = {  # numeric flags checked with the flags they depend on, in the file's fill_in_defaults
    "ppo_poi_emb": {"mc_samples", "ensemble_size"},  # each needed only by its --interest-field
    "ppo_poi_diayn": {"mc_samples", "ensemble_size"},
    "sac_forward_model": {"learning_starts"},  # below --total-timesteps
}
CHECKED_IN_ENV_DEFAULTS = {"change_steps"}  # envs.fill_in_env_defaults: increasing, inside the run


@pytest.mark.parametrize("name", DISCRETE + ["ppo_continuous_poi_ensemble", "sac_forward_model"])
def test_every_numeric_flag_has_a_range(name):
    """A flag a number can be wrong for is in the file's RANGES table (or checked with the flags it depends on), and
    every name in the table is a flag: a flag added without a range, or a range left for a flag gone, fails here."""
    import dataclasses
    import typing

    module = importlib.import_module(f"algos.{name}")
    table = set(" ".join(module.RANGES.values()).split())
    hints = typing.get_type_hints(module.Args, include_extras=True)
    flags = {f.name for f in dataclasses.fields(module.Args) if "Suppress" not in str(hints[f.name])}
    numeric = {f for f in flags if re.search(r"\b(int|float)\b", str(hints[f])) and "bool" not in str(hints[f])}
    exempt = CHECKED_IN_FILL_IN.get(name, set()) | CHECKED_IN_ENV_DEFAULTS
    assert numeric - exempt <= table, sorted(numeric - exempt - table)
    assert table <= flags, sorted(table - flags)
