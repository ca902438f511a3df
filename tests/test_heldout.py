"""The held-out sets: which transitions a colour change alters (against a re-simulation in
MiniGrid), and the sets themselves (size, layouts, independence of the run)."""

import copy

import importlib

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn
from minigrid.core.constants import COLOR_TO_IDX
from minigrid.core.world_object import Key

from common.heldout import (
    HeldoutEval,
    changed_share,
    heldout_losses,
    heldout_set,
    heldout_tensors,
    random_policy_layouts,
)
from envs import ColorDoorKeyEnv, OneHotFlatObs, flat_to_image, key_distance, target_changed
from tests.test_env import door_of, stand_before_door

RED, BLUE = COLOR_TO_IDX["red"], COLOR_TO_IDX["blue"]


def step_under(env, action, key_color):
    """The flat next view of `env` after `action` with the door opened by `key_color`, on a copy."""
    twin = copy.deepcopy(env)
    door_of(twin).key_color = key_color
    obs, *_ = twin.step(action)
    return obs


def states_with_outcomes(seed, random_steps=300):
    """(view, action, next view if red opens, next view if blue opens) for states of a random
    walk and for states in front of the locked door carrying each key (or nothing)."""
    env = OneHotFlatObs(ColorDoorKeyEnv(size=6, correct_key_color="red"))
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    rows = []
    for _ in range(random_steps):
        action = int(rng.integers(7))
        rows.append((obs, action, step_under(env, action, "red"), step_under(env, action, "blue")))
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            obs, _ = env.reset()
    for carrying in (Key("red"), Key("blue"), Key("green"), None):
        env.reset(seed=seed)
        stand_before_door(env, carrying)
        obs = env.observation(env.unwrapped.gen_obs())
        for action in range(7):
            rows.append((obs, action, step_under(env, action, "red"), step_under(env, action, "blue")))
    return rows


@pytest.mark.parametrize("seed", range(3))
def test_forward_changed_marks_exactly_the_transitions_whose_outcome_depends_on_the_colour(seed):
    rows = states_with_outcomes(seed)
    obs = np.stack([r[0] for r in rows])
    actions = np.array([r[1] for r in rows])
    differs = np.array([not np.array_equal(r[2], r[3]) for r in rows])
    assert differs.sum() >= 2  # toggling with the red and with the blue key
    np.testing.assert_array_equal(target_changed("forward", obs, actions, RED, BLUE), differs)
    np.testing.assert_array_equal(target_changed("forward", obs, actions, BLUE, RED), differs)
    assert not target_changed("forward", obs, actions, RED, RED).any()
    assert not target_changed("agent_dir", obs, actions, RED, BLUE).any()


def random_views(num_steps=400):
    """Encoded and flat one-hot views of a random walk in ColorDoorKey-8x8 (two keys)."""
    env = ColorDoorKeyEnv(size=8, correct_key_color="red")
    rng = np.random.default_rng(0)
    images, _ = [], env.reset(seed=0)
    for _ in range(num_steps):
        images.append(env.gen_obs()["image"])
        _, _, terminated, truncated, _ = env.step(int(rng.integers(7)))
        if terminated or truncated:
            env.reset()
    return images, np.stack([OneHotFlatObs(env).observation({"image": image}) for image in images])


def hand_changed(images, old, new):
    """Plain loop: the Euclidean distance from the agent's cell (3, 6) to the nearest key of
    each colour (14 if none is in view) differs between the two colours."""
    changed = []
    for image in images:
        nearest = {}
        for i in range(7):
            for j in range(7):
                if image[i, j, 0] == 5:  # key
                    d = np.hypot(i - 3, j - 6)
                    nearest[image[i, j, 1]] = min(d, nearest.get(image[i, j, 1], 14.0))
        changed.append(nearest.get(old, 14.0) != nearest.get(new, 14.0))
    return np.array(changed)


def test_key_distance_changed_where_the_two_keys_distances_differ():
    images, views = random_views()
    hand = hand_changed(images, RED, BLUE)
    assert 0 < hand.sum() < len(hand)
    np.testing.assert_array_equal(target_changed("key_distance", views, np.zeros(len(views)), RED, BLUE), hand)


def test_a_rollouts_changed_share_counts_its_views_against_the_neighbouring_phase():
    images, views = random_views()
    obs = torch.tensor(views, dtype=torch.float32).reshape(100, 4, -1)  # (steps, envs, 980) as a rollout stores it
    actions = torch.zeros(100, 4, dtype=torch.long)
    hand = hand_changed(images, RED, BLUE).mean()
    assert 0 < hand < 1
    for phase in (0, 1):  # the first phase against the next, the second against the previous
        assert changed_share("key_distance", obs, actions, ["red", "blue"], phase) == pytest.approx(hand)
    green = hand_changed(images, BLUE, COLOR_TO_IDX["green"]).mean()  # no green key: every view with a blue one
    assert green != pytest.approx(hand)
    assert changed_share("key_distance", obs, actions, ["red", "blue", "green"], 2) == pytest.approx(green)
    # a middle phase against the previous (red), not the next (green)
    assert changed_share("key_distance", obs, actions, ["red", "blue", "green"], 1) == pytest.approx(hand)
    assert changed_share("forward", obs, actions, ["red", "blue"], 1) == 0.0  # never toggles


@pytest.mark.parametrize("target", ["key_distance", "forward"])
def test_heldout_sets_are_fixed_many_layouts_and_hold_the_change(target):
    env_id, colors = "ColorDoorKey-6x6-v0", ["red", "blue"]
    full, changed = heldout_set(env_id, colors, 1, target, num_steps=2000, episode_steps=20, min_changed=64)
    again, changed_again = heldout_set(env_id, colors, 1, target, num_steps=2000, episode_steps=20, min_changed=64)
    for key in full:  # the same sets every time: nothing of the run enters them
        np.testing.assert_array_equal(full[key], again[key])
        np.testing.assert_array_equal(changed[key], changed_again[key])
    assert len(full["obs"]) == 2000
    first_views = full["obs"][:100]  # step 0 of each of the 100 worlds
    assert len(np.unique(first_views, axis=0)) >= 75  # 100 layouts (a partial view can repeat in another)
    assert len(changed["obs"]) >= 64
    assert target_changed(target, changed["obs"], changed["actions"], RED, BLUE).all()
    if target == "key_distance":  # the targets are the blue phase's
        assert np.isin(full["key_distance"], [14.0]).mean() < 0.9
        obj = flat_to_image(full["obs"])
        np.testing.assert_allclose(full["key_distance"], key_distance(obj, np.full(len(obj), BLUE)))
    phase0_full, _ = heldout_set(env_id, colors, 0, target, num_steps=2000, episode_steps=20)
    np.testing.assert_array_equal(phase0_full["obs"][:100], first_views)  # same layouts in every phase


def test_random_policy_layouts_chain_each_world_episode():
    data = random_policy_layouts(
        "ColorDoorKey-6x6-v0", num_layouts=8, episode_steps=30, seed=3, correct_key_color="red"
    )
    obs, next_obs = data["obs"].reshape(30, 8, -1), data["next_obs"].reshape(30, 8, -1)
    actions = data["actions"].reshape(30, 8)
    np.testing.assert_array_equal(next_obs[:-1], obs[1:])  # one episode per world: each step leads to the next
    assert (actions != actions[:, :1]).any()
    for i in range(8):  # each world replayed alone in MiniGrid: every transition, the last (true final view) too
        env = OneHotFlatObs(gym.make("ColorDoorKey-6x6-v0", max_steps=30, correct_key_color="red"))
        view, _ = env.reset(seed=3 + i)
        for step in range(30):
            np.testing.assert_array_equal(obs[step, i], view)
            view, _, terminated, truncated, _ = env.step(actions[step, i])
            np.testing.assert_array_equal(next_obs[step, i], view)
            if terminated or truncated:  # the world's first episode ends (at step 30 at the latest)
                break


def test_random_policy_layouts_keep_selects_each_step_what_filtering_the_whole_rollout_would():
    def keep(obs, actions):
        return target_changed("key_distance", obs, actions, RED, BLUE) | (actions == 5)

    args = ("ColorDoorKey-8x8-v0", 8, 40, 3, "red", ("key_distance",))
    full, kept = random_policy_layouts(*args), random_policy_layouts(*args, keep=keep)
    mask = keep(full["obs"], full["actions"])
    assert 0 < mask.sum() < len(mask)
    for key in full:
        np.testing.assert_array_equal(kept[key], full[key][mask])


def test_no_changed_set_where_the_colour_cannot_move_the_target():
    for target, colors in [("agent_dir", ["red", "blue"]), ("key_distance", ["red", "red"]), ("forward", ["blue"])]:
        full, changed = heldout_set(
            "ColorDoorKey-6x6-v0", colors, 0, target, num_steps=400, episode_steps=40, min_changed=50
        )
        assert len(full["obs"]) == 400 and len(changed["obs"]) == 0 and changed.keys() == full.keys()
        assert all(changed[key].shape[1:] == full[key].shape[1:] for key in full)


class TinyModel(nn.Module):
    """What the held-out evaluation asks of an external model (`inputs`, a forward pass to a mean and a
    log-std, its `log_std` head or None): a linear map of the view and the one-hot action, with `members`
    it is an ensemble whose outputs lead with the member dimension."""

    log_std = None  # deterministic

    def __init__(self, obs_dim, num_actions, out_dim, members=None):
        super().__init__()
        self.num_actions, self.members = num_actions, members
        self.heads = nn.ModuleList(nn.Linear(obs_dim + num_actions, out_dim) for _ in range(members or 1))
        self.dropout = nn.Dropout(0.5)  # must be off in the evaluation

    def inputs(self, obs, actions):
        return torch.cat([obs.float(), nn.functional.one_hot(actions.long(), self.num_actions).float()], -1)

    def forward(self, obs, actions):
        x = self.dropout(self.inputs(obs, actions))
        outputs = torch.stack([head(x) for head in self.heads])
        return (outputs if self.members else outputs[0]), None


def tiny_targets(target, obs, next_obs, info_values):
    return next_obs - obs if target == "forward" else info_values.reshape(-1, 1).float()


def loop_loss(model, data, target):
    """Plain loop: each transition through the model alone (each member alone), its squared
    error against the target worked out here, averaged over transitions (and members)."""
    losses = []
    with torch.no_grad():
        for i in range(len(data["obs"])):
            obs, next_obs = torch.tensor(data["obs"][i]).float(), torch.tensor(data["next_obs"][i]).float()
            want = next_obs - obs if target == "forward" else torch.tensor([float(data[target][i])])
            x = torch.cat([obs, torch.eye(model.num_actions)[int(data["actions"][i])]])
            for head in model.heads:
                losses.append(((head(x) - want) ** 2).mean().item())
    return float(np.mean(losses))


@pytest.mark.parametrize("members", [None, 3])
@pytest.mark.parametrize("target", ["key_distance", "forward"])
def test_the_held_out_error_is_the_mean_loss_of_each_held_out_transition(target, members):
    full, _ = heldout_set("ColorDoorKey-6x6-v0", ["red", "blue"], 0, target, num_steps=320, episode_steps=40)
    torch.manual_seed(0)
    model = TinyModel(980, 7, 980 if target == "forward" else 1, members)
    heldout = heldout_tensors(model, full, target, tiny_targets, "cpu")
    assert len(heldout["obs"]) < len(full["obs"])  # repeated inputs: each computed once
    error, nll = heldout_losses(model, **heldout)
    assert error == pytest.approx(loop_loss(model, full, target), rel=1e-5) and nll is None
    assert not model.training
    assert heldout_tensors(model, {key: value[:0] for key, value in full.items()}, target, tiny_targets, "cpu") is None


class RecordingWriter:
    def __init__(self):
        self.scalars = {}

    def add_scalar(self, tag, value, step):
        self.scalars[tag] = (value, step)


def test_heldout_eval_logs_each_set_and_the_rollouts_share_and_draws_nothing():
    env_id, colors, target = "ColorDoorKey-6x6-v0", ["red", "blue"], "key_distance"
    torch.manual_seed(0)
    model = TinyModel(980, 7, 1)
    heldout_eval = HeldoutEval(model, tiny_targets, env_id, colors, target, 320, 40, 64, "cpu")
    images, views = random_views()
    obs, actions = torch.tensor(views, dtype=torch.float32).reshape(100, 4, -1), torch.zeros(100, 4, dtype=torch.long)
    random_state = torch.get_rng_state(), np.random.get_state()
    for phase in (0, 1):
        writer = RecordingWriter()
        loaded = heldout_eval.load(phase)
        heldout_eval.log(writer, 7 + phase, obs, actions)
        full, changed = heldout_set(env_id, colors, phase, target, 320, 40, 64)
        assert len(loaded["inverse"]) == len(full["obs"])
        assert writer.scalars["external_model/eval_loss"][0] == pytest.approx(loop_loss(model, full, target), rel=1e-5)
        assert writer.scalars["external_model/eval_loss_changed"][0] == pytest.approx(
            loop_loss(model, changed, target), rel=1e-5
        )
        share = writer.scalars["external_model/rollout_changed_share"][0]
        assert share == pytest.approx(hand_changed(images, RED, BLUE).mean())
        assert {step for _, step in writer.scalars.values()} == {7 + phase}
    assert torch.equal(torch.get_rng_state(), random_state[0])
    assert all(np.array_equal(a, b) for a, b in zip(np.random.get_state(), random_state[1]))
    no_change = HeldoutEval(model, tiny_targets, env_id, ["red"], target, 320, 40, 64, "cpu")
    no_change.load(0)
    writer = RecordingWriter()
    no_change.log(writer, 3, obs, actions)
    assert set(writer.scalars) == {"external_model/eval_loss"}


@pytest.mark.parametrize("file", ["ppo", "ppo_poi_ensemble"])
def test_a_gaussian_models_held_out_loss_is_the_squared_error_of_its_mean_and_its_nll_is_logged_apart(file):
    """Every model is measured alike on the held-out sets (the squared error of its mean prediction, the unit
    of the studies' thresholds); a Gaussian model's beta-NLL, in other units and negative where it is sure,
    goes to `eval_nll` and `eval_nll_changed`. Checked against a plain loop over the transitions."""
    module = importlib.import_module(f"algos.{file}")
    env_id, colors, target = "ColorDoorKey-6x6-v0", ["red", "blue"], "forward"
    torch.manual_seed(0)
    model = module.ExternalModel(980, 7, target, (16,), 0.5, gaussian=True, nll_beta=0.5)
    heldout_eval = HeldoutEval(model, module.model_targets, env_id, colors, target, 320, 40, 64, "cpu")
    heldout_eval.load(1)
    writer = RecordingWriter()
    obs, actions = torch.zeros(2, 4, 980), torch.zeros(2, 4, dtype=torch.long)
    heldout_eval.log(writer, 5, obs, actions)
    full, changed = heldout_set(env_id, colors, 1, target, 320, 40, 64)
    for data, suffix in ((full, ""), (changed, "_changed")):
        errors, nlls = [], []
        with torch.no_grad():
            for i in range(len(data["obs"])):
                x, nx = torch.tensor(data["obs"][i : i + 1]).float(), torch.tensor(data["next_obs"][i : i + 1]).float()
                mean, log_std = model(x, torch.tensor(data["actions"][i : i + 1]))
                want = nx - x
                errors.append(((mean - want) ** 2).mean().item())  # an ensemble: over its members too
                nll = 0.5 * ((want - mean) / log_std.exp()) ** 2 + log_std
                nlls.append(((log_std.exp() ** (2 * 0.5)) * nll).mean().item())
        assert writer.scalars[f"external_model/eval_loss{suffix}"][0] == pytest.approx(np.mean(errors), rel=1e-4)
        assert writer.scalars[f"external_model/eval_nll{suffix}"][0] == pytest.approx(np.mean(nlls), rel=1e-4)
    assert writer.scalars["external_model/eval_nll"][0] != pytest.approx(writer.scalars["external_model/eval_loss"][0])
