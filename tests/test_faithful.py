"""`--model-faithful` (Stirn et al. 2023): a Gaussian external model whose mean learns exactly as an MSE model's
and whose log-std head learns the plain NLL beside it without moving the mean or the shared layers. Checked in
every discrete file against independent references built from the same weights: an MSE model (the mean's and the
shared layers' gradients), a plain-NLL model, beta 0 (the loss's value and the log-std head's gradients)."""

import importlib

import pytest
import torch

from tests.test_checks import DISCRETE  # the nine discrete files


def build(module, target, **kwargs):
    torch.manual_seed(0)  # the same draws: the shared layers and the mean head are built before the log-std head
    return module.ExternalModel(12, 3, target, hidden_sizes=(16, 8), dropout=0.0, **kwargs)


def gradients(model, obs, actions, targets):
    model.zero_grad()
    model.per_sample_loss(obs, actions, targets).mean().backward()
    return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("target", ["forward", "key_distance"])
@pytest.mark.parametrize("name", DISCRETE)
def test_faithful_mean_learns_as_mse_and_log_std_as_plain_nll(name, target):
    module = importlib.import_module(f"algos.{name}")
    faithful = build(module, target, gaussian=True, faithful=True)
    mse = build(module, target)
    nll = build(module, target, gaussian=True, nll_beta=0.0)
    for other in (mse, nll):  # the weights the references share with the faithful model
        for key, value in other.state_dict().items():
            assert torch.equal(value, faithful.state_dict()[key])
    generator = torch.Generator().manual_seed(1)
    obs = torch.randint(0, 2, (64, 12), generator=generator).float()
    actions = torch.randint(0, 3, (64,), generator=generator)
    targets = torch.randn(64, 12 if target == "forward" else 1, generator=generator)

    got = gradients(faithful, obs, actions, targets)
    want_mean = gradients(mse, obs, actions, targets)
    want_std = gradients(nll, obs, actions, targets)
    shared = [key for key in got if not key.startswith("log_std")]
    assert shared and set(shared) == set(want_mean)
    for key in shared:  # the mean and the shared layers: MSE's gradients, nothing from the log-std
        torch.testing.assert_close(got[key], want_mean[key], rtol=1e-5, atol=1e-7)
    heads = [key for key in got if key.startswith("log_std")]
    assert heads and set(heads) == {key for key in want_std if key.startswith("log_std")}
    for key in heads:  # the log-std head: the plain NLL's
        torch.testing.assert_close(got[key], want_std[key], rtol=1e-5, atol=1e-7)
    with torch.no_grad():  # the value: the plain NLL, bitwise (what the training loss and eval_nll log)
        assert torch.equal(faithful.per_sample_loss(obs, actions, targets), nll.per_sample_loss(obs, actions, targets))


@pytest.mark.parametrize("name", ["ppo", "ppo_poi_ensemble"])
def test_faithful_model_saves_and_loads(name, tmp_path):
    module = importlib.import_module(f"algos.{name}")
    model = build(module, "forward", gaussian=True, faithful=True)
    model.save(tmp_path / "model.pt")
    loaded = module.ExternalModel.load(tmp_path / "model.pt")
    assert loaded.faithful and loaded.config == model.config
