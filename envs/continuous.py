"""Continuous-control envs for the SAC and continuous-PPO files: gymnasium's classic and MuJoCo
tasks, gymnasium-robotics' goal-conditioned ones with their dict observations flattened, and
tasks whose dynamics change mid-run (`CHANGING`: a motor that weakens in a region)."""

from __future__ import annotations

import contextlib
import io
import warnings

import gymnasium as gym
import numpy as np

from envs import check_change_steps

EXAMPLES = (
    "Pendulum-v1, PendulumMotorChange-v1, MountainCarContinuous-v0, HalfCheetah-v5, Walker2d-v5, Hopper-v5, "
    "FetchReach-v4"
)


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
    """Raise ValueError (one line) unless `env_id` makes an env with a Box action space and an observation this
    file reads (a vector, or a goal-conditioned dict: `FlatGoalObs`) here."""
    try:
        gym.spec(env_id)
    except gym.error.Error:
        if not (_register_robotics() and env_id in gym.registry):
            raise ValueError(f"unknown env {env_id!r}; continuous examples: {EXAMPLES}") from None
    try:
        env = gym.make(env_id)
    except gym.error.DependencyNotInstalled as error:
        raise ValueError(f"{env_id} needs a package that is not installed: {str(error).splitlines()[0]}") from None
    actions, observations = env.action_space, env.observation_space
    env.close()
    if not isinstance(actions, gym.spaces.Box):
        raise ValueError(
            f"{env_id} has a {type(actions).__name__} action space; this file needs continuous (Box) actions"
        )
    if isinstance(observations, gym.spaces.Dict):
        check_goal_keys(observations, env_id)


GOAL_KEYS = ("observation", "achieved_goal", "desired_goal")
"""what a goal-conditioned dict observation holds (gymnasium-robotics'), all of which `FlatGoalObs` reads"""


def check_goal_keys(observations: gym.spaces.Dict, env_id: str) -> None:
    """ValueError (one line) unless the dict observation space holds every one of GOAL_KEYS."""
    missing = [key for key in GOAL_KEYS if key not in observations.spaces]
    if missing:
        raise ValueError(
            f"{env_id} has a dict observation ({', '.join(observations.spaces)}) without {', '.join(missing)}; this "
            f"file needs a vector or a goal-conditioned one ({', '.join(GOAL_KEYS)})"
        )


def make_continuous_env(env_id: str, **kwargs) -> gym.Env:
    if env_id not in gym.registry:
        _register_robotics()
    env = gym.make(env_id, **kwargs)
    if isinstance(env.observation_space, gym.spaces.Dict):
        env = FlatGoalObs(env)
    return env


class FlatGoalObs(gym.ObservationWrapper):
    """A goal-conditioned dict observation as one vector: `observation` then `desired_goal` (its last `goal_dim`
    values; the achieved goal is part of the observation in the Fetch tasks). `info["achieved_goal"]` carries
    the achieved goal of the observation returned, for hindsight relabelling."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        check_goal_keys(env.observation_space, env.spec.id if env.spec else type(env.unwrapped).__name__)
        spaces = env.observation_space.spaces
        low = np.concatenate([spaces["observation"].low, spaces["desired_goal"].low]).astype(np.float32)
        high = np.concatenate([spaces["observation"].high, spaces["desired_goal"].high]).astype(np.float32)
        self.observation_space = gym.spaces.Box(low, high, dtype=np.float32)
        self.goal_dim = spaces["desired_goal"].shape[0]

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return self.observation(obs), {**info, "achieved_goal": obs["achieved_goal"]}

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self.observation(obs), reward, terminated, truncated, {**info, "achieved_goal": obs["achieved_goal"]}

    def observation(self, observation):
        return np.concatenate([observation["observation"], observation["desired_goal"]]).astype(np.float32)


class MotorChange(gym.Wrapper):
    """A motor that weakens in a region, in the odd phases: where observation component `obs_index` is below
    `below`, action component `joint`'s positive pushes reach the task at `gain` of their strength (negative
    ones as they are). The agent sees the change only through the transitions (and the task's reward, where it
    charges for the force that acts). `set_phase(k)` takes effect at the next reset, as ColorDoorKey's colour
    change does; `changed(obs, actions)` marks the transitions the odd phases alter (their outcomes differ, except
    where the task's own limits clip both alike: Pendulum's speed cap). It counts the steps taken and those taken
    in that region, whatever the phase (`take_counts`: where the agent goes). A push beyond the action space's bounds
    is clipped to them before it weakens: this assumes the task clips its actions so (Pendulum does)."""

    def __init__(self, env: gym.Env, joint: int, gain: float, obs_index: int, below: float):
        super().__init__(env)
        self.joint, self.gain, self.obs_index, self.below = joint, gain, obs_index, below
        self.phase = self.next_phase = 0
        self.last_obs = None
        self.steps = self.region_steps = 0  # since the last take_counts
        self.last_in_region = False  # whether the last step was taken in that region

    def set_phase(self, phase: int) -> None:
        self.next_phase = phase

    def changed(self, obs, actions) -> np.ndarray:
        """Per transition (`obs` and `actions` with a leading batch dimension), whether the odd phases alter its force."""
        return (np.asarray(obs)[..., self.obs_index] < self.below) & (np.asarray(actions)[..., self.joint] > 0)

    def take_counts(self) -> tuple[int, int]:
        """The steps taken in the changed region and all steps taken since the last call; both restart."""
        counts, self.steps, self.region_steps = (self.region_steps, self.steps), 0, 0
        return counts

    def reset(self, **kwargs):
        self.phase = self.next_phase
        self.last_obs, info = self.env.reset(**kwargs)
        return self.last_obs, info

    def step(self, action):
        in_region = self.last_in_region = bool(self.changed(self.last_obs, action))
        self.steps, self.region_steps = self.steps + 1, self.region_steps + in_region
        if self.phase % 2 and in_region:  # the push the task would apply (within its bounds), weakened
            action = np.clip(np.array(action, dtype=np.float32), self.action_space.low, self.action_space.high)
            action[self.joint] *= self.gain
        self.last_obs, reward, terminated, truncated, info = self.env.step(action)
        return self.last_obs, reward, terminated, truncated, info


CHANGING = {  # id: the task it changes and MotorChange's arguments (docs/environments.md)
    # Pendulum's observation is (cos, sin) of the angle from upright, and the angular velocity: the motor's
    # positive torque drops to a quarter below the horizontal, where the swing-up starts
    "PendulumMotorChange-v1": ("Pendulum-v1", dict(joint=0, gain=0.25, obs_index=0, below=0.0))
}


def _make_changing(task: str, motor: dict, render_mode: str | None = None) -> gym.Env:
    return MotorChange(gym.make(task, render_mode=render_mode), **motor)


for _id, (_task, _motor) in CHANGING.items():
    if _id not in gym.registry:  # the task's own time limit is inside: none added
        gym.register(
            _id,
            entry_point=_make_changing,
            kwargs=dict(task=_task, motor=_motor),
            max_episode_steps=None,
            order_enforce=False,
            disable_env_checker=True,
        )


def inner_wrapper(env: gym.Env, kind: type) -> gym.Wrapper | None:
    """The wrapper of type `kind` inside `env` (MotorChange, FlatGoalObs), None if it has none."""
    while isinstance(env, gym.Wrapper):
        if isinstance(env, kind):
            return env
        env = env.env
    return None


def motor_change(env: gym.Env) -> MotorChange | None:
    """The MotorChange wrapper inside `env`, None if it has none."""
    return inner_wrapper(env, MotorChange)


def changed_region_share(envs) -> float | None:
    """The share of a SyncVectorEnv's steps since the last call (over all its envs) taken in the region its change
    acts on, whatever the phase; None for an env without a change (or no step taken)."""
    counts = [motor.take_counts() for motor in map(motor_change, envs.envs) if motor is not None]
    steps = sum(total for _, total in counts)
    return sum(region for region, _ in counts) / steps if steps else None


def last_steps_in_region(envs) -> np.ndarray | None:
    """Per env of a SyncVectorEnv, whether its last step was taken in the region its change acts on (the step's
    own, before an autoreset), whatever the phase; None for an env without a change."""
    motors = [motor_change(env) for env in envs.envs]
    return None if None in motors else np.array([motor.last_in_region for motor in motors])


def share_in_region(values, in_region) -> float:
    """The share of the sum of `values` (numpy or torch: a rollout's interest per step and env) on the steps marked
    `in_region` (booleans of the same shape): where a signal points, beside the share of the steps themselves."""
    return float(values[in_region].sum() / values.sum())


def fill_in_phases(args) -> None:
    """`args.change_steps` of a continuous file filled in and checked (ValueError, one line): on a `CHANGING`
    env, default one change at half of `--total-timesteps`; elsewhere none may be given."""
    if args.env not in CHANGING:
        if args.change_steps:
            raise ValueError(f"--change-steps needs an env that changes ({', '.join(CHANGING)}), got {args.env}")
        args.change_steps = ()
        return
    if args.change_steps is None:
        args.change_steps = (args.total_timesteps // 2,)
    check_change_steps(list(args.change_steps), args.total_timesteps)
