"""Continuous-control envs for the SAC and continuous-PPO files: gymnasium's classic and MuJoCo
tasks, and gymnasium-robotics' goal-conditioned ones with their dict observations flattened."""

from __future__ import annotations

import contextlib
import io
import warnings

import gymnasium as gym
import numpy as np

EXAMPLES = "Pendulum-v1, MountainCarContinuous-v0, HalfCheetah-v5, Walker2d-v5, Hopper-v5, FetchReach-v4"


def _register_robotics() -> bool:
    """Register gymnasium-robotics' ids (its import prints a notice about the Adroit tasks to stderr: muted)."""
    try:
        muted = io.StringIO()
        with contextlib.redirect_stdout(muted), contextlib.redirect_stderr(muted), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import gymnasium_robotics
    except ImportError:
        return False
    gym.register_envs(gymnasium_robotics)
    return True


def check_continuous_env(env_id: str) -> None:
    """Raise ValueError (one line) unless `env_id` makes an env with a Box action space here."""
    try:
        gym.spec(env_id)
    except gym.error.Error:
        if not (_register_robotics() and env_id in gym.registry):
            raise ValueError(f"unknown env {env_id!r}; continuous examples: {EXAMPLES}") from None
    try:
        env = make_continuous_env(env_id)
    except gym.error.DependencyNotInstalled as error:
        raise ValueError(f"{env_id} needs a package that is not installed: {str(error).splitlines()[0]}") from None
    space = env.action_space
    env.close()
    if not isinstance(space, gym.spaces.Box):
        raise ValueError(
            f"{env_id} has a {type(space).__name__} action space; this file needs continuous (Box) actions"
        )


def make_continuous_env(env_id: str, **kwargs) -> gym.Env:
    if env_id not in gym.registry:
        _register_robotics()
    env = gym.make(env_id, **kwargs)
    if isinstance(env.observation_space, gym.spaces.Dict):
        env = FlatGoalObs(env)
    return env


class FlatGoalObs(gym.ObservationWrapper):
    """A goal-conditioned dict observation as one vector: `observation` then `desired_goal`
    (the achieved goal is part of the observation in the Fetch tasks)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        spaces = env.observation_space.spaces
        if not {"observation", "desired_goal"} <= set(spaces):
            raise ValueError(f"dict observation without 'observation' and 'desired_goal': {list(spaces)}")
        low = np.concatenate([spaces["observation"].low, spaces["desired_goal"].low]).astype(np.float32)
        high = np.concatenate([spaces["observation"].high, spaces["desired_goal"].high]).astype(np.float32)
        self.observation_space = gym.spaces.Box(low, high, dtype=np.float32)

    def observation(self, observation):
        return np.concatenate([observation["observation"], observation["desired_goal"]]).astype(np.float32)
