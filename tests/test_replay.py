"""algos/ppo_poi_replay.py: the replay buffer, prioritised sampling and its weights, and a policy that
does not depend on which data the external model trains on."""

import pytest
import torch

from algos import ppo_poi_replay as replay
from common.tb import read_scalars
from tests.test_smoke import SMALL, only_run_dir, run


def filled(priorities, obs_dim=3):
    buffer = replay.ReplayBuffer(len(priorities), obs_dim, 1, "cpu")
    n = len(priorities)
    buffer.add(torch.eye(n, obs_dim), torch.arange(n), torch.arange(n, dtype=torch.float32)[:, None])
    buffer.priorities[:] = torch.tensor(priorities)
    return buffer


def test_buffer_keeps_the_most_recent_and_gives_new_transitions_the_largest_priority():
    buffer = replay.ReplayBuffer(5, 2, 1, "cpu")
    buffer.add(torch.ones(3, 2), torch.tensor([0, 1, 2]), torch.zeros(3, 1))
    assert buffer.count == 3 and torch.equal(buffer.priorities[:3], torch.ones(3))
    buffer.update(torch.tensor([0, 1]), torch.tensor([4.0, 0.5]), floor=0.0)
    buffer.add(torch.zeros(4, 2), torch.tensor([3, 4, 5, 6]), torch.ones(4, 1))  # wraps: overwrites slots 3, 4, 0, 1
    assert buffer.count == 5 and buffer.next == 2
    assert buffer.actions.tolist() == [5, 6, 2, 3, 4]
    assert buffer.priorities.tolist() == [4.0, 4.0, 1.0, 4.0, 4.0]  # the largest so far, 4


def test_prioritised_weights_undo_the_sampling_bias_by_beta():
    buffer = filled([1.0, 3.0])  # alpha 1: P = 1/4, 3/4; N P = 1/2, 3/2
    idx, weights = buffer.sample(200, alpha=1.0, beta=0.5, prioritised=True)
    assert set(idx.tolist()) == {0, 1}
    expected = torch.where(idx == 0, torch.tensor(1.0), torch.tensor(3.0**-0.5))  # (N P)^-beta / (N P_min)^-beta
    torch.testing.assert_close(weights, expected)
    _, flat = buffer.sample(50, alpha=0.0, beta=0.5, prioritised=True)  # alpha 0: uniform, all weights 1
    torch.testing.assert_close(flat, torch.ones(50))
    uniform_idx, ones = buffer.sample(50, alpha=1.0, beta=0.5, prioritised=False)
    assert torch.equal(ones, torch.ones(50)) and uniform_idx.max() <= 1


def test_training_from_replay_sets_drawn_priorities_to_their_losses():
    torch.manual_seed(0)
    buffer = filled([1.0] * 8, obs_dim=8)
    model = replay.ExternalModel(8, 7, "key_distance", hidden_sizes=(16,), dropout=0.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # the model stays as it is
    replay.train_from_replay(model, optimizer, buffer, 3, 4, alpha=0.6, beta=0.4, prioritised=True)
    losses = model.per_sample_loss(buffer.obs.float(), buffer.actions, buffer.targets).detach()
    drawn = buffer.priorities != 1.0
    assert drawn.any()
    torch.testing.assert_close(buffer.priorities[drawn], losses[drawn] + 1e-6)


@pytest.mark.slow
def test_the_policy_is_the_same_whatever_the_model_trains_on(tmp_path):
    flags = (
        *SMALL,
        "--env",
        "ColorDoorKey-6x6",
        "--total-timesteps",
        "1024",
        "--model-target",
        "key_distance",
        "--replay-size",
        "512",
    )
    logs = {}
    for data in ("prioritised", "uniform", "rollout"):
        (tmp_path / data).mkdir()
        run(tmp_path / data, *flags, "--model-data", data, script="algos/ppo_poi_replay.py")
        logs[data] = read_scalars(only_run_dir(tmp_path / data))
    for data in ("uniform", "rollout"):
        assert logs[data]["losses/policy_loss"] == logs["prioritised"]["losses/policy_loss"]
        assert logs[data]["external_model/train_loss"] != logs["prioritised"]["external_model/train_loss"]
    assert "replay/priority_mean" in logs["prioritised"] and "replay/priority_mean" not in logs["rollout"]
