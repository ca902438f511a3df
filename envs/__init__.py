"""Environments, their names, and the observation wrapper every algorithm file uses.

Importing this package registers ColorDoorKey with gymnasium (`ColorDoorKey-8x8-v0`, ...)
next to MiniGrid's own ids.
"""

from __future__ import annotations

import inspect

import gymnasium as gym
import minigrid  # noqa: F401  (registers the MiniGrid-* ids)
import numpy as np
from minigrid.core.constants import COLOR_NAMES, COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX

from envs.batched import BatchedColorDoorKey
from envs.color_door_key import ColorDoorKeyEnv, check_color, check_correct
from envs.views import (
    CHANNEL_OFFSETS,
    NUM_CHANNELS,
    color_moves,
    flat_to_image,
    key_distance,
    one_hot_view,
    target_changed,
)

__all__ = [
    "BatchedColorDoorKey",
    "COLOR_NAMES",
    "ColorDoorKeyEnv",
    "OneHotFlatObs",
    "check_change_steps",
    "check_color",
    "check_phase_schedule",
    "color_moves",
    "fill_in_env_defaults",
    "flat_to_image",
    "is_color_door_key",
    "key_colors",
    "key_distance",
    "make_vector_env",
    "one_hot_view",
    "resolve_env_id",
    "target_changed",
    "true_next_obs",
    "view_columns",
]

COLOR_DOOR_KEY_SIZES = (6, 8, 16)
VARIANTS = {  # short name: ColorDoorKeyEnv's arguments
    **{f"ColorDoorKey-{s}x{s}": {"size": s} for s in COLOR_DOOR_KEY_SIZES},
    # the keys in the top two rows: the bottom rows see them only facing up (docs/environments.md)
    "ColorDoorKeyBand-8x8": {"size": 8, "key_rows": 2},
    "ColorDoorKeyBand-9x9": {"size": 9, "key_rows": 2},
}
SHORT_NAMES = {"ColorDoorKey": "ColorDoorKey-8x8-v0"} | {name: f"{name}-v0" for name in VARIANTS}
for _name, _kwargs in VARIANTS.items():
    if f"{_name}-v0" not in gym.registry:
        gym.register(f"{_name}-v0", entry_point=ColorDoorKeyEnv, kwargs=_kwargs)


def resolve_env_id(name: str) -> str:
    """The gymnasium id for a `--env` name: a ColorDoorKey short name or a registered id."""
    if name in SHORT_NAMES:
        return SHORT_NAMES[name]
    if name in gym.registry and name.startswith(("ColorDoorKey", "MiniGrid-")):
        return name
    minigrid = sum(k.startswith("MiniGrid-") for k in gym.registry)
    raise ValueError(
        f"unknown env {name!r}; known names: {', '.join(SHORT_NAMES)}, the ColorDoorKey ids they stand for "
        f"(ColorDoorKey-6x6-v0, ...), or one of the {minigrid} registered MiniGrid ids (MiniGrid-DoorKey-8x8-v0, ...)"
    )


def is_color_door_key(env_id: str) -> bool:
    return gym.spec(env_id).entry_point is ColorDoorKeyEnv


def key_colors(env_id: str) -> tuple[str, ...]:
    """The colours of the keys of a registered ColorDoorKey id."""
    spec = gym.spec(env_id)
    default = inspect.signature(ColorDoorKeyEnv).parameters["key_colors"].default
    return tuple(spec.kwargs.get("key_colors", default))


def view_columns(env_id: str) -> np.ndarray | None:
    """The columns of the flat one-hot view (`OneHotFlatObs`) that `env_id` can set to 1; None: all.

    A ColorDoorKey view shows only unseen, empty, wall, door, key and goal cells, in the door's
    and the keys' colours, grey (walls), green (the goal) and red (MiniGrid encodes unseen and
    empty cells with colour index 0): with the default red door and red and blue keys, 13 of a
    cell's 20 channels. Its other columns are zero in every observation.
    """
    if not is_color_door_key(env_id):
        return None
    kwargs, defaults = gym.spec(env_id).kwargs, inspect.signature(ColorDoorKeyEnv).parameters
    door_color = kwargs.get("door_color", defaults["door_color"].default)
    colors = {"red", "grey", "green", door_color, *key_colors(env_id)}
    channels = sorted(
        [CHANNEL_OFFSETS[0] + OBJECT_TO_IDX[name] for name in ("unseen", "empty", "wall", "door", "key", "goal")]
        + [CHANNEL_OFFSETS[1] + COLOR_TO_IDX[name] for name in colors]
        + [CHANNEL_OFFSETS[2] + index for index in STATE_TO_IDX.values()]
    )
    cells = kwargs.get("agent_view_size", 7) ** 2
    return (np.arange(cells)[:, None] * NUM_CHANNELS + np.array(channels)).ravel()


def check_phase_schedule(
    change_steps: list[int], colors: list[str], total_timesteps: int, keys: tuple[str, ...] | None = None
) -> None:
    """Raise ValueError unless `colors` gives one known colour per phase (one of `keys`, the
    env's key colours, when given) and `change_steps` are strictly increasing global steps
    inside (0, total_timesteps)."""
    for color in colors:
        if keys is None:
            check_color(color)
        else:
            check_correct(color, keys)
    if len(colors) != len(change_steps) + 1:
        raise ValueError(
            f"{len(change_steps)} change step(s) make {len(change_steps) + 1} phase(s), "
            f"but {len(colors)} correct key colour(s) were given"
        )
    check_change_steps(change_steps, total_timesteps)


def check_change_steps(change_steps: list[int], total_timesteps: int) -> None:
    """Raise ValueError unless `change_steps` are strictly increasing global steps inside (0, total_timesteps)."""
    if any(b <= a for a, b in zip(change_steps, change_steps[1:])):
        raise ValueError(f"change steps must be strictly increasing, got {change_steps}")
    if change_steps and not (0 < change_steps[0] and change_steps[-1] < total_timesteps):
        raise ValueError(f"change steps must lie in (0, total-timesteps={total_timesteps}), got {change_steps}")


def make_vector_env(env_id: str, num_envs: int, kind: str, capture_video: bool = False, run_dir=None):
    """`num_envs` copies of `env_id` as the discrete algorithm files see them: the one-hot view
    (`OneHotFlatObs`), episode statistics, and SAME_STEP autoreset (a step that ends an episode
    returns the reset observation, its true final observation in `infos["final_obs"]`, so every
    stored step is a real transition). `kind` "batched": ColorDoorKey's numpy twin (envs/batched.py,
    step-equal); "minigrid": a SyncVectorEnv, env 0 recorded into `run_dir/videos` with `capture_video`."""
    if kind == "batched":
        return BatchedColorDoorKey(num_envs, **gym.spec(env_id).kwargs)

    def make(idx):
        def thunk():
            if capture_video and idx == 0:
                env = gym.make(env_id, render_mode="rgb_array")
                env = gym.wrappers.RecordVideo(env, f"{run_dir}/videos")
            else:
                env = gym.make(env_id)
            return gym.wrappers.RecordEpisodeStatistics(OneHotFlatObs(env))

        return thunk

    return gym.vector.SyncVectorEnv(
        [make(i) for i in range(num_envs)], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )


def true_next_obs(next_obs, infos, done):
    """`next_obs` of a SAME_STEP vector env with each ended episode's final observation in
    place of the reset observation: the observation the step really led to."""
    real_next_obs = next_obs.copy()
    for i in np.flatnonzero(done):
        real_next_obs[i] = infos["final_obs"][i]
    return real_next_obs


def fill_in_env_defaults(args) -> None:
    """The env flags of an algorithm file's `args` whose defaults depend on the env, filled in and
    checked (ValueError, one line): on ColorDoorKey, `change_steps` (default: one phase per correct
    key colour, evenly spaced) and the phase schedule; elsewhere no phases. `vector_env` "auto":
    the batched twin on ColorDoorKey (not with `capture_video`: it does not render)."""
    env_id = resolve_env_id(args.env)
    if is_color_door_key(env_id):
        if args.change_steps is None:
            n = len(args.correct_key_colors)
            args.change_steps = tuple(args.total_timesteps * k // n for k in range(1, n))
        check_phase_schedule(
            list(args.change_steps), list(args.correct_key_colors), args.total_timesteps, key_colors(env_id)
        )
    else:
        if args.change_steps:
            raise ValueError(f"--change-steps needs a ColorDoorKey env, got {args.env}")
        args.change_steps, args.correct_key_colors = (), ()
    if args.vector_env == "auto":
        args.vector_env = "batched" if is_color_door_key(env_id) and not args.capture_video else "minigrid"
    if args.vector_env == "batched" and not is_color_door_key(env_id):
        raise ValueError(f"--vector-env batched needs a ColorDoorKey env, got {args.env}")
    if args.vector_env == "batched" and args.capture_video:
        raise ValueError("--capture-video needs --vector-env minigrid (the batched env does not render)")


class OneHotFlatObs(gym.ObservationWrapper):
    """MiniGrid's partial view as a flat float32 one-hot vector (7x7x20 = 980 values).

    Same channel layout as minigrid's `OneHotPartialObsWrapper` (object, colour, state),
    flattened in (view x, view y, channel) order, built with array indexing.
    """

    def __init__(self, env: gym.Env):
        super().__init__(env)
        width, height, _ = env.observation_space["image"].shape
        self.observation_space = gym.spaces.Box(0.0, 1.0, (width * height * NUM_CHANNELS,), np.float32)

    def observation(self, obs):
        return one_hot_view(obs["image"])
