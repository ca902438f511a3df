"""Encodings of MiniGrid's partial view shared by the minigrid wrapper and the batched env."""

from __future__ import annotations

import numpy as np
from minigrid.core.constants import COLOR_TO_IDX, OBJECT_TO_IDX, STATE_TO_IDX

NUM_CHANNELS = len(OBJECT_TO_IDX) + len(COLOR_TO_IDX) + len(STATE_TO_IDX)
CHANNEL_OFFSETS = (0, len(OBJECT_TO_IDX), len(OBJECT_TO_IDX) + len(COLOR_TO_IDX))


def one_hot_view(image: np.ndarray) -> np.ndarray:
    """Encoded views (..., view x, view y, [object, colour, state]) as flat float32 one-hot
    vectors (..., view x * view y * 20), in minigrid's `OneHotPartialObsWrapper` channel order."""
    out = np.zeros((*image.shape[:-1], NUM_CHANNELS), dtype=np.float32)
    for channel, offset in enumerate(CHANNEL_OFFSETS):
        np.put_along_axis(out, image[..., channel : channel + 1].astype(np.int64) + offset, 1.0, axis=-1)
    return out.reshape(*image.shape[:-3], -1)


def key_distance(image: np.ndarray, color_idx) -> float | np.ndarray:
    """Euclidean distance, in the agent's view, from the agent to the nearest visible key of
    colour `color_idx` (as EMMA's key-distance predictor measures it); `width + height` of
    the view when none is visible.

    `image` is MiniGrid's encoded partial view (view x, view y, [object, colour, state]), or a
    batch of them with one colour each; the agent sits at the bottom centre, and a carried key
    shows at its cell (distance 0). Cells the agent cannot see are encoded as "unseen", so
    occluded keys do not count.
    """
    width, height = image.shape[-3:-1]
    vi, vj = np.indices((width, height))
    distance = np.hypot(vi - width // 2, vj - (height - 1))
    color = np.asarray(color_idx)[..., None, None]
    is_key = (image[..., 0] == OBJECT_TO_IDX["key"]) & (image[..., 1] == color)
    nearest = np.where(is_key, distance, float(width + height)).min(axis=(-2, -1))
    return float(nearest) if nearest.ndim == 0 else nearest


TOGGLE = 5
"""MiniGrid's toggle action"""


def color_moves(target: str, old_color: int, new_color: int) -> bool:
    """Whether a change of the correct key colour from `old_color` to `new_color` can move `target`
    at all: whether `target_changed` can mark any transition."""
    return old_color != new_color and target in ("key_distance", "forward")


def flat_to_image(obs: np.ndarray) -> np.ndarray:
    """Flat one-hot views (..., 980) back to encoded views (..., 7, 7, [object, colour, state])."""
    cells = obs.reshape(*obs.shape[:-1], 7, 7, NUM_CHANNELS)
    bounds = (*CHANNEL_OFFSETS, NUM_CHANNELS)
    return np.stack([cells[..., a:b].argmax(-1) for a, b in zip(bounds, bounds[1:])], -1)


def target_changed(target: str, obs: np.ndarray, actions: np.ndarray, old_color: int, new_color: int) -> np.ndarray:
    """Which transitions (flat one-hot views `obs`, `actions`) have another model target when
    the correct key colour changes from `old_color` to `new_color`.

    `key_distance`: the distances to the nearest visible key of the two colours differ.
    `forward`: toggling a locked door while carrying a key of either colour (one of them opens
    it, the other does not); no other outcome depends on the correct colour.
    Any other target (`agent_dir`): none.
    """
    changed = np.zeros(len(obs), dtype=bool)
    if not color_moves(target, old_color, new_color):
        return changed
    if target == "key_distance":
        image = flat_to_image(obs)
        return key_distance(image, np.full(len(obs), old_color)) != key_distance(image, np.full(len(obs), new_color))
    toggles = np.flatnonzero(np.asarray(actions) == TOGGLE)  # only these can differ: decode just their views
    image = flat_to_image(obs[toggles])
    carried, front = image[:, 3, 6], image[:, 3, 5]  # the agent's cell shows what it carries
    locked_door = (front[:, 0] == OBJECT_TO_IDX["door"]) & (front[:, 2] == STATE_TO_IDX["locked"])
    key = (carried[:, 0] == OBJECT_TO_IDX["key"]) & np.isin(carried[:, 1], (old_color, new_color))
    changed[toggles] = locked_door & key
    return changed
