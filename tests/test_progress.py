"""The progress and error interests of algos/ppo_poi_progress.py react to a change of the world."""

import pytest
import torch

from algos import ppo_poi_progress as progress
from common.tb import read_scalars
from tests.test_smoke import SMALL, only_run_dir, run
from common.checks import check_and_fill


def interest_trace(interest, switch=40, rollouts=60, seed=0):
    """Train the file's model on a toy regression target that switches at rollout `switch`, as the
    file's loop does (interest before or after the update, then the lagged copy's update);
    returns the mean interest of each rollout."""
    torch.manual_seed(seed)
    obs = (torch.rand(400, 20) < 0.3).float()
    old_target, new_target = obs @ torch.randn(20, 1), obs @ torch.randn(20, 1)
    model = progress.ExternalModel(20, 7, "key_distance", hidden_sizes=(64, 64), dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    lagged = progress.LaggedModel(model, tau=0.1)
    actions = torch.zeros(256, dtype=torch.long)
    means = []
    for rollout in range(rollouts):
        idx = torch.randint(len(obs), (256,))
        targets = (old_target if rollout < switch else new_target)[idx]
        loss_before = progress.transition_losses(model, obs[idx], actions, targets) if interest == "error" else None
        progress.train_external_model(model, optimizer, obs[idx], actions, targets, epochs=4, batch_size=64)
        values = progress.interest_values(interest, model, lagged, obs[idx], actions, targets, loss_before=loss_before)
        lagged.update(model)
        means.append(values.mean().item())
    return torch.tensor(means)


@pytest.mark.parametrize("interest", ["progress", "error"])
def test_interest_rises_after_the_target_switches(interest):
    trace = interest_trace(interest)
    before, after = trace[30:40].mean(), trace[40:45].mean()
    assert after > 5 * before.abs() and after > 0


def test_progress_is_the_lagged_loss_minus_the_current_loss():
    torch.manual_seed(1)
    model = progress.ExternalModel(6, 7, "forward", hidden_sizes=(16,), dropout=0.5)
    lagged = progress.LaggedModel(model, tau=0.5)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1)
    obs, actions, targets = torch.rand(5, 6), torch.randint(7, (5,)), torch.rand(5, 6)
    model.eval(), lagged.model.eval()  # the interest is computed with dropout off
    expected = ((lagged.model(obs, actions)[0] - targets) ** 2).mean(-1) - (
        (model(obs, actions)[0] - targets) ** 2
    ).mean(-1)
    model.train()
    torch.testing.assert_close(progress.interest_values("progress", model, lagged, obs, actions, targets), expected)
    assert model.training  # left as it was
    before = [p.clone() for p in lagged.model.parameters()]
    lagged.update(model)  # halfway towards the model's weights
    for b, p, q in zip(before, lagged.model.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(p, 0.5 * b + 0.5 * q)
    # with distinct inputs and their places (a held-out set), the same values per transition
    inverse = torch.tensor([0, 1, 1, 0, 2])
    per_transition = progress.interest_values("error", model, lagged, obs[inverse], actions[inverse], targets)
    torch.testing.assert_close(
        progress.interest_values("error", model, lagged, obs[:3], actions[:3], targets, inverse), per_transition
    )


def test_while_the_interest_is_gated_off_the_intrinsic_reward_leaves_the_task_update_alone(tmp_path):
    """The two interests give different intrinsic rewards, hence different intrinsic value losses; while the
    gate is closed (it waits for a return this short run never has) the task's losses must not differ at all:
    the intrinsic value head trains neither the task critic's body nor, through a shared clip, its step size."""
    logged = {}
    for interest in ("error", "progress"):
        (tmp_path / interest).mkdir()
        run(
            tmp_path / interest,
            *SMALL,
            "--env",
            "ColorDoorKey-6x6",
            "--total-timesteps",
            "768",
            "--seed",
            "3",
            "--interest",
            interest,
            script="algos/ppo_poi_progress.py",
        )
        logged[interest] = read_scalars(only_run_dir(tmp_path / interest))
    error, progress_ = logged["error"], logged["progress"]
    assert {v for _, v in error["poi/int_weight"]} == {0.0}
    assert error["losses/int_value_loss"] != progress_["losses/int_value_loss"]
    for key in ("losses/value_loss", "losses/policy_loss", "losses/entropy", "losses/approx_kl"):
        assert error[key] == progress_[key], key


def test_the_noise_control_is_uniform_and_independent_of_the_model_the_data_and_the_global_rng():
    torch.manual_seed(0)
    model = progress.ExternalModel(20, 7, "key_distance", hidden_sizes=(16,), dropout=0.0)
    obs, actions = (torch.rand(5000, 20) < 0.3).float(), torch.zeros(5000, dtype=torch.long)

    def draw(targets):
        generator = torch.Generator().manual_seed(3)
        return progress.interest_values("noise", model, None, obs, actions, targets, generator=generator)

    rng = torch.get_rng_state()
    values = draw(torch.zeros(5000, 1))
    assert torch.equal(torch.get_rng_state(), rng)
    assert torch.equal(values, draw(10 * torch.randn(5000, 1)))
    assert values.min() >= 0 and values.max() < 1 and abs(values.mean().item() - 0.5) < 0.02


def test_a_buffer_smaller_than_a_rollout_is_rejected_in_one_line():
    import tyro

    args = tyro.cli(progress.Args, args=["--model-data", "uniform", "--replay-size", "1000"])
    with pytest.raises(ValueError, match=r"^--replay-size=1000 must hold at least one rollout \(2048 transitions\)$"):
        check_and_fill(args, progress.RANGES, progress.fill_in_defaults)
    check_and_fill(
        tyro.cli(progress.Args, args=["--replay-size", "1000"]), progress.RANGES, progress.fill_in_defaults
    )  # no buffer: the size is not used


def test_the_uniform_buffer_trains_the_model_on_the_last_replay_size_transitions():
    """--model-data uniform: every minibatch comes from the most recent `size` transitions added."""
    torch.manual_seed(0)
    buffer = progress.ReplayBuffer(6, 4, 1, "cpu")
    for start in (0, 4, 8):  # 12 transitions through 6 slots: 6..11 remain
        buffer.add(torch.ones(4, 4), torch.arange(start, start + 4), torch.zeros(4, 1))
    drawn = []
    model = progress.ExternalModel(4, 12, "key_distance", hidden_sizes=(8,), dropout=0.0)
    model.per_sample_loss = lambda obs, actions, targets: (
        drawn.extend(actions.tolist()) or torch.ones(len(obs), requires_grad=True)
    )
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.0)
    progress.train_from_replay(model, optimizer, buffer, 50, 8, 0.0, 0.0, prioritised=False)
    assert len(drawn) == 400 and set(drawn) == set(range(6, 12))


def test_excess_error_without_a_gaussian_model_is_rejected_in_one_line():
    import tyro

    with pytest.raises(ValueError, match=r"^--interest excess needs --model-gaussian \(the variance it subtracts"):
        check_and_fill(
            tyro.cli(progress.Args, args=["--interest", "excess"]), progress.RANGES, progress.fill_in_defaults
        )
    check_and_fill(
        tyro.cli(progress.Args, args=["--interest", "excess", "--model-gaussian"]),
        progress.RANGES,
        progress.fill_in_defaults,
    )
