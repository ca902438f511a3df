"""The policy and value networks of the discrete files: one value API, and `--bf16` only where it is meant to act."""

import importlib

import pytest
import torch

INTRINSIC_FILES = [
    "ppo_poi_disagreement",
    "ppo_poi_ensemble",
    "ppo_poi_grad",
    "ppo_poi_progress",
    "ppo_poi_diayn",
    "ppo_poi_emb",
]
FILES = ["ppo", "ppo_poi_replay", *INTRINSIC_FILES]


def agents(name, obs_dim=980, num_actions=7):
    """An agent of `name`'s file in float32 and one with `--bf16`, with the same weights, and a batch of views."""
    module = importlib.import_module(f"algos.{name}")
    torch.manual_seed(0)
    fp32 = module.Agent(obs_dim, num_actions)
    bf16 = module.Agent(obs_dim, num_actions, bf16=True)
    bf16.load_state_dict(fp32.state_dict())
    x = (torch.rand(256, obs_dim) < 0.15).float()  # about as many ones as a one-hot view
    return fp32, bf16, x


@pytest.mark.parametrize("name", INTRINSIC_FILES)
def test_get_value_is_task_and_intrinsic_value(name):
    agent, _, x = agents(name)
    with torch.no_grad():
        value, int_value = agent.get_value(x)
        hidden = agent.critic[:-1](x)
        assert torch.equal(value, agent.critic(x))  # the task head on the critic's body
        assert torch.equal(int_value, agent.critic_int(hidden))
        _, _, _, value_again, int_value_again = agent.get_action_and_value(x)
    assert torch.equal(value_again, value) and torch.equal(int_value_again, int_value)


@pytest.mark.parametrize("name", FILES)
def test_bf16_leaves_rollouts_in_float32(name):
    fp32, bf16, x = agents(name)
    actions = torch.randint(7, (len(x),))
    with torch.no_grad():  # a rollout step: identical outputs
        out32, out16 = fp32.get_action_and_value(x, actions)[1:], bf16.get_action_and_value(x, actions)[1:]
    for a, b in zip(out32, out16, strict=True):  # log-prob, entropy, value(s)
        assert a.dtype == torch.float32 and torch.equal(a, b)


@pytest.mark.parametrize("name", FILES)
def test_bf16_update_close_to_float32_and_weights_stay_float32(name):
    fp32, bf16, x = agents(name)
    actions = torch.randint(7, (len(x),))
    out32, out16 = fp32.get_action_and_value(x, actions), bf16.get_action_and_value(x, actions)
    logprob32, logprob16 = out32[1], out16[1]
    assert logprob16.dtype == torch.float32
    assert not torch.equal(logprob16, logprob32)  # the gradient pass did run in bfloat16
    assert (logprob16 - logprob32).abs().max() < 0.02  # a ratio within 2% of float32's
    for value32, value16 in zip(out32[3:], out16[3:], strict=True):
        assert value16.dtype == torch.float32
        assert (value16 - value32).abs().max() < 0.05 * value32.abs().max() + 1e-3
    (logprob16.mean() + sum(v.mean() for v in out16[3:])).backward()
    assert all(
        p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in bf16.parameters() if p.grad is not None
    )


@pytest.mark.parametrize("name", [*INTRINSIC_FILES, "ppo_poi_policy", "ppo_continuous_poi_ensemble"])
def test_the_intrinsic_value_trains_its_head_and_not_the_task_critic(name):
    """The intrinsic value head reads the critic's body without training it: while the interest is gated off, the
    task critic learns as ppo.py's does, and the intrinsic reward never moves the task value's features."""
    module = importlib.import_module(f"algos.{name}")
    torch.manual_seed(0)
    agent = module.Agent(3, 2) if name == "ppo_continuous_poi_ensemble" else module.Agent(980, 7)
    x = torch.randn(64, 3) if name == "ppo_continuous_poi_ensemble" else (torch.rand(64, 980) < 0.15).float()
    body, task_head = list(agent.critic[:-1].parameters()), list(agent.critic[-1].parameters())
    int_head = list(agent.critic_int.parameters())
    task = {id(p) for p in agent.task_parameters()}  # clipped apart from the intrinsic head
    assert task == {id(p) for p in agent.parameters()} - {id(p) for p in int_head} and len(task) > len(body) + 2

    def grads(loss):
        agent.zero_grad(set_to_none=True)
        loss.backward()
        return [p.grad for p in body], [p.grad for p in task_head], [p.grad for p in int_head]

    value, int_value = agent.get_value(x)
    body_grads, task_grads, int_grads = grads((int_value**2).mean())
    assert all(g is None for g in body_grads + task_grads)
    assert all(g is not None and g.abs().sum() > 0 for g in int_grads)
    value, int_value = agent.get_value(x)
    body_grads, task_grads, int_grads = grads((value**2).mean())
    assert all(g is not None and g.abs().sum() > 0 for g in body_grads + task_grads)
    assert all(g is None for g in int_grads)
