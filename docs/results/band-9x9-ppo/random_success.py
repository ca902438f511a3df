"""How often, how late and for how much a uniformly random policy solves a ColorDoorKey env.

    python docs/results/band-9x9-ppo/random_success.py ColorDoorKey-8x8 ColorDoorKeyBand-8x8 ColorDoorKeyBand-9x9

The first episode of each of 8,192 layouts (the batched env, run to the env's own step limit, the correct key red;
seed s draws layouts s * 8192 ... s * 8192 + 8191, so seeds 0 and 1 share none): the share of episodes that reach
the goal, the mean return of those that do, the median step at which they do, and that return discounted to the
episode's first action (gamma 0.99, PPO's: a reward after step L counts gamma^(L-1)), the signal a first success sends
back to the policy's first actions, with a 95% bootstrap CI (few successes carry it: the earliest). Prints a markdown
table, one row per env and seed.
"""

import sys
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from envs import BatchedColorDoorKey, resolve_env_id  # noqa: E402

LAYOUTS, GAMMA, RESAMPLES = 8192, 0.99, 2000


def first_episodes(env_name: str, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The return and the length of each layout's first episode under a uniformly random policy."""
    env = BatchedColorDoorKey(LAYOUTS, **gym.spec(resolve_env_id(env_name)).kwargs)
    env.reset(seed=seed * LAYOUTS)  # world i is seeded seed * LAYOUTS + i
    rng = np.random.default_rng(seed)
    ended, returns, lengths = np.zeros(LAYOUTS, bool), np.zeros(LAYOUTS), np.zeros(LAYOUTS)
    step = 0
    while not ended.all():
        step += 1
        _, reward, terminated, truncated, _ = env.step(rng.integers(env.single_action_space.n, size=LAYOUTS))
        now = ~ended & (terminated | truncated)
        returns[now], lengths[now] = reward[now], step
        ended |= now
    return returns, lengths


def main(env_names: list[str]) -> None:
    print(
        "| env | seed | share solved | mean return if solved | median step of success | discounted to the start [95% CI] |"
    )
    print("|-|-|-|-|-|-|")
    for name in env_names:
        for seed in (0, 1):
            returns, lengths = first_episodes(name, seed)
            solved = returns > 0
            if not solved.any():  # nothing to average or resample
                print(f"| {name} | {seed} | 0.0000 | - | - | - |")
                continue
            discounted = returns[solved] * GAMMA ** (lengths[solved] - 1)
            draws = np.random.default_rng([seed, 1]).choice(discounted, size=(RESAMPLES, len(discounted)))  # own stream
            low, high = np.percentile(draws.mean(1), [2.5, 97.5])
            print(
                f"| {name} | {seed} | {solved.mean():.4f} | {returns[solved].mean():.3f} | "
                f"{np.median(lengths[solved]):.0f} | {discounted.mean():.4f} [{low:.4f}, {high:.4f}] |"
            )


if __name__ == "__main__":
    main(sys.argv[1:] or ["ColorDoorKey-8x8", "ColorDoorKeyBand-8x8", "ColorDoorKeyBand-9x9"])
