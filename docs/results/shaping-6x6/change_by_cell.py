"""Where the change of the correct key colour alters the key-distance target, by the agent's cell.

    python docs/results/shaping-6x6/change_by_cell.py ColorDoorKey-6x6

A uniformly random policy in 256 worlds for 400 steps each (each episode cut at 80 steps, as the held-out sets are,
and the next begun in a new layout: about 1,280 layouts): per cell (x, y) the share of visits whose view has another
key distance when the correct key is blue instead of red, and the mean squared difference of the two (what
the model's error becomes there right after the change, had it learned red exactly). Prints
markdown tables, rows y, columns x (cells never visited are left out), and the shares by row.
"""

import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
from minigrid.core.constants import COLOR_TO_IDX

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from envs import BatchedColorDoorKey, resolve_env_id  # noqa: E402
from envs.views import flat_to_image, key_distance  # noqa: E402

WORLDS, STEPS = 256, 400


def table(title: str, values: np.ndarray, visited: np.ndarray, fmt: str) -> str:
    columns = np.flatnonzero(visited.any(0))
    head = f"| {title}, y \\ x | " + " | ".join(str(x) for x in columns) + " |"
    rows = [head, "|-" * (len(columns) + 1) + "|"]
    for y in np.flatnonzero(visited.any(1)):
        cells = [format(values[y, x], fmt) if visited[y, x] else "" for x in columns]
        rows.append(f"| {y} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main(env_name: str) -> None:
    kwargs = gym.spec(resolve_env_id(env_name)).kwargs
    size = kwargs["size"]
    env = BatchedColorDoorKey(WORLDS, **dict(kwargs, max_steps=80))
    obs, info = env.reset(seed=0)
    rng = np.random.default_rng(0)
    visits, changed, squared = (np.zeros((size, size)) for _ in range(3))
    red, blue = np.full(WORLDS, COLOR_TO_IDX["red"]), np.full(WORLDS, COLOR_TO_IDX["blue"])
    for _ in range(STEPS):
        image = flat_to_image(obs)
        difference = key_distance(image, red) - key_distance(image, blue)
        cell = (info["agent_y"], info["agent_x"])
        np.add.at(visits, cell, 1)
        np.add.at(changed, cell, difference != 0)
        np.add.at(squared, cell, difference**2)
        obs, _, _, _, info = env.step(rng.integers(env.single_action_space.n, size=WORLDS))
    visited = visits > 0
    share = visits / visits.sum()
    print(
        f"{env_name}: {WORLDS} worlds x {STEPS} random steps (episodes of 80); "
        f"changed share {changed.sum() / visits.sum():.3f}, mean squared change {squared.sum() / visits.sum():.1f}\n"
    )
    print(table("share of visits", share, visited, ".3f"), end="\n\n")
    print(table("changed share", changed / np.maximum(visits, 1), visited, ".2f"), end="\n\n")
    print(table("mean squared change", squared / np.maximum(visits, 1), visited, ".1f"), end="\n\n")
    rows = np.flatnonzero(visited.any(1))  # by row: the regions a skill holds where the keys lie in a band of rows
    print("| row y | share of visits | changed share |\n|-|-|-|")
    for y in rows:
        print(f"| {y} | {visits[y].sum() / visits.sum():.3f} | {changed[y].sum() / visits[y].sum():.2f} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "ColorDoorKey-6x6")
