import importlib
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import pytest
import torch

from algos.ppo import ExternalModel, clipped_losses, compute_gae, model_targets, train_external_model
from envs import OneHotFlatObs, true_next_obs


def gae_reference(rewards, values, next_value, final_values, terminations, dones, gamma, lam):
    """A_t as the explicit sum of (gamma*lam)^k delta_{t+k} up to the end of the episode; after step k comes
    nothing if it terminated, its final observation's value if it was truncated, else the next step's value."""
    T, N = rewards.shape
    advantages = np.zeros((T, N))
    for n in range(N):
        for t in range(T):
            total, weight = 0.0, 1.0
            for k in range(t, T):
                if terminations[k, n]:
                    bootstrap = 0.0
                elif dones[k, n]:
                    bootstrap = gamma * final_values[k, n]
                else:
                    bootstrap = gamma * (values[k + 1, n] if k + 1 < T else next_value[0, n])
                total += weight * (rewards[k, n] + bootstrap - values[k, n])
                if dones[k, n]:
                    break
                weight *= gamma * lam
            advantages[t, n] = total
    return advantages


def test_gae_hand_worked():
    # one env, 3 steps; the episode is truncated after step 1 (bootstraps from V(final)=2)
    # and terminated after step 2
    rewards = torch.tensor([[1.0], [0.0], [1.0]])
    values = torch.tensor([[0.5], [1.0], [0.0]])
    next_value, final_values = torch.tensor([[9.0]]), torch.tensor([[7.0], [2.0], [7.0]])  # 7: never read
    terminations = torch.tensor([[0.0], [0.0], [1.0]])
    dones = torch.tensor([[0.0], [1.0], [1.0]])
    gamma, lam = 0.5, 0.5
    adv, ret = compute_gae(rewards, values, next_value, final_values, terminations, dones, gamma, lam)
    d2 = 1.0 - 0.0  # terminal: no bootstrap
    d1 = 0.0 + 0.5 * 2.0 - 1.0  # truncated: bootstraps, but the trace stops here
    d0 = 1.0 + 0.5 * 1.0 - 0.5
    expected = torch.tensor([[d0 + 0.25 * d1], [d1], [d2]])
    torch.testing.assert_close(adv, expected)
    torch.testing.assert_close(ret, expected + values)


@pytest.mark.parametrize("seed", range(4))
def test_gae_matches_plain_loop(seed):
    rng = np.random.default_rng(seed)
    T, N = 33, 5
    rewards, values, final_values = (rng.normal(size=(T, N)) for _ in range(3))
    next_value = rng.normal(size=(1, N))
    terminations = rng.random((T, N)) < 0.1
    dones = terminations | (rng.random((T, N)) < 0.1)
    as_t = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    inputs = (rewards, values, next_value, final_values, terminations, dones)
    adv, ret = compute_gae(*map(as_t, inputs), 0.97, 0.9)
    expected = gae_reference(*inputs, 0.97, 0.9)
    np.testing.assert_allclose(adv.numpy(), expected, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(ret.numpy(), expected + values, rtol=1e-10, atol=1e-10)


def test_clipped_losses_hand_worked():
    """PPO's losses at clip 0.2 on five samples worked by hand: the surrogate takes the more pessimistic of the
    unclipped and the clipped term, the value loss the larger of the unclipped and the clipped squared error."""
    ratio = torch.tensor([1.65, 0.5, 0.5, 1.1, 1.5])
    advantages = torch.tensor([1.0, -1.0, 1.0, 2.0, -1.0])
    # per sample -min(r A, clip(r) A): 1.65 > 1.2 with A > 0 is clipped: -1.2; 0.5 < 0.8 with A < 0 is clipped: 0.8;
    # 0.5 with A > 0 is not (the unclipped term is the smaller): -0.5; 1.1 is inside the clip: -2.2; 1.5 > 1.2 with
    # A < 0 is not: 1.5
    expected_pg = (-1.2 + 0.8 - 0.5 - 2.2 + 1.5) / 5
    new_values = torch.tensor([1.0, 0.0, 2.0, 0.5, -1.0])
    old_values = torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0])
    returns = torch.tensor([1.0, 3.0, 0.0, 0.5, -1.0])
    # clipped values: 0.2 (1 - 0 clipped above), 0.0, 1.2 (2 - 1 clipped above), 0.2 (0.5 - 0 clipped above), -0.2
    # (-1 - 0 clipped below); max(unclipped, clipped) squared errors: max(0, 0.64), max(9, 9), max(4, 1.44),
    # max(0, 0.09), max(0, 0.64)
    expected_v_clipped = 0.5 * (0.64 + 9.0 + 4.0 + 0.09 + 0.64) / 5
    expected_v_plain = 0.5 * (0.0 + 9.0 + 4.0 + 0.0 + 0.0) / 5
    for clip_vloss, expected_v in ((True, expected_v_clipped), (False, expected_v_plain)):
        args = SimpleNamespace(clip_coef=0.2, clip_vloss=clip_vloss)
        pg, v = clipped_losses(ratio, advantages, new_values, old_values, returns, args)
        assert pg.item() == pytest.approx(expected_pg, abs=1e-6)
        assert v.item() == pytest.approx(expected_v, abs=1e-6)


def test_clipped_losses_gradient_stops_where_the_clip_binds():
    """The surrogate's gradient in the ratio is -A/n where the unclipped term counts (inside the clip both terms
    are equal, and torch.max shares the gradient between them) and 0 where the clip binds."""
    ratio = torch.tensor([1.65, 0.5, 0.5, 1.1, 1.5], requires_grad=True)
    advantages = torch.tensor([1.0, -1.0, 1.0, 2.0, -1.0])
    values = torch.zeros(5)
    pg, _ = clipped_losses(ratio, advantages, values, values, values, SimpleNamespace(clip_coef=0.2, clip_vloss=True))
    pg.backward()
    torch.testing.assert_close(ratio.grad, torch.tensor([0.0, 0.0, -0.2, -0.4, 0.2]))


def ring_dynamics(n_states=12, n_samples=2048, seed=0):
    """Toy deterministic dynamics: a one-hot position on a ring; action 0 stays, 1 steps
    forward, 2 steps back."""
    rng = np.random.default_rng(seed)
    pos, actions = rng.integers(n_states, size=n_samples), rng.integers(3, size=n_samples)
    next_pos = (pos + np.array([0, 1, -1])[actions]) % n_states
    eye = np.eye(n_states, dtype=np.float32)
    return torch.tensor(eye[pos]), torch.tensor(actions), torch.tensor(eye[next_pos])


def gaussian_nll(model, obs, actions, targets):
    mean, log_std = model(obs, actions)
    return -torch.distributions.Normal(mean, log_std.exp()).log_prob(targets).mean().item()


@pytest.mark.parametrize("gaussian", [False, True])
def test_forward_model_learns_toy_dynamics(gaussian):
    torch.manual_seed(0)
    obs, actions, next_obs = ring_dynamics()
    model = ExternalModel(12, 3, "forward", hidden_sizes=(64, 64), dropout=0.0, gaussian=gaussian)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    targets = model_targets("forward", obs, next_obs, None)
    nll_before = gaussian_nll(model, obs, actions, targets) if gaussian else None
    first = train_external_model(model, optimizer, obs, actions, targets, epochs=1, batch_size=128)
    for _ in range(30):
        last = train_external_model(model, optimizer, obs, actions, targets, epochs=1, batch_size=128)
    if gaussian:  # the beta-weighted loss is not comparable across steps; the plain NLL is
        assert gaussian_nll(model, obs, actions, targets) < nll_before - 2.0
    else:
        assert last < 0.05 * first
    mse = ((model.predict(obs, actions) - next_obs) ** 2).mean().item()
    assert mse < 0.01
    assert (model.predict(obs, actions).argmax(-1) == next_obs.argmax(-1)).all()


def test_predict_is_obs_plus_delta_with_dropout_off():
    torch.manual_seed(0)
    obs, actions, _ = ring_dynamics(n_samples=64)
    model = ExternalModel(12, 3, "forward", hidden_sizes=(32,), dropout=0.5).train()
    prediction = model.predict(obs, actions)
    assert model.training  # predict restores the mode
    model.eval()
    delta, _ = model(obs, actions)
    torch.testing.assert_close(prediction, obs + delta)
    torch.testing.assert_close(model.predict(obs, actions), prediction)  # deterministic


def test_info_target_model_ignores_action_and_round_trips(tmp_path):
    torch.manual_seed(0)
    obs, actions, _ = ring_dynamics(n_samples=64)
    model = ExternalModel(12, 3, "key_distance", hidden_sizes=(16, 4), dropout=0.5, gaussian=True)
    out = model.predict(obs, actions)
    assert out.shape == (64, 1)
    torch.testing.assert_close(model.predict(obs, torch.zeros_like(actions)), out)
    model.save(tmp_path / "m.pt")
    loaded = ExternalModel.load(tmp_path / "m.pt")
    torch.testing.assert_close(loaded.predict(obs, actions), out)
    assert loaded.config == model.config


def test_plain_gaussian_nll_is_beta_zero():
    torch.manual_seed(0)
    obs, actions, next_obs = ring_dynamics(n_samples=32)
    model = ExternalModel(12, 3, "forward", hidden_sizes=(16,), dropout=0.0, gaussian=True, nll_beta=0.0)
    mean, log_std = model(obs, actions)
    targets = next_obs - obs
    nll = torch.distributions.Normal(mean, log_std.exp()).log_prob(targets).neg() - 0.5 * np.log(2 * np.pi)
    torch.testing.assert_close(model.per_sample_loss(obs, actions, targets), nll.mean(-1))


def test_beta_nll_weights_each_dimension_by_its_std_to_the_2_beta_held_constant():
    """beta-NLL (Seitzer et al. 2022) at beta 0.5, its value and both gradients against the NLL written out, weighted
    by std^(2 beta) with no gradient through the weight (at beta 0 the weight is 1, so the test above cannot see it);
    the weight with a gradient is checked to move the log-std's gradient, so the comparison can tell them apart."""
    model = ExternalModel(12, 3, "forward", hidden_sizes=(16,), dropout=0.0, gaussian=True, nll_beta=0.5)
    generator = torch.Generator().manual_seed(0)
    mean, log_std, targets = (torch.randn(8, 12, generator=generator) for _ in range(3))

    def value_and_gradients(loss_of):
        m, s = mean.clone().requires_grad_(), (0.5 * log_std).requires_grad_()
        loss = loss_of(m, s)
        loss.sum().backward()
        return loss.detach(), m.grad, s.grad

    def by_hand(weight):
        return lambda m, s: (weight(s) * (0.5 * ((targets - m) / s.exp()) ** 2 + s)).mean(-1)

    got = value_and_gradients(lambda m, s: model.loss(m, s, targets))
    expected = value_and_gradients(by_hand(lambda s: s.detach().exp() ** (2 * 0.5)))
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)
    through = value_and_gradients(by_hand(lambda s: s.exp() ** (2 * 0.5)))
    assert not torch.allclose(through[2], expected[2])


@pytest.mark.parametrize("file", ["ppo", "ppo_poi_ensemble"])  # the two versions of the model (test_shared_code)
def test_gaussian_log_std_is_clamped_at_both_ends(file):
    model_class = importlib.import_module(f"algos.{file}").ExternalModel
    model = model_class(4, 2, "forward", hidden_sizes=(8,), dropout=0.0, gaussian=True)
    for bias, bound in ((100.0, 2.0), (-100.0, -5.0)):  # the class's bounds, written out
        with torch.no_grad():
            model.log_std.bias.fill_(bias)
        _, log_std = model(torch.zeros(3, 4), torch.zeros(3, dtype=torch.long))
        assert (log_std == bound).all()


def test_rollout_pairs_never_cross_a_reset():
    """Pairs (obs_t, true next obs_t) from a SAME_STEP vector env equal what plain
    single envs (no autoreset) produce for the same seeds and actions."""
    num_envs, max_steps, T = 3, 7, 40
    make = lambda: OneHotFlatObs(gym.make("ColorDoorKey-6x6-v0", max_steps=max_steps))  # noqa: E731
    venv = gym.vector.SyncVectorEnv([make] * num_envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    rng = np.random.default_rng(0)
    actions = rng.integers(7, size=(T, num_envs))
    obs, _ = venv.reset(seed=10)
    pairs, resets = [], 0
    for t in range(T):
        next_obs, _, terminated, truncated, infos = venv.step(actions[t])
        done = terminated | truncated
        pairs.append((obs, true_next_obs(next_obs, infos, done)))
        resets += done.sum()
        obs = next_obs
    assert resets >= num_envs * (T // max_steps)

    for i in range(num_envs):  # replay each env without autoreset
        env = make()
        o, _ = env.reset(seed=10 + i)
        for t in range(T):
            o_next, _, terminated, truncated, _ = env.step(actions[t, i])
            np.testing.assert_array_equal(pairs[t][0][i], o)
            np.testing.assert_array_equal(pairs[t][1][i], o_next)
            o = env.reset()[0] if terminated or truncated else o_next
