"""What a ColorDoorKey policy does, read from checkpoints copied while its run went on (the run itself untouched).

    python docs/results/fair-test-8x8-entropy/behaviour.py CHECKPOINT... --out behaviour.jsonl   # one line each
    python docs/results/fair-test-8x8-entropy/behaviour.py --random --env ColorDoorKey-8x8          # the reference

Each checkpoint names the algorithm file that wrote it (in --code's algos/: the checkout that ran); that file's
`Agent` (files whose agent sees the view alone: `ppo.py`, `ppo_poi_progress.py`, ...) is rebuilt from the
checkpoint's weights and plays --episodes episodes of
MiniGrid's env (not the batched twin: its objects can be asked what the agent carries), the correct key of the
checkpoint's phase unless --color says otherwise, actions sampled from the policy. Episode i is layout --layout-seed
+ i for every checkpoint, so checkpoints are compared on the same layouts. Per checkpoint: the share of episodes
that reach the goal; which key the agent picks up first (or none); the share of episodes in which it ever carries
each colour, or drops what it carries; its toggles of the locked door per episode that fail, by what it carries; the
share of its steps spent facing the locked door and carrying each colour; the share of its steps facing a key of
each colour empty-handed, and the policy's mean probability of picking it up there (None where it never does); its
actions' shares.
"""

import argparse
import importlib.util
import json
import pickle
import sys
from collections import Counter
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))
from envs import OneHotFlatObs, resolve_env_id, view_columns  # noqa: E402

ACTIONS = ("left", "right", "forward", "pickup", "drop", "toggle", "done")  # MiniGrid's order
PICKUP, TOGGLE = ACTIONS.index("pickup"), ACTIONS.index("toggle")


def load_agent(path: Path, code: Path):
    """The checkpoint's agent, its run's args and its loop values. The checkpoint names its algorithm file and
    pickles the file's `Args` as `__main__.Args`, so that file (in `code`/algos) is imported first and its `Args` put
    where the unpickler looks."""
    file = torch.load(path, map_location="cpu", weights_only=False, pickle_module=_StubPickle)["file"]
    spec = importlib.util.spec_from_file_location("algorithm", code / "algos" / file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines the file's classes; its main block does not run
    sys.modules["__main__"].Args = module.Args
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    args = checkpoint["args"]
    agent = module.Agent(980, len(ACTIONS), False, columns=view_columns(resolve_env_id(args.env)))
    agent.load_state_dict(checkpoint["stateful"]["agent"])
    return agent.eval(), args, checkpoint["values"]


class _Stub:
    """What the first read of a checkpoint makes of a class it cannot find (its `Args`): enough to read `file`."""


class _StubPickle:
    """A pickle module for torch.load whose unpickler puts `_Stub` where a class cannot be found."""

    class Unpickler(pickle.Unpickler):
        def find_class(self, module, name):
            try:
                return super().find_class(module, name)
            except AttributeError:
                return _Stub

    load = pickle.load


def carried(env) -> str:
    """The colour of what the agent carries ("none" when nothing)."""
    return env.carrying.color if env.carrying is not None else "none"


def play(agent, env_id: str, color: str, episodes: int, layout_seed: int, seed: int, batch: int = 16) -> dict:
    """`episodes` episodes, `batch` envs at a time (one forward pass for all), actions from `agent` (None: uniform)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    envs = [OneHotFlatObs(gym.make(env_id)) for _ in range(min(batch, episodes))]
    count, first_key, actions = Counter(), Counter(), Counter()
    started = 0

    def start(env):
        nonlocal started
        env.unwrapped.set_correct_key_color(color)
        obs, _ = env.reset(seed=layout_seed + started)
        started += 1
        return obs, dict(picked=[], dropped=False, steps=0)

    live = [start(env) for env in envs]
    running = list(range(len(envs)))
    while running:
        obs = torch.tensor(np.stack([live[i][0] for i in running]))
        if agent is None:
            chosen = rng.integers(len(ACTIONS), size=len(running))
            pickup_probability = np.full(len(running), 1 / len(ACTIONS))
        else:
            with torch.no_grad():
                chosen = agent.get_action_and_value(obs)[0].numpy()
                pickup = torch.full((len(running),), PICKUP)
                pickup_probability = agent.get_action_and_value(obs, pickup)[1].exp().numpy()
        still = []
        for i, action, p_pickup in zip(running, chosen, pickup_probability):
            env, episode = envs[i].unwrapped, live[i][1]
            before = carried(env)
            front = env.grid.get(*env.front_pos)
            facing_locked = front is not None and front.type == "door" and front.is_locked
            if front is not None and front.type == "key" and before == "none":  # a key it can pick up
                count[f"steps facing a {front.color} key"] += 1
                count[f"pickup probability facing a {front.color} key"] += float(p_pickup)
            count["steps"] += 1
            count[f"steps carrying {before}"] += 1
            count["steps facing the locked door"] += facing_locked
            actions[ACTIONS[action]] += 1
            obs, reward, terminated, truncated, _ = envs[i].step(int(action))
            episode["steps"] += 1
            after = carried(env)
            if before == "none" and after != "none":
                episode["picked"].append(after)
            episode["dropped"] |= before != "none" and after == "none"
            if action == TOGGLE and facing_locked and front.is_locked:
                count[f"failed toggles carrying {before}"] += 1
            if terminated or truncated:
                count["episodes"] += 1
                count["successes"] += reward > 0
                count["length"] += episode["steps"]
                first_key[episode["picked"][0] if episode["picked"] else "none"] += 1
                for colour in set(episode["picked"]):
                    count[f"episodes carrying {colour}"] += 1
                count["episodes with a drop"] += episode["dropped"]
                if started < episodes:
                    live[i] = start(envs[i])
                    still.append(i)
            else:
                live[i] = (obs, episode)
                still.append(i)
        running = still
    n, steps = count["episodes"], count["steps"]
    colours = ("red", "blue")
    return dict(
        episodes=n,
        success=count["successes"] / n,
        mean_length=count["length"] / n,
        first_key={k: first_key[k] / n for k in (*colours, "none")},
        episodes_carrying={k: count[f"episodes carrying {k}"] / n for k in colours},
        episodes_with_a_drop=count["episodes with a drop"] / n,
        failed_toggles_per_episode={k: count[f"failed toggles carrying {k}"] / n for k in (*colours, "none")},
        steps_facing_the_locked_door=count["steps facing the locked door"] / steps,
        steps_carrying={k: count[f"steps carrying {k}"] / steps for k in colours},
        steps_facing_a_key={k: count[f"steps facing a {k} key"] / steps for k in colours},
        pickup_probability_facing_a_key={
            k: count[f"pickup probability facing a {k} key"] / count[f"steps facing a {k} key"]
            if count[f"steps facing a {k} key"]
            else None
            for k in colours
        },
        actions={a: actions[a] / steps for a in ACTIONS},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="*", type=Path)
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose algos/ wrote the checkpoints")
    parser.add_argument("--random", action="store_true", help="a uniformly random policy on --env instead")
    parser.add_argument("--env", default="ColorDoorKey-8x8", help="with --random: the env")
    parser.add_argument("--color", help="the correct key colour (default: the checkpoint's phase's; red with --random)")
    parser.add_argument("--episodes", type=int, default=200)
    parser.add_argument("--layout-seed", type=int, default=1_000_000, help="episode i plays layout seed + i")
    parser.add_argument("--seed", type=int, default=0, help="seeds the actions' sampling")
    parser.add_argument("--out", type=Path, help="append one JSON line per checkpoint to this file")
    options = parser.parse_args()
    if not options.checkpoints and not options.random:
        parser.error("give checkpoints, or --random")
    if options.episodes < 1:
        parser.error(f"--episodes must be positive, got {options.episodes}")
    missing = [str(p) for p in options.checkpoints if not p.is_file()]
    if missing:
        parser.error(f"no such checkpoint: {missing[0]}")
    for path in [None] if options.random else options.checkpoints:
        if path is None:
            agent, env_id, color, where = None, resolve_env_id(options.env), options.color or "red", {}
        else:
            agent, args, values = load_agent(path, options.code)
            env_id = resolve_env_id(args.env)
            color = options.color or args.correct_key_colors[values["phase"]]
            where = dict(checkpoint=str(path), label=args.exp_name, seed=args.seed, global_step=values["global_step"])
        row = dict(
            **where,
            env=env_id,
            color=color,
            layout_seed=options.layout_seed,
            policy="random" if agent is None else "agent",
        )
        row.update(play(agent, env_id, color, options.episodes, options.layout_seed, options.seed))
        line = json.dumps(row)
        print(line)
        if options.out:
            with options.out.open("a") as out:
                out.write(line + "\n")


if __name__ == "__main__":
    main()
