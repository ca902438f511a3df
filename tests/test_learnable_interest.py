"""Interests that see only what can be learned: on a toy target with a learnable part that switches
and an unpredictable part (white noise the model can learn only as variance), the interest must rise
where the target switched and not pay for the noise. Prediction error is the contrast: the noisy TV."""

import pytest
import torch

from algos import ppo_poi_ensemble as ensemble
from algos import ppo_poi_progress as progress

SWITCH, ROLLOUTS, NOISE = 40, 48, 3.0


def toy(seed):
    """400 inputs: the first half sees features 1-9 and a learnable target that switches at rollout
    SWITCH, the second half features 10-19 and a target of N(0, NOISE^2) drawn afresh every time."""
    torch.manual_seed(seed)
    obs = (torch.rand(400, 20) < 0.3).float()
    learnable = torch.arange(400) < 200
    obs[:, 0] = learnable.float()
    obs[learnable, 10:], obs[~learnable, 1:10] = 0.0, 0.0
    old, new = obs @ torch.randn(20, 1), obs @ torch.randn(20, 1)

    def rollout(r):
        idx = torch.randint(len(obs), (256,))
        targets = (old if r < SWITCH else new)[idx].clone()
        noisy = ~learnable[idx]
        targets[noisy] = NOISE * torch.randn(int(noisy.sum()), 1)
        return obs[idx], targets, noisy

    return rollout


def progress_trace(interest, seed, gaussian=True, lag=0, tau=0.05):
    """The file's loop on the toy: the interest before the model's update (error, excess) or after it
    (progress, then the lagged copy's update); per rollout, the mean interest on each part."""
    rollout = toy(seed)
    model = progress.ExternalModel(20, 7, "key_distance", hidden_sizes=(64, 64), dropout=0.0, gaussian=gaussian)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    lagged = progress.SnapshotModel(model, lag) if lag else progress.LaggedModel(model, tau)
    actions = torch.zeros(256, dtype=torch.long)
    trace = []
    for r in range(ROLLOUTS):
        obs, targets, noisy = rollout(r)
        before = (
            progress.interest_values(interest, model, lagged, obs, actions, targets)
            if interest in ("error", "excess")
            else None
        )
        progress.train_external_model(model, optimizer, obs, actions, targets, epochs=4, batch_size=64)
        values = progress.interest_values(interest, model, lagged, obs, actions, targets, loss_before=before)
        lagged.update(model)
        trace.append((values[~noisy].mean().item(), values[noisy].mean().item()))
    return torch.tensor(trace)  # (rollout, [learnable, noise])


@pytest.mark.parametrize("seed", [0, 1])
def test_prediction_error_pays_for_noise_the_model_cannot_learn(seed):
    trace = progress_trace("error", seed, gaussian=False)
    learnable, noise = trace[SWITCH - 10 : SWITCH].mean(0)
    assert noise > 5.0 and noise > 20 * learnable  # before any change: the noise earns ~NOISE^2 for ever


@pytest.mark.parametrize("seed", [0, 1])
def test_excess_error_ignores_learned_noise_and_rises_where_the_target_switched(seed):
    trace = progress_trace("excess", seed)
    learnable_before, noise_before = trace[SWITCH - 10 : SWITCH].mean(0).abs()
    learnable_at, noise_at = trace[SWITCH]
    assert noise_before < 1.0 and learnable_before < 0.2  # the noise's squared error is its predicted variance
    assert (
        learnable_at > 1.0 and learnable_at > 10 * learnable_before and noise_at < learnable_at / 3
    )  # the switched part earns, the noise (at or below 0) does not


@pytest.mark.parametrize("seed", [0, 1])
def test_progress_against_a_snapshot_reacts_within_its_lag_and_ignores_noise(seed):
    snapshot = progress_trace("progress", seed, lag=3)
    learnable_after, noise_after = snapshot[SWITCH : SWITCH + 3].mean(0)
    assert learnable_after > 10 * snapshot[SWITCH - 10 : SWITCH, 0].abs().mean()
    assert learnable_after > 10 * noise_after.abs() and snapshot[SWITCH - 10 : SWITCH, 1].abs().mean() < 2.0
    lagged = progress_trace("progress", seed, tau=0.05)  # the exponential copy spreads its reaction over ~20 rollouts
    assert lagged[SWITCH : SWITCH + 3, 0].mean() < 0.2 * learnable_after


def test_a_snapshot_is_the_model_as_it_was_lag_updates_ago():
    model = torch.nn.Linear(1, 1, bias=False)
    snapshot = progress.SnapshotModel(model, lag=2)
    for value in (1.0, 2.0, 3.0, 4.0):
        model.weight.data.fill_(value)
        snapshot.update(model)
    assert snapshot.model.weight.item() == 3.0  # two updates ago: the model after the update that set 3
    model.weight.data.fill_(5.0)
    assert snapshot.model.weight.item() == 3.0 and not snapshot.model.weight.requires_grad


@pytest.mark.parametrize("seed", [0, 1])
def test_ensemble_disagreement_of_gaussian_members_means_rises_on_the_switch_not_on_noise(seed):
    rollout = toy(seed)
    model = ensemble.ExternalModel(20, 7, "key_distance", hidden_sizes=(64, 64), dropout=0.0, gaussian=True)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    actions = torch.zeros(256, dtype=torch.long)
    trace = []
    for r in range(ROLLOUTS):
        obs, targets, noisy = rollout(r)
        ensemble.train_external_model(model, optimizer, obs, actions, targets, epochs=4, batch_size=64)
        with torch.no_grad():
            values = ensemble.poi_values(model, obs, actions)
        trace.append((values[~noisy].mean().item(), values[noisy].mean().item()))
    trace = torch.tensor(trace)
    learnable_before, noise_before = trace[SWITCH - 10 : SWITCH].mean(0)
    learnable_after, noise_after = trace[SWITCH : SWITCH + 5].mean(0)
    assert noise_before < 0.05 * NOISE**2  # the members agree on the noise's mean
    assert learnable_after > 5 * learnable_before and learnable_after > 2 * noise_after
