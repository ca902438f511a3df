import gymnasium as gym
import numpy as np
import pytest
from minigrid.core.constants import COLOR_TO_IDX
from minigrid.core.grid import Grid
from minigrid.core.world_object import Door, Key, Wall
from minigrid.wrappers import OneHotPartialObsWrapper

import envs
from envs import ColorDoorKeyEnv, OneHotFlatObs, key_distance

TOGGLE, FORWARD, PICKUP, DROP = 5, 2, 3, 4


def door_of(env):
    grid = env.unwrapped.grid
    (door,) = [obj for obj in grid.grid if obj is not None and obj.type == "door"]
    return door


def stand_before_door(env, carrying):
    """Put the agent left of the door, facing it, carrying `carrying` (a Key or None)."""
    env = env.unwrapped
    door = door_of(env)
    x, y = door.cur_pos
    env.grid.set(x - 1, y, None)
    env.agent_pos, env.agent_dir, env.carrying = (x - 1, y), 0, carrying
    return door


@pytest.mark.parametrize("seed", range(5))
def test_correct_key_opens_wrong_key_does_not(seed):
    # the door is red, the correct key blue: the red key (the door's own colour) must fail
    env = ColorDoorKeyEnv(size=8, door_color="red", key_colors=("red", "blue"), correct_key_color="blue")
    env.reset(seed=seed)
    door = stand_before_door(env, Key("red"))
    env.step(TOGGLE)
    assert door.is_locked and not door.is_open
    env.step(FORWARD)
    assert env.agent_pos != tuple(door.cur_pos)  # a locked door blocks the way

    env.carrying = Key("blue")
    env.step(TOGGLE)
    assert door.is_open and not door.is_locked
    env.step(FORWARD)
    assert tuple(env.agent_pos) == tuple(door.cur_pos)


def test_no_key_does_not_open():
    env = ColorDoorKeyEnv(size=6)
    env.reset(seed=0)
    door = stand_before_door(env, None)
    env.step(TOGGLE)
    assert door.is_locked


def test_scripted_episode_picks_key_opens_door_and_reaches_goal():
    """Hand-built 6x6 world: agent at (1,1) facing down, red key at (1,2), door at (3,2)."""
    env = ColorDoorKeyEnv(size=6, correct_key_color="red")
    env.reset(seed=0)
    grid = Grid(6, 6)
    grid.wall_rect(0, 0, 6, 6)
    grid.vert_wall(3, 0)
    door = envs.color_door_key.ColorLockedDoor("red", key_color="red")
    grid.set(3, 2, door)
    grid.set(1, 2, Key("red"))
    grid.set(2, 4, Key("blue"))
    from minigrid.core.world_object import Goal

    grid.set(4, 4, Goal())
    env.grid, env.agent_pos, env.agent_dir, env.carrying, env.step_count = grid, (1, 1), 1, None, 0
    # pick up the red key below, step onto its cell, turn to face right (dir 0), step, open the
    # door, walk through, turn down and walk to the goal at (4, 4)
    script = [PICKUP, FORWARD, 0, FORWARD, TOGGLE, FORWARD, FORWARD, 1, FORWARD, FORWARD]
    for action in script[:-1]:
        _, reward, terminated, truncated, info = env.step(action)
        assert reward == 0 and not terminated and not truncated
    _, reward, terminated, _, info = env.step(script[-1])
    assert terminated and door.is_open
    assert reward == pytest.approx(1 - 0.9 * len(script) / env.max_steps)
    assert (info["agent_x"], info["agent_y"]) == (4, 4)


def test_colour_change_applies_at_next_reset():
    env = ColorDoorKeyEnv(size=8, correct_key_color="red")
    _, info = env.reset(seed=3)
    env.set_correct_key_color("blue")
    _, _, _, _, info = env.step(0)
    assert info["correct_key_color_idx"] == COLOR_TO_IDX["red"]  # the running episode keeps its door
    door = stand_before_door(env, Key("red"))
    env.step(TOGGLE)
    assert door.is_open

    _, info = env.reset(seed=4)
    assert info["correct_key_color_idx"] == COLOR_TO_IDX["blue"]
    door = stand_before_door(env, Key("red"))
    env.step(TOGGLE)
    assert door.is_locked
    env.carrying = Key("blue")
    env.step(TOGGLE)
    assert door.is_open


def test_colour_change_through_vector_env_call():
    make = lambda: gym.make("ColorDoorKey-6x6-v0", max_steps=3)  # noqa: E731
    venv = gym.vector.SyncVectorEnv([make, make], autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    _, infos = venv.reset(seed=0)
    venv.call("set_correct_key_color", "blue")
    for _ in range(2):
        _, _, _, _, infos = venv.step(np.zeros(2, dtype=np.int64))
        assert (infos["correct_key_color_idx"] == COLOR_TO_IDX["red"]).all()
    _, _, _, truncated, infos = venv.step(np.zeros(2, dtype=np.int64))  # the step limit resets both
    assert truncated.all() and (infos["correct_key_color_idx"] == COLOR_TO_IDX["blue"]).all()


def test_bad_colours_raise():
    with pytest.raises(ValueError, match="unknown colour"):
        ColorDoorKeyEnv(size=6, correct_key_color="pink")
    env = ColorDoorKeyEnv(size=6, key_colors=("red", "blue"))
    with pytest.raises(ValueError, match="not among the keys"):
        env.set_correct_key_color("green")


@pytest.mark.parametrize("size", [6, 8, 16])
def test_layout_properties(size):
    env = ColorDoorKeyEnv(size=size, door_color="yellow", key_colors=("red", "blue", "green"))
    for seed in range(30):
        _, info = env.reset(seed=seed)
        objects = [obj for obj in env.grid.grid if obj is not None and obj.type in ("door", "key", "goal")]
        (door,) = [o for o in objects if o.type == "door"]
        (goal,) = [o for o in objects if o.type == "goal"]
        keys = [o for o in objects if o.type == "key"]
        split = door.cur_pos[0]
        assert 3 <= split <= size - 3 and door.is_locked and door.color == "yellow"
        assert tuple(goal.cur_pos) == (size - 2, size - 2)
        assert sorted(k.color for k in keys) == ["blue", "green", "red"]
        assert all(k.cur_pos[0] < split for k in keys) and env.agent_pos[0] < split
        assert (info["agent_x"], info["agent_y"], info["agent_dir"]) == (*env.agent_pos, env.agent_dir)
        assert env.max_steps == 10 * size**2


@pytest.mark.parametrize("key_rows", [2, 3])
def test_keys_lie_in_the_top_key_rows_and_nothing_else_moves(key_rows):
    """With key_rows, every key is in rows 1..key_rows of the agent's side; the rest of the layout
    (split, door, agent) is drawn as without it, so the same seed gives the same agent and door."""
    banded, plain = ColorDoorKeyEnv(size=9, key_rows=key_rows), ColorDoorKeyEnv(size=9)
    rows = set()
    for seed in range(200):
        banded.reset(seed=seed)
        plain.reset(seed=seed)
        keys = [(x, y) for x in range(9) for y in range(9) if isinstance(banded.grid.get(x, y), Key)]
        split = next(x for x in range(1, 8) if all(isinstance(banded.grid.get(x, y), (Wall, Door)) for y in range(9)))
        assert len(keys) == 2 and all(x < split and 1 <= y <= key_rows for x, y in keys)
        assert tuple(banded.agent_pos) == tuple(plain.agent_pos) and banded.agent_dir == plain.agent_dir
        doors = [
            [(x, y) for x in range(9) for y in range(9) if isinstance(e.grid.get(x, y), Door)] for e in (banded, plain)
        ]
        assert doors[0] == doors[1]
        rows.update(y for _, y in keys)
    assert rows == set(range(1, key_rows + 1))


@pytest.mark.parametrize("size", [8, 9])
def test_the_band_variants_are_registered_and_known(size):
    name = f"ColorDoorKeyBand-{size}x{size}"
    env = gym.make(envs.resolve_env_id(name)).unwrapped
    assert env.width == size and env.key_rows == 2 and envs.is_color_door_key(envs.resolve_env_id(name))


def empty_room(size=9):
    env = ColorDoorKeyEnv(size=size, correct_key_color="red")
    env.reset(seed=0)
    env.grid = Grid(size, size)
    env.grid.wall_rect(0, 0, size, size)
    env.carrying = None
    return env


def distance_seen(env):
    return key_distance(env.gen_obs()["image"], COLOR_TO_IDX["red"])


def test_key_distance_hand_worked():
    env = empty_room()
    env.agent_pos, env.agent_dir = (3, 3), 0  # facing +x: forward is +x, the right hand +y
    assert distance_seen(env) == 14  # no key: view width + height
    env.grid.set(5, 3, Key("red"))  # two ahead
    assert distance_seen(env) == 2
    env.grid.set(5, 3, None)
    env.grid.set(4, 5, Key("red"))  # one ahead, two to the right: Euclidean, sqrt(1 + 4)
    assert distance_seen(env) == pytest.approx(5**0.5)
    env.grid.set(4, 4, Key("blue"))  # a nearer key of the wrong colour changes nothing
    assert distance_seen(env) == pytest.approx(5**0.5)
    env.agent_dir = 2  # facing -x: the key is now behind the agent, out of view
    assert distance_seen(env) == 14
    env.carrying = Key("red")  # a carried key is at the agent's own cell
    assert distance_seen(env) == 0


def test_key_distance_ignores_occluded_keys():
    env = empty_room()
    env.agent_pos, env.agent_dir = (4, 6), 3  # facing up (-y)
    env.grid.set(4, 2, Key("red"))
    assert distance_seen(env) == 4
    env.grid.horz_wall(1, 4, 7, Wall)  # a full wall between agent and key hides it
    assert distance_seen(env) == 14


def distance_from_the_world(env, color_idx):
    """The key distance read from MiniGrid's world state, not from the encoded view: each key of the colour in the
    grid, where the agent's visibility mask shows it, at its place relative to the agent (bottom centre of the 7x7
    view); 0 for a carried key of the colour; 14 (the view's width + height) for none."""
    world = env.unwrapped
    if world.carrying is not None and world.carrying.type == "key" and COLOR_TO_IDX[world.carrying.color] == color_idx:
        return 0.0
    _, visible = world.gen_obs_grid()
    best = 14.0
    for x in range(world.grid.width):
        for y in range(world.grid.height):
            cell = world.grid.get(x, y)
            if cell is None or cell.type != "key" or COLOR_TO_IDX[cell.color] != color_idx:
                continue
            view = world.relative_coords(x, y)
            if view is not None and visible[view]:
                best = min(best, float(np.hypot(view[0] - 3, view[1] - 6)))
    return best


def test_key_distance_in_info_matches_the_world():
    env = gym.make("ColorDoorKey-8x8-v0")
    obs, info = env.reset(seed=0)
    rng = np.random.default_rng(0)
    seen = set()
    for _ in range(500):
        color = info["correct_key_color_idx"]
        assert info["key_distance"] == pytest.approx(distance_from_the_world(env, color))
        seen.add(info["key_distance"])
        obs, _, terminated, truncated, info = env.step(int(rng.integers(7)))
        if terminated or truncated:
            obs, info = env.reset()
    assert {0.0, 14.0} <= seen and len(seen) > 5  # a carried key, none in view, and keys at several distances


def test_one_hot_flat_obs_matches_minigrid_wrapper():
    ours = OneHotFlatObs(gym.make("ColorDoorKey-8x8-v0"))
    ref = OneHotPartialObsWrapper(gym.make("ColorDoorKey-8x8-v0"))
    obs, _ = ours.reset(seed=7)
    ref_obs, _ = ref.reset(seed=7)
    rng = np.random.default_rng(0)
    for _ in range(300):
        assert obs.shape == (980,) and obs.dtype == np.float32
        np.testing.assert_array_equal(obs, ref_obs["image"].reshape(-1))
        action = int(rng.integers(7))
        obs, *_ = ours.step(action)
        ref_obs, *_ = ref.step(action)


def test_names_resolve_and_unknown_lists_known():
    assert envs.resolve_env_id("ColorDoorKey") == "ColorDoorKey-8x8-v0"
    for size in (6, 8, 16):
        env_id = envs.resolve_env_id(f"ColorDoorKey-{size}x{size}")
        assert gym.make(env_id).unwrapped.width == size and envs.is_color_door_key(env_id)
    assert envs.resolve_env_id("MiniGrid-DoorKey-5x5-v0") == "MiniGrid-DoorKey-5x5-v0"
    assert not envs.is_color_door_key("MiniGrid-DoorKey-5x5-v0")
    with pytest.raises(ValueError, match="unknown env 'ColorDoorKey-7x7'.*ColorDoorKey-6x6"):
        envs.resolve_env_id("ColorDoorKey-7x7")


@pytest.mark.parametrize(
    "change_steps, colors, message",
    [
        ([100], ["red"], "2 phase"),
        ([200, 100], ["red", "blue", "red"], "strictly increasing"),
        ([1000], ["red", "blue"], "must lie in"),
        ([0], ["red", "blue"], "must lie in"),
        ([100], ["red", "pink"], "unknown colour"),
    ],
)
def test_phase_schedule_errors(change_steps, colors, message):
    with pytest.raises(ValueError, match=message):
        envs.check_phase_schedule(change_steps, colors, total_timesteps=1000)
    envs.check_phase_schedule([100, 500], ["red", "blue", "red"], total_timesteps=1000)
