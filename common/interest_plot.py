"""Interest against the model's error around a change of the world: does a method's interest
rise when its model is wrong, and fall when the model has re-learned?

    python -m common.interest_plot sweeps/study --out docs/results/study/interest_around_change.png

For every method whose runs log `poi/mean`, and for every run: the rollout's mean interest
(`poi/mean`), the interest on the held-out set (`poi/eval_mean`), the model's loss on the
agent's own data (`external_model/train_loss`) and on the held-out transitions the change
altered (`external_model/eval_loss_changed`), each divided by its own mean absolute value over
the `--before` steps before the first change (progress is signed). Plotted: the median over runs, with the quartiles as a band,
from `--before` steps before the change to `--after` steps after it, one panel per method; the
medians are written next to the figure as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from common.analyze import find_runs
from common.console import OneLineParser
from common.learning_summary import phase_starts
from common.tb import read_scalars

QUANTITIES = {
    "poi/mean": "interest, rollout",
    "poi/eval_mean": "interest, held-out set",
    "external_model/train_loss": "model loss, own data",
    "external_model/eval_loss_changed": "model loss, changed views",
}


def relative_curves(scalars: dict, grid: np.ndarray, before: int) -> dict[str, np.ndarray]:
    """Each quantity on `grid` (steps relative to the first change), divided by its mean absolute
    value over the `before` steps before the change; quantities not logged, or without values before it, are left out."""
    starts = phase_starts(scalars)
    if len(starts) < 2:
        return {}
    change, curves = starts[1], {}
    for tag in QUANTITIES:
        points = np.array(scalars.get(tag, []), dtype=float).reshape(-1, 2)
        steps, values = points[:, 0] - change, points[:, 1]
        level = values[(steps >= -before) & (steps < 0)]
        if len(level) == 0 or not np.any(level):
            continue
        curves[tag] = np.interp(grid, steps, values) / np.mean(np.abs(level))  # signed (progress): its typical size
    return curves


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="sweep folders or folders of run folders")
    parser.add_argument(
        "--out", type=Path, required=True, help="the figure (.png); the medians go to the same name .json"
    )
    parser.add_argument("--before", type=int, default=50_000, help="steps before the change: the reference level")
    parser.add_argument("--after", type=int, default=300_000, help="steps after the change to plot")
    parser.add_argument(
        "--methods", nargs="+", default=None, help="only these methods (default: all that log poi/mean)"
    )
    args = parser.parse_args(argv)
    try:
        if args.before <= 0 or args.after <= 0:
            raise ValueError(f"--before and --after must be positive, got {args.before} and {args.after}")
        if args.out.suffix != ".png":
            raise ValueError(f"--out must name a .png file, got {args.out}")
        runs, _ = find_runs(args.folders)
        grid = np.linspace(-args.before, args.after, 200)
        per_method: dict[str, dict[str, list[np.ndarray]]] = {}
        for run in runs:
            if args.methods is not None and run.method not in args.methods:
                continue
            scalars = read_scalars(run.path)
            if "poi/mean" not in scalars:
                continue
            for tag, curve in relative_curves(scalars, grid, args.before).items():
                per_method.setdefault(run.method, {}).setdefault(tag, []).append(curve)
        if not per_method:
            raise ValueError("no run logs poi/mean and a change of phase")
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = sorted(per_method)
    fig, axes = plt.subplots(1, len(methods), figsize=(4.5 * len(methods), 3.6), squeeze=False, sharey=True)
    medians = {}
    for ax, method in zip(axes[0], methods):
        medians[method] = {}
        for tag, curves in per_method[method].items():
            low, median, high = np.percentile(np.stack(curves), [25, 50, 75], axis=0)
            ax.plot(grid / 1000, median, label=f"{QUANTITIES[tag]} ({len(curves)} runs)")
            ax.fill_between(grid / 1000, low, high, alpha=0.2)
            medians[method][tag] = median.tolist()
        ax.axvline(0, color="grey", linestyle="--", linewidth=1)
        ax.set(title=method, xlabel="steps from the change (thousands)")
        ax.set_yscale("symlog", linthresh=0.1)  # progress can be negative
    axes[0][0].set_ylabel("relative to the level before the change")
    axes[0][0].legend(fontsize=7)
    fig.suptitle("interest and model error around the change (median over runs, quartile band)")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    args.out.with_suffix(".json").write_text(json.dumps({"steps_from_change": grid.tolist(), "medians": medians}))
    print(f"wrote {args.out} and {args.out.with_suffix('.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
