"""ColorDoorKey: MiniGrid's DoorKey where only the key of the *correct* colour opens the door.

A wall with one locked door splits the room. Keys of several colours lie on the agent's
side; the key that opens the door is a parameter of the environment, independent of the
door's own colour, and can be changed between episodes with `set_correct_key_color`.
The goal is in the bottom-right corner; reward is MiniGrid's `1 - 0.9 * steps / max_steps`.
"""

from __future__ import annotations

from minigrid.core.constants import COLOR_NAMES, COLOR_TO_IDX
from minigrid.core.grid import Grid
from minigrid.core.mission import MissionSpace
from minigrid.core.world_object import Door, Goal, Key
from minigrid.minigrid_env import MiniGridEnv

from envs.views import key_distance


def check_color(color: str) -> str:
    if color not in COLOR_NAMES:
        raise ValueError(f"unknown colour {color!r}; known colours: {', '.join(COLOR_NAMES)}")
    return color


def check_correct(color: str, key_colors: tuple[str, ...]) -> str:
    check_color(color)
    if color not in key_colors:
        raise ValueError(f"correct key colour {color!r} is not among the keys {tuple(key_colors)}")
    return color


def check_config(
    size: int, door_color: str, key_colors: tuple[str, ...], correct_key_color: str, key_rows: int | None = None
) -> None:
    """Raise ValueError unless the parameters make a ColorDoorKey layout that can be solved."""
    if size < 6:
        raise ValueError(f"ColorDoorKey needs size >= 6, got {size}")
    # the narrowest agent's side is two cells wide: 2 x key_rows cells for the keys and the agent
    fewest_rows = (len(key_colors) + 2) // 2
    if key_rows is not None and not (isinstance(key_rows, int) and fewest_rows <= key_rows <= size - 2):
        raise ValueError(
            f"key_rows must be an integer in [{fewest_rows}, size - 2 = {size - 2}] for "
            f"{len(key_colors)} keys (or None), got {key_rows}"
        )
    if len(set(key_colors)) != len(key_colors) or not key_colors:
        raise ValueError(f"key colours must be distinct and non-empty, got {key_colors}")
    for color in (door_color, *key_colors):
        check_color(color)
    check_correct(correct_key_color, key_colors)


class ColorLockedDoor(Door):
    """A locked door that opens with the key of `key_color`, whatever the door's own colour."""

    def __init__(self, color: str, key_color: str):
        super().__init__(color, is_open=False, is_locked=True)
        self.key_color = key_color

    def toggle(self, env, pos):
        if self.is_locked:
            if isinstance(env.carrying, Key) and env.carrying.color == self.key_color:
                self.is_locked = False
                self.is_open = True
                return True
            return False
        self.is_open = not self.is_open
        return True


class ColorDoorKeyEnv(MiniGridEnv):
    """DoorKey with several keys, of which only the one of `correct_key_color` opens the door.

    The splitting wall is drawn so that the agent's side is at least two cells wide: in a
    one-cell corridor two keys can wall the agent off from the door. With `key_rows`, the keys
    lie only in the top `key_rows` rows inside the outer wall (the rest of the agent's side has
    none): where the agent cannot see them, the change of the correct colour leaves the key
    distance as it was, so some regions hold more of the change than others.
    """

    def __init__(
        self,
        size: int = 8,
        door_color: str = "red",
        key_colors: tuple[str, ...] = ("red", "blue"),
        correct_key_color: str = "red",
        max_steps: int | None = None,
        key_rows: int | None = None,
        **kwargs,
    ):
        check_config(size, door_color, tuple(key_colors), correct_key_color, key_rows)
        self.door_color, self.key_colors, self.key_rows = door_color, tuple(key_colors), key_rows
        self.correct_key_color = correct_key_color
        self._next_correct_key_color = self.correct_key_color
        super().__init__(
            mission_space=MissionSpace(mission_func=self._gen_mission),
            grid_size=size,
            max_steps=10 * size**2 if max_steps is None else max_steps,
            **kwargs,
        )

    @staticmethod
    def _gen_mission():
        return "use the key of the right colour to open the door and then get to the goal"

    def set_correct_key_color(self, color: str) -> None:
        """Make `color` the opening colour from the next reset on (the running episode keeps its door)."""
        self._next_correct_key_color = check_correct(color, self.key_colors)

    def _gen_grid(self, width, height):
        self.correct_key_color = self._next_correct_key_color
        self.grid = Grid(width, height)
        self.grid.wall_rect(0, 0, width, height)
        self.put_obj(Goal(), width - 2, height - 2)
        split = self._rand_int(3, width - 2)
        self.grid.vert_wall(split, 0)
        self.place_agent(size=(split, height))
        self.put_obj(
            ColorLockedDoor(self.door_color, key_color=self.correct_key_color), split, self._rand_int(1, height - 2)
        )
        key_height = height if self.key_rows is None else self.key_rows + 1  # row 0 is the outer wall
        for color in self.key_colors:
            self.place_obj(Key(color), top=(0, 0), size=(split, key_height))
        self.mission = self._gen_mission()

    def _info(self, obs) -> dict:
        color_idx = COLOR_TO_IDX[self.correct_key_color]
        return {
            "correct_key_color_idx": color_idx,
            "agent_x": int(self.agent_pos[0]),
            "agent_y": int(self.agent_pos[1]),
            "agent_dir": int(self.agent_dir),
            "key_distance": key_distance(obs["image"], color_idx),
        }

    def reset(self, *, seed=None, options=None):
        obs, info = super().reset(seed=seed, options=options)
        return obs, {**info, **self._info(obs)}

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, truncated, {**info, **self._info(obs)}
