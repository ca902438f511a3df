"""Analyse a sweep: per run and phase, how fast and how far the external model learns, and
whether the task was solved; per method, IQM with stratified-bootstrap 95% CIs (rliable).

    python -m common.analyze sweeps/demo --baseline ppo --eval-threshold 2 --train-threshold 0.5
    python -m common.analyze sweeps/a sweeps/b --out results/ab --drop-unsuccessful

Reads every run folder under the given folders (any folder holding TensorBoard event files,
named `<env>__<method>__<seed>__<time>` as the algorithm files name them). Per run and phase
(phases from `charts/phase`), following EMMA's definitions, with an exponential moving
average of span `--span` restarted at each phase start:
- adaptation efficiency: global steps from the phase start until the smoothed external-model
  loss first falls below `--train-threshold` / `--eval-threshold` after having been at or
  above it (the training loss rises only as the episodes that began before a change end);
  0 when it never is at or above it in the phase. A phase where it never falls back counts
  with the phase's length (a lower bound; the table says how many reached it);
- asymptotic loss: the lowest smoothed loss in the phase;
- success: whether the mean return of the last `--success-window` episodes of the phase reached
  `--success-threshold` (`learning_summary.steps_to_return`, the one definition of solved).
Losses: the training loss, the held-out loss, and the held-out loss on the transitions the
colour change altered (`changed`, where a run logs it). With `--relative F`, the threshold of
every phase after the first is F times the run's own smoothed loss at the end of the phase
before (back within F of where it was before the change).
`--drop-unsuccessful` keeps only the runs that succeeded in every phase, and says how many went;
`--methods` keeps only the methods named.

Aggregates per (env, phase, method): IQM and 95% CI by stratified bootstrap over runs
(`--reps` resamples, seeded afresh for each method); with `--baseline`, the ratio of each
method's IQM of adaptation efficiency to the baseline's (below 1 = adapts faster than the
baseline), its 95% CI from resampling both methods' runs. Writes `results.json`,
`results.md` and PNG plots (curves with CI bands; normalised adaptation efficiency) to `--out`.
Of several attempts of one run (a sweep started again), the finished one counts, else the latest.

The fair test (docs/sweeps-and-analysis.md): per run and phase also the task along the phase (the mean
return over the phase's last `--task-window` steps, and more), and whether each method keeps the
baseline's task level; with `--frontier M ...` every other method against the non-interest frontier
(common/frontier.py) and the robustness readings. A folder may also be a study's per-run series
(common/series.py, `series.jsonl.gz`): the tables made from it are those made from the event files,
which are read through the same encoding.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from common.console import OneLineParser
from common.frontier import against_frontier, iqm, versus
from common.learning_summary import phase_spans, phase_starts, steps_to_return
from common.runs import COMPLETION_MARKER, RUN_NAME
from common.series import record as series_record
from common.series import window_mean
from common.series import read as read_series
from common.series import whole_runs
from common.tb import read_scalars

LOSSES = {
    "train": "external_model/train_loss",
    "eval": "external_model/eval_loss",
    "changed": "external_model/eval_loss_changed",
}
REQUIRED = ("train", "eval")  # `changed` only where the run logs it
RETURN = "charts/episodic_return"


@dataclass
class RunInfo:
    path: Path
    env: str
    method: str
    seed: int
    finished: bool
    scalars: dict = field(default_factory=dict, repr=False)
    phases: list[dict] = field(default_factory=list)
    episodes: dict | None = field(default=None, repr=False)  # common.series.episode_bins
    summary: list | None = field(default=None, repr=False)  # common.series.episode_summary
    machines: list | None = field(default=None, repr=False)  # a series record's: common.series.record


@dataclass(frozen=True)
class Robustness:
    """Other ways to read the re-learning of one loss, beside the pre-registered threshold and span:
    thresholds as multiples of it, other spans, and the mean log10 loss over a window after the phase start."""

    kind: str = "changed"
    factors: tuple[float, ...] = (0.5, 1.0, 2.0)
    spans: tuple[int, ...] = (5, 10, 30)
    window: int = 200_000

    def names(self, span: int) -> list[str]:
        return (
            [f"threshold x{f:g}, span {span}" for f in self.factors]
            + [f"span {n}" for n in self.spans if n != span]
            + [f"mean log10 loss, first {self.window // 1000}k"]
        )


def ema(values: np.ndarray, span: int) -> np.ndarray:
    """Exponential moving average, alpha = 2 / (span + 1), starting at the first value
    (pandas' `ewm(span=span, adjust=False).mean()`)."""
    alpha = 2.0 / (span + 1.0)
    out = np.empty(len(values))
    level = values[0] if len(values) else 0.0
    for i, value in enumerate(values):
        level = level + alpha * (value - level)
        out[i] = level
    return out


def steps_to_fall_below(steps: np.ndarray, smoothed: np.ndarray, threshold: float, start: int) -> float:
    """Steps from `start` until the smoothed loss falls below `threshold` after having been at
    or above it (a loss that rises a few rollouts after the change, as old episodes finish,
    counts from its rise); 0 when it never is at or above it; nan when it never falls back."""
    above = np.flatnonzero(smoothed >= threshold)
    if len(above) == 0:
        return 0.0
    below = np.flatnonzero(smoothed[above[0] :] < threshold)
    return float(steps[above[0] + below[0]]) - start if len(below) else math.nan


def in_phase(series: list[tuple[int, float]], start: int, end: float) -> tuple[np.ndarray, np.ndarray]:
    pairs = [(step, value) for step, value in series if start <= step < end]
    return np.array([s for s, _ in pairs], dtype=float), np.array([v for _, v in pairs], dtype=float)


def phase_metrics(
    scalars: dict,
    span: int,
    thresholds: dict[str, float],
    success_threshold: float,
    success_window: int = 100,
    relative: float | None = None,
    episodes: dict | None = None,
    summary: list | None = None,
    task_window: int = 100_000,
    robustness: Robustness | None = None,
) -> list[dict]:
    """The metrics of every phase of one run (see the module docstring). With `episodes` (binned,
    common.series): the task along the phase; with `summary`: the last 100 episodes, and success where
    the scalars hold no single episodes; with `robustness`: its re-readings of one loss."""
    level = {}  # each loss's smoothed value at the end of the phase before
    phases = []
    for phase, (start, end) in enumerate(phase_spans(scalars)):
        row = {"phase": phase, "start": start, "length": end - start}
        for kind, tag in LOSSES.items():
            steps, values = in_phase(scalars.get(tag, []), start, end)
            if len(values) == 0:
                row.update(
                    {
                        f"{kind}_adaptation": math.nan,
                        f"{kind}_reached": False,
                        f"{kind}_asymptotic": math.nan,
                        f"{kind}_highest": math.nan,
                    }
                )
                continue
            smoothed = ema(values, span)
            threshold = relative * level[kind] if relative and kind in level else thresholds[kind]
            level[kind] = float(smoothed[-1])
            row[f"{kind}_threshold"] = threshold
            reached = steps_to_fall_below(steps, smoothed, threshold, start)
            row[f"{kind}_reached"] = not math.isnan(reached)
            row[f"{kind}_adaptation"] = reached if row[f"{kind}_reached"] else end - start
            row[f"{kind}_asymptotic"] = float(smoothed.min())
            row[f"{kind}_highest"] = float(smoothed.max())
            if robustness is not None and kind == robustness.kind:
                row["robust"] = robust_readings(steps, values, start, end, threshold, span, robustness)
        if RETURN in scalars or summary is None:
            row["success_steps"] = steps_to_return(
                scalars.get(RETURN, []), start, end, success_threshold, success_window
            )
        else:  # from a series: the step its last 100 episodes' mean first reached 0.8 (common.series.episode_summary)
            solved_at = summary[phase]["solved_at"]
            row["success_steps"] = math.nan if solved_at is None else solved_at - start
        row["success"] = not math.isnan(row["success_steps"])
        if episodes is not None:
            window_start = max(start, end - task_window)  # a window never reaches into the phase before
            row["return_window"] = window_mean(episodes, window_start, end)
            row["length_window"] = window_mean(episodes, window_start, end, "length")
            row["return_phase"] = window_mean(episodes, start, end)
            _, entropy = in_phase(scalars.get("losses/entropy", []), window_start, end)
            row["entropy_window"] = float(entropy.mean()) if len(entropy) else math.nan
        if summary is not None:
            last = summary[phase]["last_100_episodes"]
            row["last_100_episodes"] = math.nan if last is None else last
        phases.append(row)
    return phases


def robust_readings(
    steps: np.ndarray, values: np.ndarray, start: int, end: int, threshold: float, span: int, robustness: Robustness
) -> dict[str, float]:
    """One phase's re-learning of one loss read the other ways `robustness` names (steps, a run that never
    gets there with the phase's length; the mean log10 loss, unsmoothed, over the window's evaluations)."""
    readings = {}
    for name, (factor, n) in zip(
        robustness.names(span),
        [(f, span) for f in robustness.factors] + [(1.0, n) for n in robustness.spans if n != span],
    ):
        reached = steps_to_fall_below(steps, ema(values, n), factor * threshold, start)
        readings[name] = end - start if math.isnan(reached) else reached
    early = values[steps < start + robustness.window]
    readings[robustness.names(span)[-1]] = float(np.log10(np.maximum(early, 1e-12)).mean()) if len(early) else math.nan
    return readings


def find_runs(folders: list[Path]) -> tuple[list[RunInfo], list[str]]:
    """Run folders under `folders`, one per (env, method, seed) (of several attempts the
    finished one, else the latest), and the runs of series files (common.series) among them, with
    their scalars and episodes loaded; notes on what was passed over."""
    notes, attempts = [], defaultdict(list)
    for folder in folders:
        if folder.name.endswith(".jsonl.gz") and folder.is_file():
            for rec in whole_runs(folder, read_series(folder)):
                match = RUN_NAME.match(rec["run"])
                if match is None:
                    raise ValueError(
                        f"{folder}: a record's run {rec['run']!r} is not named <env>__<method>__<seed>__<time>"
                    )
                attempts[(rec["env"], rec["method"], rec["seed"])].append((rec["finished"], int(match["time"]), rec))
            continue
        if not folder.is_dir():
            raise ValueError(f"no folder at {folder}")
        run_dirs = sorted({p.parent for p in folder.rglob("events.out.tfevents*")})
        if not run_dirs:
            raise ValueError(f"no runs (TensorBoard event files) under {folder}")
        for run_dir in run_dirs:
            match = RUN_NAME.match(run_dir.name)
            if match is None:
                notes.append(f"passed over {run_dir}: not named <env>__<method>__<seed>__<time>")
                continue
            key = (match["env"], match["exp_name"], int(match["seed"]))
            attempts[key].append(((run_dir / COMPLETION_MARKER).is_file(), int(match["time"]), run_dir))
    runs = []
    for (env, method, seed), options in sorted(attempts.items()):
        finished, _, source = max(options, key=lambda o: o[:2])  # finished first, then the latest
        times = sorted({time for done, time, _ in options if done})
        if len(times) > 1:  # a run repeated, not the same run in a series and its folder: say which counts
            notes.append(f"{env}__{method}__{seed} finished {len(times)} times: the latest counts ({times[-1]})")
        if isinstance(source, dict):  # a series record
            runs.append(
                RunInfo(
                    Path(source["run"]),
                    env,
                    method,
                    seed,
                    finished,
                    scalars=source["scalars"],
                    episodes=source["episodes"],
                    summary=source["phases"],
                    machines=source.get("machines"),
                )
            )
        else:
            runs.append(RunInfo(source, env, method, seed, finished))
    return runs, notes


def planned_but_missing(folders: list[Path], runs: list[RunInfo], methods: list[str] | None = None) -> list[str]:
    """Runs listed in a folder's sweep.json (only those of `methods`, if given) that have no run folder yet."""
    present = {f"{run.env}__{run.method}__{run.seed}" for run in runs}
    missing = []
    for folder in folders:
        manifest = folder / "sweep.json"
        if manifest.is_file():
            planned = json.loads(manifest.read_text())["runs"]
            missing += [
                r["key"] for r in planned if r["key"] not in present and (methods is None or r["label"] in methods)
            ]
    return missing


def bootstrap(scores: dict[str, np.ndarray], statistic, reps: int, seed: int) -> tuple[dict, dict]:
    """rliable's stratified bootstrap over runs: (point estimates, 95% intervals) per key of
    `scores`, each an array shaped (runs, tasks)."""
    from rliable import library as rly

    # rliable's stratified resampling draws from numpy's global generator (its random_state
    # argument reaches arch, which rliable's own index sampling bypasses): seed it, then restore
    # it. Seeded afresh for each key, so that a key's interval does not depend on the other keys.
    state = np.random.get_state()
    point, interval = {}, {}
    try:
        for key, key_scores in scores.items():
            np.random.seed(seed)
            estimates = rly.get_interval_estimates({key: key_scores}, statistic, reps=reps)
            point[key], interval[key] = estimates[0][key], estimates[1][key]
    finally:
        np.random.set_state(state)
    return point, interval


def interval_estimates(scores: dict[str, np.ndarray], reps: int, seed: int) -> dict[str, tuple[float, float, float]]:
    """IQM and 95% stratified-bootstrap CI per method."""
    point, interval = bootstrap(scores, lambda x: np.array([iqm(x, axis=None)]), reps, seed)
    return {m: (float(point[m][0]), float(interval[m][0, 0]), float(interval[m][1, 0])) for m in scores}


def ratio_estimates(scores: dict[str, np.ndarray], base: np.ndarray, reps: int, seed: int) -> dict:
    """Per method: its IQM over the baseline's IQM, and a 95% percentile-bootstrap interval that
    resamples the method's runs and the baseline's runs independently (seeded afresh for each
    method). The baseline's IQM is an estimate too: dividing by it as if it were exact would
    leave its spread out of the interval."""
    return {method: versus(method_scores, base, reps=reps, seed=seed) for method, method_scores in scores.items()}


def aggregate(runs: list[RunInfo], baseline: str | None, reps: int, seed: int) -> list[dict]:
    """One row per (env, phase, method): IQM [CI] of each metric over the runs."""
    rows = []
    metric_names = [f"{kind}_{name}" for kind in LOSSES for name in ("adaptation", "asymptotic")]
    groups = defaultdict(lambda: defaultdict(list))
    for run in runs:
        for phase in run.phases:
            groups[(run.env, phase["phase"])][run.method].append(phase)
    for (env, phase), by_method in sorted(groups.items()):
        estimates = {}
        for name in metric_names:
            scores = {m: np.array([[p[name]] for p in ps if not math.isnan(p[name])]) for m, ps in by_method.items()}
            scores = {m: s for m, s in scores.items() if len(s)}
            estimates[name] = interval_estimates(scores, reps, seed)
            if baseline is not None and name.endswith("adaptation") and baseline in estimates[name]:
                if estimates[name][baseline][0] > 0:
                    estimates[f"{name}_normalised"] = ratio_estimates(scores, scores[baseline], reps, seed)
        for method, phases in sorted(by_method.items()):
            row = {
                "env": env,
                "phase": phase,
                "method": method,
                "runs": len(phases),
                "success": sum(p["success"] for p in phases),
            }
            for kind in LOSSES:
                row[f"{kind}_reached"] = sum(p[f"{kind}_reached"] for p in phases)
            for name, per_method in estimates.items():
                if method in per_method:
                    row[name] = dict(zip(("iqm", "low", "high"), per_method[method]))
            rows.append(row)
    return rows


TASK = ("return_window", "return_phase", "last_100_episodes", "length_window", "entropy_window")


def task_rows(runs: list[RunInfo], baseline: str | None, reps: int, seed: int) -> list[dict]:
    """Per (env, phase, method): IQM [95% CI] of each task measure; whether the method keeps the task
    (its IQM of the return over the window at or above the lower end of the baseline's CI)."""
    groups = defaultdict(lambda: defaultdict(list))
    for run in runs:
        for phase in run.phases:
            if "return_window" in phase:
                groups[(run.env, phase["phase"])][run.method].append(phase)
    rows = []
    for (env, phase), by_method in sorted(groups.items()):
        estimates = {}
        for name in TASK:
            scores = {
                m: np.array([[p[name]] for p in ps if not math.isnan(p.get(name, math.nan))])
                for m, ps in by_method.items()
            }
            estimates[name] = interval_estimates({m: v for m, v in scores.items() if len(v)}, reps, seed)
        floor = estimates["return_window"].get(baseline, (math.nan, math.nan, math.nan))[1]
        for method in sorted(by_method):
            row = {"env": env, "phase": phase, "method": method, "runs": len(by_method[method])}
            for name, per_method in estimates.items():
                if method in per_method:
                    row[name] = dict(zip(("iqm", "low", "high"), per_method[method]))
            kept = row.get("return_window", {}).get("iqm", math.nan) >= floor
            row["keeps_task"] = None if math.isnan(floor) else bool(kept)
            rows.append(row)
    return rows


def frontier_rows(
    runs: list[RunInfo],
    frontier: list[str],
    measure: str,
    span: int,
    robustness: Robustness | None,
    reps: int,
    seed: int,
    comparisons: int,
    task: str = "return_window",
) -> list[dict]:
    """Per (env, phase after a change, method not on the frontier): the method against the frontier of
    the `frontier` methods (common.frontier) on the pre-registered re-learning and on every robustness
    reading; x is each run's `task` (the return over the phase's last window, or over the whole phase).
    CIs at 95% and at 1 - 0.05 / comparisons."""
    corrected = 1 - 0.05 / comparisons
    readings = [(f"{measure}_adaptation", False, True)]
    if robustness is not None:
        readings += [(name, name.startswith("mean log10"), False) for name in robustness.names(span)]
    groups = defaultdict(lambda: defaultdict(list))
    for run in runs:
        for phase in run.phases[1:]:
            groups[(run.env, phase["phase"])][run.method].append(phase)
    rows = []
    for (env, phase), by_method in sorted(groups.items()):
        if not set(frontier) <= set(by_method):
            continue

        def runs_of(method, name):
            pairs = [(p[task], p[name] if name in p else p["robust"][name]) for p in by_method[method]]
            pairs = [(x, y) for x, y in pairs if not (math.isnan(x) or math.isnan(y))]
            return np.array([x for x, _ in pairs]), np.array([y for _, y in pairs])

        for method in sorted(set(by_method) - set(frontier)):
            row = {
                "env": env,
                "phase": phase,
                "method": method,
                "runs": len(runs_of(method, readings[0][0])[0]),
                "task": task,
                "readings": {},
            }
            for name, log, primary in readings:
                result = against_frontier(
                    {m: runs_of(m, name) for m in frontier},
                    runs_of(method, name),
                    log=log,
                    reps=reps,
                    seed=seed,
                    levels=(0.95, corrected),
                )
                cis = result.pop("cis")
                result["ci"], result["ci_corrected"] = cis[0.95], cis[corrected]
                result["pre_registered"] = primary
                row["readings"][name] = result
            rows.append(row)
    return rows


def verdicts(
    frontier_table: list[dict],
    robustness: list[dict],
    task: list[dict],
    judged: list[str],
    against_baseline: list[str],
    baseline: str,
) -> list[dict]:
    """The plan's verdict for each primary comparison: a method against the frontier, or against another
    the baseline (`against_baseline`, the robustness rows' ratios): a *win* when the upper end of the corrected CI of the
    pre-registered reading is below 1 and the method keeps the task in every phase; *fragile* when a
    robustness reading's point estimate is not below 1; *not judged* below the frontier's range."""
    kept = defaultdict(list)
    for row in task:
        kept[(row["env"], row["method"])].append(row["keeps_task"])
    out = []
    rows = [
        (r, "frontier", r["readings"]) for r in frontier_table if r["method"] in judged and r["task"] == "return_window"
    ]
    by_method = {(r["env"], r["phase"], r["method"]): r for r in robustness}
    rows += [(r, baseline, None) for key, r in by_method.items() if key[2] in against_baseline]
    for row, against, readings in rows:
        keeps = all(k is True for k in kept[(row["env"], row["method"])])
        if readings is not None:
            primary = next(v for v in readings.values() if v["pre_registered"])
            ratio, high = primary["ratio"], primary["ci_corrected"][1]
            others = [v["ratio"] for v in readings.values() if not v["pre_registered"]]
        else:  # against a reference method: the robustness rows computed with that method as the baseline
            ratio, high = (
                row["readings"][next(n for n in row["readings"] if n.startswith("threshold x1,"))]["iqm"],
                row["corrected"][1],
            )
            others = [v["iqm"] for v in row["readings"].values()]
        if readings is not None and math.isnan(ratio):
            verdict = "not judged (below the frontier's task levels)"
        elif high < 1 and keeps:
            verdict = "fragile win" if any(not o < 1 for o in others) else "win"
        else:
            verdict = "no" + ("" if keeps else " (does not keep the task)")
        out.append(
            {
                "env": row["env"],
                "phase": row["phase"],
                "method": row["method"],
                "against": against,
                "ratio": ratio,
                "corrected_high": high,
                "keeps_task": keeps,
                "verdict": verdict,
            }
        )
    return out


def robustness_rows(
    runs: list[RunInfo], baseline: str, span: int, robustness: Robustness, reps: int, seed: int, comparisons: int
) -> list[dict]:
    """Per (env, phase after a change, method): every robustness reading against the baseline's, and the
    pre-registered one's interval at 1 - 0.05 / comparisons too (a primary comparison against the baseline)."""
    groups = defaultdict(lambda: defaultdict(list))
    for run in runs:
        for phase in run.phases[1:]:
            if "robust" in phase:
                groups[(run.env, phase["phase"])][run.method].append(phase["robust"])
    rows = []
    for (env, phase), by_method in sorted(groups.items()):
        if baseline not in by_method:
            continue
        for method in sorted(by_method):
            row = {"env": env, "phase": phase, "method": method, "readings": {}}
            for name in robustness.names(span):
                values = [r[name] for r in by_method[method] if not math.isnan(r[name])]
                base = [r[name] for r in by_method[baseline] if not math.isnan(r[name])]
                point, low, high = versus(values, base, log=name.startswith("mean log10"), reps=reps, seed=seed)
                row["readings"][name] = {"iqm": point, "low": low, "high": high}
                if name == f"threshold x1, span {span}":  # the pre-registered reading
                    row["corrected"] = versus(values, base, reps=reps, seed=seed, level=1 - 0.05 / comparisons)[1:]
            rows.append(row)
    return rows


def binned_returns(run: RunInfo) -> list[tuple[int, float]]:
    """The run's mean return per bin of episodes, at each bin's middle (bins where an episode ended)."""
    bins = run.episodes
    return [
        (i * bins["bin"] + bins["bin"] // 2, total / count)
        for i, (count, total) in enumerate(zip(bins["count"], bins["return"]))
        if count
    ]


def curves(runs: list[RunInfo], span: int, reps: int, seed: int, points: int = 100) -> dict:
    """Per env and method: smoothed losses and return on a common step grid (up to the end of
    the shortest run), IQM and 95% CI band per grid point."""
    out = {}
    for env in sorted({run.env for run in runs}):
        members = [run for run in runs if run.env == env]
        grid = np.linspace(0, min(r.scalars[LOSSES["train"]][-1][0] for r in members), points)
        phase_starts_ = [p["start"] for p in members[0].phases]
        out[env] = {"steps": grid.tolist(), "phase_starts": phase_starts_, "methods": {}}
        for method in sorted({run.method for run in members}):
            per_tag = {}
            for name, tag in {**{f"{k}_loss": t for k, t in LOSSES.items()}, "return": RETURN}.items():
                series = []
                for run in (r for r in members if r.method == method):
                    smoothed_steps, smoothed = [], []
                    source = (
                        binned_returns(run) if tag == RETURN and run.episodes is not None else run.scalars.get(tag, [])
                    )
                    for p in run.phases:
                        steps, values = in_phase(source, p["start"], p["start"] + p["length"])
                        if len(values):
                            smoothed_steps.append(steps)
                            smoothed.append(ema(values, span))
                    if smoothed:
                        series.append(np.interp(grid, np.concatenate(smoothed_steps), np.concatenate(smoothed)))
                if not series:
                    continue
                point, band = bootstrap({method: np.array(series)}, lambda x: iqm(x, axis=0), reps, seed)
                per_tag[name] = {
                    "iqm": point[method].tolist(),
                    "low": band[method][0].tolist(),
                    "high": band[method][1].tolist(),
                }
            out[env]["methods"][method] = per_tag
    return out


def curve_agreement(curve_data: dict, baseline: str) -> list[dict]:
    """Per env, method and curve: the share of grid points where the method's IQM lies in the
    baseline's 95% CI band and the baseline's IQM in the method's ("within each other's CIs")."""
    rows = []
    for env, data in curve_data.items():
        base = data["methods"].get(baseline, {})
        for method, per_tag in data["methods"].items():
            if method == baseline:
                continue
            for name, curve in per_tag.items():
                if name not in base:
                    continue
                b, m = ({k: np.asarray(v) for k, v in c.items()} for c in (base[name], curve))
                inside = (
                    (b["low"] <= m["iqm"]) & (m["iqm"] <= b["high"]) & (m["low"] <= b["iqm"]) & (b["iqm"] <= m["high"])
                )
                rows.append({"env": env, "method": method, "curve": name, "share": float(inside.mean())})
    return rows


def plot(curve_data: dict, rows: list[dict], baseline: str | None, out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    for env, data in curve_data.items():
        fig, axes = plt.subplots(1, 4, figsize=(20, 4))
        for ax, (name, title) in zip(
            axes,
            [
                ("eval_loss", "external model eval loss"),
                ("changed_loss", "eval loss on what the change altered"),
                ("train_loss", "external model train loss"),
                ("return", "episodic return"),
            ],
        ):
            for method, per_tag in data["methods"].items():
                if name in per_tag:
                    (line,) = ax.plot(data["steps"], per_tag[name]["iqm"], label=method)
                    ax.fill_between(
                        data["steps"], per_tag[name]["low"], per_tag[name]["high"], color=line.get_color(), alpha=0.2
                    )
            for start in data["phase_starts"][1:]:
                ax.axvline(start, color="grey", linestyle="--", linewidth=1)
            ax.set(title=f"{title} (IQM, 95% CI)", xlabel="global step")
            ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 0))
        written.append(finish_figure(fig, axes, env, out / f"curves_{env}.png"))

        env_rows = [row for row in rows if row["env"] == env]
        suffix = "_normalised" if baseline else ""
        fig, axes = plt.subplots(1, len(LOSSES), figsize=(12, 4))
        methods = sorted({row["method"] for row in env_rows})
        phases = sorted({row["phase"] for row in env_rows})
        width = 0.8 / max(1, len(methods))
        for ax, kind in zip(axes, LOSSES):
            for i, method in enumerate(methods):
                xs, heights, errors = [], [], [[], []]
                for row in env_rows:
                    estimate = row.get(f"{kind}_adaptation{suffix}")
                    if row["method"] == method and estimate:
                        xs.append(phases.index(row["phase"]) + (i - (len(methods) - 1) / 2) * width)
                        heights.append(estimate["iqm"])
                        # a ratio's percentile interval need not hold its point estimate: no negative bars
                        errors[0].append(max(0.0, estimate["iqm"] - estimate["low"]))
                        errors[1].append(max(0.0, estimate["high"] - estimate["iqm"]))
                ax.bar(xs, heights, width, yerr=errors, capsize=3, label=method)
            if baseline:
                ax.axhline(1.0, color="grey", linestyle="--", linewidth=1)
            ax.set_xticks(range(len(phases)), [f"phase {p}" for p in phases])
            ax.set(
                title=f"{kind} loss: adaptation efficiency" + (f" / {baseline}'s" if baseline else " (steps)"),
                ylabel="IQM, 95% CI (lower = faster)",
            )
        written.append(finish_figure(fig, axes, env, out / f"adaptation_{env}.png"))
    return written


def short_name(method: str) -> str:
    """A method's label in a crowded figure: `ppo_poi_progress-interest-noise-int-coef-1` -> `progress noise 1`."""
    for prefix in ("ppo_poi_", "ppo-"):
        method = method.removeprefix(prefix)
    for long, short in (("-interest-", " "), ("-model-data-", " data "), ("-int-coef-", " "), ("ent-coef-", "ent ")):
        method = method.replace(long, short)
    return method


def plot_frontier(
    runs: list[RunInfo], frontier: list[str], frontier_table: list[dict], measure: str, reps: int, seed: int, out: Path
) -> list[Path]:
    """Per env and phase after a change: re-learning steps against the return over the phase's last
    window, one point per method with 95% CIs on both axes, the frontier drawn through its arms; the
    right panel is the same, zoomed on the methods' point estimates, every point labelled."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from common.frontier import pareto

    written = []
    for env, phase in sorted({(row["env"], row["phase"]) for row in frontier_table}):
        members = defaultdict(list)
        for run in runs:
            if run.env == env and len(run.phases) > phase:
                members[run.method].append(run.phases[phase])
        points = {}  # method: (x, x low, x high, y, y low, y high)
        for method, phases in sorted(members.items()):
            pairs = [(p["return_window"], p[f"{measure}_adaptation"]) for p in phases]
            pairs = [pair for pair in pairs if not any(math.isnan(v) for v in pair)]  # as frontier_rows takes them
            x, y = np.array([[px] for px, _ in pairs]), np.array([[py] for _, py in pairs])
            points[method] = tuple(v for a in (x, y) for v in interval_estimates({method: a}, reps, seed)[method])
        front = [(points[m][0], points[m][3]) for m in frontier if m in points]
        line = [front[i] for i in pareto(front)]
        colours = iter([f"C{i}" for i in range(10) if i != 7] * len(points))  # C7 is the frontier's grey
        colour = {m: "grey" if m in frontier else next(colours) for m in points}
        fig, axes = plt.subplots(1, 2, figsize=(14, 6))
        for ax in axes:
            for method, (xi, xl, xh, yi, yl, yh) in points.items():
                on_frontier = method in frontier
                ax.errorbar(
                    xi,
                    yi,
                    xerr=[[xi - xl], [xh - xi]],
                    yerr=[[yi - yl], [yh - yi]],
                    fmt="o" if on_frontier else "s",
                    color=colour[method],
                    capsize=3,
                    alpha=0.6 if on_frontier else 1.0,
                    label=None if on_frontier else method,
                )
                # the frontier's arms labelled above right, the others below right: both stay legible where they meet
                offset = (4, 4) if on_frontier else (4, -10)
                ax.annotate(short_name(method), (xi, yi), xytext=offset, textcoords="offset points", fontsize=7)
            ax.plot(
                [x for x, _ in line], [y for _, y in line], color="grey", linestyle="--", label="non-interest frontier"
            )
            ax.set(xlabel="task: mean return over the phase's last window (IQM, 95% CI)")
        xs, ys = [v[0] for v in points.values()], [v[3] for v in points.values()]
        pad_x, pad_y = 0.1 * (max(xs) - min(xs)) + 0.005, 0.1 * (max(ys) - min(ys)) + 1000
        axes[1].set(xlim=(min(xs) - pad_x, max(xs) + pad_x), ylim=(min(ys) - pad_y, max(ys) + pad_y))
        axes[1].set_title("zoomed on the point estimates (grey: non-interest arms)", fontsize=9)
        axes[0].set(ylabel=f"steps until the {measure} loss is re-learned (IQM, 95% CI)")
        axes[0].legend(fontsize=7, loc="best")
        fig.suptitle(f"{env}, phase {phase}: re-learning against the task (lower right is better)")
        fig.tight_layout()
        path = out / f"frontier_{env}_phase{phase}.png"
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written


def finish_figure(fig, axes, title: str, path: Path) -> Path:
    import matplotlib.pyplot as plt

    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(4, len(labels)), fontsize=8)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def floor_notes(
    runs: list[RunInfo], baseline: str | None, relative: float | None = None, share: float = 0.75
) -> list[str]:
    """A note for each env, loss and phase after a change in which fewer than `share` of the baseline's finished runs
    that log the loss (at least 3) get back below its threshold: the baseline's re-learning steps then count mostly
    whether a run gets back at all, and a ratio to them reads the threshold at the baseline's floor
    (docs/sweeps-and-analysis.md, three checks for a plan). A loss whose threshold is not above 0 (one a study switched
    off) is left out. With `relative` each run's threshold is that factor times its own level before the change."""
    notes = []
    for env in sorted({run.env for run in runs if run.method == baseline}):
        mine = [run for run in runs if run.method == baseline and run.env == env and run.finished]
        for kind in LOSSES:
            for phase in range(1, max((len(run.phases) for run in mine), default=1)):
                rows = [r.phases[phase] for r in mine if len(r.phases) > phase]
                rows = [row for row in rows if row.get(f"{kind}_threshold", 0) > 0]  # the runs that log this loss
                back = sum(row[f"{kind}_reached"] for row in rows)
                if len(rows) >= 3 and back < share * len(rows):
                    below = (
                        f"within {relative:g}x their own {kind} level before the change"
                        if relative
                        else f"below the {kind} threshold {rows[0][f'{kind}_threshold']:g}"
                    )
                    notes.append(
                        f"{env}, phase {phase}: {back} of the {len(rows)} finished runs of the baseline {baseline} "
                        f"that log the {kind} loss get back {below}: its {kind} re-learning steps count mostly "
                        "whether a run gets back (a threshold at the baseline's floor)"
                    )
    return notes


def markdown(rows: list[dict], settings: dict, notes: list[str], agreement: list[dict] = ()) -> str:
    def cell(estimate: dict | None, steps: bool) -> str:
        if not estimate:
            return "-"
        fmt = (lambda v: f"{v:,.0f}") if steps else (lambda v: f"{v:.3g}")
        return f"{fmt(estimate['iqm'])} [{fmt(estimate['low'])}, {fmt(estimate['high'])}]"

    lines = [f"Settings: {json.dumps(settings)}", ""]
    for kind in LOSSES:
        if not any(row.get(f"{kind}_asymptotic") for row in rows):
            continue
        threshold = settings[f"{kind}_threshold"]
        if settings.get("relative"):
            threshold = f"{threshold} in the first phase, then {settings['relative']}x the level before the change"
        lines += [
            f"### {kind} loss (threshold {threshold})",
            "",
            "| env | phase | method | runs | task solved | reached | adaptation steps | normalised | asymptotic loss |",
            "|-|-|-|-|-|-|-|-|-|",
        ]
        for row in rows:
            lines.append(
                f"| {row['env']} | {row['phase']} | {row['method']} | {row['runs']} | {row['success']}/{row['runs']} "
                f"| {row[f'{kind}_reached']}/{row['runs']} | {cell(row.get(f'{kind}_adaptation'), True)} "
                f"| {cell(row.get(f'{kind}_adaptation_normalised'), False)} "
                f"| {cell(row.get(f'{kind}_asymptotic'), False)} |"
            )
        lines.append("")
    lines.append(
        "IQM [95% stratified-bootstrap CI] over runs. Adaptation steps: from the phase start until the "
        "smoothed loss first falls below the threshold after having been at or above it (0 if it never was); "
        "a run that never gets there counts with the phase's length. Normalised: the method's IQM over the "
        "baseline's (below 1 = faster), its CI from resampling the runs of both."
    )
    if agreement:
        lines += [
            "",
            f"### curves against {settings['baseline']}",
            "",
            "Share of the curve's grid points (smoothed, up to the end of the shortest run) where the method's "
            "IQM lies in the baseline's 95% CI band and the baseline's IQM in the method's.",
            "",
            "| env | method | curve | share within each other's CIs |",
            "|-|-|-|-|",
        ]
        lines += [f"| {r['env']} | {r['method']} | {r['curve']} | {r['share']:.2f} |" for r in agreement]
    if notes:
        lines += ["", "Notes:", *[f"- {note}" for note in notes]]
    return "\n".join(lines) + "\n"


def fair_test_markdown(
    task: list[dict], frontier_table: list[dict], robustness: list[dict], verdict: list[dict], settings: dict
) -> str:
    """The task along the phase, every method against the frontier, and the robustness readings."""

    def cell(estimate, fmt="{:.3g}"):
        if not estimate or math.isnan(estimate["iqm"]):
            return "-"
        return f"{fmt.format(estimate['iqm'])} [{fmt.format(estimate['low'])}, {fmt.format(estimate['high'])}]"

    window = f"{settings['task_window'] // 1000}k"
    lines = [
        f"### The task along the phase (returns over each phase's last {window} steps)",
        "",
        f"| env | phase | method | runs | return, last {window} | return, whole phase | last 100 episodes "
        f"| episode length, last {window} | entropy, last {window} | keeps the task |",
        "|-|-|-|-|-|-|-|-|-|-|",
    ]
    for row in task:
        kept = {None: "-", True: "yes", False: "**no**"}[row["keeps_task"]]
        lines.append(
            f"| {row['env']} | {row['phase']} | {row['method']} | {row['runs']} | "
            + " | ".join(cell(row.get(name), "{:.1f}" if name == "length_window" else "{:.3g}") for name in TASK)
            + f" | {kept} |"
        )
    task_baseline = settings["task_baseline"] or settings["baseline"]
    lines += [
        "",
        f"IQM [95% CI] over runs. Keeps the task: the IQM of the return over the last {window} steps at "
        f"or above the lower end of {task_baseline}'s 95% CI in that phase.",
        "",
    ]
    if verdict:
        corrected = 100 * (1 - 0.05 / settings["comparisons"])
        lines += [
            "### Verdicts (the primary comparisons)",
            "",
            f"Win: the upper end of the pre-registered reading's {corrected:g}% CI below 1, and the task kept in "
            "every phase; fragile: a robustness reading's point estimate not below 1.",
            "",
            f"| env | phase | method | against | ratio | {corrected:g}% CI upper end | keeps the task | verdict |",
            "|-|-|-|-|-|-|-|-|",
        ]
        for v in verdict:
            lines.append(
                f"| {v['env']} | {v['phase']} | {v['method']} | {v['against']} | {v['ratio']:.3g} | "
                f"{v['corrected_high']:.3g} | {'yes' if v['keeps_task'] else 'no'} | **{v['verdict']}** |"
            )
        lines.append("")
    if frontier_table:
        corrected = 100 * (1 - 0.05 / settings["comparisons"])
        lines += [
            f"### Against the non-interest frontier ({', '.join(settings['frontier'])})",
            "",
            f"Pre-registered: steps until the {settings['frontier_loss']} loss (EMA span {settings['span']}) falls "
            f"below {settings[settings['frontier_loss'] + '_threshold']:g}. x: the return over the phase's last "
            f"{window} steps. F(x): the frontier's steps at the method's x (interpolated; not judged below the "
            f"frontier's lowest x; a method near that edge is not judged in part of the resamples, which count as unbounded, so "
            f"it cannot win once more than {(100 - corrected) / 2:g}% of them are). {corrected:g}% CI: Bonferroni over "
            f"{settings['comparisons']} comparisons.",
            "",
            f"| env | phase | method | runs | x | y | F(x) | y / F(x) | 95% CI | {corrected:g}% CI "
            "| resamples not judged |",
            "|-|-|-|-|-|-|-|-|-|-|-|",
        ]
        for row in sorted(frontier_table, key=lambda r: r["task"] != "return_window"):
            r = next(v for v in row["readings"].values() if v["pre_registered"])
            if row["task"] != "return_window":
                row = {**row, "method": f"{row['method']} (x: whole phase, not pre-registered)"}
            lines.append(
                f"| {row['env']} | {row['phase']} | {row['method']} | {row['runs']} | {r['x']:.3g} | "
                f"{r['y']:,.0f} | {r['frontier']:,.0f} | {r['ratio']:.3g} | [{r['ci'][0]:.3g}, {r['ci'][1]:.3g}] | "
                f"[{r['ci_corrected'][0]:.3g}, {r['ci_corrected'][1]:.3g}] | {r['not_judged_share']:.2f} |"
            )
        frontier_table = [r for r in frontier_table if r["task"] == "return_window"]
        names = list(frontier_table[0]["readings"])
        lines += [
            "",
            "### Robustness: against the frontier, every reading",
            "",
            "Ratio [95% CI] to the frontier at the method's task level (steps; for the mean log10 loss, the "
            "ratio of geometric-mean losses). The first column is the pre-registered measure.",
            "",
            "| env | phase | method | " + " | ".join(names) + " |",
            "|-|-|-|" + "-|" * len(names),
        ]
        for row in frontier_table:
            lines.append(
                f"| {row['env']} | {row['phase']} | {row['method']} | "
                + " | ".join(f"{r['ratio']:.3g} [{r['ci'][0]:.3g}, {r['ci'][1]:.3g}]" for r in row["readings"].values())
                + " |"
            )
    if robustness:
        names = list(robustness[0]["readings"])
        corrected = 100 * (1 - 0.05 / settings["comparisons"])
        lines += [
            "",
            f"### Robustness: against {settings['baseline']}",
            "",
            f"Ratio [95% CI] of each reading of the {settings['frontier_loss']} loss's re-learning to "
            f"{settings['baseline']}'s; the last column, the pre-registered reading's {corrected:g}% CI.",
            "",
            "| env | phase | method | " + " | ".join(names) + f" | {corrected:g}% CI |",
            "|-|-|-|" + "-|" * (len(names) + 1),
        ]
        for row in robustness:
            lines.append(
                f"| {row['env']} | {row['phase']} | {row['method']} | "
                + " | ".join(cell(row["readings"][n]) for n in names)
                + " | [{:.3g}, {:.3g}] |".format(*row["corrected"])
            )
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    class Formatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
        pass

    parser = OneLineParser(description=__doc__, formatter_class=Formatter)
    parser.add_argument("folders", nargs="+", type=Path, help="sweep folders or folders of run folders")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: <first folder>/analysis)")
    parser.add_argument("--span", type=int, default=30, help="span of the exponential moving average")
    units = "in the loss's units: about 1 for the key-distance model, 0.004 for the forward model"
    parser.add_argument("--train-threshold", type=float, default=0.5, help=f"for the training loss, {units}")
    parser.add_argument("--eval-threshold", type=float, default=2.0, help=f"for eval_loss, {units}")
    parser.add_argument("--changed-threshold", type=float, default=2.0, help=f"for eval_loss_changed, {units}")
    parser.add_argument(
        "--relative",
        type=float,
        default=None,
        help="after the first phase: this factor times the run's loss level before the change",
    )
    parser.add_argument(
        "--success-window", type=int, default=100, help="episodes in the mean return of --success-threshold"
    )
    parser.add_argument("--success-threshold", type=float, default=0.8, help="mean return that counts as solved")
    parser.add_argument("--drop-unsuccessful", action="store_true", help="keep only runs that solved every phase")
    parser.add_argument("--baseline", default=None, help="method to normalise adaptation efficiency by")
    parser.add_argument("--methods", nargs="+", default=None, help="analyse only these methods (default: all)")
    parser.add_argument("--reps", type=int, default=2000, help="bootstrap resamples")
    parser.add_argument("--seed", type=int, default=0, help="seed of the bootstrap")
    parser.add_argument(
        "--task-window",
        type=int,
        default=100_000,
        help="the task along the phase: mean return over each phase's last this many steps",
    )
    parser.add_argument(
        "--frontier",
        nargs="+",
        default=None,
        help="the non-interest methods: every other method is placed against their frontier",
    )
    parser.add_argument(
        "--frontier-loss",
        choices=sorted(LOSSES),
        default="changed",
        help="the loss whose re-learning the frontier and the robustness readings use",
    )
    parser.add_argument("--comparisons", type=int, default=1, help="primary comparisons: CIs at 1 - 0.05 / this too")
    parser.add_argument(
        "--task-baseline", default=None, help="the method whose task level the others must keep (default: --baseline)"
    )
    parser.add_argument(
        "--judge", nargs="+", default=[], help="primary comparisons: these methods against the frontier"
    )
    parser.add_argument(
        "--judge-against-baseline", nargs="+", default=[], help="primary comparisons: these methods against --baseline"
    )
    parser.add_argument(
        "--robust-window",
        type=int,
        default=200_000,
        help="robustness: the mean log10 loss over this many steps after each change",
    )
    parser.add_argument(
        "--robust-factors",
        nargs="+",
        type=float,
        default=list(Robustness.factors),
        help="robustness: the thresholds, as multiples of the pre-registered one, at which re-learning is read again "
        "(the loss's range after a change may leave no room for x0.5 and x2)",
    )
    parser.add_argument(
        "--robust-spans",
        nargs="+",
        type=int,
        default=list(Robustness.spans),
        help="robustness: the EMA spans at which re-learning is read again (--span's own, listed or not, is the "
        "pre-registered reading)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.span < 1 or args.reps < 1 or args.success_window < 1:
            raise ValueError("--span, --reps and --success-window must be at least 1")
        if args.relative is not None and not args.relative > 0:
            raise ValueError(f"--relative must be positive, got {args.relative}")
        if args.task_window < 1 or args.comparisons < 1 or args.robust_window < 1:
            raise ValueError("--task-window, --comparisons and --robust-window must be at least 1")
        if not all(f > 0 for f in args.robust_factors) or not all(n >= 1 for n in args.robust_spans):
            raise ValueError("--robust-factors must be positive and --robust-spans at least 1")
        for kind in ("train", "eval", "changed", "success"):  # a Gaussian model's NLL may sit below 0: any finite value
            if not math.isfinite(threshold := getattr(args, f"{kind}_threshold")):
                raise ValueError(f"--{kind}-threshold must be a finite number, got {threshold}")
        if not 0 <= args.seed < 2**32:
            raise ValueError(f"--seed must be in [0, 4294967295] (numpy's seeds), got {args.seed}")
        if args.out is not None and any(p.exists() and not p.is_dir() for p in (args.out, *args.out.parents)):
            raise ValueError(f"--out {args.out} is, or lies under, a file; the analysis writes a folder")
        if 1.0 not in args.robust_factors:  # the pre-registered reading is the factor 1 at --span
            raise ValueError("--robust-factors must include 1 (the pre-registered threshold)")
        for flag, values in (("--robust-factors", args.robust_factors), ("--robust-spans", args.robust_spans)):
            if len({f"{v:g}" for v in values}) != len(values):  # as the readings name them
                raise ValueError(f"{flag} names a value twice: {' '.join(f'{v:g}' for v in values)}")
        runs, notes = find_runs(args.folders)
        if args.methods is not None:
            unknown = sorted(set(args.methods) - {run.method for run in runs})
            if unknown:
                found = " ".join(sorted({run.method for run in runs}))
                raise ValueError(f"--methods: no runs of {' '.join(unknown)}; methods found: {found}")
            runs = [run for run in runs if run.method in args.methods]
        missing = planned_but_missing(args.folders, runs, args.methods)
        for run in runs:
            if not run.finished:
                notes.append(f"{run.path.name} did not finish (no {COMPLETION_MARKER}): analysed as far as it got")
        if missing:
            notes.append(f"{len(missing)} planned run(s) have no run folder yet: {' '.join(missing)}")
        usable = []
        robustness = Robustness(
            args.frontier_loss, tuple(args.robust_factors), tuple(args.robust_spans), args.robust_window
        )
        for run in runs:
            if run.episodes is None:  # a run folder: read as its series record would be, so both give one table
                scalars = read_scalars(run.path)
                rec = series_record(run, scalars)
                run.scalars = {**scalars, **rec["scalars"]}  # the episodes' returns as logged, for success
                run.episodes, run.summary = rec["episodes"], rec["phases"]
            elif (args.success_threshold, args.success_window) != (0.8, 100):
                raise ValueError("a series file holds success at --success-threshold 0.8 over 100 episodes only")
            for tag in LOSSES.values():  # a NaN would hold the moving average at NaN (never reached), an inf above all
                points = run.scalars.get(tag) or []
                finite = [(step, value) for step, value in points if math.isfinite(value)]
                if len(finite) < len(points):
                    notes.append(f"{run.path.name}: {len(points) - len(finite)} non-finite {tag} value(s) left out")
                    run.scalars[tag] = finite
            lacking = [LOSSES[kind] for kind in REQUIRED if not run.scalars.get(LOSSES[kind])]
            if lacking:
                notes.append(f"passed over {run.path.name}: no {', '.join(lacking)}")
                continue
            if not any(run.episodes["count"]):
                notes.append(f"{run.path.name}: no episode ended (no {RETURN}): not successful")
            thresholds = {"train": args.train_threshold, "eval": args.eval_threshold, "changed": args.changed_threshold}
            phases = len(phase_starts(run.scalars))
            if len(run.summary) < phases:  # a series record made or edited apart from its tags
                raise ValueError(
                    f"{run.path.name}: its record's phases do not fit its tags ({len(run.summary)} summaries, "
                    f"{phases} phases)"
                )
            run.phases = phase_metrics(
                run.scalars,
                args.span,
                thresholds,
                args.success_threshold,
                args.success_window,
                args.relative,
                run.episodes,
                run.summary,
                args.task_window,
                robustness,
            )
            usable.append(run)
        if not usable:
            raise ValueError("no run has the scalars the analysis needs: " + "; ".join(notes))
        if args.drop_unsuccessful:
            kept = [run for run in usable if all(p["success"] for p in run.phases)]
            notes.append(f"--drop-unsuccessful: dropped {len(usable) - len(kept)} of {len(usable)} runs")
            usable = kept
            if not usable:
                raise ValueError("--drop-unsuccessful dropped every run")
        for kind, threshold in thresholds.items():
            highest = [
                p[f"{kind}_highest"] for run in usable for p in run.phases if not math.isnan(p[f"{kind}_highest"])
            ]
            if highest and max(highest) < threshold:
                raise ValueError(
                    f"--{kind}-threshold {threshold:g} is above every run's smoothed {kind} loss (at most "
                    f"{max(highest):.3g}): every adaptation would be 0; pass a threshold below that, or --relative F"
                )
        methods = sorted({run.method for run in usable})
        if args.baseline is not None and args.baseline not in methods:
            raise ValueError(f"baseline {args.baseline!r} is not in the sweep; methods: {' '.join(methods)}")
        for flag, named in (
            ("--frontier", args.frontier or []),
            ("--task-baseline", [args.task_baseline] if args.task_baseline else []),
            ("--judge", args.judge),
            ("--judge-against-baseline", args.judge_against_baseline),
        ):
            unknown = sorted(set(named) - set(methods))
            if unknown:
                raise ValueError(f"{flag}: no runs of {' '.join(unknown)}; methods: {' '.join(methods)}")
        if (args.judge or args.judge_against_baseline) and args.frontier is None:
            raise ValueError("--judge and --judge-against-baseline need --frontier")
        if args.frontier is not None:
            if args.baseline is None:
                raise ValueError("--frontier needs --baseline (the arm whose task level the others must keep)")
            named = {*args.frontier, *args.judge, *args.judge_against_baseline, args.baseline}
            tag = LOSSES[args.frontier_loss]
            without = sorted({run.method for run in usable if run.method in named and not run.scalars.get(tag)})
            if without:
                raise ValueError(f"--frontier-loss {args.frontier_loss}: no {tag} in runs of {' '.join(without)}")
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1

    notes += floor_notes(usable, args.baseline, args.relative)
    first = args.folders[0]
    out = args.out or (first.parent if first.is_file() else first) / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    rows = aggregate(usable, args.baseline, args.reps, args.seed)
    curve_data = curves(usable, args.span, min(args.reps, 1000), args.seed)
    plots = plot(curve_data, rows, args.baseline, out)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k not in ("folders", "out")}
    settings["folders"] = [str(f) for f in args.folders]
    agreement = curve_agreement(curve_data, args.baseline) if args.baseline is not None else []
    task = task_rows(usable, args.task_baseline or args.baseline, args.reps, args.seed)
    frontier_table, robust, verdict = [], [], []
    if args.frontier is not None:
        for task_measure in ("return_window", "return_phase"):  # the plan's x, and x over the whole phase beside it
            frontier_table += frontier_rows(
                usable,
                args.frontier,
                args.frontier_loss,
                args.span,
                robustness if task_measure == "return_window" else None,
                args.reps,
                args.seed,
                args.comparisons,
                task_measure,
            )
        robust = robustness_rows(usable, args.baseline, args.span, robustness, args.reps, args.seed, args.comparisons)
        verdict = verdicts(frontier_table, robust, task, args.judge, args.judge_against_baseline, args.baseline)
        plots += plot_frontier(
            usable, args.frontier, frontier_table, args.frontier_loss, min(args.reps, 1000), args.seed, out
        )
    results = {
        "settings": settings,
        "notes": notes,
        "aggregates": rows,
        "curves": curve_data,
        "curve_agreement": agreement,
        "task": task,
        "frontier": frontier_table,
        "robustness": robust,
        "verdicts": verdict,
        "runs": [
            {
                "run": run.path.name,
                "env": run.env,
                "method": run.method,
                "seed": run.seed,
                "finished": run.finished,
                "phases": run.phases,
            }
            for run in usable
        ],
    }
    (out / "results.json").write_text(json.dumps(results, indent=1))
    table = (
        markdown(rows, settings, notes, agreement)
        + "\n"
        + fair_test_markdown(task, frontier_table, robust, verdict, settings)
    )
    (out / "results.md").write_text(table)
    print(table)
    print(f"wrote {out / 'results.json'}, {out / 'results.md'}, {', '.join(p.name for p in plots)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
