"""A continuous file's returns beside a published table (the measure and the rule of the MuJoCo plans' Amendment 1).

Per run, the mean return of its last 100 training episodes (common.series' `last_100_episodes` of its last phase,
as openrlbenchmark's `rlops` scores a run for CleanRL's tables); per env, the mean and the standard deviation over
the runs (numpy's, ddof 0, as `rlops` gives them), beside the table's. **Consistent** when the two means differ by
at most the larger of 2 standard errors of the difference and 15% of the table's mean, the standard error taken
from the table's spread alone (at ddof 1, over its THEIR_RUNS runs and as many as ours), so that a noisier set of
our runs does not widen the bound. The mean return of the episodes that end in the run's last 100k steps is shown
beside it, no rule of its own.

    python docs/results/ppo-continuous-mujoco/compare.py docs/results/ppo-continuous-mujoco/series.jsonl.gz \
        ppo_continuous_poi_ensemble-int-coef-0 Hopper-v5=2382.86,271.74 HalfCheetah-v5=1442.64,46.03
"""

import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))

from common import series  # noqa: E402

THEIR_RUNS, FLOOR, WINDOW = 3, 0.15, 100_000


def tolerance(runs: int, their_mean: float, their_std: float) -> float:
    """The rule's bound on |our mean - their mean| for `runs` of ours, from the table's mean and its ddof-0 std."""
    variance = their_std**2 * THEIR_RUNS / (THEIR_RUNS - 1)  # at ddof 1
    return max(2 * math.sqrt(variance * (1 / THEIR_RUNS + 1 / runs)), FLOOR * abs(their_mean))


def last_window(bins: dict) -> float:
    """The mean return of the episodes logged in the run's last WINDOW steps, counted from the end of the bin of its
    last episode (the series' bins are 2,000 steps: up to one bin short of WINDOW from the run's last step)."""
    end = bins["bin"] * len(bins["count"])
    return series.window_mean(bins, end - WINDOW, end)


def rows(path: Path, method: str, reference: dict[str, tuple[float, float]]) -> list[dict]:
    """One row per env of `reference`: our runs' measure beside the table's and the verdict."""
    if not path.is_file():
        raise ValueError(f"no series file at {path}")
    try:
        records = series.read(path)
    except (OSError, EOFError, ValueError) as error:  # not gzip, cut short, not JSON lines
        raise ValueError(f"{path} is not a series file (common.series): {error}") from None
    try:
        runs = [rec for rec in records if rec["method"] == method and rec["finished"]]
    except (KeyError, TypeError):
        raise ValueError(f"{path} is not a series file (common.series): a record without its method") from None
    out = []
    for env, (their_mean, their_std) in reference.items():
        mine = [rec for rec in runs if rec["env"] == env]
        if len(mine) < 2:
            raise ValueError(f"{len(mine)} finished run(s) of {method} on {env} in {path}: the rule needs 2 or more")
        for rec in mine:
            if rec["phases"][-1]["last_100_episodes"] is None:
                raise ValueError(f"{rec['run']} logged no episode")
        ours = np.array([rec["phases"][-1]["last_100_episodes"] for rec in mine], dtype=float)
        last = [last_window(rec["episodes"]) for rec in mine]
        bound = tolerance(len(ours), their_mean, their_std)
        out.append(
            dict(
                env=env,
                runs=len(ours),
                mean=float(ours.mean()),
                std=float(ours.std()),
                their_mean=their_mean,
                their_std=their_std,
                difference=float(ours.mean() - their_mean),
                tolerance=bound,
                consistent=bool(abs(ours.mean() - their_mean) <= bound),
                last_100k=float(np.mean(last)),
            )
        )
    return out


def parse_reference(items: list[str]) -> dict[str, tuple[float, float]]:
    """`ENV=MEAN,STD` arguments as {env: (mean, std)}; ValueError naming the first that is not one."""
    reference = {}
    for item in items:
        env, _, numbers = item.partition("=")
        try:
            their_mean, their_std = (float(x) for x in numbers.split(","))
        except ValueError:
            raise ValueError(f"not ENV=MEAN,STD: {item!r}") from None
        reference[env] = (their_mean, their_std)
    return reference


def main(argv: list[str]) -> int:
    try:
        if len(argv) < 3:
            raise ValueError("usage: compare.py SERIES METHOD ENV=MEAN,STD [ENV=MEAN,STD ...]")
        table = rows(Path(argv[0]), argv[1], parse_reference(argv[2:]))
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print("| env | runs | ours: last 100 episodes, mean ± std | the table | difference | bound | consistent | ", end="")
    print("ours: last 100k steps |")
    print("|-|-|-|-|-|-|-|-|")
    for r in table:
        print(
            f"| {r['env']} | {r['runs']} | {r['mean']:.2f} ± {r['std']:.2f} | {r['their_mean']:.2f} ± "
            f"{r['their_std']:.2f} | {r['difference']:+.2f} | {r['tolerance']:.2f} | "
            f"{'yes' if r['consistent'] else 'no'} | {r['last_100k']:.2f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
