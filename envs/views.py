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


def key_distance(image: np.ndarray, color_idx) -> int | np.ndarray:
    """Manhattan distance, in the agent's view, from the agent to the nearest visible key of
    colour `color_idx`; `width + height` of the view when none is visible.

    `image` is MiniGrid's encoded partial view (view x, view y, [object, colour, state]), or a
    batch of them with one colour each; the agent sits at the bottom centre, and a carried key
    shows at its cell (distance 0). Cells the agent cannot see are encoded as "unseen", so
    occluded keys do not count.
    """
    width, height = image.shape[-3:-1]
    vi, vj = np.indices((width, height))
    distance = np.abs(vi - width // 2) + np.abs(vj - (height - 1))
    color = np.asarray(color_idx)[..., None, None]
    is_key = (image[..., 0] == OBJECT_TO_IDX["key"]) & (image[..., 1] == color)
    nearest = np.where(is_key, distance, width + height).min(axis=(-2, -1))
    return int(nearest) if nearest.ndim == 0 else nearest
