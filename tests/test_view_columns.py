"""The first layers read only the columns of the one-hot view that ColorDoorKey can set (`envs.view_columns`,
`keep_columns` in the algorithm files): an exact rewrite, so every network must compute what the dense one does."""

import importlib

import gymnasium as gym
import numpy as np
import pytest
import torch
from minigrid.core.constants import STATE_TO_IDX

from common.heldout import random_policy_transitions
from envs import BatchedColorDoorKey, ColorDoorKeyEnv, OneHotFlatObs, view_columns
from envs.views import CHANNEL_OFFSETS
from tests.test_checks import DISCRETE

CUSTOM = "ColorDoorKey-TestColumns-v0"  # a purple door and three keys: more colours than the registered ids
if CUSTOM not in gym.registry:
    gym.register(
        CUSTOM,
        entry_point=ColorDoorKeyEnv,
        kwargs=dict(size=8, door_color="purple", key_colors=("green", "yellow", "blue"), correct_key_color="blue"),
    )


def set_columns(obs):
    return set(np.flatnonzero(np.asarray(obs).reshape(-1, 980).any(0)))


@pytest.mark.parametrize(
    "env_id, colours, small",
    [
        ("ColorDoorKey-6x6-v0", 4, True),
        ("ColorDoorKey-8x8-v0", 4, True),
        ("ColorDoorKey-16x16-v0", 4, False),
        (CUSTOM, 6, True),
    ],
)
def test_the_view_columns_hold_every_column_a_view_sets(env_id, colours, small):
    columns = view_columns(env_id)
    # by hand: 6 object types (unseen, empty, wall, door, key, goal), the colours (red, grey, green, and the door's
    # and keys' others), 3 door states, in each of the 49 cells
    assert len(columns) == 49 * (6 + colours + 3) and len(set(columns)) == len(columns)
    assert view_columns("MiniGrid-Empty-5x5-v0") is None
    seen = set_columns(random_policy_transitions(OneHotFlatObs(gym.make(env_id)), 6000, seed=3)["obs"])
    batched = BatchedColorDoorKey(32, **gym.spec(env_id).kwargs)
    obs, _ = batched.reset(seed=4)
    rng = np.random.default_rng(5)
    for _ in range(300):
        seen |= set_columns(obs)
        obs, *_ = batched.step(rng.integers(7, size=32))
    assert seen <= set(columns)
    if small:  # a random walk meets every channel the list names, but a closed door (opened, then closed again)
        # only at times, and in 16x16 rarely the goal
        assert {c % 20 for c in columns} - {c % 20 for c in seen} <= {CHANNEL_OFFSETS[2] + STATE_TO_IDX["closed"]}


def views(n=512, env_id="ColorDoorKey-8x8-v0"):
    data = random_policy_transitions(OneHotFlatObs(gym.make(env_id)), n, seed=0, info_keys=("key_distance",))
    return {key: torch.tensor(value) for key, value in data.items()}


def agent_outputs(agent, x, actions, name):
    if name == "ppo_poi_policy":
        masks = agent.draw_masks((len(x),), generator=torch.Generator().manual_seed(1))
        return agent.get_action_and_value(x, masks, actions)[1:]
    return agent.get_action_and_value(x, actions)[1:]


@pytest.mark.parametrize("name", DISCRETE)
def test_an_agent_on_the_view_columns_computes_and_learns_what_the_dense_one_does(name):
    module = importlib.import_module(f"algos.{name}")
    columns = view_columns("ColorDoorKey-8x8-v0")
    torch.manual_seed(0)
    dense = module.Agent(980, 7)
    torch.manual_seed(0)
    sparse = module.Agent(980, 7, columns=columns)
    assert sparse.actor[0].weight.shape == (256, len(columns))
    x = views()["obs"]
    actions = torch.randint(7, (len(x),))
    for _ in range(3):  # the same outputs before and after Adam steps on the same loss
        losses = []
        for agent in (dense, sparse):
            outputs = agent_outputs(agent, x, actions, name)
            losses.append(outputs)
            optimizer = torch.optim.Adam(agent.parameters(), lr=1e-3)
            loss = -outputs[0].mean() - 0.01 * outputs[1].mean() + sum((v**2).mean() for v in outputs[2:])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        for a, b in zip(*losses, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(dense.actor[0].weight[:, columns], sparse.actor[0].weight, rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        noise = torch.zeros(len(x), 7)
        assert torch.equal(dense.act(x, noise), sparse.act(x, noise))


@pytest.mark.parametrize("name", ["ppo", "ppo_poi_ensemble"])  # the two ExternalModel classes
@pytest.mark.parametrize("target", ["key_distance", "forward"])
def test_an_external_model_on_the_view_columns_is_the_dense_one(name, target, tmp_path):
    module = importlib.import_module(f"algos.{name}")
    columns = view_columns("ColorDoorKey-8x8-v0")
    data = views()
    targets = data["key_distance"][:, None].float() if target == "key_distance" else data["next_obs"] - data["obs"]
    models = []
    for cols in (None, columns):
        torch.manual_seed(0)
        model = module.ExternalModel(980, 7, target, hidden_sizes=(64, 32), dropout=0.0, columns=cols)
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        for _ in range(5):
            loss = model.per_sample_loss(data["obs"], data["actions"], targets).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        models.append(model)
    dense, sparse = models
    prediction = sparse.predict(data["obs"], data["actions"])
    torch.testing.assert_close(prediction, dense.predict(data["obs"], data["actions"]), rtol=1e-4, atol=1e-4)
    sparse.save(tmp_path / "model.pt")
    loaded = module.ExternalModel.load(tmp_path / "model.pt")
    assert torch.equal(loaded.predict(data["obs"], data["actions"]), prediction)
