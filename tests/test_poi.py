"""Interest fields: batched computations against plain loops, and POI higher off the data."""

import importlib
import itertools
import re

import numpy as np
import pytest
import torch

from algos import ppo_poi_disagreement as disagreement
from tests.test_checks import POI


def region_data(n, low, high, seed, dim=32, num_actions=3):
    """Binary observations (like one-hot views) whose active units lie in [low, high);
    target: the count of active units modulo 3."""
    rng = np.random.default_rng(seed)
    obs = np.zeros((n, dim), dtype=np.float32)
    obs[:, low:high] = rng.random((n, high - low)) < 0.5
    targets = obs.sum(1, keepdims=True) % 3
    return torch.tensor(obs), torch.tensor(rng.integers(num_actions, size=n)), torch.tensor(targets)


def fit(module, model, obs, actions, targets, epochs=100):
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(epochs):
        module.train_external_model(model, optimizer, obs, actions, targets, epochs=1, batch_size=64)
    return model


def poi_off_and_on_data(module, model, seed, **poi_kwargs):
    """Mean POI on fresh observations outside the training region and inside it."""
    fit(module, model, *region_data(512, 0, 16, seed))
    inside = module.poi_values(model, *region_data(256, 0, 16, seed + 100)[:2], **poi_kwargs).mean().item()
    outside = module.poi_values(model, *region_data(256, 16, 32, seed + 100)[:2], **poi_kwargs).mean().item()
    return outside, inside


def loop_predictions(model, obs, actions, masks):
    """Plain reference: pass by pass, observation by observation, the prediction of the
    network thinned by `masks` (one keep-mask per pass and layer), in float64."""
    keep = 1.0 - model.config["dropout"]
    linears = [layer for layer in model.body if isinstance(layer, torch.nn.Linear)]
    x = (torch.cat([obs, torch.eye(model.num_actions)[actions]], -1) if model.target == "forward" else obs).double()
    predictions = torch.zeros(len(masks[0]), len(obs), model.mean.out_features, dtype=torch.float64)
    for s in range(len(masks[0])):
        for b in range(len(obs)):
            h = x[b]
            for layer, mask in zip(linears, masks):
                h = torch.relu(h @ layer.weight.double().T + layer.bias.double()) * mask[s].double() / keep
            predictions[s, b] = h @ model.mean.weight.double().T + model.mean.bias.double()
    return predictions


@pytest.mark.parametrize(
    "target,hidden_sizes,gaussian",
    [
        ("forward", (12, 8, 12), False),
        ("forward", (12, 8, 12), True),
        ("key_distance", (16, 4), False),
        ("key_distance", (9,), False),
    ],
)
def test_mc_dropout_poi_equals_a_loop_over_passes_and_observations(target, hidden_sizes, gaussian):
    torch.manual_seed(0)
    model = disagreement.ExternalModel(32, 3, target, hidden_sizes=hidden_sizes, dropout=0.3, gaussian=gaussian)
    obs, actions, _ = region_data(10, 0, 32, seed=0)
    masks = disagreement.dropout_masks(model, num_samples=7)
    masks[0][1] = False  # a pass that drops the whole first layer
    masks[-1][2] = True  # a pass that keeps the whole last layer
    expected = loop_predictions(model, obs, actions, masks).var(0, unbiased=False).mean(-1)
    torch.testing.assert_close(
        disagreement.mc_dropout_poi(model, obs, actions, masks).double(), expected, rtol=1e-4, atol=1e-7
    )
    same = [mask[:1].expand_as(mask) for mask in masks]  # every pass the same network: no spread
    assert disagreement.mc_dropout_poi(model, obs, actions, same).abs().max().item() < 1e-6


def test_mc_dropout_poi_values_computes_each_distinct_input_once(monkeypatch):
    torch.manual_seed(0)
    model = disagreement.ExternalModel(32, 3, "forward", hidden_sizes=(12, 8), dropout=0.3)
    obs, actions, _ = region_data(6, 0, 32, seed=0)
    obs, actions = obs[[0, 1, 2, 0, 0, 1, 3, 4, 5]], actions[[0, 1, 2, 0, 0, 1, 3, 4, 5]]
    actions[4] = (actions[0] + 1) % 3  # the same observation with another action: another input
    rows, inverse = disagreement.distinct_rows(model.inputs(obs, actions))
    assert len(rows) == 7 and torch.equal(model.inputs(obs, actions)[rows][inverse], model.inputs(obs, actions))
    computed = []  # the rows each call of the passes gets
    passes = disagreement.mc_dropout_poi
    monkeypatch.setattr(
        disagreement, "mc_dropout_poi", lambda m, o, *rest: computed.append(len(o)) or passes(m, o, *rest)
    )
    torch.manual_seed(1)
    values = disagreement.poi_values(model, obs, actions, num_samples=30)
    assert computed == [7]  # of 9 rows
    torch.manual_seed(1)  # the same masks, every row computed
    masks = disagreement.dropout_masks(model, num_samples=30)
    torch.testing.assert_close(values, disagreement.mc_dropout_poi(model, obs, actions, masks))
    assert values[0] == values[3] and values[1] == values[5] and values[0] != values[4]


def test_mc_dropout_poi_converges_to_the_exact_dropout_variance():
    """A network small enough to enumerate all 2^5 dropout masks: the POI of many passes
    approaches the exact variance of the prediction under dropout."""
    torch.manual_seed(0)
    model = disagreement.ExternalModel(6, 2, "forward", hidden_sizes=(3, 2), dropout=0.4)
    obs, actions = (torch.rand(4, 6) < 0.5).float(), torch.tensor([0, 1, 1, 0])
    keep = 0.6
    configurations = torch.tensor(list(itertools.product([False, True], repeat=5)))
    weights = torch.where(configurations, keep, 1 - keep).prod(1).double()
    predictions = loop_predictions(model, obs, actions, [configurations[:, :3], configurations[:, 3:]])
    mean = (weights[:, None, None] * predictions).sum(0)
    exact = (weights[:, None, None] * (predictions - mean) ** 2).sum(0).mean(-1)
    sampled = disagreement.poi_values(model, obs, actions, num_samples=200_000).double()
    torch.testing.assert_close(sampled, exact, rtol=0.02, atol=1e-6)


def test_mc_dropout_masks_drop_at_the_configured_rate():
    torch.manual_seed(0)
    model = disagreement.ExternalModel(16, 3, "forward", hidden_sizes=(50, 40), dropout=0.3)
    masks = disagreement.dropout_masks(model, num_samples=3000)
    assert [tuple(m.shape) for m in masks] == [(3000, 50), (3000, 40)]
    for mask in masks:
        assert mask.dtype == torch.bool
        assert (~mask).float().mean().item() == pytest.approx(0.3, abs=0.01)
    indices, scale = disagreement.kept_units(torch.tensor([[True, False, True], [False, False, True]]), keep=0.5)
    assert indices[:, :1].tolist() == [[0], [2]] and indices[0, 1] == 2  # kept units first, in order
    assert scale.tolist() == [[2.0, 2.0], [2.0, 0.0]]


def test_mc_dropout_poi_is_higher_off_the_training_data():
    dropout = disagreement.Args().model_dropout  # the file's default keeps the field useful
    ratios = []
    for seed in range(3):
        torch.manual_seed(seed)
        model = disagreement.ExternalModel(32, 3, "key_distance", hidden_sizes=(64, 32), dropout=dropout)
        outside, inside = poi_off_and_on_data(disagreement, model, seed, num_samples=30)
        ratios.append(outside / inside)
    assert min(ratios) > 1.3 and np.mean(ratios) > 2.0, ratios


def test_intrinsic_advantages_are_gae_that_no_episode_end_cuts():
    """The intrinsic return is non-episodic (it takes no episode ends): its advantages are the explicit sum of
    (gamma lambda)^k deltas to the rollout's end, bootstrapped there from the next value (test_ppo_math's plain
    loop with no step ended), and its returns those advantages plus the values."""
    from tests.test_ppo_math import gae_reference

    generator = torch.Generator().manual_seed(0)
    rewards, values = torch.rand(6, 3, generator=generator), torch.randn(6, 3, generator=generator)
    next_value, no_ends = torch.randn(1, 3, generator=generator), np.zeros((6, 3))
    adv, ret = disagreement.intrinsic_advantages(rewards, values, next_value, 0.9, 0.6)
    expected = gae_reference(rewards.numpy(), values.numpy(), next_value.numpy(), no_ends, no_ends, no_ends, 0.9, 0.6)
    torch.testing.assert_close(adv, torch.tensor(expected, dtype=torch.float32))
    torch.testing.assert_close(ret, adv + values)


SCALED_FILES = (*POI, "ppo_continuous_poi_ensemble")


@pytest.mark.parametrize("name", SCALED_FILES)
def test_intrinsic_reward_scale_forgets_as_weighted_moments_of_the_rollouts(name):
    module = importlib.import_module(f"algos.{name}")
    rng = np.random.default_rng(0)
    gamma, decay, num_envs = 0.9, 0.8, 3
    rollouts = [rng.exponential(0.01 if k < 30 else 1.0, size=(5, num_envs)) for k in range(40)]  # interest rises at 30
    scale = module.IntrinsicRewardScale(num_envs, gamma, decay, "cpu")
    returns, seen, scales = np.zeros(num_envs), [], []
    for k, rollout in enumerate(rollouts):
        got = scale.update(torch.tensor(rollout, dtype=torch.float32))
        block = []
        for reward in rollout:  # plain loop: returns of this rollout
            returns = gamma * returns + reward
            block.append(returns.copy())
        seen.append(np.array(block))
        weights = decay ** np.arange(k, -1, -1.0)  # rollout i weighs decay^(k - i)
        mean = sum(w * b.mean() for w, b in zip(weights, seen)) / weights.sum()
        second = sum(w * (b**2).mean() for w, b in zip(weights, seen)) / weights.sum()
        assert got == pytest.approx(np.sqrt(second - mean**2), rel=1e-4)
        scales.append(got)
    no_forgetting = module.IntrinsicRewardScale(num_envs, gamma, 0.0, "cpu")
    for rollout in rollouts:
        last = no_forgetting.update(torch.tensor(rollout, dtype=torch.float32))
    assert last == pytest.approx(seen[-1].std(), rel=1e-4)  # decay 0: the last rollout alone


@pytest.mark.parametrize("name", ["ppo_poi_grad", "ppo_continuous_poi_ensemble"])
def test_a_rise_of_interest_shrinks_the_scaled_reward_for_a_while(name):
    """What the scale's docstring and the interest-fields page say it does, at the files' gamma and decay: the
    interest x5 everywhere (uniform draws, 16 envs x 128 steps a rollout) is no larger reward; the moving moments mix
    the returns before and after the rise, so the std overshoots its new level (5x the old) and the mean reward falls
    about ninefold within 10 rollouts and stays below its level before the rise 100 rollouts on."""
    module = importlib.import_module(f"algos.{name}")
    generator = torch.Generator().manual_seed(0)
    scale = module.IntrinsicRewardScale(16, 0.99, 0.95, "cpu")
    stds, rewards = [], []
    for k in range(200):
        poi = torch.rand(128, 16, generator=generator) * (5.0 if k >= 100 else 1.0)
        stds.append(scale.update(poi))
        rewards.append((poi / (stds[-1] + 1e-8)).mean().item())
    before = np.mean(rewards[90:100])
    assert max(stds[100:]) > 40 * stds[99]  # far past the new level's 5x
    assert rewards[109] < before / 8 and max(rewards[101:200]) < before  # never a larger reward, for 100 rollouts


@pytest.mark.parametrize("name", SCALED_FILES)
def test_the_reward_scale_averages_each_rollouts_own_variance(name):
    """--int-scale reward: the bias-corrected moving average of each rollout's variance of the interest (the
    population variance over its steps and envs), computed here by a plain loop; the env returns play no part."""
    module = importlib.import_module(f"algos.{name}")
    rng = np.random.default_rng(1)
    decay = 0.8
    rollouts = [rng.exponential(0.01 if k < 30 else 1.0, size=(5, 3)) + 7 * (k >= 30) for k in range(40)]
    scale = module.IntrinsicRewardScale(3, 0.9, decay, "cpu", rule="reward")
    for k in range(len(rollouts)):
        got = scale.update(torch.tensor(rollouts[k], dtype=torch.float32))
        weights = decay ** np.arange(k, -1, -1.0)
        variances = [((r - r.mean()) ** 2).mean() for r in rollouts[: k + 1]]
        assert got == pytest.approx(np.sqrt(np.dot(weights, variances) / weights.sum()), rel=1e-4)


def test_a_scale_from_a_checkpoint_written_before_the_choice_resumes_as_the_return_s():
    """A checkpoint pickles the scale; one written before `rule` existed unpickles without it and keeps its rule."""
    import pickle

    old, new = (gradient.IntrinsicRewardScale(3, 0.9, 0.8, "cpu") for _ in range(2))
    del old.__dict__["rule"]  # as an object pickled by the class before --int-scale
    old = pickle.loads(pickle.dumps(old))
    block = torch.rand(5, 3, generator=torch.Generator().manual_seed(0))
    assert "rule" not in old.__dict__ and old.update(block) == new.update(block)


def test_every_scaled_file_builds_its_scale_from_its_flags():
    """test_smoke runs --int-scale on one file; every file builds the scale with the same call of its flags."""
    from pathlib import Path

    call = "IntrinsicRewardScale(args.num_envs,args.int_gamma,args.int_scale_decay,device,args.int_scale)"
    for name in SCALED_FILES:
        source = (Path(__file__).resolve().parents[1] / "algos" / f"{name}.py").read_text()
        assert re.sub(r"\s", "", source).count(call) == 1, name


@pytest.mark.parametrize("name", ["ppo_poi_grad", "ppo_continuous_poi_ensemble"])
def test_under_the_reward_scale_a_rise_of_interest_is_a_larger_reward_for_a_while(name):
    """The case of the test above under --int-scale reward, as its docstring says: the rollout after the rise
    (x5 everywhere) pays about 3.4 times the reward before it, more than before for ~20 rollouts, and the reward is
    back at its old level (the interest's scale cancels) 100 rollouts on; it never falls far below it."""
    module = importlib.import_module(f"algos.{name}")
    generator = torch.Generator().manual_seed(0)
    scale = module.IntrinsicRewardScale(16, 0.99, 0.95, "cpu", rule="reward")
    rewards = []
    for k in range(200):
        poi = torch.rand(128, 16, generator=generator) * (5.0 if k >= 100 else 1.0)
        rewards.append((poi / (scale.update(poi) + 1e-8)).mean().item())
    ratio = np.array(rewards[100:]) / np.mean(rewards[90:100])
    assert 3.0 < ratio[0] < 3.8 and (ratio[:20] > 1.15).all()
    assert abs(ratio[-10:].mean() - 1) < 0.05 and ratio.min() > 0.9


# ---- ensemble disagreement ----------------------------------------------------------------

from algos import ppo_poi_ensemble as ensemble  # noqa: E402
from algos import ppo_poi_grad as gradient  # noqa: E402


def test_ensemble_batched_equals_loop_over_members():
    torch.manual_seed(0)
    model = ensemble.ExternalModel(32, 3, "forward", hidden_sizes=(12, 8), dropout=0.5, num_members=4).eval()
    obs, actions, _ = region_data(9, 0, 32, seed=1)
    batched, _ = model(obs, actions)
    x = torch.cat([obs, torch.eye(3)[actions]], dim=-1)  # the observation and the one-hot action, built here
    linears = [layer for layer in model.body if isinstance(layer, ensemble.EnsembleLinear)] + [model.mean]
    for k in range(4):  # each member as its own plain MLP
        h = x
        for i, layer in enumerate(linears):
            h = h @ layer.weight[k] + layer.bias[k, 0]
            h = torch.relu(h) if i < len(linears) - 1 else h
        torch.testing.assert_close(batched[k], h)
    expected_poi = torch.stack([batched[k] for k in range(4)]).var(0, unbiased=False).mean(-1)
    repeated = torch.tensor([0, 1, 2, 3, 4, 5, 6, 7, 8, 3, 3, 0])  # repeated inputs are computed once
    computed = []  # the rows each forward pass gets
    hook = model.register_forward_hook(lambda module, inputs, output: computed.append(len(inputs[0])))
    torch.testing.assert_close(ensemble.poi_values(model, obs[repeated], actions[repeated]), expected_poi[repeated])
    hook.remove()
    assert computed == [9]  # of 12 rows
    torch.testing.assert_close(model.predict(obs, actions), obs + batched.mean(0))


def test_ensemble_members_train_on_their_own_orders_and_all_learn():
    torch.manual_seed(0)
    model = ensemble.ExternalModel(32, 3, "key_distance", hidden_sizes=(32,), dropout=0.0, num_members=3)
    obs, actions, _ = region_data(256, 0, 16, seed=0)
    targets = obs.sum(1, keepdim=True) / 8  # a target every member can fit
    before = model.per_sample_loss(obs, actions, targets).mean(1)
    fit(ensemble, model, obs, actions, targets, epochs=50)
    after = model.per_sample_loss(obs, actions, targets).mean(1)
    assert before.shape == (3,) and (after < 0.2 * before).all()

    def trained_from_one_member(batch_size):  # every member made member 0, then one pass over the data
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.copy_(parameter[:1].expand_as(parameter))
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        ensemble.train_external_model(model, optimizer, obs, actions, targets, epochs=1, batch_size=batch_size)
        return model.mean.weight.detach().clone()

    whole = trained_from_one_member(batch_size=256)  # one batch of all the data: the order moves only rounding
    apart = trained_from_one_member(batch_size=64)  # four batches, each member's own
    assert (whole[1:] - whole[0]).abs().max() < 1e-7  # about 1e-9
    assert ((apart[1:] - apart[0]).abs().amax((1, 2)) > 1e-3).all()  # about 0.007: three orders apart


def test_ensemble_poi_is_higher_off_the_training_data():
    ratios = []
    for seed in range(3):
        torch.manual_seed(seed)
        model = ensemble.ExternalModel(32, 3, "key_distance", hidden_sizes=(64, 32), dropout=0.0, num_members=5)
        outside, inside = poi_off_and_on_data(ensemble, model, seed)
        ratios.append(outside / inside)
    assert min(ratios) > 1.3 and np.mean(ratios) > 2.0, ratios


# ---- model-gradient interest -------------------------------------------------------------


@pytest.mark.parametrize("target", ["forward", "key_distance"])
def test_gradient_interest_equals_torch_func_and_loop(target):
    torch.manual_seed(0)
    model = gradient.ExternalModel(32, 3, target, hidden_sizes=(12, 8), dropout=0.5, gaussian=True).eval()
    obs, actions, _ = region_data(6, 0, 32, seed=2)
    signs = torch.randint(0, 2, (6, model.mean.out_features)).float() * 2 - 1
    batched = gradient.gradient_interest(model, obs, actions, signs)

    params = dict(model.named_parameters())

    def projected(p, o, a, s):
        return (torch.func.functional_call(model, p, (o[None], a[None]))[0][0] * s).sum()

    per_sample = torch.func.vmap(torch.func.grad(projected), in_dims=(None, 0, 0, 0))(params, obs, actions, signs)
    torch.testing.assert_close(batched, sum(g.flatten(1).pow(2).sum(1) for g in per_sample.values()))
    for i in range(6):  # plain autograd, one sample at a time
        model.zero_grad()
        (model(obs[i : i + 1], actions[i : i + 1])[0][0] * signs[i]).sum().backward()
        norm2 = sum(p.grad.pow(2).sum() for p in model.parameters() if p.grad is not None)
        torch.testing.assert_close(batched[i], norm2)


def test_gradient_poi_estimates_the_jacobian_norm():
    """Averaged over sign draws, the POI of a vector output is the squared Frobenius norm of
    the output-parameter Jacobian, computed here row by row."""
    torch.manual_seed(0)
    model = gradient.ExternalModel(8, 2, "forward", hidden_sizes=(6,), dropout=0.0)
    obs, actions = torch.rand(1, 8), torch.tensor([1])
    jacobian_norm2 = 0.0
    for d in range(8):
        model.zero_grad()
        model(obs, actions)[0][0, d].backward()
        jacobian_norm2 += sum(p.grad.pow(2).sum().item() for p in model.parameters() if p.grad is not None)
    draws = torch.stack([gradient.poi_values(model, obs, actions) for _ in range(4000)])
    assert draws.mean().item() == pytest.approx(jacobian_norm2, rel=0.05)
    scalar = gradient.ExternalModel(8, 2, "key_distance", hidden_sizes=(6,), dropout=0.0)
    assert len(set(gradient.poi_values(scalar, obs, actions).item() for _ in range(5))) == 1  # exact


def test_gradient_poi_is_higher_off_the_training_data():
    ratios = []
    for seed in range(3):
        torch.manual_seed(seed)
        model = gradient.ExternalModel(32, 3, "key_distance", hidden_sizes=(64, 32), dropout=0.0)
        outside, inside = poi_off_and_on_data(gradient, model, seed)
        ratios.append(outside / inside)
    assert min(ratios) > 1.3 and np.mean(ratios) > 2.0, ratios


def test_the_interest_gate_and_the_mixing_are_the_same_code_in_every_file():
    """test_smoke runs the reward flags on one file; the lines that gate and mix are the same in all, but for
    the policy file's gate, which is live (the interest counts while the task is solved), not latched."""
    from pathlib import Path

    keys = ("int_weight", "interest_on", "recent_returns", "mb_int_advantages", "int_after_return")
    blocks = {}
    for name in POI:
        source = (Path(__file__).resolve().parents[1] / "algos" / f"{name}.py").read_text()
        lines = [line.strip() for line in source.splitlines() if any(key in line for key in keys)]
        checkpointing = ('state["', "=recent_returns,", "=interest_on,")  # lists each file's own values too
        ranges = [line for line in lines if line.startswith('"')]  # the RANGES table: each file's flags
        blocks[name] = [
            line for line in lines if not any(part in line for part in checkpointing) and line not in ranges
        ]
    first = blocks["ppo_poi_ensemble"]
    assert len(first) >= 10 and all(block == first for name, block in blocks.items() if name != "ppo_poi_policy")
    latched = "interest_on = interest_on or full and float(np.mean(recent_returns)) >= args.int_after_return"
    starts_latched = "interest_on = args.int_after_return == 0 or args.no_task_reward"
    assert latched in first and starts_latched in first
    # the policy file's live gate, whatever the formatter's line breaks: compared without spaces and parentheses
    live = "interest_on = args.int_after_return == 0 or args.no_task_reward or full and float(np.mean(recent_returns))"
    live += " >= args.int_after_return"
    policy_source = (Path(__file__).resolve().parents[1] / "algos" / "ppo_poi_policy.py").read_text()
    squeeze = lambda text: re.sub(r"[\s()]", "", text)  # noqa: E731
    policy = blocks["ppo_poi_policy"]
    assert squeeze(live) in squeeze(policy_source) and latched not in policy and starts_latched not in policy
    assert [line for line in policy if squeeze(line) not in squeeze(live)] == [
        line for line in first if line not in (latched, starts_latched)
    ]
