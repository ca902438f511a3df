"""Where the skills go: each run's `skills/visitation` maps (ppo_poi_diayn.py) averaged over each phase's last 100k
steps, written as one PNG per run (the phases one above the other, the skills side by side), and per run and phase
each skill's weight in the goal's column and its spread (the median and largest over the skills, the median). A
reading from the run folders, which are not committed; the PNGs and the table are.

    python docs/results/diayn-then-task-8x8/maps.py RUN_DIR [RUN_DIR ...] --out FOLDER

A phase's last 100k steps are [end - 100k, end), its end as `common.analyze` cuts it (the next phase's first logged
step; after the run's last). The goal's column is x = width - 2: on ColorDoorKey the goal is in the bottom-right
corner inside the outer wall, and the splitting wall is drawn left of it in every layout, so a step there is beyond the
door. A skill's spread is the number of cells with at least a tenth of its busiest cell's weight. Each logged map is
scaled to its skill's busiest cell (`visitation_image`), so these are readings of the averaged scaled maps, not
shares of visits. The grids are square: a map's width is its height.
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from common.learning_summary import phase_spans  # noqa: E402
from common.tb import mean_image, read_scalars  # noqa: E402

TAG, WINDOW = "skills/visitation", 100_000


def phase_ends(scalars: dict) -> list[int]:
    """Each phase's end as common.analyze cuts it: the next phase's first logged step, after the run's last step."""
    if not scalars.get("charts/phase"):
        raise ValueError("no charts/phase logged")
    return [end for _, end in phase_spans(scalars)]


def panels(image: np.ndarray) -> list[np.ndarray]:
    """The skills' square maps of a `visitation_image`: side by side, one empty column between."""
    grey = image[..., 0] if image.ndim == 3 else image
    width = grey.shape[0]
    if (grey.shape[1] + 1) % (width + 1):
        raise ValueError(f"a {grey.shape[0]} x {grey.shape[1]} image is not square maps side by side")
    return [grey[:, k * (width + 1) : k * (width + 1) + width] for k in range((grey.shape[1] + 1) // (width + 1))]


def spread(panel: np.ndarray) -> float:
    """How many cells of a skill's map hold at least a tenth of its busiest cell's weight; nan for an empty map."""
    return float((panel >= 0.1 * panel.max()).sum()) if panel.max() > 0 else float("nan")


def goal_column_weight(panel: np.ndarray) -> float:
    """The share of a skill's map in the goal's column (x = width - 2); nan for an empty map."""
    total = panel.sum()
    return float(panel[:, -2].sum() / total) if total > 0 else float("nan")


def run_maps(run_dir: Path) -> list[tuple[np.ndarray, list[float], list[float]]]:
    """Per phase: the mean map over its last 100k steps, each skill's goal-column weight and each skill's spread."""
    maps = []
    for end in phase_ends(read_scalars(run_dir)):
        image, _ = mean_image(run_dir, TAG, end - WINDOW, end)
        skills = panels(image)
        maps.append((image, [goal_column_weight(p) for p in skills], [spread(p) for p in skills]))
    return maps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True, help="the folder the PNGs go to")
    args = parser.parse_args()
    for run_dir in args.runs:
        if not run_dir.is_dir():
            sys.exit(f"error: no run folder {run_dir}")
    import matplotlib.image

    args.out.mkdir(parents=True, exist_ok=True)
    print(
        "| run | goal column weight, median of the skills (largest) before / after the change "
        "| cells with a tenth of the busiest's weight, median of the skills |"
    )
    print("|-|-|-|")
    for run_dir in args.runs:
        try:
            maps = run_maps(run_dir)
        except ValueError as error:
            sys.exit(f"error: {run_dir}: {error}")
        gap = np.ones((1, maps[0][0].shape[1]))  # a white line between the phases
        rows = [m[..., 0] if m.ndim == 3 else m for m, _, _ in maps]
        stacked = np.concatenate([r for row in rows for r in (row, gap)][:-1])
        name = run_dir.name.rsplit("__", 1)[0]  # without the start time
        matplotlib.image.imsave(args.out / f"{name}.png", np.kron(stacked, np.ones((12, 12))), cmap="gray", vmin=0)
        weights = " / ".join(f"{np.nanmedian(w):.3f} ({np.nanmax(w):.3f})" for _, w, _ in maps)
        spreads = " / ".join(f"{np.nanmedian(s):.1f}" for _, _, s in maps)
        print(f"| {name} | {weights} | {spreads} |")


if __name__ == "__main__":
    main()
