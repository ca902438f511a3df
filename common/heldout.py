"""Held-out data for the external model: transitions of a uniformly random policy."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch
from minigrid.core.constants import COLOR_TO_IDX

from envs import BatchedColorDoorKey, OneHotFlatObs, color_moves, is_color_door_key, target_changed
from envs.continuous import make_continuous_env, motor_change

HELDOUT_SEED = 20_240_700
"""seed of every held-out set: the same layouts and actions for every run, seed and method"""


def random_policy_transitions(env: gym.Env, num_steps: int, seed: int, info_keys: tuple[str, ...] = ()) -> dict:
    """Roll a uniformly random policy in `env` for `num_steps` steps.

    Returns arrays `obs`, `actions`, `next_obs` (the true next observation, never a reset
    one) and, for each of `info_keys`, the value the env reported with `obs`.
    """
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    rows = {"obs": [], "actions": [], "next_obs": []} | {key: [] for key in info_keys}
    for _ in range(num_steps):
        action = int(rng.integers(env.action_space.n))
        next_obs, _, terminated, truncated, next_info = env.step(action)
        rows["obs"].append(obs)
        rows["actions"].append(action)
        rows["next_obs"].append(next_obs)
        for key in info_keys:
            rows[key].append(info[key])
        obs, info = (next_obs, next_info) if not (terminated or truncated) else env.reset()
    return {key: np.asarray(value) for key, value in rows.items()}


def random_policy_layouts(
    env_id: str,
    num_layouts: int,
    episode_steps: int,
    seed: int,
    correct_key_color: str | None,
    info_keys: tuple[str, ...] = (),
    keep=None,
) -> dict:
    """`num_layouts` worlds (seeded `seed + i`), each rolled by a uniformly random policy for
    `episode_steps` steps, its episode cut there (a world that reaches the goal earlier goes
    on in a new layout). Returns `obs`, `actions`, `next_obs` (true next observations) and the
    `info_keys` values of `obs`, in (step, world) order flattened; with `keep`, only the
    transitions where `keep(obs, actions)` (a mask over the worlds, each step) holds.
    ColorDoorKey runs as the batched env (step-equal to the MiniGrid one), other MiniGrid ids
    as a SyncVectorEnv."""
    kwargs = dict(gym.spec(env_id).kwargs, max_steps=episode_steps)
    if is_color_door_key(env_id):
        envs = BatchedColorDoorKey(num_layouts, **(kwargs | {"correct_key_color": correct_key_color}))
    else:
        make = lambda: OneHotFlatObs(gym.make(env_id, max_steps=episode_steps))  # noqa: E731
        envs = gym.vector.SyncVectorEnv([make] * num_layouts, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    rng = np.random.default_rng(seed)
    obs, info = envs.reset(seed=seed)
    rows = {"obs": [], "actions": [], "next_obs": []} | {key: [] for key in info_keys}
    for _ in range(episode_steps):
        actions = rng.integers(envs.single_action_space.n, size=num_layouts)
        kept = slice(None) if keep is None else keep(obs, actions)
        next_obs, _, terminated, truncated, next_info = envs.step(actions)
        real_next_obs = next_obs.copy()
        for i in np.flatnonzero(terminated | truncated):
            real_next_obs[i] = next_info["final_obs"][i]
        rows["obs"].append(obs[kept])
        rows["actions"].append(actions[kept])
        rows["next_obs"].append(real_next_obs[kept])
        for key in info_keys:
            rows[key].append(info[key][kept])
        obs, info = next_obs, next_info
    envs.close()
    return {key: np.concatenate(value) for key, value in rows.items()}


def neighbour_color(colors: list[str], phase: int) -> str:
    """The correct colour `phase`'s changes are measured against: the previous phase's, or for
    the first phase, the next one's."""
    return colors[phase - 1] if phase > 0 else colors[1]


def changed_share(target: str, obs, actions, colors: list[str], phase: int) -> float:
    """The share of a rollout's transitions (flat one-hot views `obs` of shape (..., 980) and
    `actions`, tensors) whose target differs between `phase`'s correct colour and its
    neighbour's (`envs.target_changed`): how much of what the external model trains on can
    teach it the change. Logging only: it draws nothing."""
    obs = obs.reshape(-1, obs.shape[-1]).cpu().numpy()
    old, new = COLOR_TO_IDX[neighbour_color(colors, phase)], COLOR_TO_IDX[colors[phase]]
    return float(target_changed(target, obs, actions.reshape(-1).cpu().numpy(), old, new).mean())


def heldout_set(
    env_id: str,
    colors: list[str],
    phase: int,
    target: str,
    num_steps: int,
    episode_steps: int,
    min_changed: int = 0,
    seed: int = HELDOUT_SEED,
) -> tuple[dict, dict]:
    """The external model's held-out sets of `phase`, drawn from `seed` whatever the run's seed
    (the same layouts and actions in every phase, run and method).

    `all`: `num_steps` random-policy transitions (rounded up to whole worlds) from
    `ceil(num_steps / episode_steps)` layouts, as `random_policy_layouts` returns them.
    `changed`: the random-policy transitions whose target differs between this phase and its
    neighbour (the previous phase; for the first phase, the next one), where a change of the
    correct colour moves the target (`envs.target_changed`): those of `all`, topped up from
    further layouts until there are `min_changed` (the forward model's, toggling a locked door
    with a key, are about 1 in 1,000 random steps on 6x6) or 100 times `num_steps` were
    rolled. Empty without a change of colour or for a target it cannot move (`agent_dir`).
    """
    info_keys = () if target == "forward" else (target,)
    color = colors[phase] if colors else None
    num_layouts = math.ceil(num_steps / episode_steps)
    full = random_policy_layouts(env_id, num_layouts, episode_steps, seed, color, info_keys)
    other = COLOR_TO_IDX[neighbour_color(colors, phase)] if len(colors) > 1 else None
    if other is None or not color_moves(target, other, COLOR_TO_IDX[color]):
        return full, {key: value[:0] for key, value in full.items()}  # no change, or none that moves the target

    def changed(obs, actions):
        return target_changed(target, obs, actions, other, COLOR_TO_IDX[color])

    mask = changed(full["obs"], full["actions"])
    parts, first_world = [{key: value[mask] for key, value in full.items()}], seed + num_layouts
    while sum(len(part["obs"]) for part in parts) < min_changed and first_world - seed < 100 * num_layouts:
        parts.append(random_policy_layouts(env_id, num_layouts, episode_steps, first_world, color, info_keys, changed))
        first_world += num_layouts
    return full, {key: np.concatenate([part[key] for part in parts]) for key in full}


def continuous_heldout_set(
    env_id: str, phase: int, num_steps: int, episode_steps: int, seed: int = HELDOUT_SEED
) -> tuple[dict, dict]:
    """A continuous task's held-out sets of `phase`, drawn from `seed` whatever the run's seed (the same starts
    and actions in every phase, run and method). `all`: `num_steps` transitions (rounded up to whole worlds) of
    a uniformly random policy in `ceil(num_steps / episode_steps)` worlds (reset with seeds `seed + i`), each
    rolled for `episode_steps` steps (an episode that ends earlier goes on from a reset): arrays `obs`,
    `actions`, `next_obs` (true next observations), world after world. `changed`: those of them whose outcome
    differs between this phase and its neighbour (`MotorChange.changed`; empty for a task that does not
    change). The worlds are rolled one after another in one env (a Fetch task takes 0.2 s to build)."""
    env = make_continuous_env(env_id)
    motor = motor_change(env)
    if motor is not None:
        motor.set_phase(phase)
    rng = np.random.default_rng(seed)
    space = env.action_space
    rows = {"obs": [], "actions": [], "next_obs": []}
    for world in range(math.ceil(num_steps / episode_steps)):
        obs, _ = env.reset(seed=seed + world)
        for _ in range(episode_steps):
            action = rng.uniform(space.low, space.high).astype(space.dtype)
            next_obs, _, terminated, truncated, _ = env.step(action)
            for key, value in zip(rows, (obs, action, next_obs)):
                rows[key].append(value)
            obs = env.reset()[0] if terminated or truncated else next_obs
    env.close()
    full = {key: np.array(value, dtype=np.float32) for key, value in rows.items()}
    changed = motor.changed(full["obs"], full["actions"]) if motor is not None else np.zeros(len(full["obs"]), bool)
    return full, {key: value[changed] for key, value in full.items()}


def continuous_heldout_tensors(
    env_id: str, phase: int, num_steps: int, episode_steps: int, device, seed: int = HELDOUT_SEED
) -> list:
    """`continuous_heldout_set`'s two sets as tensors (obs, actions, next_obs), None for an empty one."""
    sets = continuous_heldout_set(env_id, phase, num_steps, episode_steps, seed)
    keys = ("obs", "actions", "next_obs")
    return [tuple(torch.tensor(d[k], device=device) for k in keys) if len(d["obs"]) else None for d in sets]


def distinct_rows(x):
    """One index per distinct row of `x` (any of its occurrences), and each row's place among them:
    x[rows][inverse] == x."""
    _, inverse = torch.unique(x, dim=0, return_inverse=True)
    rows = torch.empty(int(inverse.max()) + 1, dtype=torch.long, device=x.device)
    return rows.scatter_(0, inverse, torch.arange(len(x), device=x.device)), inverse


def heldout_tensors(model, data, target, model_targets, device):
    """A held-out set (`heldout_set`) as `model`'s distinct inputs `obs`, `actions` (a random
    policy's 10,240 steps on 6x6 hold about 1,000 distinct views and 4,000 distinct pairs),
    each transition's place among them (`inverse`) and its target, `model_targets(target, obs,
    next_obs, info_values)` (the algorithm file's); None for an empty set."""
    obs = torch.tensor(data["obs"], device=device)
    actions = torch.tensor(data["actions"], device=device)
    if len(obs) == 0:
        return None
    info_values = torch.tensor(data[target], device=device) if target != "forward" else None
    targets = model_targets(target, obs, torch.tensor(data["next_obs"], device=device), info_values)
    rows, inverse = distinct_rows(model.inputs(obs, actions))
    return dict(obs=obs[rows], actions=actions[rows], inverse=inverse, targets=targets)


@torch.no_grad()
def heldout_losses(model, obs, actions, inverse, targets) -> tuple[float, float | None]:
    """Over a held-out set's transitions, in one pass: the mean squared error of the model's mean prediction,
    whatever it trains on (so that an MSE model and a Gaussian one are measured alike), and a Gaussian model's
    own loss (beta-NLL; the plain NLL with --model-faithful), None for an MSE model. Dropout off (the model is
    left in eval mode), each distinct input computed once; an ensemble's member dimension, leading, is averaged
    too."""
    model.eval()
    mean, log_std = model(obs, actions)
    mean = mean[..., inverse, :]
    error = ((mean - targets) ** 2).mean(-1).mean().item()
    nll = None if log_std is None else model.loss(mean, log_std[..., inverse, :], targets).mean().item()
    return error, nll


class HeldoutEval:
    """The external model's held-out evaluation in a training loop. `load(phase)` (when the run
    starts and at each colour change) builds `phase`'s sets (`heldout_set`) as `model`'s tensors
    and returns the whole one, for a file's own statistics on it; `log(writer, step, obs,
    actions)` writes `external_model/eval_loss` (the squared error of the mean prediction) and, where
    the colour change alters some targets, `external_model/eval_loss_changed` and the rollout's (`obs`,
    `actions`) `external_model/rollout_changed_share`; a Gaussian model's own loss on the sets too, as
    `external_model/eval_nll` and `eval_nll_changed`. It draws nothing from any random generator."""

    def __init__(
        self,
        model,
        model_targets,
        env_id: str,
        colors: list[str],
        target: str,
        num_steps: int,
        episode_steps: int,
        min_changed: int,
        device,
    ):
        self.model, self.model_targets, self.device = model, model_targets, device
        self.env_id, self.colors, self.target = env_id, colors, target
        self.num_steps, self.episode_steps, self.min_changed = num_steps, episode_steps, min_changed
        self.phase, self.all, self.changed = None, None, None

    @classmethod
    def for_run(cls, model, model_targets, env_id: str, args, device) -> "HeldoutEval":
        """The evaluation of a run of an algorithm file: its phases' colours, model target and `--eval-*` flags."""
        return cls(
            model,
            model_targets,
            env_id,
            list(args.correct_key_colors),
            args.model_target,
            args.eval_steps,
            args.eval_episode_steps,
            args.eval_changed_min,
            device,
        )

    def load(self, phase: int) -> dict:
        """`phase`'s sets; returns the whole one (`heldout_tensors`)."""
        sets = heldout_set(
            self.env_id, self.colors, phase, self.target, self.num_steps, self.episode_steps, self.min_changed
        )
        self.all, self.changed = [
            heldout_tensors(self.model, data, self.target, self.model_targets, self.device) for data in sets
        ]
        self.phase = phase
        return self.all

    def log(self, writer, step: int, obs, actions) -> None:
        """Evaluate the model on the loaded sets and log it at `step`."""
        for suffix, heldout in (("", self.all), ("_changed", self.changed)):
            if heldout is not None:
                error, nll = heldout_losses(self.model, **heldout)
                writer.add_scalar(f"external_model/eval_loss{suffix}", error, step)
                if nll is not None:
                    writer.add_scalar(f"external_model/eval_nll{suffix}", nll, step)
        if self.changed is not None:
            share = changed_share(self.target, obs, actions, self.colors, self.phase)
            writer.add_scalar("external_model/rollout_changed_share", share, step)
