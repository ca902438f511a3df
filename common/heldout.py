"""Held-out data for the external model: transitions of a uniformly random policy."""

from __future__ import annotations

import gymnasium as gym
import numpy as np


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
