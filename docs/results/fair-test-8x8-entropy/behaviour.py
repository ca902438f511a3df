"""What a ColorDoorKey policy does, read from checkpoints copied while its run went on (the run itself untouched).

    python docs/results/fair-test-8x8-entropy/behaviour.py --code ../study-8x8 CHECKPOINT... --out behaviour.jsonl
    python docs/results/fair-test-8x8-entropy/behaviour.py --random --env ColorDoorKey-8x8 --color blue

Each checkpoint names the algorithm file that wrote it, found in --code's algos/ (the checkout that ran it); that
file's `Agent` (files whose agent sees the view alone: `ppo.py`, `ppo_poi_progress.py`, ...) is rebuilt from the
checkpoint's weights. It plays the first episode of each of --episodes worlds of the batched env, all at once: world
i has layout --layout-seed + i (as MiniGrid's reset(seed=--layout-seed + i) draws it) and its own stream of action
draws, seeded (--seed, i), so an episode's layout and draws do not depend on the others', and every checkpoint plays
the same layouts. The correct key is the checkpoint's phase's unless --color says otherwise. The env's rules come
from this checkout (envs/batched.py), the agent from --code.

Per checkpoint, shares of episodes: reaching the goal; by the first key picked up (red, blue, none); ever carrying
each colour; with a drop. Failed toggles of the locked door per episode, by what the agent carried. Shares of steps:
facing the locked door (in all, and by what the agent carries); whose view the change alters (the key-distance
model's target differs between the red and the blue key: the data the model needs after the change); carrying each
colour; facing a key of each colour empty-handed, with the policy's mean probability of picking it up there (over
those steps, so a run that stares at a key weighs more; None where it never faces one); each action.
tests/test_fair_test.py checks the counts on a hand-worked episode and against a plain loop over MiniGrid's own env
objects.
"""

import argparse
import importlib.util
import json
import pickle
import subprocess
import sys
from collections import Counter
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch
from minigrid.core.constants import COLOR_TO_IDX, DIR_TO_VEC

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from envs import BatchedColorDoorKey, is_color_door_key, key_colors, resolve_env_id, view_columns  # noqa: E402
from envs.batched import DOOR, EMPTY, KEY, LOCKED  # noqa: E402
from envs.views import target_changed  # noqa: E402

ACTIONS = ("left", "right", "forward", "pickup", "drop", "toggle", "done")  # MiniGrid's order
PICKUP, DROP, TOGGLE = (ACTIONS.index(a) for a in ("pickup", "drop", "toggle"))
COLOURS = {name: COLOR_TO_IDX[name] for name in ("red", "blue")}


class _Stub:
    """What the first read of a checkpoint makes of a class it cannot find: enough to read which file wrote it."""


def _pickle_module(classes):
    """A pickle module for torch.load whose unpickler finds the classes of the file that ran as `__main__` in
    `classes` (None: a `_Stub` for each)."""

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            if module == "__main__":
                return _Stub if classes is None else getattr(classes, name)
            return super().find_class(module, name)

    return type("pickle_module", (), dict(Unpickler=Unpickler, load=pickle.load))


def load_agent(path: Path, code: Path):
    """The checkpoint's agent, its run's args and its loop values. The checkpoint names its algorithm file; that
    file (in `code`/algos) is imported under a name of its own, and the checkpoint read again with its classes."""
    file = torch.load(path, map_location="cpu", weights_only=False, pickle_module=_pickle_module(None))["file"]
    spec = importlib.util.spec_from_file_location("algorithm", code / "algos" / file)
    module = importlib.util.module_from_spec(spec)
    path_before = list(sys.path)
    try:
        spec.loader.exec_module(module)  # defines the file's classes (its main block does not run)
    finally:
        sys.path[:] = path_before  # the file puts its checkout first; later imports stay this checkout's
    checkpoint = torch.load(path, map_location="cpu", weights_only=False, pickle_module=_pickle_module(module))
    args = checkpoint["args"]
    env_id = checked_env(args.env)
    obs_dim = BatchedColorDoorKey(1, **gym.spec(env_id).kwargs).single_observation_space.shape[0]
    agent = module.Agent(obs_dim, len(ACTIONS), bf16=False, columns=view_columns(env_id))
    agent.load_state_dict(checkpoint["stateful"]["agent"])
    return agent.eval(), args, checkpoint["values"]


def checked_env(name: str) -> str:
    """The env id of `name`, if it is a ColorDoorKey env with a red and a blue key (what the counts are about)."""
    env_id = resolve_env_id(name)
    if not is_color_door_key(env_id) or set(key_colors(env_id)) != set(COLOURS):
        raise ValueError(f"the env must be a ColorDoorKey env with a red and a blue key, got {name}")
    return env_id


def action_probabilities(agent, obs: np.ndarray) -> np.ndarray:
    """Each action's probability under `agent` (None: uniform) for each observation, (len(obs), 7)."""
    n = len(obs)
    if agent is None:
        return np.full((n, len(ACTIONS)), 1 / len(ACTIONS))
    every_action = torch.arange(len(ACTIONS)).repeat_interleave(n)
    with torch.no_grad():
        log_probs = agent.get_action_and_value(torch.as_tensor(obs).repeat(len(ACTIONS), 1), every_action)[1]
    return log_probs.exp().view(len(ACTIONS), n).T.double().numpy()


def sample(probabilities: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """The action of each row whose cumulative probability first exceeds its uniform draw (inverse CDF)."""
    cumulative = probabilities.cumsum(axis=1)
    return np.minimum((cumulative < draws[:, None] * cumulative[:, -1:]).sum(axis=1), len(ACTIONS) - 1)


def play(agent, env_id: str, color: str, episodes: int, layout_seed: int, seed: int) -> dict:
    """The first episode of each of `episodes` worlds, stepped at once (see the module's docstring). What each step
    does is read from the worlds' arrays before it, by the env's rules (envs/batched.py): a pickup needs a key in
    front and empty hands, a drop an empty cell in front, and a locked door opens only to the right key."""
    env = BatchedColorDoorKey(episodes, **gym.spec(env_id).kwargs)
    env.set_correct_key_color(color)
    obs, _ = env.reset(seed=layout_seed)
    streams = [np.random.default_rng([seed, i]) for i in range(episodes)]
    rows = np.arange(episodes)
    live = np.ones(episodes, dtype=bool)  # in its first episode
    length, success = np.zeros(episodes, dtype=int), np.zeros(episodes, dtype=bool)
    first_key = np.full(episodes, -1)  # the colour index of the first key picked up (-1: none)
    carried = {name: np.zeros(episodes, dtype=bool) for name in COLOURS}  # picked up at some step of the episode
    dropped = np.zeros(episodes, dtype=bool)
    count = Counter()
    step = 0
    while live.any():
        probabilities = action_probabilities(agent, obs)
        actions = sample(probabilities, np.array([stream.random() for stream in streams]))
        fx, fy = (env.pos + np.asarray(DIR_TO_VEC)[env.dir]).T
        front, front_color, front_state = env.obj[rows, fx, fy], env.color[rows, fx, fy], env.state[rows, fx, fy]
        holding = {"none": env.carry_obj == EMPTY}
        holding.update({name: ~holding["none"] & (env.carry_color == index) for name, index in COLOURS.items()})
        facing_locked = live & (front == DOOR) & (front_state == LOCKED)
        pick = live & (actions == PICKUP) & (front == KEY) & holding["none"]
        first_key = np.where(pick & (first_key < 0), front_color, first_key)
        dropped |= live & (actions == DROP) & (front == EMPTY) & ~holding["none"]
        right_key = ~holding["none"] & (env.carry_color == env.door_key)
        failed = facing_locked & (actions == TOGGLE) & ~right_key
        for name, index in COLOURS.items():
            carried[name] |= pick & (front_color == index)
            count[f"steps carrying {name}"] += int((live & holding[name]).sum())
            can_pick = live & (front == KEY) & (front_color == index) & holding["none"]
            count[f"steps facing a {name} key"] += int(can_pick.sum())
            count[f"pickup probability facing a {name} key"] += float(probabilities[can_pick, PICKUP].sum())
        for name, held in holding.items():
            count[f"failed toggles carrying {name}"] += int((failed & held).sum())
            count[f"steps facing the locked door carrying {name}"] += int((facing_locked & held).sum())
        # the views whose key-distance target the change alters, by the held-out sets' rule (envs/views.py)
        changed = target_changed("key_distance", obs, actions, COLOURS["red"], COLOURS["blue"])
        count["steps the change alters"] += int((live & changed).sum())
        for index, action in enumerate(ACTIONS):
            count[action] += int((live & (actions == index)).sum())
        obs, reward, terminated, truncated, _ = env.step(actions)
        step += 1
        ended = live & (terminated | truncated)
        success |= ended & (reward > 0)
        length[ended] = step  # every world started its episode at step 0
        live &= ~ended
    steps = int(length.sum())
    facing = {name: count[f"steps facing a {name} key"] for name in COLOURS}
    facing_door = {k: count[f"steps facing the locked door carrying {k}"] for k in (*COLOURS, "none")}
    return dict(
        episodes=episodes,
        success=float(success.mean()),
        mean_length=float(length.mean()),
        first_key={
            **{name: float(np.mean(first_key == i)) for name, i in COLOURS.items()},
            "none": float(np.mean(first_key < 0)),
        },
        episodes_carrying={name: float(carried[name].mean()) for name in COLOURS},
        episodes_with_a_drop=float(dropped.mean()),
        failed_toggles_per_episode={k: count[f"failed toggles carrying {k}"] / episodes for k in (*COLOURS, "none")},
        steps_facing_the_locked_door=sum(facing_door.values()) / steps,  # red and blue are the only keys
        steps_facing_the_locked_door_carrying={k: n / steps for k, n in facing_door.items()},
        steps_the_change_alters=count["steps the change alters"] / steps,
        steps_carrying={name: count[f"steps carrying {name}"] / steps for name in COLOURS},
        steps_facing_a_key={name: facing[name] / steps for name in COLOURS},
        pickup_probability_facing_a_key={
            name: count[f"pickup probability facing a {name} key"] / facing[name] if facing[name] else None
            for name in COLOURS
        },
        actions={action: count[action] / steps for action in ACTIONS},
    )


def commit_of(code: Path) -> str | None:
    """The checkout's commit, with "+changes" when its tracked files differ from it."""
    head = subprocess.run(["git", "-C", str(code), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    if not head:
        return None
    changed = subprocess.run(["git", "-C", str(code), "diff", "--quiet", "HEAD"], capture_output=True).returncode != 0
    return head + ("+changes" if changed else "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="*", type=Path)
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose algos/ wrote the checkpoints")
    parser.add_argument("--random", action="store_true", help="a uniformly random policy on --env instead")
    parser.add_argument("--env", default="ColorDoorKey-8x8", help="with --random: the env (a ColorDoorKey one)")
    parser.add_argument("--color", help="the correct key colour (default: the checkpoint's phase's; red with --random)")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--layout-seed", type=int, default=1_000_000, help="episode i plays layout seed + i")
    parser.add_argument("--seed", type=int, default=0, help="episode i draws its actions from the stream (seed, i)")
    parser.add_argument("--out", type=Path, help="append one JSON line per checkpoint to this file")
    options = parser.parse_args()
    if bool(options.checkpoints) == options.random:
        parser.error("give checkpoints or --random, not both")
    if options.episodes < 1:
        parser.error(f"--episodes must be positive, got {options.episodes}")
    missing = [str(p) for p in options.checkpoints if not p.is_file()]
    if missing:
        parser.error(f"no such checkpoint: {missing[0]}")
    if options.color not in (None, *COLOURS):
        parser.error(f"--color must be one of {', '.join(COLOURS)}, got {options.color}")
    try:
        random_env = checked_env(options.env) if options.random else None
    except ValueError as error:
        parser.error(str(error))
    script = commit_of(ROOT)  # this checkout: the env's rules and the counting
    for path in options.checkpoints or [None]:
        if path is None:
            agent, env_id, color, where = None, random_env, options.color or "red", {}
        else:
            agent, args, values = load_agent(path, options.code)
            env_id = resolve_env_id(args.env)
            color = options.color or args.correct_key_colors[values["phase"]]
            where = dict(checkpoint=str(path), code=commit_of(options.code), label=args.exp_name, seed=args.seed)
            where["global_step"] = values["global_step"]
        row = dict(**where, script=script, env=env_id, color=color, layout_seed=options.layout_seed)
        row["action_seed"] = options.seed
        row["policy"] = "random" if agent is None else "agent"
        row.update(play(agent, env_id, color, options.episodes, options.layout_seed, options.seed))
        line = json.dumps(row)
        print(line)
        if options.out:
            with options.out.open("a") as out:
                out.write(line + "\n")


if __name__ == "__main__":
    main()
