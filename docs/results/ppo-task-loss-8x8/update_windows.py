"""What PPO's update does in the runs that lose the task after the change: per run, the means of the logged return,
entropy and update statistics over windows around the change, and each run's outcome; a table by outcome.

    python docs/results/ppo-task-loss-8x8/update_windows.py rows ../sweeps/band8 ../sweeps/fair8 \
        --out docs/results/ppo-task-loss-8x8/update_windows.jsonl      # from the runs' event files (finished runs)
    python docs/results/ppo-task-loss-8x8/update_windows.py table docs/results/ppo-task-loss-8x8/update_windows.jsonl \
        --pool ppo ppo-ent-coef-0.01 ppo_poi_progress-interest-error       # by outcome over these methods' runs
    python docs/results/ppo-task-loss-8x8/update_windows.py stats docs/results/ppo-task-loss-8x8/outcomes.jsonl \
        --pool ppo ppo-ent-coef-0.01 ppo_poi_progress-interest-error       # the page's tests

A run's outcome, by the fair test's task measure (the mean return over a phase's last 100k steps at least 0.8):
`kept` (both phases), `lost` (the first only), `late` (the second only), `never` (neither). The windows are steps
from the change (the first step logged in the second phase): the last 100k before it, then 0-100k, 100k-300k,
300k-600k and 600k-1M after it, and the run's last 100k. The return of a window is the mean of the episodes that
ended in the whole 2,000-step bins inside it (the fair test's `return_window`); the others are means of one value
per PPO iteration: the entropy, the approximate KL divergence and the value loss of the update's last minibatch (as
CleanRL logs them), the clip fraction over all its minibatches. `solved_at`: per phase, the step at which the mean
return of 100 episodes first reached 0.8 (None: never). Only finished runs with a single change are read.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the checkout's common/

from common.analyze import find_runs  # noqa: E402
from common.learning_summary import phase_starts, run_end  # noqa: E402
from common.series import episode_bins, episode_summary, window_mean  # noqa: E402
from common.tb import read_scalars  # noqa: E402

TAGS = {
    "return": "charts/episodic_return",
    "entropy": "losses/entropy",
    "approx_kl": "losses/approx_kl",
    "clipfrac": "losses/clipfrac",
    "value_loss": "losses/value_loss",
}
WINDOWS = {  # name: (start, end) in steps from the change; "end" counts back from the run's last logged step
    "before": (-100_000, 0),
    "0-100k": (0, 100_000),
    "100k-300k": (100_000, 300_000),
    "300k-600k": (300_000, 600_000),
    "600k-1M": (600_000, 1_000_000),
    "end": (-100_000, 0),
}
TASK = 0.8


def window_means(scalars: dict, bins: dict, change: int, last: int) -> dict:
    """Each window's mean of each quantity (nan where nothing was logged in it); the return from the episodes'
    bins, as the fair test's task measure takes it (common.series.window_mean)."""
    out = {}
    for name, (lo, hi) in WINDOWS.items():
        start, end = (last + 1 + lo, last + 1 + hi) if name == "end" else (change + lo, change + hi)
        row = {"return": window_mean(bins, start, end)}
        for key, tag in TAGS.items():
            values = [v for s, v in scalars.get(tag, []) if start <= s < end]
            if key != "return":
                row[key] = float(np.mean(values)) if values else float("nan")
        out[name] = row
    return out


def outcome(windows: dict) -> str:
    before, after = windows["before"]["return"] >= TASK, windows["end"]["return"] >= TASK
    return {(True, True): "kept", (True, False): "lost", (False, True): "late", (False, False): "never"}[before, after]


def rows(folders: list[Path]) -> list[dict]:
    runs, _ = find_runs(folders)
    out = []
    for run in runs:
        if not run.finished:
            continue
        from_series = run.episodes is not None  # a committed series: no update statistics (nan), binned episodes
        scalars = run.scalars if from_series else read_scalars(run.path)
        starts = phase_starts(scalars)
        if len(starts) != 2:
            continue
        last = run_end(scalars) - 1  # the last logged step
        windows = window_means(scalars, run.episodes if from_series else episode_bins(scalars), starts[1], last)
        solved = [phase["solved_at"] for phase in (run.summary if from_series else episode_summary(scalars))]
        out.append(
            dict(run=run.path.name, env=run.env, method=run.method, seed=run.seed, change=starts[1], last=last)
            | dict(outcome=outcome(windows), solved_at=solved, windows=windows)
        )
    return out


def median(values: list[float]) -> float:
    """The median of the values that are not nan (nan if none is)."""
    values = [v for v in values if not np.isnan(v)]
    return float(np.median(values)) if values else float("nan")


def fmt(value: float, key: str) -> str:
    if np.isnan(value):
        return "-"
    return (
        f"{value:.1e}"
        if key == "value_loss"
        else f"{value:.3f}"
        if key in ("approx_kl", "clipfrac")
        else f"{value:.2f}"
    )


def table(records: list[dict], pool: list[str] | None = None) -> str:
    """Per (env, method, outcome), or with `pool` per outcome over the runs of those methods (every env): how many
    runs, and the median over them of each quantity in each window; with `pool`, also each run that did the task
    before the change, by its entropy then."""
    groups: dict[tuple, list[dict]] = {}
    for rec in records:
        if pool is None:
            groups.setdefault((rec["env"], rec["method"], rec["outcome"]), []).append(rec)
        elif rec["method"] in pool:
            groups.setdefault((rec["outcome"],), []).append(rec)
    if not groups:
        raise ValueError(f"no runs of {pool} in the rows")
    head = ["env", "method", "outcome"] if pool is None else ["outcome"]
    lines = []
    for key in TAGS:
        lines += [
            f"\n{key} (median over the group's runs)\n",
            "| " + " | ".join(head) + " | runs | " + " | ".join(WINDOWS) + " |",
            "|" + "-|" * len(head) + "-:|" + "-:|" * len(WINDOWS),
        ]
        for group_key, group in sorted(groups.items()):
            cells = [fmt(median([r["windows"][w][key] for r in group]), key) for w in WINDOWS]
            lines.append("| " + " | ".join(map(str, group_key)) + f" | {len(group)} | " + " | ".join(cells) + " |")
    if pool is not None:
        learned = [r for group in groups.values() for r in group if r["outcome"] in ("kept", "lost")]
        lines += [
            "\nEach run that did the task before the change, by its entropy over the last 100k steps before it\n",
            "| env | method | seed | entropy | value loss | first solved | return before / at the end "
            "| lowest return after | outcome |",
            "|-|-|-:|-:|-:|-:|-|-:|-|",
        ]
        for r in sorted(learned, key=lambda r: r["windows"]["before"]["entropy"]):
            w = r["windows"]
            after = [w[k]["return"] for k in ("100k-300k", "300k-600k", "600k-1M")]
            low = min((v for v in after if not math.isnan(v)), default=math.nan)
            value_loss, before, end = (
                fmt(w["before"]["value_loss"], "value_loss"),
                w["before"]["return"],
                w["end"]["return"],
            )
            lines.append(
                f"| {r['env']} | {r['method']} | {r['seed']} | {w['before']['entropy']:.2f} | {value_loss} | "
                f"{'-' if r['solved_at'][0] is None else format(r['solved_at'][0], ',')} | "
                f"{before:.2f} / {end:.2f} | {fmt(low, 'return')} | {r['outcome']} |"
            )
    return "\n".join(lines)


def stats(records: list[dict], pool: list[str]) -> str:
    """The page's tests over the pooled methods' runs that did the task before the change: entropy before it against
    the outcome (ranges, medians, a split at the median, Mann-Whitney over all and per method) and against when the
    task was first solved (Spearman), and when the runs that lost and kept it first solved it (Mann-Whitney)."""
    from scipy.stats import mannwhitneyu, spearmanr

    runs = [r for r in records if r["method"] in pool and r["outcome"] in ("kept", "lost")]
    if not runs:
        raise ValueError(f"no runs of {pool} that did the task before the change")
    entropy = np.array([r["windows"]["before"]["entropy"] for r in runs])
    lost = np.array([r["outcome"] == "lost" for r in runs])
    solved = np.array([r["solved_at"][0] for r in runs], dtype=float)
    mid = float(np.median(entropy))
    lines = [f"{len(runs)} runs did the task before the change; {lost.sum()} lost it after"]
    for name, group in (("lost", entropy[lost]), ("kept", entropy[~lost])):
        lines.append(
            f"entropy before the change, {name}: {group.min():.2f}-{group.max():.2f}, median {np.median(group):.2f}"
        )
    low = entropy <= mid
    lines.append(
        f"split at the median entropy ({mid:.2f}): {(lost & low).sum()} of {low.sum()} at or below it lost the task, "
        f"{(lost & ~low).sum()} of {(~low).sum()} above it"
    )
    p_all = mannwhitneyu(entropy[lost], entropy[~lost]).pvalue
    lines.append(f"Mann-Whitney, entropy of lost against kept, all runs: p = {p_all:.3f}")
    for method in pool:
        mine = np.array([r["method"] == method for r in runs])
        if (mine & lost).any() and (mine & ~lost).any():
            p = mannwhitneyu(entropy[mine & lost], entropy[mine & ~lost]).pvalue
            lines.append(f"  {method}: {(mine & lost).sum()} lost, {(mine & ~lost).sum()} kept, p = {p:.3f}")
    lines.append(
        f"Spearman, entropy against the step the task was first solved: {spearmanr(entropy, solved).statistic:.2f}"
    )
    lines.append(
        f"first solved, median: lost {np.median(solved[lost]):,.0f}, kept {np.median(solved[~lost]):,.0f} "
        f"(Mann-Whitney p = {mannwhitneyu(solved[lost], solved[~lost]).pvalue:.3f})"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser(
        "rows", help="rows from sweep folders (event files) or committed series files (finished runs)"
    )
    make.add_argument("folders", nargs="+", type=Path)
    make.add_argument("--out", type=Path, required=True)
    show = sub.add_parser("table", help="the table of a rows file")
    show.add_argument("rows_file", type=Path)
    show.add_argument("--pool", nargs="+", help="methods whose runs are pooled by outcome (every env)")
    test = sub.add_parser("stats", help="the page's tests over the pooled methods' runs")
    test.add_argument("rows_file", type=Path)
    test.add_argument("--pool", nargs="+", required=True)
    args = parser.parse_args(argv)
    if args.command == "rows":
        try:
            records = rows(args.folders)
        except ValueError as error:
            sys.exit(f"error: {error}")
        args.out.write_text("".join(json.dumps(r) + "\n" for r in records))
        print(f"wrote {args.out}: {len(records)} runs")
    else:
        if not args.rows_file.is_file():
            sys.exit(f"error: no rows file at {args.rows_file}")
        records = [json.loads(line) for line in args.rows_file.read_text().splitlines() if line.strip()]
        try:
            print(table(records, args.pool) if args.command == "table" else stats(records, args.pool))
        except ValueError as error:
            sys.exit(f"error: {error}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
