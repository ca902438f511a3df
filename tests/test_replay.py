"""algos/ppo_poi_replay.py: the replay buffer, prioritised sampling and its weights, Curious Replay's
priorities and draws, and a policy that does not depend on which data the external model trains on."""

import copy

import pytest
import torch

from algos import ppo_poi_replay as replay
from common.tb import read_scalars
from tests.reference import by_reference, reference
from tests.test_smoke import only_run_dir, run


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


def test_a_replay_step_follows_the_gradient_of_the_importance_weighted_loss():
    """One SGD step at lr 1 moves the model by the gradient of mean(w_i L_i) over the drawn transitions, with the
    weights the draw gave (unequal here: the priorities differ and beta > 0)."""
    torch.manual_seed(0)
    buffer = filled([0.5, 1.0, 2.0, 4.0, 8.0, 0.25, 1.0, 3.0], obs_dim=8)
    model = replay.ExternalModel(8, 7, "key_distance", hidden_sizes=(16,), dropout=0.0)
    reference = copy.deepcopy(model)
    drawn, sample = [], buffer.sample

    def recorded_sample(*args):
        drawn.append(sample(*args))
        return drawn[-1]

    buffer.sample = recorded_sample
    replay.train_from_replay(model, torch.optim.SGD(model.parameters(), lr=1.0), buffer, 1, 6, 0.6, 0.4, True)
    ((idx, weights),) = drawn
    assert weights.min() < weights.max()
    losses = ((reference(buffer.obs[idx].float(), None)[0] - buffer.targets[idx]) ** 2).mean(-1)  # MSE, by hand
    gradients = torch.autograd.grad((weights * losses).sum() / len(idx), list(reference.parameters()))
    for moved, start, gradient in zip(model.parameters(), reference.parameters(), gradients):
        torch.testing.assert_close(moved, start - gradient)


CURIOUS = dict(count_scale=4.0, count_decay=0.5, loss_alpha=0.5, loss_eps=0.25, new_priority=100.0)


def curious_buffer(size, obs_dim=2, **constants):
    return replay.CuriousReplayBuffer(size, obs_dim, 1, "cpu", **{**CURIOUS, **constants})


def add(buffer, n):
    buffer.add(torch.zeros(n, buffer.obs.shape[1]), torch.zeros(n, dtype=torch.long), torch.zeros(n, 1))


def test_prioritised_priorities_of_negative_losses_are_the_floor():
    """A Gaussian model's beta-NLL is negative where it is sure and right: such a transition has learned
    nothing to teach, so its priority is the floor (a negative priority made torch.multinomial raise)."""
    buffer = replay.ReplayBuffer(3, 2, 1, "cpu")
    add(buffer, 3)
    buffer.update(torch.tensor([0, 1, 2]), torch.tensor([-2.0, 0.0, 3.0]))
    torch.testing.assert_close(buffer.priorities, torch.tensor([1e-6, 1e-6, 3.0 + 1e-6]))
    idx, weights = buffer.sample(1000, alpha=0.6, beta=0.4, prioritised=True)
    assert torch.all(weights > 0) and torch.bincount(idx, minlength=3)[2] > 990


def test_curious_priorities_by_hand():
    """p = 4 * 0.5^v + (max(L, 0) + 0.25)^0.5, worked by hand: only drawn transitions count a draw, a repeat
    counts twice, a negative loss counts as 0, a new transition takes the largest priority (at least 100) and v = 0."""
    buffer = curious_buffer(4)
    add(buffer, 3)
    assert buffer.priorities.tolist() == [100.0, 100.0, 100.0, 0.0] and buffer.visits.tolist() == [0, 0, 0, 0]
    buffer.update(torch.tensor([0, 2, 2]), torch.tensor([2.0, -0.75, -0.75]))  # slot 2 twice, with a negative NLL
    # slot 0: 4 * 0.5 + (2 + 0.25)^0.5 = 2 + 1.5; slot 2: 4 * 0.25 + (0 + 0.25)^0.5 = 1 + 0.5; slot 1 untouched
    assert buffer.visits.tolist() == [1, 0, 2, 0] and buffer.priorities.tolist() == [3.5, 100.0, 1.5, 0.0]
    buffer.update(torch.tensor([0]), torch.tensor([0.0]))  # 4 * 0.25 + 0.25^0.5
    assert buffer.visits.tolist() == [2, 0, 2, 0] and buffer.priorities.tolist() == [1.5, 100.0, 1.5, 0.0]
    add(buffer, 2)  # slots 3 and 0 (it wraps): the largest priority, slot 1's 100, and no draws yet
    assert buffer.visits.tolist() == [0, 0, 2, 0] and buffer.priorities.tolist() == [100.0, 100.0, 1.5, 100.0]

    low = curious_buffer(2, new_priority=1.0)  # every priority above new_priority: a new transition takes the largest
    add(low, 2)
    low.update(torch.tensor([0, 1]), torch.tensor([0.0, 2.0]))  # 2 + 0.5 and 2 + 1.5
    add(low, 1)  # into slot 0
    assert low.priorities.tolist() == [3.5, 3.5] and low.visits.tolist() == [0, 1]


def test_curious_buffer_follows_a_plain_loop_over_slots():
    """Adds of random sizes (the ring wraps) and draws with repeats and losses of both signs, at the authors'
    constants, against the same rules written as a loop over slots."""
    c, decay, alpha, eps, new = 1e4, 0.7, 0.7, 0.01, 1e5
    buffer = replay.CuriousReplayBuffer(16, 2, 1, "cpu", c, decay, alpha, eps, new)
    generator = torch.Generator().manual_seed(0)
    priorities, visits, count, head = [0.0] * 16, [0] * 16, 0, 0
    for _ in range(60):
        n = int(torch.randint(1, 9, (1,), generator=generator))
        top = max([new] + priorities[:count])
        for k in range(n):
            priorities[(head + k) % 16], visits[(head + k) % 16] = top, 0
        head, count = (head + n) % 16, min(count + n, 16)
        add(buffer, n)

        drawn = torch.randint(count, (12,), generator=generator)
        slot_losses = torch.randn(16, generator=generator)  # one loss per slot: a repeat carries the same loss
        buffer.update(drawn, slot_losses[drawn])
        for j in drawn.tolist():
            visits[j] += 1
        for j in set(drawn.tolist()):
            priorities[j] = c * decay ** visits[j] + (max(slot_losses[j].item(), 0.0) + eps) ** alpha
        assert buffer.visits.tolist() == visits
        torch.testing.assert_close(buffer.priorities, torch.tensor(priorities), rtol=1e-5, atol=0.0)


def test_curious_draws_in_proportion_to_the_priorities_with_unit_weights():
    """P(i) = p_i / sum_j p_j: over 200,000 draws each share lies within 5 standard errors of 0.1, 0.2, 0.3, 0.4;
    prioritised replay's exponent (alpha 0.6 would give 0.15, 0.22, 0.29, 0.34) and weights do not apply."""
    buffer = curious_buffer(4)
    add(buffer, 4)
    buffer.priorities[:] = torch.tensor([1.0, 2.0, 3.0, 4.0])
    torch.manual_seed(0)
    n = 200_000
    idx, weights = buffer.sample(n, alpha=0.6, beta=0.4, prioritised=True)
    share = torch.bincount(idx, minlength=4).double() / n
    expected = torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64)
    assert torch.all((share - expected).abs() < 5 * (expected * (1 - expected) / n).sqrt()), share
    assert torch.equal(weights, torch.ones(n))


def test_training_from_curious_replay_counts_the_draws_and_sets_their_priorities():
    torch.manual_seed(0)
    buffer = curious_buffer(8, obs_dim=8)
    buffer.add(torch.eye(8), torch.arange(8), torch.arange(8, dtype=torch.float32)[:, None])
    model = replay.ExternalModel(8, 7, "key_distance", hidden_sizes=(16,), dropout=0.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # the model stays as it is
    replay.train_from_replay(model, optimizer, buffer, 2, 2, alpha=0.6, beta=0.4, prioritised=True)
    assert buffer.visits.sum() == 4  # 2 updates of 2 draws
    losses = model.per_sample_loss(buffer.obs.float(), buffer.actions, buffer.targets).detach()
    drawn = buffer.visits > 0
    expected = 4.0 * 0.5**buffer.visits + (losses.clamp(min=0) + 0.25) ** 0.5
    torch.testing.assert_close(buffer.priorities[drawn], expected[drawn])
    assert torch.all(buffer.priorities[~drawn] == 100.0)


@pytest.mark.slow
@pytest.mark.parametrize("key", by_reference(["ppo_poi_replay.py"]))
def test_the_policy_is_the_same_whatever_the_model_trains_on(tmp_path, shared_run, key):
    """The reference run (tests/reference.py) trains the model on prioritised replay; the same flags with uniform
    replay, with the rollout alone and with Curious Replay."""
    script, flags = reference(key)
    logs = {"prioritised": read_scalars(shared_run(script, *flags))}
    for data in ("uniform", "rollout", "curious"):
        (tmp_path / data).mkdir()
        run(tmp_path / data, *flags, "--model-data", data, script=script)
        logs[data] = read_scalars(only_run_dir(tmp_path / data))
    for data in ("uniform", "rollout", "curious"):
        assert logs[data]["losses/policy_loss"] == logs["prioritised"]["losses/policy_loss"]
        assert logs[data]["external_model/train_loss"] != logs["prioritised"]["external_model/train_loss"]
    assert "replay/priority_mean" in logs["prioritised"] and "replay/priority_mean" not in logs["rollout"]
    assert [data for data in logs if "replay/never_drawn" in logs[data]] == ["curious"]
