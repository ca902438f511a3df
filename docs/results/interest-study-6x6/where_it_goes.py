"""Where a saved ppo_poi_progress agent goes, and what its forward model gets wrong there: its
policy's episodes in ColorDoorKey-6x6 with a given correct key, each step counted by
(action, what the agent carries, what is in front of it) with the model's mean squared error.

    python docs/results/interest-study-6x6/where_it_goes.py runs/<run saved with --save-model> --color blue
"""

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository's root

import gymnasium as gym
import torch

from algos.ppo_poi_progress import Agent, ExternalModel
from envs import OneHotFlatObs

ACTIONS = ["left", "right", "forward", "pickup", "drop", "toggle", "done"]


def describe(world_object):
    if world_object is None:
        return "empty"
    if world_object.type == "door":
        return f"{world_object.color} door ({'locked' if world_object.is_locked else 'open' if world_object.is_open else 'closed'})"
    return f"{world_object.color} {world_object.type}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--color", default="blue", help="the correct key colour of the episodes")
    parser.add_argument("--episodes", type=int, default=10)
    args = parser.parse_args()
    env = OneHotFlatObs(gym.make("ColorDoorKey-6x6-v0"))
    env.unwrapped.set_correct_key_color(args.color)
    agent = Agent(env.observation_space.shape[0], env.action_space.n)
    agent.load_state_dict(torch.load(args.run / "agent.pt"))
    model = ExternalModel.load(args.run / "external_model.pt").eval()
    torch.manual_seed(0)
    steps, errors, returns, lengths = collections.Counter(), collections.Counter(), [], []
    for episode in range(args.episodes):
        obs, _ = env.reset(seed=1000 + episode)
        done, total, length = False, 0.0, 0
        while not done:
            x = torch.tensor(obs).unsqueeze(0)
            with torch.no_grad():
                action = agent.get_action_and_value(x)[0].item()
            world = env.unwrapped
            carrying = describe(world.carrying) if world.carrying else "nothing"
            where = (ACTIONS[action], carrying, describe(world.grid.get(*world.front_pos)))
            obs, reward, terminated, truncated, _ = env.step(action)
            with torch.no_grad():
                error = ((model.predict(x, torch.tensor([action])) - torch.tensor(obs)) ** 2).mean().item()
            steps[where] += 1
            errors[where] += error
            done, total, length = terminated or truncated, total + reward, length + 1
        returns.append(round(total, 2))
        lengths.append(length)
    print(f"returns {returns}, lengths {lengths}")
    for name in ACTIONS:
        share = sum(count for where, count in steps.items() if where[0] == name) / sum(steps.values())
        print(f"{name}: {share:.3f}", end="  ")
    print()
    print("(action, carrying, in front): share of the steps, the forward model's mean squared error")
    for where, count in steps.most_common(12):
        print(f"  {where}: {count / sum(steps.values()):.3f}, {errors[where] / count:.5f}")


if __name__ == "__main__":
    main()
