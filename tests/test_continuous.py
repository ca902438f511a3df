"""Continuous control: the SAC file's forward model and data, the continuous PPO ensemble,
the envs (flattened goal observations), smoke runs on Pendulum and MuJoCo tasks."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from algos import ppo_continuous_poi_ensemble as cppo
from algos import sac_forward_model as sac
from common.checkpoint import load_checkpoint, save_checkpoint
from common.tb import read_scalars
from common.heldout import continuous_heldout_set
from envs.continuous import (
    changed_region_share,
    fill_in_phases,
    last_steps_in_region,
    make_continuous_env,
    motor_change,
    share_in_region,
)
from tests import forked
from tests.reference import by_reference, reference
from tests.test_rollout_data import ROOT, SPY
from tests.test_smoke import only_run_dir, run

A = np.array([[0.9, 0.2], [-0.1, 0.95]], dtype=np.float32)
B = np.array([[0.0], [0.5]], dtype=np.float32)
NOISE = 0.01


def linear_system(n, center, spread, rng):
    """x' = A x + B u + noise around `center`: (obs, actions, deltas) as tensors."""
    x = (center + spread * rng.standard_normal((n, 2))).astype(np.float32)
    u = rng.uniform(-1, 1, (n, 1)).astype(np.float32)
    next_x = x @ A.T + u @ B.T + NOISE * rng.standard_normal((n, 2)).astype(np.float32)
    return torch.tensor(x), torch.tensor(u), torch.tensor(next_x - x)


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("gaussian", [False, True])
def test_forward_model_learns_a_linear_system(seed, gaussian):
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    dense, sparse = linear_system(4000, 0.0, 0.3, rng), linear_system(40, 2.0, 0.3, rng)
    data = tuple(torch.cat(pair) for pair in zip(dense, sparse))
    model = sac.ForwardModel(2, 1, hidden_size=64, layers=2, activation="tanh", gaussian=gaussian)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    fresh_dense, fresh_sparse = linear_system(500, 0.0, 0.3, rng), linear_system(500, 2.0, 0.3, rng)
    std_before = model(*fresh_dense[:2])[1].exp().mean().item() if gaussian else None
    for _ in range(30):
        sac.train_forward_model(model, optimizer, *data, epochs=1, batch_size=64)
    mean, log_std = model(*fresh_dense[:2])
    assert ((mean - fresh_dense[2]) ** 2).mean() < 5 * NOISE**2  # near the noise floor
    next_obs = model.predict(*fresh_dense[:2])
    assert torch.allclose(next_obs, fresh_dense[0] + mean, atol=1e-6)
    if gaussian:  # the std shrinks to the noise where data is dense, and stays wider where it is sparse
        std_dense = log_std.exp().mean().item()
        std_sparse = model(*fresh_sparse[:2])[1].exp().mean().item()
        assert std_dense < 0.05 * std_before and std_dense < 2 * NOISE and std_sparse > 1.3 * std_dense


def test_forward_model_save_load_round_trip(tmp_path):
    model = sac.ForwardModel(3, 1, hidden_size=16, layers=3, activation="logistic", gaussian=True)
    model.save(tmp_path / "fm.pt")
    loaded = sac.ForwardModel.load(tmp_path / "fm.pt")
    obs, actions = torch.randn(5, 3), torch.randn(5, 1)
    assert torch.equal(model.predict(obs, actions), loaded.predict(obs, actions))
    assert isinstance(loaded.body[1], torch.nn.Sigmoid) and len(loaded.body) == 6


def test_replay_buffer_wraps_and_transition_set_holds_out_a_fraction():
    buffer = sac.ReplayBuffer(capacity=5, obs_dim=1, action_dim=1)
    for i in range(7):
        buffer.add(np.array([[i]]), np.array([[i + 1]]), np.array([[0.0]]), np.array([float(i)]), np.array([0.0]))
    assert buffer.full and sorted(buffer.obs[:, 0]) == [2, 3, 4, 5, 6] and np.all(buffer.next_obs == buffer.obs + 1)
    data = sac.TransitionSet(10_000, 2, 1, eval_fraction=0.2, seed=0)
    obs = np.random.default_rng(0).normal(size=(10_000, 2)).astype(np.float32)
    data.add(obs, np.zeros((10_000, 1), np.float32), obs + 1)
    held_out, train = data.part(True, "cpu"), data.part(False, "cpu")
    assert abs(len(held_out[0]) / 10_000 - 0.2) < 0.02 and len(held_out[0]) + len(train[0]) == 10_000
    assert torch.allclose(train[2], torch.ones_like(train[2])) and not set(map(tuple, held_out[0].tolist())) & set(
        map(tuple, train[0].tolist())
    )
    assert [s for s in range(1, 3001) if sac.retrain_due(s, 1000)] == [1000, 2000, 3000]


def test_sac_interest_values_the_model_error_and_a_noise_fixed_per_transition():
    """The error interest against a hand-worked linear model (delta = 2 * action, so a transition whose observation
    moved by d for action a is off by d - 2a in each dimension); the noise interest is a uniform draw per stored
    transition, the same each time it is sampled, from the buffer's own generator (seeded apart from numpy's)."""
    model = sac.ForwardModel(obs_dim=2, action_dim=1, layers=0)
    with torch.no_grad():
        model.mean.weight.copy_(torch.tensor([[0.0, 0.0, 2.0], [0.0, 0.0, 2.0]]))
        model.mean.bias.zero_()
    obs, actions = torch.tensor([[1.0, 1.0], [0.0, 3.0]]), torch.tensor([[0.5], [1.0]])
    next_obs = torch.tensor([[2.0, 3.0], [2.0, 3.0]])  # moved by (1, 2) and (2, 0): off by (0, 1) and (0, -2)
    assert torch.allclose(sac.transition_errors(model, obs, actions, next_obs), torch.tensor([0.5, 2.0]))
    buffers = [sac.ReplayBuffer(capacity=50, obs_dim=1, action_dim=1, seed=seed) for seed in (3, 3, 4)]
    for buffer in buffers:
        for i in range(80):  # wraps: the last 50 stay
            buffer.add(np.array([[i]]), np.array([[i]]), np.zeros((1, 1)), np.zeros(1), np.zeros(1))
    np.random.seed(0)
    draws = {}
    for _ in range(5):
        obs, *_, noise, _ = buffers[0].sample(64, "cpu")
        for n, value in zip(obs[:, 0].tolist(), noise.tolist()):
            assert draws.setdefault(n, value) == value
    assert 0 <= min(draws.values()) and max(draws.values()) < 1 and len(draws) > 40
    assert np.array_equal(buffers[0].noise, buffers[1].noise) and not np.array_equal(buffers[0].noise, buffers[2].noise)
    # apart from the forward model's split of the transitions, which the same seed draws: numpy's float32 draw 2k + 1
    # is its float64 draw k to float32 precision, so one stream for both would hold out exactly the transitions whose
    # noise is below the held-out fraction
    buffer, transitions = sac.ReplayBuffer(80, 1, 1, seed=3), sac.TransitionSet(80, 1, 1, eval_fraction=0.5, seed=3)
    for i in range(80):
        buffer.add(np.array([[i]]), np.array([[i]]), np.zeros((1, 1)), np.zeros(1), np.zeros(1))
        transitions.add(np.array([[i]]), np.zeros((1, 1)), np.array([[i]]))
    agreement = np.mean((buffer.noise[1::2] < 0.5) == transitions.held_out[:40])
    assert 0.2 < agreement < 0.8, agreement


def test_transition_set_window_keeps_the_last_transitions_of_each_part():
    """--fm-window: the parts among the last `window` transitions added, against a plain filter of the numbered rows;
    a window larger than the data, or none, gives all of it."""
    data = sac.TransitionSet(100, 1, 1, eval_fraction=0.3, seed=1)
    numbers = np.arange(70, dtype=np.float32)[:, None]
    for chunk in np.split(numbers, [10, 35]):  # added in three calls, as runs add one step (or env) at a time
        data.add(chunk, np.zeros_like(chunk), chunk + 1)
    held_out = data.held_out[:70]
    for window, first in [(25, 45), (1, 69), (70, 0), (500, 0), (None, 0)]:
        for part in (True, False):
            expected = [n for n in range(first, 70) if held_out[n] == part]
            obs, actions, deltas = data.part(part, "cpu", window)
            assert obs[:, 0].tolist() == expected and torch.equal(deltas, torch.ones_like(deltas))
    assert 0 < held_out[45:].sum() < 25  # both parts are in the window


def test_her_relabels_with_goals_achieved_later_in_the_same_episode():
    """A hand-built history (episodes of 6, 8, 5 and 7 steps, then 4 of one still going, through a buffer of 20):
    each observation holds its transition's number and a desired goal of -1, each next observation achieves the goal
    number + 0.5. Against a plain bookkeeping of the episodes: a relabelled sample's goal is one achieved at its own
    step or later in its episode (so far), in the observation and the next one, and its reward is the reward
    function's; about k / (k + 1) of them are relabelled, the others are as stored."""
    lengths, ongoing = [6, 8, 5, 7], 4
    buffer = sac.ReplayBuffer(capacity=20, obs_dim=2, action_dim=1, goal_dim=1)
    episode_of, ends, number = {}, {}, 0
    for episode, length in enumerate([*lengths, ongoing]):
        for t in range(length):
            done = np.array([t == length - 1 and episode < len(lengths)])
            row = np.array([[number, -1.0]], np.float32)
            buffer.add(row, row, np.zeros((1, 1)), np.array([7.0]), np.zeros(1), np.array([[number + 0.5]]), done)
            episode_of[number] = episode
            number += 1
        ends[episode] = number
    np.random.seed(0)
    reward = lambda achieved, goal, info: -np.abs(achieved - goal).sum(-1)  # noqa: E731
    obs, _, next_obs, rewards, *_ = (np.asarray(x) for x in buffer.sample(4000, "cpu", her=(4, reward)))
    relabelled = obs[:, 1] != -1
    assert abs(relabelled.mean() - 0.8) < 0.03 and np.all(rewards[~relabelled] == 7.0)
    assert set(obs[:, 0].astype(int)) == set(range(number - 20, number))  # the last 20 transitions only
    offsets = set()
    for (n, goal), next_goal, r in zip(obs[relabelled], next_obs[relabelled, 1], rewards[relabelled]):
        later = goal - 0.5
        assert later == int(later) and n <= later < ends[episode_of[int(n)]] and episode_of[int(later)] == episode_of[n]
        assert next_goal == goal and r == -abs(n + 0.5 - goal)
        offsets.add(int(later - n))
    assert offsets == set(range(7))  # from its own step to the last of the longest episode in the buffer (7)


def test_sac_actor_samples_and_log_densities_equal_torch_normals():
    """The actor's hand-written reparameterised sample and log density against CleanRL's formulation
    with torch.distributions.Normal: bitwise, so that the rewrite cannot change a run."""
    space = gym.spaces.Box(np.array([-2.0, 0.0], dtype=np.float32), np.array([2.0, 1.0], dtype=np.float32))
    torch.manual_seed(0)
    actor = sac.Actor(3, space)
    obs = torch.randn(64, 3)
    torch.manual_seed(1)
    action, log_prob, mean = actor.get_action(obs)

    torch.manual_seed(1)
    loc, log_std = actor(obs)
    normal = torch.distributions.Normal(loc, log_std.exp())
    x_t = normal.rsample()
    y_t = torch.tanh(x_t)
    scale, bias = torch.tensor([2.0, 0.5]), torch.tensor([0.0, 0.5])  # the space's half-widths and centres, by hand
    expected = normal.log_prob(x_t) - torch.log(scale * (1 - y_t.pow(2)) + 1e-6)
    assert torch.equal(action, y_t * scale + bias)
    assert torch.equal(log_prob, expected.sum(1, keepdim=True))
    assert torch.equal(mean, torch.tanh(loc) * scale + bias)


def test_soft_update_equals_the_loop_over_parameters():
    torch.manual_seed(0)
    online, target = sac.SoftQNetwork(3, 1), sac.SoftQNetwork(3, 1)
    expected = [0.005 * p + (1 - 0.005) * t for p, t in zip(online.parameters(), target.parameters())]
    sac.soft_update(list(target.parameters()), list(online.parameters()), 0.005)
    assert all(torch.equal(t, e) for t, e in zip(target.parameters(), expected))
    assert not any(t.grad_fn for t in target.parameters())


def test_continuous_ensemble_equals_a_loop_over_members():
    torch.manual_seed(0)
    model = cppo.ForwardModel(4, 2, hidden_sizes=(8, 6), num_members=3)
    obs, actions = torch.randn(7, 4), torch.randn(7, 2)
    batched = model(obs, actions)
    layers = [m for m in model.modules() if isinstance(m, cppo.EnsembleLinear)]
    for k in range(3):
        h = torch.cat([obs, actions], -1)
        for i, layer in enumerate(layers):
            h = h @ layer.weight[k] + layer.bias[k]
            h = torch.relu(h) if i < len(layers) - 1 else h
        assert torch.allclose(batched[k], h, atol=1e-5)
    assert torch.allclose(cppo.poi_values(model, obs, actions), batched.var(0, unbiased=False).mean(-1))


def test_the_continuous_ppo_held_out_error_is_in_raw_observation_units():
    """raw_heldout_error against hand-made cases: a model that predicts no change errs by the raw deltas' mean square,
    one that predicts the normalised delta exactly errs by nothing, whatever the normalising statistics; so does an
    ensemble whose two members err by +-0.3 around it from the normalised observation it is given (the error is the
    members' mean's, and the model reads normalised observations)."""
    rng = np.random.default_rng(0)
    obs = torch.tensor(rng.normal(size=(50, 3)), dtype=torch.float32)
    next_obs = obs + torch.tensor(rng.normal(scale=0.1, size=(50, 3)), dtype=torch.float32)
    mean, var = torch.tensor([0.5, -1.0, 2.0]), torch.tensor([4.0, 0.25, 9.0])
    normalise = lambda x: (x - mean) / torch.sqrt(var + 1e-8)  # noqa: E731

    class Fixed(torch.nn.Module):  # a two-member "ensemble" that predicts `delta` for every input
        def __init__(self, delta):
            super().__init__()
            self.delta = delta

        def forward(self, o, a):
            return self.delta.expand(2, *self.delta.shape)

    actions = torch.zeros(50, 1)
    still = cppo.raw_heldout_error(Fixed(torch.zeros(50, 3)), obs, actions, next_obs, mean, var)
    assert np.isclose(still, ((next_obs - obs) ** 2).mean().item(), rtol=1e-5)
    exact = cppo.raw_heldout_error(Fixed(normalise(next_obs) - normalise(obs)), obs, actions, next_obs, mean, var)
    assert exact < 1e-10

    class Apart(torch.nn.Module):  # two members 0.3 either side of the exact normalised delta from the input `o`
        def forward(self, o, a):
            delta = normalise(next_obs) - o
            return torch.stack([delta + 0.3, delta - 0.3])

    assert cppo.raw_heldout_error(Apart(), obs, actions, next_obs, mean, var) < 1e-10


def test_goal_observations_are_flattened():
    env = make_continuous_env("FetchReach-v4")
    raw = gym.make("FetchReach-v4")
    flat, _ = env.reset(seed=3)
    obs, _ = raw.reset(seed=3)
    assert np.allclose(flat, np.concatenate([obs["observation"], obs["desired_goal"]]))
    assert env.observation_space.shape == (13,)


def pendulum_step(state, torque, phase):
    """Pendulum's next (cos, sin, angular velocity) from `state` (angle, velocity) and `torque`, in `phase` of
    PendulumMotorChange-v1, from the equations of motion (gymnasium's constants: g 10, m 1, l 1, dt 0.05)."""
    if phase % 2 and np.cos(state[0]) < 0 and torque > 0:
        torque *= 0.25
    velocity = np.clip(state[1] + (3 * 10 / 2 * np.sin(state[0]) + 3.0 * torque) * 0.05, -8, 8)
    angle = state[0] + velocity * 0.05
    return np.array([np.cos(angle), np.sin(angle), velocity], dtype=np.float32)


def test_the_motor_weakens_where_marked_and_only_from_the_next_reset():
    """PendulumMotorChange-v1 against the equations of motion: in an odd phase, a positive torque below the
    horizontal acts at a quarter; `changed` marks exactly the transitions whose outcome the phases disagree on."""
    env = make_continuous_env("PendulumMotorChange-v1")
    motor = motor_change(env)
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    motor.set_phase(1)
    assert motor.phase == 0  # not before the next reset
    outcomes = {}
    for phase in (1, 2, 3):
        motor.set_phase(phase)
        env.reset(seed=1)
        assert motor.phase == phase
        rows = []
        for _ in range(400):
            state = np.array([rng.uniform(-np.pi, np.pi), rng.uniform(-8, 8)])
            torque = rng.uniform(-2, 2)
            obs = np.array([np.cos(state[0]), np.sin(state[0]), state[1]], dtype=np.float32)
            env.unwrapped.state, motor.last_obs = state.copy(), obs  # the world put in `state`
            next_obs = env.step(np.array([torque], dtype=np.float32))[0]
            assert np.allclose(next_obs, pendulum_step(state, torque, phase), atol=1e-5)
            rows.append((obs, torque, next_obs, pendulum_step(state, torque, phase + 1)))
        outcomes[phase] = rows
    capped = 0
    for obs, torque, next_obs, other in outcomes[1]:
        differs = not np.allclose(next_obs, other, atol=1e-6)
        marked = bool(motor.changed(obs[None], np.array([[torque]]))[0])
        assert marked == (obs[0] < 0 and torque > 0) and (marked or not differs)
        if marked and not differs:  # both phases at the speed cap
            assert abs(next_obs[2]) == 8.0
            capped += 1
    assert capped < 20
    assert 0.15 < np.mean([motor.changed(o[None], np.array([[t]]))[0] for o, t, *_ in outcomes[1]]) < 0.35


def test_a_torque_beyond_the_bounds_weakens_from_the_bound():
    """Pendulum clips a torque to [-2, 2]; the weakened motor applies its quarter to that clipped push (4 acts as 2
    does: 0.5), not to the raw action (which Pendulum would then clip to 1)."""
    env = make_continuous_env("PendulumMotorChange-v1")
    motor = motor_change(env)
    motor.set_phase(1)
    env.reset(seed=0)
    state = np.array([2.5, 0.3])  # below the horizontal
    obs = np.array([np.cos(state[0]), np.sin(state[0]), state[1]], dtype=np.float32)
    for torque, acting in ((4.0, 2.0), (2.0, 2.0), (-4.0, -2.0)):
        env.unwrapped.state, motor.last_obs = state.copy(), obs
        next_obs = env.step(np.array([torque], dtype=np.float32))[0]
        assert np.allclose(next_obs, pendulum_step(state, acting, 1), atol=1e-6), torque


def test_the_held_out_sets_marked_transitions_all_change_but_at_the_speed_cap():
    """The environments page's counts: of the marked transitions of each phase's held-out set (the files' default,
    10,240 random steps), those whose outcome both phases share, all at Pendulum's speed cap: 13 of 3,647 and 33
    of 3,688."""
    for phase, (marked, capped) in enumerate(((3647, 13), (3688, 33))):
        full, changed = continuous_heldout_set("PendulumMotorChange-v1", phase, 10240, 80)
        states = np.stack([np.arctan2(changed["obs"][:, 1], changed["obs"][:, 0]), changed["obs"][:, 2]], axis=1)
        same = [
            np.array_equal(pendulum_step(x, float(u[0]), 1), pendulum_step(x, float(u[0]), 0))
            for x, u in zip(states, changed["actions"])
        ]
        assert (len(changed["obs"]), sum(same)) == (marked, capped)
        ends = [pendulum_step(x, float(u[0]), 1)[2] for x, u, s in zip(states, changed["actions"], same) if s]
        assert np.all(np.abs(ends) == 8.0)


def test_the_last_step_s_region_is_the_step_s_own_through_episode_ends():
    """With SAME_STEP autoreset (the files' mode), over 450 random steps of 3 envs (6 episode ends, where the env
    resets within the step), last_steps_in_region is changed() of the observation each env stepped from and the action
    it took; and share_in_region, by hand: the share of a sum on the marked steps, numpy or torch alike."""
    envs = gym.vector.SyncVectorEnv(
        [lambda: make_continuous_env("PendulumMotorChange-v1")] * 3, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    obs, _ = envs.reset(seed=3)
    envs.call("set_phase", 1)
    rng = np.random.default_rng(4)
    ends = 0
    for _ in range(450):
        torques = rng.uniform(-2, 2, (3, 1)).astype(np.float32)
        expected = (obs[:, 0] < 0) & (torques[:, 0] > 0)
        obs, _, terminated, truncated, infos = envs.step(torques)
        ends += int(np.sum(terminated | truncated))
        assert np.array_equal(last_steps_in_region(envs), expected)
    assert ends == 6
    values, marked = np.array([[1.0, 2.0], [3.0, 4.0]]), np.array([[True, False], [False, True]])
    assert share_in_region(values, marked) == 0.5 and share_in_region(values, ~marked) == 0.5
    in_torch = torch.tensor(values, dtype=torch.float32), torch.tensor([[False, False], [True, False]])
    assert share_in_region(*in_torch) == pytest.approx(0.3)


def test_the_changed_region_share_counts_where_the_agent_went_in_every_phase():
    """changed_region_share over a vector env against a plain count of the hand-placed states: steps below the
    horizontal with a positive torque, in phase 0 as in phase 1, each count taken once; and last_steps_in_region
    marks each env's own last step."""
    envs = gym.vector.SyncVectorEnv([lambda: make_continuous_env("PendulumMotorChange-v1")] * 2)
    envs.reset(seed=0)
    rng = np.random.default_rng(1)
    assert changed_region_share(envs) is None  # no step yet
    for phase in (0, 1):
        envs.call("set_phase", phase)
        envs.reset(seed=phase)
        expected = 0
        for _ in range(30):
            angles, torques = rng.uniform(-np.pi, np.pi, 2), rng.uniform(-2, 2, (2, 1)).astype(np.float32)
            for env, angle in zip(envs.envs, angles):
                motor = motor_change(env)
                env.unwrapped.state = np.array([angle, 0.0])
                motor.last_obs = np.array([np.cos(angle), np.sin(angle), 0.0], dtype=np.float32)
            marked = (np.cos(angles) < 0) & (torques[:, 0] > 0)
            expected += int(np.sum(marked))
            envs.step(torques)
            assert np.array_equal(last_steps_in_region(envs), marked)
        assert changed_region_share(envs) == expected / 60 and 0 < expected < 60
    unchanging = gym.vector.SyncVectorEnv([lambda: make_continuous_env("Pendulum-v1")])
    assert changed_region_share(unchanging) is None and last_steps_in_region(unchanging) is None


def test_continuous_heldout_sets_are_fixed_per_phase_and_hold_the_changed_transitions():
    full, changed = continuous_heldout_set("PendulumMotorChange-v1", 1, 1000, 80)
    again, _ = continuous_heldout_set("PendulumMotorChange-v1", 1, 1000, 80)
    first, first_changed = continuous_heldout_set("PendulumMotorChange-v1", 0, 1000, 80)
    assert len(full["obs"]) == 13 * 80 and all(np.array_equal(full[k], again[k]) for k in full)
    starts = full["obs"][::80]  # world after world, each from its own seed: the same starts and actions in each phase
    assert np.array_equal(starts, first["obs"][::80]) and len(np.unique(starts, axis=0)) == 13
    assert np.array_equal(full["actions"], first["actions"]) and not np.array_equal(full["next_obs"], first["next_obs"])
    # each transition of the odd phase follows the equations of motion with its weakened motor where marked
    states = np.stack([np.arctan2(full["obs"][:, 1], full["obs"][:, 0]), full["obs"][:, 2]], axis=1)
    expected = np.array([pendulum_step(x, float(u[0]), 1) for x, u in zip(states, full["actions"])])
    assert np.allclose(full["next_obs"], expected, atol=1e-5)
    weakened = np.array(
        [
            not np.allclose(pendulum_step(x, float(u[0]), 1), pendulum_step(x, float(u[0]), 0))
            for x, u in zip(states, full["actions"])
        ]
    )
    mask = (full["obs"][:, 0] < 0) & (full["actions"][:, 0] > 0)
    assert np.array_equal(changed["obs"], full["obs"][mask]) and 0.2 < mask.mean() < 0.5
    assert np.all(mask[weakened]) and weakened.sum() > 0.99 * mask.sum()  # all but those at the speed cap
    assert len(first_changed["obs"]) == ((first["obs"][:, 0] < 0) & (first["actions"][:, 0] > 0)).sum()
    # each step of a world follows from the one before (no episode ends within 80 steps)
    follows = np.ones(len(full["obs"]) - 1, bool)
    follows[79::80] = False
    assert np.array_equal(full["next_obs"][:-1][follows], full["obs"][1:][follows])
    plain, none = continuous_heldout_set("Pendulum-v1", 0, 160, 80)
    assert len(plain["obs"]) == 160 and len(none["obs"]) == 0


class Phases:
    def __init__(self, env, change_steps, total_timesteps=1000):
        self.env, self.change_steps, self.total_timesteps = env, change_steps, total_timesteps


@pytest.mark.parametrize(
    "env, steps, expected",
    [
        ("PendulumMotorChange-v1", None, (500,)),
        ("PendulumMotorChange-v1", (100, 900), (100, 900)),
        ("PendulumMotorChange-v1", (), ()),
        ("Pendulum-v1", None, ()),
        ("Pendulum-v1", (500,), "--change-steps needs an env that changes (PendulumMotorChange-v1), got Pendulum-v1"),
        ("PendulumMotorChange-v1", (600, 600), "change steps must be strictly increasing, got [600, 600]"),
        ("PendulumMotorChange-v1", (1000,), "change steps must lie in (0, total-timesteps=1000), got [1000]"),
    ],
)
def test_change_steps_of_the_continuous_files(env, steps, expected):
    args = Phases(env, steps)
    if isinstance(expected, str):
        with pytest.raises(ValueError) as error:
            fill_in_phases(args)
        assert str(error.value) == expected
    else:
        fill_in_phases(args)
        assert args.change_steps == expected


SAC_SMALL = [
    "--eval-steps",
    "512",
    "--total-timesteps",
    "600",
    "--learning-starts",
    "200",
    "--fm-retrain-every",
    "200",
    "--fm-epochs",
    "4",
    "--batch-size",
    "64",
]


def test_sac_intrinsic_reward_reaches_the_critics_only_with_a_weight(tmp_path):
    """--int-coef 0 trains the same run whatever --interest says (no poi/ logged); with a weight, the error and the
    noise interests each train another run, and the logged batch values are the model's errors (positive) or the
    uniform draws (mean about 0.5)."""
    small = [*SAC_SMALL, "--eval-steps", "64"]
    arms = {"none": ["--interest", "noise"], "error": ["--int-coef", "1"], "noise": ["--int-coef", "1", "--interest",
            "noise"], "plain": []}  # fmt: skip
    scalars = {}
    for name, flags in arms.items():
        (tmp_path / name).mkdir()
        run(tmp_path / name, *small, *flags, script="algos/sac_forward_model.py")
        scalars[name] = read_scalars(only_run_dir(tmp_path / name))
    training = lambda s: {k: v for k, v in s.items() if k.startswith(("losses/", "fm/"))}  # noqa: E731
    assert training(scalars["none"]) == training(scalars["plain"]) and "poi/mean" not in scalars["none"]
    for name in ("error", "noise"):
        assert scalars[name]["losses/qf1_values"] != scalars["plain"]["losses/qf1_values"]
    assert scalars["error"]["poi/mean"][0][1] > 0 and abs(scalars["noise"]["poi/mean"][0][1] - 0.5) < 0.15


def test_sac_holds_out_transitions_apart_from_the_random_actions_that_made_them(tmp_path):
    """The forward model's held-out fifth of the transitions is drawn from a stream of its own: over the random
    actions before --learning-starts (drawn by the action space, seeded by --seed) it is no threshold on the action
    (one stream for both held out exactly the actions below -1.2) and holds about a fifth in every band of actions."""
    script = tmp_path / "keep.py"  # the file's main block, then what its TransitionSet holds
    script.write_text(
        "import runpy, sys\nimport numpy as np\n"
        f"sys.argv[0] = {str(ROOT / 'algos/sac_forward_model.py')!r}\n"
        "transitions = runpy.run_path(sys.argv[0], run_name='__main__')['transitions']\n"
        f"np.savez({str(tmp_path / 'kept.npz')!r}, size=transitions.size, actions=transitions.actions, "
        "held_out=transitions.held_out)\n"
    )
    flags = ["--env", "Pendulum-v1", "--total-timesteps", "1001", "--learning-starts", "1000", "--eval-steps", "64",
             "--runs-dir", tmp_path / "runs"]  # fmt: skip
    proc = forked.run([script, *flags], tmp_path)
    assert proc.returncode == 0, proc.stderr
    kept = np.load(tmp_path / "kept.npz")
    size, actions, held_out = int(kept["size"]), kept["actions"][:, 0], kept["held_out"]
    actions, held_out = actions[:size], held_out[:size]
    assert size == 1001 and 150 < held_out.sum() < 250
    for band in (actions < -1.2, (actions >= -1.2) & (actions < 0), actions >= 0):
        assert 0.1 < held_out[band].mean() < 0.3


def test_sac_buffer_in_a_checkpoint_draws_its_noise_on_as_the_buffer_that_was_not_saved(tmp_path):
    """The noise interest reads each row's draw from the buffer's own generator, which the checkpoint keeps inside
    the buffer (a loop value): the reloaded buffer's next draws are the uninterrupted buffer's, not a fresh one's.
    The checkpoint test resumes SAC under the error interest, which never reads the noise."""
    buffer = sac.ReplayBuffer(capacity=8, obs_dim=1, action_dim=1, seed=5)
    rows = lambda n: (np.zeros((n, 1)), np.zeros((n, 1)), np.zeros((n, 1)), np.zeros(n), np.zeros(n))  # noqa: E731
    buffer.add(*rows(3))
    save_checkpoint(tmp_path, sac.Args(), {}, {"rb": buffer})
    reloaded = load_checkpoint(tmp_path / "checkpoint.pt")["values"]["rb"]
    fresh = sac.ReplayBuffer(capacity=8, obs_dim=1, action_dim=1, seed=5)
    for each in (buffer, reloaded, fresh):
        each.add(*rows(4))
    np.testing.assert_array_equal(reloaded.noise, buffer.noise)
    assert not np.array_equal(fresh.noise[:4], buffer.noise[3:7])  # a fresh generator would repeat the first draws


@pytest.mark.slow
def test_sac_logs_how_much_of_the_interest_falls_on_an_earlier_worlds_transitions(tmp_path):
    """On PendulumMotorChange-v1 with a change after step 1,000 the new motor acts from step 1,201 (the reset after
    the 200-step episode under way): at step 2,000 the batch's rows of the earlier world are about 1,200 / 2,000 of
    it, at 2,400 about 1,200 / 2,400, and the noise interest, blind to the world, falls on them in that share. Rows
    counted from the phase's move (step 1,001) would be 0.5 and 0.42. The buffer keeps each row's world."""
    buffer = sac.ReplayBuffer(capacity=40, obs_dim=1, action_dim=1)
    for i in range(60):  # wraps: rows 20-59 stay, those from 45 on from world 1
        buffer.add(np.array([[i]]), np.array([[i]]), np.zeros((1, 1)), np.zeros(1), np.zeros(1), world=int(i >= 45))
    obs, *_, world = buffer.sample(200, "cpu")
    np.testing.assert_array_equal(world, obs[:, 0].numpy() >= 45)
    flags = ["--env", "PendulumMotorChange-v1", "--seed", "3", "--total-timesteps", "2400", "--change-steps", "1000",
             "--learning-starts", "1900", "--batch-size", "1024", "--eval-steps", "64", "--int-coef", "0.1",
             "--interest", "noise", "--fm-hidden-size", "64"]  # fmt: skip
    run(tmp_path, *flags, script="algos/sac_forward_model.py")
    scalars = read_scalars(only_run_dir(tmp_path))
    rows, interest = scalars["poi/old_world_rows"], scalars["poi/old_world_interest"]
    assert [s for s, _ in rows] == [s for s, _ in interest] == [2000, 2400]
    for (_, share), expected in zip(rows, (1200 / 2000, 1200 / 2400)):
        assert abs(share - expected) < 0.04, (share, expected)
    for (_, share), (_, interest_share) in zip(rows, interest):
        assert abs(interest_share - share) < 0.05


@pytest.mark.slow
@pytest.mark.parametrize("env_id", ["Pendulum-v1", "HalfCheetah-v5", "FetchReach-v4"])
def test_sac_runs_and_retrains_the_forward_model_every_n_steps(tmp_path, env_id):
    window = ["--fm-window", "300"] if env_id == "Pendulum-v1" else []  # on the last 300 transitions only
    run(
        tmp_path,
        "--env",
        env_id,
        *SAC_SMALL,
        *window,
        "--save-model",
        "--fm-gaussian",
        script="algos/sac_forward_model.py",
    )
    run_dir = only_run_dir(tmp_path)
    scalars = read_scalars(run_dir)
    assert [s for s, _ in scalars["external_model/train_loss"]] == [200, 400, 600]
    assert [s for s, _ in scalars["fm/eval_loss"]] == [200, 400, 600]
    assert [s for s, _ in scalars["external_model/eval_loss"]] == [200, 400, 600]  # the random policy's transitions
    assert {"losses/qf_loss", "losses/actor_loss", "losses/alpha", "charts/SPS"} <= set(scalars)
    model = sac.ForwardModel.load(run_dir / "forward_model.pt")
    assert model.config["gaussian"] and (run_dir / "finished.json").is_file()
    if env_id == "Pendulum-v1":  # the saved model predicts fresh transitions better than an untrained one
        env = make_continuous_env(env_id)
        obs, _ = env.reset(seed=5)
        rows = []
        for _ in range(200):
            action = env.action_space.sample()
            next_obs, *_ = env.step(action)
            rows.append((obs, action, next_obs))
            obs = next_obs
        o, a, n = (torch.tensor(np.array(x), dtype=torch.float32) for x in zip(*rows))
        untrained = sac.ForwardModel(**model.config)
        assert ((model.predict(o, a) - n) ** 2).mean() < 0.5 * ((untrained.predict(o, a) - n) ** 2).mean()


@pytest.mark.parametrize("env_id", ["Pendulum-v1", "Walker2d-v5"])
def test_continuous_ppo_ensemble_runs(tmp_path, env_id):
    run(
        tmp_path,
        "--env",
        env_id,
        "--total-timesteps",
        "1024",
        "--num-steps",
        "512",
        "--num-minibatches",
        "4",
        "--update-epochs",
        "2",
        "--save-model",
        script="algos/ppo_continuous_poi_ensemble.py",
    )
    run_dir = only_run_dir(tmp_path)
    scalars = read_scalars(run_dir)
    assert {
        "poi/mean",
        "poi/max",
        "poi/intrinsic_reward_mean",
        "external_model/train_loss",
        "external_model/eval_loss",
        "charts/phase",
        "losses/int_value_loss",
        "losses/value_loss",
        "charts/SPS",
    } <= set(scalars)
    assert len(scalars["poi/mean"]) == 2 and min(v for _, v in scalars["poi/mean"]) > 0
    model = cppo.ForwardModel.load(run_dir / "forward_model.pt")
    assert model.num_members == 5
    # what the saved agent needs to act on raw observations: the normalisation it was trained with
    stats = np.load(run_dir / "obs_normalization.npz")
    obs_dim = stats["mean"].shape[1]
    assert stats["mean"].shape == stats["var"].shape == (1, obs_dim) and float(stats["clip"]) == 10.0
    assert not np.allclose(stats["mean"], 0.0) and not np.allclose(stats["var"], 1.0)  # moved from their start
    agent = cppo.Agent(obs_dim, int(make_continuous_env(env_id).action_space.shape[0]))
    agent.load_state_dict(torch.load(run_dir / "agent.pt"))
    raw = np.asarray(make_continuous_env(env_id).reset(seed=0)[0], dtype=np.float32)
    normalised = np.clip((raw - stats["mean"][0]) / np.sqrt(stats["var"][0] + 1e-8), -10, 10)
    action = agent.get_action_and_value(torch.tensor(normalised, dtype=torch.float32)[None])[0]
    assert action.shape == (1, agent.actor_logstd.shape[1]) and torch.isfinite(action).all()


def test_continuous_ppo_noise_interest_draws_uniform_values_of_its_own(tmp_path):
    """--interest noise: the point-of-interest values are uniform draws (mean about 0.5, all in [0, 1)), from a
    generator of their own (the same seed draws the same values with another model, whose initialisation takes other
    draws from torch's global generator), whose stream is not the global generator's."""
    flags = ["--total-timesteps", "1024", "--num-steps", "512", "--num-minibatches", "4", "--update-epochs", "2"]
    for members in ("5", "3"):
        (tmp_path / members).mkdir()
        run(tmp_path / members, "--interest", "noise", "--ensemble-size", members, *flags,
            script="algos/ppo_continuous_poi_ensemble.py")  # fmt: skip
    scalars = [read_scalars(only_run_dir(tmp_path / members)) for members in ("5", "3")]
    assert scalars[0]["poi/mean"] == scalars[1]["poi/mean"] and scalars[0]["poi/max"] == scalars[1]["poi/max"]
    assert all(abs(v - 0.5) < 0.05 for _, v in scalars[0]["poi/mean"]) and all(v < 1 for _, v in scalars[0]["poi/max"])
    assert scalars[0]["external_model/train_loss"] != scalars[1]["external_model/train_loss"]  # the models differ
    # a stream apart from torch's global one, which the same seed (1, the default) starts: its first draws differ
    first = torch.rand((512, 1), generator=torch.Generator().manual_seed(1)).mean().item()
    assert abs(scalars[0]["poi/mean"][0][1] - first) > 1e-4


def test_the_continuous_ppo_forward_model_reads_the_actions_the_env_executes(tmp_path):
    """The env clips the policy's Gaussian sample to the action space (ClipAction); the forward model, and the
    disagreement it gives as interest (each spied on), read that executed action: on Pendulum-v1 every action they
    read lies in [-2, 2], and the untrained policy's samples (std 1) pass the bounds often enough that some sit on
    them. The policy's update still reads the sample: its first minibatch's actions pass the bounds."""
    script = tmp_path / "spy.py"
    out = tmp_path / "received.npz"
    spied = ["train_forward_model", "poi_values"]
    functions = [*spied, "Agent.get_action_and_value"]  # its first `action`: the update's first minibatch's
    script.write_text(SPY.format(root=str(ROOT), name="ppo_continuous_poi_ensemble", functions=functions, out=str(out)))
    flags = ["--env", "Pendulum-v1", "--seed", "5", "--total-timesteps", "2048", "--num-minibatches", "4",
             "--update-epochs", "1", "--runs-dir", tmp_path / "runs"]  # fmt: skip
    proc = forked.run([script, *flags], tmp_path)
    assert proc.returncode == 0, proc.stderr
    received = np.load(out)
    for function in spied:  # the model's training and the interest, each on the rollout's executed actions
        actions = received[f"{function}.actions"]
        assert actions.shape == (2048, 1)
        assert actions.min() >= -2 and actions.max() <= 2
        assert (np.abs(actions) == 2).sum() >= 20  # a policy of std 1 passes |a| = 2 at about 4.6% of its steps
    sampled = received["Agent.get_action_and_value.action"]
    assert sampled.shape == (512, 1) and (np.abs(sampled) > 2).sum() >= 5  # about 24 of 512 past a bound


@pytest.mark.parametrize(
    "keys, named",
    [
        (("image", "mission"), "(image, mission) without observation, achieved_goal, desired_goal"),
        (("observation", "desired_goal"), "(desired_goal, observation) without achieved_goal"),  # FlatGoalObs reads it
    ],
)
def test_a_dict_observation_that_is_not_goal_conditioned_is_named_in_one_line(keys, named):
    from envs.continuous import FlatGoalObs, check_continuous_env

    class DictObservation(gym.Env):
        action_space = gym.spaces.Box(-1.0, 1.0, (1,))
        observation_space = gym.spaces.Dict({key: gym.spaces.Box(0.0, 1.0, (2,)) for key in keys})

    gym.register("TestDictObservation-v0", entry_point=DictObservation)
    try:
        with pytest.raises(ValueError) as error:
            check_continuous_env("TestDictObservation-v0")
        with pytest.raises(ValueError) as wrapped:
            FlatGoalObs(gym.make("TestDictObservation-v0"))
    finally:
        gym.registry.pop("TestDictObservation-v0")
    assert (
        str(error.value)
        == str(wrapped.value)
        == (
            f"TestDictObservation-v0 has a dict observation {named}; "
            "this file needs a vector or a goal-conditioned one (observation, achieved_goal, desired_goal)"
        )
    )


@pytest.mark.parametrize(
    "script, flags, message, fresh",
    [
        (  # each file's first case in a fresh interpreter
            "algos/sac_forward_model.py",
            ["--env", "CartPole-v1"],
            "error: CartPole-v1 has a Discrete action space",
            True,
        ),
        ("algos/sac_forward_model.py", ["--env", "Nope-v0"], "error: unknown env 'Nope-v0'", False),
        (
            "algos/sac_forward_model.py",
            ["--fm-eval-fraction", "1.5"],
            "error: --fm-eval-fraction must be a finite number in (0, 1), got 1.5",
            False,
        ),
        (
            "algos/ppo_continuous_poi_ensemble.py",
            ["--ensemble-size", "1"],
            "error: --ensemble-size must be a finite number in [2, inf), got 1",
            True,
        ),
        ("algos/ppo_continuous_poi_ensemble.py", ["--env", "Nope-v0"], "error: unknown env 'Nope-v0'", False),
        (  # a dict observation, but the action space comes first
            "algos/ppo_continuous_poi_ensemble.py",
            ["--env", "MiniGrid-Empty-5x5-v0"],
            "error: MiniGrid-Empty-5x5-v0 has a Discrete action space",
            False,
        ),
    ],
)
def test_continuous_files_reject_bad_input_with_one_line(tmp_path, script, flags, message, fresh):
    proc = run(tmp_path, *flags, script=script, check=False, fresh=fresh)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [proc.stderr.strip()], proc.stderr
    assert proc.stderr.startswith(message) and not (tmp_path / "runs").exists()


TRAINING = ("losses/", "poi/mean", "poi/changed_region_interest", "external_model/train_loss", "fm/")


@pytest.mark.parametrize(
    "key", by_reference(["ppo_continuous_poi_ensemble.py"]) + by_reference(["sac_forward_model.py"], [pytest.mark.slow])
)
def test_a_world_that_changes_and_its_evaluation_which_never_changes_training(tmp_path, shared_run, key):
    """The reference run (tests/reference.py: PendulumMotorChange-v1, its held-out sets evaluated at each model
    update) changes phase after the change steps and logs the model's held-out losses on each phase's sets; the same
    seed with other held-out sets (and, for PPO, evaluated at the end only) trains the same run."""
    script, flags = reference(key)
    other = ["--eval-steps", "64", "--eval-episode-steps", "16"] + (["--eval-every", "1000"] if "ppo" in key else [])
    run(tmp_path, *flags, *other, script=script)  # the last value of a flag counts
    reference_scalars, other_scalars = read_scalars(shared_run(script, *flags)), read_scalars(only_run_dir(tmp_path))
    phases = reference_scalars["charts/phase"]
    if "sac" in key:  # changes at 1,500 and 2,100; logged every 1,000 steps and at the last
        assert phases == [(1000, 0.0), (2000, 1.0), (2400, 2.0)]
        assert [s for s, _ in reference_scalars["external_model/eval_loss"]] == list(range(100, 2401, 100))
        # an earlier world's rows: at 2,000 those of the first motor (until 1,600), at 2,400 those of both before the
        # third (from 2,201)
        for tag in ("poi/old_world_rows", "poi/old_world_interest"):
            assert [step for step, _ in reference_scalars[tag]] == [2000, 2400]
            assert all(0 < share < 1 for _, share in reference_scalars[tag])
    else:  # 2 envs x 64 steps an iteration, changes after steps 100 and 500
        assert phases == [(128 * i, 1.0 + (i > 3)) for i in range(1, 7)]
        assert [s for s, _ in other_scalars["external_model/eval_loss"]] == [768]
    for tag in ("external_model/eval_loss", "external_model/eval_loss_changed"):
        assert all(np.isfinite(v) and v > 0 for _, v in reference_scalars[tag])
    shares = reference_scalars["external_model/rollout_changed_share"]  # where the agent went, at each log
    assert [s for s, _ in shares] == [s for s, _ in phases] and all(0 < v < 1 for _, v in shares)
    if "ppo" in key:  # the share of each rollout's interest on its steps there
        interest = reference_scalars["poi/changed_region_interest"]
        assert [s for s, _ in interest] == [s for s, _ in shares] and all(0 < v < 1 for _, v in interest)
    assert reference_scalars["external_model/eval_loss"] != other_scalars["external_model/eval_loss"]
    training = [{k: v for k, v in s.items() if k.startswith(TRAINING)} for s in (reference_scalars, other_scalars)]
    assert len(training[0]) >= 4 and training[0] == training[1]


def test_her_study_success_rates_per_window():
    """docs/results/her-fetchreach/success.py on hand-made episodes: windows of 2,000 steps by the episode's last
    step, the first window at 0.9 or more."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("success", "docs/results/her-fetchreach/success.py")
    success = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(success)
    points = [(50 * i, float(i > 60)) for i in range(1, 121)]  # 120 episodes of 50 steps, successes from the 61st
    rates = success.window_rates(points, 6000)
    assert rates == [0.0, 0.5, 1.0]  # episodes 1-40 end in the first window, 41-80 (half of them successes) in the next
    assert np.isnan(success.window_rates([(10, 1.0)], 4000)[1])  # no episode ended in the second window
    assert success.first_reaching(rates) == 6000 and success.first_reaching([0.2, 0.95, 0.4]) == 4000
    assert success.first_reaching([0.89, np.nan]) is None
