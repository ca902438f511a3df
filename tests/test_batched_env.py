"""The batched ColorDoorKey against the MiniGrid one, step by step: same seeds, same actions."""

from collections import deque

import gymnasium as gym
import numpy as np
import pytest
from minigrid.core.constants import DIR_TO_VEC

from envs import OneHotFlatObs
from envs.batched import BatchedColorDoorKey, row_tables

LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE = range(6)
INFO_KEYS = ("correct_key_color_idx", "agent_x", "agent_y", "agent_dir", "key_distance")


def minigrid_vector(num_envs, size, env_id=None, **kwargs):
    env_id = env_id or f"ColorDoorKey-{size}x{size}-v0"
    make = lambda: gym.wrappers.RecordEpisodeStatistics(OneHotFlatObs(gym.make(env_id, **kwargs)))  # noqa: E731
    return gym.vector.SyncVectorEnv([make] * num_envs, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def assert_same_step(ref_out, out):
    obs, reward, terminated, truncated, infos = out
    ref_obs, ref_reward, ref_terminated, ref_truncated, ref_infos = ref_out
    np.testing.assert_array_equal(obs, ref_obs)
    np.testing.assert_array_equal(reward, ref_reward)
    np.testing.assert_array_equal(terminated, ref_terminated)
    np.testing.assert_array_equal(truncated, ref_truncated)
    for key in INFO_KEYS:
        np.testing.assert_array_equal(infos[key], ref_infos[key], err_msg=key)
    assert ("final_obs" in infos) == ("final_obs" in ref_infos)
    if "final_obs" in ref_infos:
        np.testing.assert_array_equal(infos["_final_obs"], ref_infos["_final_obs"])
        for i in np.flatnonzero(ref_infos["_final_obs"]):
            np.testing.assert_array_equal(infos["final_obs"][i], ref_infos["final_obs"][i])
        final, ref_final = infos["final_info"], ref_infos["final_info"]
        np.testing.assert_array_equal(final["_episode"], ref_final["_episode"])
        for key in ("r", "l"):
            np.testing.assert_array_equal(final["episode"][key], ref_final["episode"][key])
        for key in INFO_KEYS:
            np.testing.assert_array_equal(final[key], ref_final[key], err_msg=f"final {key}")


@pytest.mark.parametrize(
    "size, num_envs, max_steps, steps, key_rows",
    [
        (6, 16, 12, 1500, None),
        (8, 16, 20, 1500, None),
        (16, 8, 30, 1000, None),
        (8, 16, 16, 1000, 2),
        (9, 16, 16, 1000, 2),
    ],
)
def test_random_episodes_match_minigrid(size, num_envs, max_steps, steps, key_rows):
    """Short step limits end episodes often: thousands of episodes, each a fresh layout (the last
    two: ColorDoorKeyBand-8x8 and -9x9, their keys drawn from the top rows)."""
    env_id = None if key_rows is None else f"ColorDoorKeyBand-{size}x{size}-v0"
    ref, batched = (
        minigrid_vector(num_envs, size, env_id, max_steps=max_steps),
        BatchedColorDoorKey(num_envs, size, max_steps=max_steps, key_rows=key_rows),
    )
    ref_obs, ref_info = ref.reset(seed=size)
    obs, info = batched.reset(seed=size)
    np.testing.assert_array_equal(obs, ref_obs)
    for key in INFO_KEYS:
        np.testing.assert_array_equal(info[key], ref_info[key])
    rng = np.random.default_rng(size)
    episodes = 0
    for _ in range(steps):
        actions = rng.integers(7, size=num_envs)
        ref_out = ref.step(actions)
        assert_same_step(ref_out, batched.step(actions))
        episodes += (ref_out[2] | ref_out[3]).sum()
    assert episodes >= 0.9 * steps * num_envs / max_steps  # nearly every episode runs to its limit


def test_long_random_episodes_match_minigrid():
    ref, batched = minigrid_vector(4, 8), BatchedColorDoorKey(4, 8)
    ref.reset(seed=0)
    batched.reset(seed=0)
    rng = np.random.default_rng(1)
    for _ in range(1500):  # past the 640-step limit: truncations included
        actions = rng.choice(7, size=4, p=[0.15, 0.15, 0.4, 0.1, 0.05, 0.1, 0.05])
        assert_same_step(ref.step(actions), batched.step(actions))


# ---- scripted episodes, planned on the MiniGrid env's state --------------------------------


def actions_to_face(env, wanted):
    """Shortest turn/forward sequence after which the agent faces a cell for which `wanted(cell_pos)`."""
    start = (*env.agent_pos, env.agent_dir)
    queue, came = deque([start]), {start: None}
    while queue:
        x, y, d = state = queue.popleft()
        front = (x + DIR_TO_VEC[d][0], y + DIR_TO_VEC[d][1])
        if wanted(front):
            plan = []
            while came[state] is not None:
                state, action = came[state]
                plan.append(action)
            return plan[::-1]
        moves = [((x, y, (d - 1) % 4), LEFT), ((x, y, (d + 1) % 4), RIGHT)]
        cell = env.grid.get(*front)
        if cell is None or (cell.type == "door" and cell.is_open):  # walk around keys, never onto the goal
            moves.append(((*front, d), FORWARD))
        for nxt, action in moves:
            if nxt not in came:
                came[nxt] = (state, action)
                queue.append(nxt)
    raise AssertionError("no path")


def cell_is(kind, color=None):
    def wanted(env):
        def check(pos):
            cell = env.grid.get(*pos)
            return cell is not None and cell.type == kind and (color is None or cell.color == color)

        return check

    return wanted


def empty_cell(env):
    return lambda pos: env.grid.get(*pos) is None and tuple(pos) != tuple(env.agent_pos)


def script(env, steps):
    """Yield the actions of `steps`: ("face", wanted) walks to face a cell, else an action."""
    for step in steps:
        if isinstance(step, tuple):
            yield from actions_to_face(env, step[1](env))
        else:
            yield step


def scripts_for(env, kind):
    right = env.correct_key_color
    wrong = next(c for c in env.key_colors if c != right)
    to_goal = [("face", cell_is("goal")), FORWARD]
    open_door = [("face", cell_is("door")), TOGGLE]
    take = lambda color: [("face", cell_is("key", color)), PICKUP]  # noqa: E731
    drop = [("face", empty_cell), DROP]
    return {
        "right key": [*take(right), *open_door, *to_goal],
        "wrong key, then the right one": [*take(wrong), *open_door, *drop, *take(right), *open_door, *to_goal],
        "drop and re-pick": [*take(right), *drop, *take(right), *open_door, *to_goal],
    }[kind]


def feasible_seeds(size, kind, count):
    """Seeds whose layout the planner can script (a key in front of the door can block it):
    the whole script is first played on a copy of the env, and must reach the goal."""
    seeds, seed = [], 0
    while len(seeds) < count:
        env = gym.make(f"ColorDoorKey-{size}x{size}-v0").unwrapped
        env.reset(seed=seed)
        try:
            for action in script(env, scripts_for(env, kind)):
                _, _, terminated, truncated, _ = env.step(action)
            if terminated:
                seeds.append(seed)
        except AssertionError:  # no path
            pass
        seed += 1
    return seeds


@pytest.mark.parametrize("kind", ["right key", "wrong key, then the right one", "drop and re-pick"])
@pytest.mark.parametrize("size", [6, 8])
def test_scripted_episodes_match_minigrid(kind, size):
    num_envs = 6
    seeds = feasible_seeds(size, kind, num_envs)
    ref, batched = minigrid_vector(num_envs, size), BatchedColorDoorKey(num_envs, size)
    ref.reset(seed=seeds)
    batched.reset(seed=seeds)
    plans = [script(env.unwrapped, scripts_for(env.unwrapped, kind)) for env in ref.envs]
    finished = np.zeros(num_envs, dtype=bool)
    for _ in range(300):
        actions = np.array([LEFT if done else next(plan) for plan, done in zip(plans, finished)])
        ref_out = ref.step(actions)
        assert_same_step(ref_out, batched.step(actions))
        finished |= ref_out[2]
        if finished.all():
            break
    assert finished.all(), "every scripted episode reaches the goal"


def test_wrong_key_leaves_the_door_locked_in_both():
    ref, batched = minigrid_vector(3, 6), BatchedColorDoorKey(3, 6)
    ref.reset(seed=7)
    batched.reset(seed=7)
    envs = [env.unwrapped for env in ref.envs]
    plans = [
        script(e, [("face", cell_is("key", "blue")), PICKUP, ("face", cell_is("door")), TOGGLE, TOGGLE]) for e in envs
    ]
    for _ in range(60):
        actions = np.array([next(plan, LEFT) for plan in plans])
        assert_same_step(ref.step(actions), batched.step(actions))
    for i, env in enumerate(envs):
        (door,) = [o for o in env.grid.grid if o is not None and o.type == "door"]
        assert door.is_locked and env.carrying is not None and env.carrying.color == "blue"
        assert batched.state[i, door.cur_pos[0], door.cur_pos[1]] == 2


def test_phases_switch_at_the_next_reset_in_both():
    ref, batched = minigrid_vector(4, 6, max_steps=10), BatchedColorDoorKey(4, 6, max_steps=10)
    ref.reset(seed=3)
    batched.reset(seed=3)
    rng = np.random.default_rng(0)
    for t in range(40):
        if t == 15:
            ref.call("set_correct_key_color", "blue")
            batched.call("set_correct_key_color", "blue")
        actions = rng.integers(7, size=4)
        ref_out, out = ref.step(actions), batched.step(actions)
        assert_same_step(ref_out, out)
        assert (out[4]["correct_key_color_idx"] == (0 if t < 19 else 2)).all()  # resets at steps 10, 20, ...


def test_row_tables_reproduce_process_vis_rows():
    """Spot checks of the row rule: a wall stops the spread, open cells pass it on."""
    visible, above = row_tables()
    agent_only, all_clear = 1 << 3, (1 << 7) - 1
    assert visible[agent_only | all_clear << 7] == all_clear  # an open row is seen end to end
    assert above[agent_only | all_clear << 7] == all_clear
    wall_at_4 = all_clear & ~(1 << 4)
    # the wall cell itself is seen but nothing behind it; the rows above see up to the wall
    assert visible[agent_only | wall_at_4 << 7] == 0b0011111
    assert above[agent_only | wall_at_4 << 7] == 0b0011111
    assert visible[agent_only | 0 << 7] == agent_only and above[agent_only] == 0  # an opaque agent cell


def test_bad_configurations_raise_like_the_minigrid_env():
    from envs import ColorDoorKeyEnv

    for kwargs, message in [
        ({"size": 5}, "size >= 6"),
        ({"key_colors": ("red", "red")}, "distinct"),
        ({"correct_key_color": "green"}, "not among the keys"),
        ({"door_color": "pink"}, "unknown colour"),
        ({"size": 8, "key_rows": 1}, "key_rows must be an integer in"),  # two keys and the agent in a 2x1 band
        ({"size": 8, "key_rows": 7}, "key_rows must be an integer in"),
        ({"size": 9, "key_rows": 2.5}, "key_rows must be an integer in"),
    ]:
        with pytest.raises(ValueError, match=message):
            BatchedColorDoorKey(2, **kwargs)
        with pytest.raises(ValueError, match=message):
            ColorDoorKeyEnv(**kwargs)
    with pytest.raises(ValueError, match="not among the keys"):
        BatchedColorDoorKey(2).set_correct_key_color("green")
    ColorDoorKeyEnv(key_rows=1, key_colors=("red",)).reset(seed=0)  # one key beside the agent: room enough
    BatchedColorDoorKey(2, key_rows=1, key_colors=("red",)).reset(seed=0)
