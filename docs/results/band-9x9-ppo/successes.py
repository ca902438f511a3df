"""How many episodes of each run and phase reached the goal, from a study's series alone.

    python docs/results/band-9x9-ppo/successes.py docs/results/band-9x9-ppo/series.jsonl.gz

A ColorDoorKey episode ends at the goal (return 1 - 0.9 L / M, L its length, M the step limit) or at
the limit (return 0, length M). So over a phase's bins of episodes, with N episodes, R the sum of their
returns and S of their lengths, the number that reached the goal is n = 10 (R - 0.9 (N M - S) / M):
each success adds 1 - 0.9 L / M to R and M - L to N M - S. Prints a markdown table: per run and phase,
N, n and n / N.
"""

import sys
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from common.series import read  # noqa: E402
from envs import resolve_env_id  # noqa: E402


def successes(episodes: dict, step_limit: int, start: int, end: int) -> tuple[int, float]:
    """(episodes, successes) in the bins whose first step lies in [start, end) (a bin holds `BIN` steps: the one
    the phase changes in goes to the earlier phase)."""
    steps = np.arange(len(episodes["count"])) * episodes["bin"]
    inside = (steps >= start) & (steps < end)
    count = float(np.sum(np.asarray(episodes["count"], float)[inside]))
    returns = float(np.sum(np.asarray(episodes["return"], float)[inside]))
    lengths = np.asarray(episodes["length"], float)[inside]
    if np.isnan(lengths[np.asarray(episodes["count"])[inside] > 0]).any():
        raise ValueError("a bin with episodes but no length: the series does not hold what this count needs")
    lengths = float(np.nansum(lengths))
    return int(count), 10 * (returns - 0.9 * (count * step_limit - lengths) / step_limit)


def main(path: str) -> None:
    print("| seed | phase | episodes | reached the goal | share |")
    print("|-|-|-|-|-|")
    for record in read(Path(path)):
        size = gym.spec(resolve_env_id(record["env"])).kwargs["size"]
        phase_steps = [step for step, _ in record["scalars"]["charts/phase"]][1:]  # where each later phase starts
        bounds = [0, *phase_steps, np.inf]
        for phase, (start, end) in enumerate(zip(bounds, bounds[1:])):
            count, reached = successes(record["episodes"], 10 * size**2, start, end)
            print(f"| {record['seed']} | {phase} | {count} | {reached:.0f} | {reached / max(count, 1):.4f} |")


if __name__ == "__main__":
    main(sys.argv[1])
