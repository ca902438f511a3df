"""ColorDoorKey for N worlds at once, as numpy arrays: the same layouts, dynamics, partial view,
rewards and `info` as `ColorDoorKeyEnv` behind `OneHotFlatObs` and `RecordEpisodeStatistics`
in a gymnasium `SyncVectorEnv` with `AutoresetMode.SAME_STEP` (tests compare them step by
step), many times faster.

Layouts come from the same random draws as MiniGrid (one generator per world, seeded like
gymnasium's `seed + i`), so a seed gives the same episodes in both.
"""

from __future__ import annotations

import time

import gymnasium as gym
import numpy as np
from gymnasium.utils import seeding
from minigrid.core.constants import COLOR_TO_IDX, DIR_TO_VEC, OBJECT_TO_IDX, STATE_TO_IDX

from envs.color_door_key import check_config, check_correct
from envs.views import NUM_CHANNELS, one_hot_view, key_distance

EMPTY, WALL, DOOR, KEY, GOAL = (OBJECT_TO_IDX[k] for k in ("empty", "wall", "door", "key", "goal"))
OPEN, CLOSED, LOCKED = (STATE_TO_IDX[k] for k in ("open", "closed", "locked"))
GREY, GREEN = COLOR_TO_IDX["grey"], COLOR_TO_IDX["green"]
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE = range(7)
VIEW = 7


def view_offsets(view: int = VIEW) -> np.ndarray:
    """World offset of each view cell from the agent, per direction: (4, view, view, 2).

    View cell (i, j) lies `view - 1 - j` cells ahead and `i - view // 2` cells to the right
    (the agent sits at the bottom centre, looking up the view)."""
    i, j = np.meshgrid(np.arange(view), np.arange(view), indexing="ij")
    out = np.zeros((4, view, view, 2), dtype=np.int64)
    for d, (fx, fy) in enumerate(DIR_TO_VEC):
        rx, ry = -fy, fx
        out[d, ..., 0] = fx * (view - 1 - j) + rx * (i - view // 2)
        out[d, ..., 1] = fy * (view - 1 - j) + ry * (i - view // 2)
    return out


def row_tables(view: int = VIEW) -> tuple[np.ndarray, np.ndarray]:
    """MiniGrid's `process_vis` handles the view row by row, from the agent's row up: a row's
    visible cells spread sideways through see-through cells, and mark cells of the row above.
    Run that rule once for every (visible bits, see-through bits) of a row: the tables give
    the row's final visible bits, and the bits it marks visible in the row above."""
    combos = np.arange(2 ** (2 * view))
    bits = (combos[:, None] >> np.arange(2 * view)) & 1
    visible, clear = bits[:, :view].astype(bool), bits[:, view:].astype(bool)
    above = np.zeros_like(visible)
    for i in range(view - 1):
        spread = visible[:, i] & clear[:, i]
        visible[:, i + 1] |= spread
        above[:, i + 1] |= spread
        above[:, i] |= spread
    for i in reversed(range(1, view)):
        spread = visible[:, i] & clear[:, i]
        visible[:, i - 1] |= spread
        above[:, i - 1] |= spread
        above[:, i] |= spread
    powers = 1 << np.arange(view)
    return visible @ powers, above @ powers


ROW_VISIBLE, ROW_ABOVE = row_tables()


class BatchedColorDoorKey(gym.vector.VectorEnv):
    """`num_envs` ColorDoorKey worlds stepped together; observations are the flat one-hot
    views (980 floats), autoreset is SAME_STEP (`infos["final_obs"]`, `infos["final_info"]`)."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}

    def __init__(
        self,
        num_envs: int,
        size: int = 8,
        door_color: str = "red",
        key_colors: tuple[str, ...] = ("red", "blue"),
        correct_key_color: str = "red",
        max_steps: int | None = None,
        key_rows: int | None = None,
    ):
        check_config(size, door_color, tuple(key_colors), correct_key_color, key_rows)
        self.num_envs, self.size, self.key_color_names = num_envs, size, tuple(key_colors)
        self.key_height = size if key_rows is None else key_rows + 1  # rows a key is drawn from (row 0: wall)
        self.door_color = COLOR_TO_IDX[door_color]
        self.key_colors = [COLOR_TO_IDX[c] for c in key_colors]
        self.max_steps = 10 * size**2 if max_steps is None else max_steps
        self.single_observation_space = gym.spaces.Box(0.0, 1.0, (VIEW * VIEW * NUM_CHANNELS,), np.float32)
        self.single_action_space = gym.spaces.Discrete(7)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)

        n = num_envs
        self.obj = np.zeros((n, size, size), dtype=np.int64)  # object index, EMPTY where nothing
        self.color = np.zeros((n, size, size), dtype=np.int64)
        self.state = np.zeros((n, size, size), dtype=np.int64)  # door state
        self.door_key = np.zeros(n, dtype=np.int64)  # colour of the key that opens each world's door
        self.pos = np.zeros((n, 2), dtype=np.int64)
        self.dir = np.zeros(n, dtype=np.int64)
        self.carry_obj = np.full(n, EMPTY, dtype=np.int64)  # EMPTY: carrying nothing
        self.carry_color = np.zeros(n, dtype=np.int64)
        self.steps = np.zeros(n, dtype=np.int64)
        self.correct = np.full(n, COLOR_TO_IDX[correct_key_color], dtype=np.int64)
        self.next_correct = self.correct.copy()
        self.episode_return = np.zeros(n)
        self.episode_start = np.zeros(n)
        self.rngs = [seeding.np_random()[0] for _ in range(n)]
        self._offsets = view_offsets()
        self._rows = np.arange(n)

    def set_correct_key_color(self, color: str) -> None:
        """Make `color` the opening colour of every world from its next reset on."""
        self.next_correct[:] = COLOR_TO_IDX[check_correct(color, self.key_color_names)]

    def call(self, name: str, *args, **kwargs):
        result = getattr(self, name)(*args, **kwargs)
        return (result,) * self.num_envs

    # -- layouts: the draws of ColorDoorKeyEnv._gen_grid, in the same order -------------------

    def _generate(self, i: int) -> None:
        rng, size = self.rngs[i], self.size
        obj, color, state = self.obj[i], self.color[i], self.state[i]
        obj[:], color[:], state[:] = EMPTY, 0, 0
        for border in (obj[0, :], obj[-1, :], obj[:, 0], obj[:, -1]):
            border[:] = WALL
        obj[size - 2, size - 2], color[size - 2, size - 2] = GOAL, GREEN
        split = int(rng.integers(3, size - 2))
        obj[split, :] = WALL
        color[obj == WALL] = GREY
        self.pos[i] = self._place(rng, obj, split, self.size, agent=(-1, -1))
        self.dir[i] = rng.integers(0, 4)
        door_y = int(rng.integers(1, size - 2))
        self.correct[i] = self.next_correct[i]
        self.door_key[i] = self.correct[i]
        obj[split, door_y], color[split, door_y], state[split, door_y] = DOOR, self.door_color, LOCKED
        for key_color in self.key_colors:
            x, y = self._place(rng, obj, split, self.key_height, agent=tuple(self.pos[i]))
            obj[x, y], color[x, y] = KEY, key_color
        self.carry_obj[i], self.carry_color[i], self.steps[i] = EMPTY, 0, 0

    def _place(self, rng, obj, split, height, agent):
        """MiniGrid's `place_obj` on the agent's side, in its top `height` rows: rejection-sample an empty cell."""
        while True:
            pos = (int(rng.integers(0, split)), int(rng.integers(0, height)))
            if obj[pos] == EMPTY and pos != agent:
                return pos

    # -- observation ------------------------------------------------------------------------------

    def _view(self, rows):
        """Encoded partial views (len(rows), 7, 7, 3) with MiniGrid's occlusion rules."""
        world = self.pos[rows, None, None, :] + self._offsets[self.dir[rows]]
        x, y = world[..., 0], world[..., 1]
        inside = (x >= 0) & (x < self.size) & (y >= 0) & (y < self.size)
        xc, yc = np.clip(x, 0, self.size - 1), np.clip(y, 0, self.size - 1)
        r = rows[:, None, None]
        obj = np.where(inside, self.obj[r, xc, yc], WALL)
        color = np.where(inside, self.color[r, xc, yc], GREY)
        state = np.where(inside, self.state[r, xc, yc], 0)
        opaque = (obj == WALL) | ((obj == DOOR) & (state != OPEN))

        powers = 1 << np.arange(VIEW)
        clear_bits = np.einsum("nij,i->nj", (~opaque).astype(np.int64), powers)  # per row j
        visible_bits = np.zeros((len(rows), VIEW), dtype=np.int64)
        marks = np.full(len(rows), 1 << (VIEW // 2))  # the agent's cell, bottom row
        for j in reversed(range(VIEW)):
            index = marks | (clear_bits[:, j] << VIEW)
            visible_bits[:, j], marks = ROW_VISIBLE[index], ROW_ABOVE[index]
        visible = ((visible_bits[:, None, :] >> np.arange(VIEW)[None, :, None]) & 1).astype(bool)

        # the agent sees what it carries at its own cell
        obj[:, VIEW // 2, VIEW - 1] = self.carry_obj[rows]
        color[:, VIEW // 2, VIEW - 1] = self.carry_color[rows]
        state[:, VIEW // 2, VIEW - 1] = 0
        image = np.stack([obj, color, state], axis=-1) * visible[..., None]
        return image

    def _observe(self, rows):
        image = self._view(rows)
        return one_hot_view(image), self._info(rows, image)

    def _info(self, rows, image):
        return {
            "correct_key_color_idx": self.correct[rows].copy(),
            "agent_x": self.pos[rows, 0].copy(),
            "agent_y": self.pos[rows, 1].copy(),
            "agent_dir": self.dir[rows].copy(),
            "key_distance": key_distance(image, self.correct[rows]),
        }

    # -- gymnasium API ----------------------------------------------------------------------------

    def reset(self, *, seed=None, options=None):
        if seed is not None:
            seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed)
            self.rngs = [seeding.np_random(s)[0] for s in seeds]
        for i in range(self.num_envs):
            self._generate(i)
        self.episode_return[:] = 0.0
        self.episode_start[:] = time.perf_counter()
        obs, info = self._observe(self._rows)
        return obs, with_masks(info, self.num_envs)

    def step(self, actions):
        actions = np.asarray(actions)
        rows = self._rows
        self.steps += 1
        fx, fy = (self.pos + np.asarray(DIR_TO_VEC)[self.dir]).T
        front_obj, front_state = self.obj[rows, fx, fy], self.state[rows, fx, fy]
        reward = np.zeros(self.num_envs)
        terminated = np.zeros(self.num_envs, dtype=bool)

        self.dir = np.where(actions == LEFT, (self.dir - 1) % 4, self.dir)
        self.dir = np.where(actions == RIGHT, (self.dir + 1) % 4, self.dir)

        passable = (front_obj == EMPTY) | (front_obj == GOAL) | ((front_obj == DOOR) & (front_state == OPEN))
        move = (actions == FORWARD) & passable
        self.pos[move] = np.stack([fx, fy], axis=1)[move]
        goal = move & (front_obj == GOAL)
        terminated |= goal
        reward[goal] = 1.0 - 0.9 * (self.steps[goal] / self.max_steps)

        pick = (actions == PICKUP) & (front_obj == KEY) & (self.carry_obj == EMPTY)
        self.carry_obj[pick], self.carry_color[pick] = KEY, self.color[rows, fx, fy][pick]
        self.obj[pick, fx[pick], fy[pick]], self.color[pick, fx[pick], fy[pick]] = EMPTY, 0

        drop = (actions == DROP) & (front_obj == EMPTY) & (self.carry_obj != EMPTY)
        self.obj[drop, fx[drop], fy[drop]] = self.carry_obj[drop]
        self.color[drop, fx[drop], fy[drop]] = self.carry_color[drop]
        self.carry_obj[drop], self.carry_color[drop] = EMPTY, 0

        toggle = (actions == TOGGLE) & (front_obj == DOOR)
        right_key = (self.carry_obj == KEY) & (self.carry_color == self.door_key)
        unlock = toggle & (front_state == LOCKED) & right_key
        flip = toggle & (front_state != LOCKED)
        new_state = np.where(unlock, OPEN, np.where(flip, np.where(front_state == OPEN, CLOSED, OPEN), front_state))
        self.state[rows, fx, fy] = new_state

        truncated = self.steps >= self.max_steps
        self.episode_return += reward
        obs, info = self._observe(rows)
        infos = with_masks(info, self.num_envs)
        done = np.flatnonzero(terminated | truncated)
        if len(done):
            infos = self._autoreset(done, obs, info, infos)
        return obs, reward, terminated, truncated, infos

    def _autoreset(self, done, obs, info, infos):
        """SAME_STEP: report the final observation and info of each ended episode, then reset it."""
        now = time.perf_counter()
        final_obs = np.full(self.num_envs, None, dtype=object)
        mask = np.zeros(self.num_envs, dtype=bool)
        mask[done] = True
        for i in done:
            final_obs[i] = obs[i].copy()
        episode = {
            "r": np.where(mask, self.episode_return, 0.0),
            "l": np.where(mask, self.steps, 0),
            "t": np.where(mask, np.round(now - self.episode_start, 6), 0.0),
        }
        final_info = {key: np.where(mask, value, 0) for key, value in info.items()}
        final_info = with_masks(final_info, self.num_envs, mask)
        final_info["episode"] = with_masks(episode, self.num_envs, mask)
        final_info["_episode"] = mask
        for i in done:
            self._generate(i)
        self.episode_return[done], self.episode_start[done] = 0.0, now
        reset_obs, reset_info = self._observe(done)
        obs[done] = reset_obs
        for key, value in reset_info.items():
            infos[key][done] = value
        return infos | {"final_obs": final_obs, "_final_obs": mask, "final_info": final_info, "_final_info": mask}


def with_masks(info: dict, num_envs: int, mask: np.ndarray | None = None) -> dict:
    """gymnasium's vector `info` layout: each key beside `_key`, the worlds that report it."""
    mask = np.ones(num_envs, dtype=bool) if mask is None else mask
    return {k: v for key, value in info.items() for k, v in ((key, value), (f"_{key}", mask))}
