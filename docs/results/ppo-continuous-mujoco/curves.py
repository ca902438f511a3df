"""The MuJoCo plans' learning curves: each run's mean training return per 20k steps, from a study's series, one panel
per env, no verdict of their own. Over the last 100k steps, the published table's mean and the comparison's bound
about it (compare.py), which apply to the mean over runs of each run's last 100 episodes, not to a run's curve.

    python docs/results/ppo-continuous-mujoco/curves.py docs/results/ppo-continuous-mujoco/series.jsonl.gz \\
        ppo_continuous_poi_ensemble-int-coef-0 Hopper-v5=2382.86,271.74 HalfCheetah-v5=1442.64,46.03 \\
        --out docs/results/ppo-continuous-mujoco/curves.png
"""

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import compare  # noqa: E402

from common import series  # noqa: E402
from common.console import OneLineParser  # noqa: E402

WIDTH = 20_000


def curve(bins: dict, width: int = WIDTH) -> tuple[np.ndarray, np.ndarray]:
    """The end step of each `width`-step window and the mean return of the episodes logged in it (nan where none
    ended), from the series' episode bins (a window is whole bins: `width` must be a multiple of the bin)."""
    if width % bins["bin"]:
        raise ValueError(f"a window of {width} steps is not a whole number of the series' {bins['bin']}-step bins")
    per = width // bins["bin"]
    count, total = (np.asarray(bins[key], dtype=float) for key in ("count", "return"))
    windows = -(-len(count) // per)
    count, total = (np.pad(x, (0, windows * per - len(x))).reshape(windows, per).sum(1) for x in (count, total))
    with np.errstate(invalid="ignore", divide="ignore"):
        return width * np.arange(1, windows + 1), np.where(count > 0, total / count, np.nan)


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("series", type=Path, help="the study's series (common.series)")
    parser.add_argument("method", help="the runs' label in the series")
    parser.add_argument("reference", nargs="+", help="ENV=MEAN,STD: the table's mean and std (ddof 0) per env")
    parser.add_argument("--out", type=Path, required=True, help="the figure (.png)")
    args = parser.parse_args(argv)
    try:
        if args.out.suffix != ".png":
            raise ValueError(f"--out must name a .png file, got {args.out}")
        reference = compare.parse_reference(args.reference)
        rows = {row["env"]: row for row in compare.rows(args.series, args.method, reference)}
        runs = [rec for rec in series.read(args.series) if rec["method"] == args.method and rec["finished"]]
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(reference), figsize=(5 * len(reference), 3.6), squeeze=False)
    for ax, env in zip(axes[0], reference):
        drawn = []
        for rec in sorted((rec for rec in runs if rec["env"] == env), key=lambda rec: rec["seed"]):
            drawn.append(curve(rec["episodes"]))
            ax.plot(drawn[-1][0] / 1e6, drawn[-1][1], linewidth=1, label=f"seed {rec['seed']}")
        row = rows[env]
        end = max(steps[-1] for steps, _ in drawn) / 1e6
        last = [end - compare.WINDOW / 1e6, end]
        ax.plot(last, [row["their_mean"]] * 2, color="black", linestyle="--", linewidth=1, label="the table's mean")
        low, high = row["their_mean"] - row["tolerance"], row["their_mean"] + row["tolerance"]
        ax.fill_between(last, low, high, color="grey", alpha=0.3, label="compare.py's bound")
        ax.set(title=env, xlabel="steps (millions)", ylabel=f"mean training return per {WIDTH // 1000}k steps")
        ax.legend(fontsize=7)
    fig.suptitle(
        f"{args.method}: the runs' curves; the bound (last 100k steps) is for the mean over runs of their last 100 "
        "episodes",
        fontsize=8,
    )
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
