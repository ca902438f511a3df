"""Where the interest goes: an interest file's raw per-transition interest, averaged per kind of
transition (what the agent did and, for a toggle, what became of the door), logged every rollout;
and, from runs, those means per phase as a figure and a markdown table.

    python -m common.interest_by_action sweeps/study --out docs/results/study/interest_by_action.png
    python -m common.interest_by_action sweeps/study/runs/*grad* --window 0 --out fig.png   # whole phases

The kinds (`KINDS`): `turn` (left or right), `forward`, `pickup`, `drop`, `done`, and a toggle by its
outcome: `toggle_opens` (a locked door in front opens: only the correct key opens it), `toggle_wrong_key`
(it stays locked though the agent carries a key), `toggle_other` (anything else: no locked door in front,
or no key carried). An interest file logs `poi/by_action/<kind>` each rollout: the mean raw interest (before
any normalisation) of the rollout's transitions of that kind, when it holds any. Per run and phase, this tool
averages the logged rollouts of the phase's last `--window` steps (rollouts count alike, whatever their
number of such transitions); plotted per method, one panel each: the median over runs as a dash, each run as a
dot, per kind and phase, and beside them `all`, the mean of `poi/mean` (every transition) over the same
rollouts. Reads run folders and sweep folders, and the series files of `common.series`, which keep these means
for the default window and for whole phases (`--window 0`; not in a series written before they were kept).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import torch
from minigrid.core.constants import OBJECT_TO_IDX, STATE_TO_IDX

from common.console import OneLineParser
from common.learning_summary import phase_spans, phase_starts
from envs.views import CHANNEL_OFFSETS, NUM_CHANNELS

KINDS = ("turn", "forward", "pickup", "drop", "toggle_opens", "toggle_wrong_key", "toggle_other", "done")
TAG = "poi/by_action/"
COLUMNS = {**{kind: TAG + kind for kind in KINDS}, "all": "poi/mean"}  # what the tool reads: each kind, and all
WINDOW = 100_000  # steps at the end of each phase: the analysis's window for the task along a phase

# MiniGrid's actions left, right, forward, pickup, drop, toggle, done, as kinds (a toggle's is its door's)
ACTION_KINDS = torch.tensor([0, 0, 1, 2, 3, 6, 7])
TOGGLE = 5
DOOR, KEY = OBJECT_TO_IDX["door"], OBJECT_TO_IDX["key"]
OPEN, LOCKED = (CHANNEL_OFFSETS[2] + STATE_TO_IDX[state] for state in ("open", "locked"))


def transition_kinds(obs, actions, next_obs):
    """The index in `KINDS` of each transition: flat one-hot views `obs` and `next_obs` (the true next
    view, not a reset's) of shape (..., view * view * 20), MiniGrid actions (...). Read from the views alone
    (the agent's cell shows what it carries, the cell above it what it faces), so every env with MiniGrid's
    view gives the same kinds, both ColorDoorKey implementations alike."""
    view = math.isqrt(obs.shape[-1] // NUM_CHANNELS)
    front = ((view // 2) * view + view - 2) * NUM_CHANNELS  # first column of the faced cell
    held = front + NUM_CHANNELS  # of the agent's own cell
    locked_door = (obs[..., front + DOOR] > 0) & (obs[..., front + LOCKED] > 0)
    opens = locked_door & (next_obs[..., front + OPEN] > 0)  # a toggle never moves the agent: the same cell
    wrong_key = locked_door & (obs[..., held + KEY] > 0) & ~opens
    door = torch.where(opens, 4, torch.where(wrong_key, 5, 6))
    return torch.where(actions == TOGGLE, door, ACTION_KINDS.to(actions.device)[actions])


def log_interest_by_action(writer, global_step, poi, obs, actions, next_views):
    """`poi/by_action/<kind>`: the mean of the raw interest `poi` over the rollout's transitions of each kind
    (`transition_kinds` of the rollout's `obs`, `actions` and true next observations `next_views`); a kind the
    rollout does not hold is not logged. Once per rollout: classifying each step as it comes cost 10x more."""
    kinds = transition_kinds(obs, actions, next_views).reshape(-1)
    poi = poi.reshape(-1).double()
    counts = torch.bincount(kinds, minlength=len(KINDS)).tolist()
    sums = torch.bincount(kinds, weights=poi, minlength=len(KINDS)).tolist()
    for kind, count, total in zip(KINDS, counts, sums):
        if count:
            writer.add_scalar(TAG + kind, total / count, global_step)


def phase_means(scalars: dict, window: int = WINDOW) -> list[dict[str, float]]:
    """Per phase, {column: mean of its logged rollouts in the phase's last `window` steps (0: the whole phase)}
    for the `COLUMNS` logged there (a run that logs no kind has none)."""
    if not any(TAG + kind in scalars for kind in KINDS):
        return [{} for _ in phase_starts(scalars)]
    phases = []
    for start, end in phase_spans(scalars):
        first = max(start, end - window) if window else start
        means = {}
        for column, tag in COLUMNS.items():
            values = [value for step, value in scalars.get(tag, []) if first <= step < end]
            if values:
                means[column] = float(np.mean(values))
        phases.append(means)
    return phases


def phase_name(phase: int, count: int) -> str:
    if count == 2:
        return ("before the change", "after the change")[phase]
    return f"phase {phase}"


def values_of(runs: list[list[dict]], phase: int, column: str) -> list[float]:
    """The runs' means of `column` in `phase`, of the runs that have one."""
    return [run[phase][column] for run in runs if phase < len(run) and column in run[phase]]


def table(per_method: dict[str, list[list[dict]]], num_phases: int) -> str:
    """Markdown: per method and column, per phase the median over runs [lowest, highest] (runs)."""
    names = [phase_name(p, num_phases) for p in range(num_phases)]
    out = ["| method | transition | " + " | ".join(names) + " |", "|-|-|" + "-|" * num_phases]
    for method, runs in sorted(per_method.items()):
        for column in COLUMNS:
            cells = []
            for phase in range(num_phases):
                values = values_of(runs, phase, column)
                cells.append(
                    f"{np.median(values):.3g} [{min(values):.3g}, {max(values):.3g}] ({len(values)})" if values else "-"
                )
            if any(cell != "-" for cell in cells):
                out.append(f"| {method} | {column} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def figure(per_method: dict[str, list[list[dict]]], num_phases: int, window: int, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = sorted(per_method)
    fig, axes = plt.subplots(len(methods), 1, figsize=(9, 2.8 * len(methods)), squeeze=False)
    offset = 0.6 / num_phases
    for ax, method in zip(axes[:, 0], methods):
        runs, every = per_method[method], []
        for phase in range(num_phases):
            label = phase_name(phase, num_phases)  # on the phase's first median only
            for k, column in enumerate(COLUMNS):
                values = values_of(runs, phase, column)
                if values:
                    x = k + (phase - (num_phases - 1) / 2) * offset
                    ax.scatter(np.full(len(values), x), values, s=12, color=f"C{phase}", alpha=0.6, linewidths=0)
                    ax.plot(x, np.median(values), "_", markersize=16, mew=2.5, color=f"C{phase}", label=label)
                    every, label = every + values, None
        if every and min(every) > 0:
            ax.set_yscale("log")
        elif every:  # learning progress can be negative
            ax.set_yscale("symlog", linthresh=max(abs(v) for v in every) * 1e-3)
        ax.axvline(len(KINDS) - 0.5, color="grey", linestyle=":", linewidth=1)  # the kinds | every transition
        ax.set_xticks(range(len(COLUMNS)), [column.replace("_", "\n") for column in COLUMNS], fontsize=8)
        ax.set_title(f"{method} ({len(runs)} run{'s' * (len(runs) > 1)})", fontsize=10)
        ax.set_ylabel("mean raw interest")
        ax.legend(fontsize=7)
    span = f"the last {window // 1000}k steps of each phase" if window else "each whole phase"
    fig.suptitle(f"interest per kind of transition, over {span} (dash: median over runs; dots: runs)", fontsize=10)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    from common.analyze import find_runs
    from common.tb import read_scalars

    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folders", nargs="+", type=Path, help="run folders, sweep folders, or series files")
    parser.add_argument("--out", type=Path, required=True, help="the figure (.png)")
    parser.add_argument(
        "--window", type=int, default=WINDOW, help=f"steps at the end of each phase to average (0: all; {WINDOW})"
    )
    parser.add_argument("--methods", nargs="+", default=None, help="only these methods (default: all that log them)")
    args = parser.parse_args(argv)
    try:
        if args.window < 0:
            raise ValueError(f"--window must be 0 or positive, got {args.window}")
        if args.out.suffix != ".png":
            raise ValueError(f"--out must name a .png file, got {args.out}")
        runs, _ = find_runs(args.folders)
        per_method: dict[str, list[list[dict]]] = {}
        for run in runs:
            if args.methods is not None and run.method not in args.methods:
                continue
            if run.episodes is None:  # a run folder
                means = phase_means(read_scalars(run.path), args.window)
            elif args.window not in (WINDOW, 0):
                raise ValueError(f"--window {args.window}: a series keeps the means of --window {WINDOW} and 0 only")
            else:
                key = "interest_by_action" if args.window else "interest_by_action_whole"
                means = [phase.get(key, {}) for phase in run.summary]
                if not args.window and not any(means) and any(p.get("interest_by_action") for p in run.summary):
                    raise ValueError(f"{run.path.name}: its series was written before whole phases were kept")
            if any(means):
                per_method.setdefault(run.method, []).append(means)
        if not per_method:
            raise ValueError(f"no run logs {TAG}*")
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    num_phases = max(len(means) for runs in per_method.values() for means in runs)
    figure(per_method, num_phases, args.window, args.out)
    print(table(per_method, num_phases))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
