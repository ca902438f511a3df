"""The fair test's measures: the non-interest frontier (hand-worked cases, a property every frontier
must have), the per-run series (binned episodes, an exact round trip), and the analysis made from
event files and from the committed series alike; the 8x8 follow-up's behaviour script on a scripted policy and
a stopped run's checkpoint."""

import dataclasses
import functools
import gzip
import hashlib
import importlib.util
import json
import math
import os
import random
import re
import shlex
import signal
from collections import Counter
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from minigrid.core.constants import COLOR_TO_IDX
from torch.utils.tensorboard import SummaryWriter

from common import analyze, frontier, series
from envs import OneHotFlatObs
from envs.views import key_distance
from tests import forked

ROOT = Path(__file__).resolve().parents[1]


def test_the_frontier_keeps_the_undominated_points_and_interpolates_between_them():
    points = [(0.9, 250.0), (0.8, 200.0), (0.7, 220.0), (0.6, 150.0)]  # (0.7, 220) is dominated by (0.8, 200)
    assert frontier.pareto(points) == [3, 1, 0]
    assert frontier.frontier_at(points, 0.7) == pytest.approx(175.0)  # halfway from (0.6, 150) to (0.8, 200)
    assert frontier.frontier_at(points, 0.8) == 200.0
    assert frontier.frontier_at(points, 0.95) == 250.0  # above every arm: held at the highest arm's steps
    assert math.isnan(frontier.frontier_at(points, 0.5))  # below every arm: not judged
    assert frontier.pareto([(0.5, 1.0), (0.5, 1.0)]) == [0]  # a repeated point once


def test_the_frontier_is_never_above_an_arm_that_does_the_task_at_least_as_well():
    rng = np.random.default_rng(0)
    for _ in range(200):
        points = [tuple(p) for p in rng.uniform([0, 100], [1, 400], size=(rng.integers(1, 8), 2))]
        lowest = points[frontier.pareto(points)[0]][0]
        assert math.isnan(frontier.frontier_at(points, lowest - 1e-6))  # below the frontier: not judged
        xs = np.linspace(lowest, 1.2, 50)
        values = [frontier.frontier_at(points, x) for x in xs]
        assert all(a <= b + 1e-9 for a, b in zip(values, values[1:]))  # more task never costs fewer steps
        for x, f in zip(xs, values):
            assert all(f <= y + 1e-9 for px, y in points if px >= x)


def test_an_arm_against_the_frontier_with_runs_that_do_not_vary():
    runs = lambda x, y: (np.full(5, x), np.full(5, y))  # noqa: E731
    front = {"a": runs(0.6, 150.0), "b": runs(0.8, 200.0)}
    result = frontier.against_frontier(front, runs(0.7, 140.0), reps=200, levels=(0.95, 0.99))
    assert result["frontier"] == pytest.approx(175.0) and result["ratio"] == pytest.approx(0.8)
    assert result["cis"][0.95] == pytest.approx((0.8, 0.8)) and result["not_judged_share"] == 0.0
    low = frontier.against_frontier(front, runs(0.5, 100.0), reps=200)
    assert math.isnan(low["ratio"]) and low["not_judged_share"] == 1.0
    logged = frontier.against_frontier(front, runs(0.8, 2.0), log=True, reps=50)  # log10 losses: 10^(2 - 200)
    assert logged["ratio"] == pytest.approx(10.0 ** (2.0 - 200.0))


def test_the_frontier_interval_covers_an_arm_on_the_frontier_as_often_as_its_level_says():
    """A null simulation: the arm's re-learning is drawn as the frontier's at its task level (between two frontier
    arms, F(0.8) = 80 of their centres 60 and 100; normal runs, whose IQM is unbiased), so its ratio is 1. The 95%
    interval holds 1 in about 95% of 200 studies (neither too narrow nor unbounded), the 98.75% one more often; with
    the frontier's runs held at their IQMs (the frontier taken as exact) it holds 1 less often than it should."""
    rng = np.random.default_rng(0)
    holds, holds_corrected, holds_if_exact = 0, 0, 0
    for study in range(200):
        front = {"a": (np.full(10, 0.95), rng.normal(100, 15, 10)), "b": (np.full(10, 0.65), rng.normal(60, 15, 10))}
        arm = (np.full(10, 0.8), rng.normal(80, 15, 10))
        cis = frontier.against_frontier(front, arm, reps=500, seed=study, levels=(0.95, 0.9875))["cis"]
        holds += cis[0.95][0] <= 1 <= cis[0.95][1]
        holds_corrected += cis[0.9875][0] <= 1 <= cis[0.9875][1]
        exact = {name: (x, np.full(10, frontier.iqm(y))) for name, (x, y) in front.items()}
        low, high = frontier.against_frontier(exact, arm, reps=500, seed=study)["cis"][0.95]
        holds_if_exact += low <= 1 <= high
    assert 0.9 * 200 <= holds <= 0.98 * 200 and holds < holds_corrected, (holds, holds_corrected)
    assert holds_if_exact <= holds - 5, (holds_if_exact, holds)


def test_an_arms_task_and_relearning_are_resampled_together_and_the_edge_counts_as_unbounded():
    front = {"a": (np.full(6, 0.5), np.full(6, 100.0)), "b": (np.full(6, 1.0), np.full(6, 200.0))}  # F(x) = 200 x
    x = np.array([0.55, 0.6, 0.7, 0.8, 0.9, 0.95, 0.62, 0.75])
    together = frontier.against_frontier(front, (x, 0.8 * 200 * x), reps=500)  # each run at 0.8 of F at its own x
    assert together["cis"][0.95] == pytest.approx((0.8, 0.8))  # resampled apart, y and x would part: a wide interval
    edge = frontier.against_frontier(
        front, (np.array([0.45, 0.48, 0.52, 0.55] * 2), np.full(8, 50.0)), reps=2000, levels=(0.95, 0.9875)
    )
    assert 0.00625 < edge["not_judged_share"] < 0.5 and edge["cis"][0.9875][1] == math.inf
    assert frontier.compare(10.0, 0.0, log=False) == math.inf and frontier.compare(0.0, 0.0, log=False) == 1.0
    with pytest.raises(ValueError, match="no runs with both measures for b"):
        frontier.against_frontier({**front, "b": (np.array([]), np.array([]))}, (x, x), reps=10)


def test_an_arm_against_a_baseline_as_a_ratio_or_a_ratio_of_geometric_means():
    assert frontier.versus([2.0] * 4, [4.0] * 4)[0] == pytest.approx(0.5)
    point, low, high = frontier.versus([-1.0] * 4, [0.0] * 4, log=True)  # mean log10 losses -1 and 0
    assert (point, low, high) == pytest.approx((0.1, 0.1, 0.1))


def test_the_iqm_is_bitwise_scipys_trimmed_mean():
    """frontier.iqm, which every bootstrap of the analyses calls once a resample, against scipy's trim_mean (rliable's
    IQM) on random arrays of the shapes the analyses pass (runs x 1 over all values; runs x grid points along the runs;
    resamples x runs along each resample; runs along the last axis), with ties, and the inputs it hands to scipy (a
    NaN, integers, nothing, a scalar): the same values, bit for bit, and the same dtype and shape."""
    from scipy.stats import trim_mean

    rng = np.random.default_rng(0)
    cases = []
    for trial in range(600):
        runs, other = int(rng.integers(1, 45)), int(rng.integers(1, 140))
        values = rng.standard_normal([(runs, 1), (runs, other), (other, runs)][trial % 3]) * 10.0 ** rng.integers(-6, 6)
        cases.append(np.round(values, 1) if trial % 5 == 0 else values)
    with_nan = rng.standard_normal((9, 3))
    with_nan[8, 0] = np.nan  # in the trimmed top quarter: scipy's answer, whatever it is
    cases += [with_nan, rng.integers(0, 9, (7, 2)), np.zeros((0, 1)), rng.standard_normal(11), np.float64(2.5)]
    for values in cases:
        for axis in (None, 0, 1, -1):
            if (values.size == 0 or values.ndim < 2) and axis not in (None, -1) or values.ndim == 0 and axis == -1:
                continue
            ours, theirs = np.asarray(frontier.iqm(values, axis)), np.asarray(trim_mean(values, 0.25, axis=axis))
            assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
            assert np.array_equal(ours, theirs, equal_nan=True), (values.shape, axis)


def test_the_ratios_are_of_iqms_not_medians():
    """Eight runs whose middle four (the IQM's) sit at 0.8 of the reference and whose median is at 0.75: both
    ratios, against the frontier and against a baseline, are the IQM's."""
    front = {"a": (np.full(5, 0.6), np.full(5, 150.0)), "b": (np.full(5, 0.8), np.full(5, 200.0))}  # F(0.7) = 175
    y = 175.0 * np.array([0.1, 0.2, 0.5, 0.7, 0.8, 1.2, 5.0, 9.0])
    assert np.median(y) == pytest.approx(0.75 * 175)
    assert frontier.against_frontier(front, (np.full(8, 0.7), y), reps=50)["ratio"] == pytest.approx(0.8)
    assert frontier.versus(y, np.full(4, 175.0), reps=50)[0] == pytest.approx(0.8)


def test_the_ratio_intervals_are_at_their_level():
    """With the frontier's and the baseline's runs constant (F(0.75) = 150), a ratio's interval is the percentile
    bootstrap of the arm's IQM over 150: against a plain loop over 20,000 resamples (a generator of its own), both
    intervals' ends lie within 3% of its width, at 95% and at the corrected 98.75% (a 90% interval misses by ~20%)."""
    from scipy.stats import trim_mean

    y = np.random.default_rng(5).lognormal(12, 0.5, 10)
    rng, reps = np.random.default_rng(9), 20_000
    loop = np.array([trim_mean(y[rng.integers(10, size=10)], 0.25) for _ in range(reps)]) / 150.0
    front = {"a": (np.full(6, 0.5), np.full(6, 100.0)), "b": (np.full(6, 1.0), np.full(6, 200.0))}
    cis = frontier.against_frontier(front, (np.full(10, 0.75), y), reps=reps, seed=0, levels=(0.95, 0.9875))["cis"]
    for level, ends in ((0.95, [2.5, 97.5]), (0.9875, [0.625, 99.375])):
        low, high = np.percentile(loop, ends)
        _, versus_low, versus_high = frontier.versus(y, np.full(10, 150.0), reps=reps, seed=0, level=level)
        for got_low, got_high in (cis[level], (versus_low, versus_high)):
            assert abs(got_low - low) < 0.03 * (high - low) and abs(got_high - high) < 0.03 * (high - low), level


def test_the_corrected_interval_against_the_baseline_is_at_the_bonferroni_level():
    """robustness_rows' interval of the pre-registered reading against the baseline is at 1 - 0.05 / comparisons
    (the ratio's bootstrap at that level, with the same resamples), strictly wider than the 95% one."""
    rng = np.random.default_rng(2)
    method, base = rng.lognormal(10, 0.4, 10), rng.lognormal(10.2, 0.4, 10)
    robustness = analyze.Robustness(factors=(1.0,), spans=(10,), window=1000)
    name = "threshold x1, span 10"

    def runs(label, values):
        def phases(value):
            return [{"phase": 0}, {"phase": 1, "robust": {name: value, "mean log10 loss, first 1k": 0.0}}]

        return [analyze.RunInfo(Path("x"), "E", label, seed, True, phases=phases(v)) for seed, v in enumerate(values)]

    rows = analyze.robustness_rows(runs("m", method) + runs("b", base), "b", 10, robustness, 2000, 0, 4)
    (row,) = [r for r in rows if r["method"] == "m"]
    assert row["corrected"] == pytest.approx(frontier.versus(method, base, reps=2000, seed=0, level=1 - 0.05 / 4)[1:])
    assert row["corrected"][0] < row["readings"][name]["low"] and row["readings"][name]["high"] < row["corrected"][1]


def test_the_verdicts_on_hand_made_rows():
    """Each outcome of analyze.verdicts: a win only where the corrected interval's upper end is below 1 (a point
    below 1 is not enough), fragile where another reading is not below 1, no where the task is lost, not judged
    below the frontier's task levels; against the baseline by the robustness rows' corrected interval."""

    def frontier_row(method, ratio, high, other):
        readings = {
            "changed_adaptation": {"ratio": ratio, "ci_corrected": (0.1, high), "pre_registered": True},
            "span 5": {"ratio": other, "pre_registered": False},
        }
        return {"env": "E", "phase": 1, "method": method, "task": "return_window", "readings": readings}

    def robust_row(method, high):
        readings = {"threshold x1, span 10": {"iqm": 0.6}, "span 5": {"iqm": 0.7}}
        return {"env": "E", "phase": 1, "method": method, "readings": readings, "corrected": (0.4, high)}

    methods = ["win", "wide", "fragile", "lost", "edge"]
    table = [
        frontier_row("win", 0.7, 0.95, 0.8),
        frontier_row("wide", 0.7, 1.05, 0.8),  # the point below 1, the corrected interval's upper end not
        frontier_row("fragile", 0.7, 0.95, 1.02),
        frontier_row("lost", 0.7, 0.95, 0.8),
        frontier_row("edge", math.nan, math.inf, 0.8),
    ]
    task = [{"env": "E", "method": m, "keeps_task": m != "lost" or k == 1} for m in methods for k in (0, 1)]
    robust = [robust_row("win", 0.9), robust_row("wide", 1.1)]
    out = analyze.verdicts(table, robust, task, methods, ["win", "wide"], "base")
    assert {(v["method"], v["against"]): v["verdict"] for v in out} == {
        ("win", "frontier"): "win",
        ("wide", "frontier"): "no",
        ("fragile", "frontier"): "fragile win",
        ("lost", "frontier"): "no (does not keep the task)",
        ("edge", "frontier"): "not judged (below the frontier's task levels)",
        ("win", "base"): "win",
        ("wide", "base"): "no",
    }


def test_keeping_the_task_is_reaching_the_low_end_of_the_baselines_interval():
    """An arm keeps the task when its IQM of the return over the window reaches the lower end of the baseline's 95%
    interval, not the baseline's IQM: an arm between the two keeps it, one below both does not."""
    base = np.linspace(0.80, 0.98, 10)  # IQM (the middle six) 0.89

    def runs(method, values):
        phases = lambda value: [{"phase": 0, "return_window": value}]  # noqa: E731
        return [analyze.RunInfo(Path("x"), "E", method, seed, True, phases=phases(v)) for seed, v in enumerate(values)]

    rows = analyze.task_rows(
        runs("base", base) + runs("near", [0.885] * 10) + runs("far", [0.80] * 10), "base", 1000, 0
    )
    by_method = {row["method"]: row for row in rows}
    window = by_method["base"]["return_window"]
    assert window["low"] < 0.885 < window["iqm"] == pytest.approx(0.89)
    assert by_method["near"]["keeps_task"] is True and by_method["far"]["keeps_task"] is False
    assert by_method["base"]["keeps_task"] is True


def test_episodes_are_summed_per_bin_and_windows_take_whole_bins():
    scalars = {
        "charts/episodic_return": [(100, 1.0), (1999, 0.5), (2000, 0.0), (5000, 0.25)],
        "charts/episodic_length": [(100, 10), (1999, 20), (2000, 360), (5000, 30)],
    }
    bins = series.episode_bins(scalars, bin_width=2000)
    assert bins["count"] == [2, 1, 1] and bins["return"] == [1.5, 0.0, 0.25] and bins["length"] == [30, 360, 30]
    assert series.window_mean(bins, 0, 4000) == pytest.approx(0.5)  # (1 + 0.5 + 0) / 3
    assert series.window_mean(bins, 2000, 6000, "length") == pytest.approx(195.0)
    assert series.window_mean(bins, 1, 4000) == 0.0  # the bin starting at 0 is not inside
    assert series.window_mean(bins, 0, 5999) == pytest.approx(0.5)  # the bin ending at 6,000 is not inside
    assert math.isnan(series.window_mean(bins, 6000, 8000))


def write_run(folder, method, seed, relearn_at, returns_after, finished=True, more=None, plateau=0):
    """Two phases of 50 evaluations 1,000 steps apart, the change at 50,000: the changed views' loss
    is 5 until `relearn_at` steps after the change (2 over its last `plateau` steps), then 0.1; two episodes per
    evaluation; `more`: {tag: value of the evaluation's index} logged at every evaluation too."""
    run_dir = folder / f"ColorDoorKey-6x6__{method}__{seed}__{1000 + seed}"
    writer = SummaryWriter(run_dir)
    rng = np.random.default_rng(seed)
    for i in range(100):
        step, phase = (i + 1) * 1000, int(i >= 50)
        since = step - 50_000
        changed = (
            (5.0 if since < relearn_at - plateau else 2.0)
            if phase and since < relearn_at
            else 0.1 + 0.01 * rng.random()
        )
        for tag, value in {
            "charts/phase": phase,
            "external_model/train_loss": changed,
            "external_model/eval_loss": changed,
            "external_model/eval_loss_changed": changed,
            "losses/entropy": 1 + rng.random(),
            **{tag: value(i) for tag, value in (more or {}).items()},
        }.items():
            writer.add_scalar(tag, value, step)
        for _ in range(2):
            ret = returns_after if phase else 0.9
            writer.add_scalar("charts/episodic_return", ret + 0.01 * rng.random(), step)
            writer.add_scalar("charts/episodic_length", int(rng.integers(10, 40)), step)
    writer.close()
    if finished:
        (run_dir / "finished.json").write_text("{}")


def analyse(*args):
    """`python -m common.analyze *args`, forked from the test process (tests/forked.py)."""
    return forked.run(["-m", "common.analyze", *args], ROOT, timeout=600)


def test_the_tables_made_from_the_committed_series_are_those_made_from_the_event_files(tmp_path):
    arms = {"ppo": (30_000, 0.9), "entropy": (20_000, 0.6), "interest": (12_000, 0.88), "never": (10**6, 0.9)}
    for method, (relearn, ret) in arms.items():
        for seed in range(1, 5):
            write_run(tmp_path / "runs", method, seed, relearn + 1000 * seed, ret)
    made = forked.run(["-m", "common.series", tmp_path / "runs", "--out", tmp_path / "s.jsonl.gz"], ROOT)
    assert made.returncode == 0 and "16 finished runs" in made.stdout, made.stderr
    flags = [
        "--baseline",
        "ppo",
        "--frontier",
        "ppo",
        "entropy",
        "--span",
        "1",
        "--changed-threshold",
        "1",
        "--eval-threshold",
        "1",
        "--train-threshold",
        "1",
        "--reps",
        "100",
        "--task-window",
        "20000",
        "--comparisons",
        "2",
        "--judge",
        "interest",
        "never",
        "--judge-against-baseline",
        "interest",
    ]
    assert analyse(str(tmp_path / "runs"), *flags, "--out", str(tmp_path / "from_events")).returncode == 0
    result = analyse(str(tmp_path / "s.jsonl.gz"), *flags)
    assert result.returncode == 0, result.stderr
    events = json.loads((tmp_path / "from_events/results.json").read_text())
    committed = json.loads((tmp_path / "analysis/results.json").read_text())
    for key in ("aggregates", "task", "frontier", "robustness", "curves", "runs", "verdicts"):
        assert events[key] == committed[key], key

    never = {(r["method"], r["phase"]): r for r in committed["aggregates"]}[("never", 1)]
    assert (
        never["changed_reached"] == 0 and never["changed_adaptation"]["iqm"] == 100_001 - 51_000
    )  # the phase's length
    interest = {(r["method"], r["task"]): r for r in committed["frontier"]}[("interest", "return_window")]
    primary = interest["readings"]["changed_adaptation"]
    # phase 1 starts at its first logged step, 51,000; the loss falls at 50,000 + relearn: relearn - 1,000 steps
    # after it; IQM over seeds 1-4 = the mean of seeds 2 and 3; the frontier from entropy (x ~0.605) to ppo (~0.905)
    y = np.mean([12_000 + 1000 * s - 1000 for s in (2, 3)])
    x = primary["x"]
    f = np.interp(
        x,
        [0.605, 0.905],
        [np.mean([20_000 + 1000 * s - 1000 for s in (2, 3)]), np.mean([30_000 + 1000 * s - 1000 for s in (2, 3)])],
    )
    assert primary["y"] == pytest.approx(y) and x == pytest.approx(0.885, abs=0.003)
    assert primary["frontier"] == pytest.approx(f, rel=0.01) and primary["ratio"] == pytest.approx(y / f, rel=0.01)
    assert (
        primary["ci_corrected"][0]
        <= primary["ci"][0]
        <= primary["ratio"]
        <= primary["ci"][1]
        <= primary["ci_corrected"][1]
    )
    task = {(r["method"], r["phase"]): r for r in committed["task"]}
    assert task[("ppo", 1)]["keeps_task"] is True and task[("entropy", 1)]["keeps_task"] is False
    assert task[("interest", 1)]["keeps_task"] is False  # 0.885 against ppo's returns of 0.90-0.91: below its CI
    assert task[("interest", 0)]["keeps_task"] is True  # all at 0.90-0.91 before the change
    table = (tmp_path / "analysis/results.md").read_text()
    assert "### Against the non-interest frontier (ppo, entropy)" in table and "97.5% CI" in table
    verdicts = {(v["method"], v["against"]): v["verdict"] for v in committed["verdicts"]}
    assert verdicts == {
        ("interest", "frontier"): "no (does not keep the task)",
        ("never", "frontier"): "no",
        ("interest", "ppo"): "no (does not keep the task)",
    }
    assert "| ColorDoorKey-6x6 | 1 | interest | frontier |" in table and "x: whole phase, not pre-registered" in table
    against_ppo = {r["method"]: r for r in committed["robustness"]}["interest"]
    pre_registered = against_ppo["readings"]["threshold x1, span 1"]
    assert pre_registered["iqm"] == pytest.approx(y / np.mean([30_000 + 1000 * s - 1000 for s in (2, 3)]))
    assert against_ppo["corrected"][0] <= pre_registered["low"] <= pre_registered["high"] <= against_ppo["corrected"][1]
    assert (tmp_path / "analysis/frontier_ColorDoorKey-6x6_phase1.png").stat().st_size > 10_000


def test_a_run_read_back_from_its_series_holds_the_float32_values_it_logged(tmp_path):
    write_run(tmp_path, "m", 1, 10_000, 0.5)
    (run,), _ = analyze.find_runs([tmp_path])
    scalars = analyze.read_scalars(run.path)
    rec = series.record(run, scalars)
    series.write([rec], tmp_path / "s.jsonl.gz")
    (back,) = series.read(tmp_path / "s.jsonl.gz")
    for tag in ("external_model/eval_loss_changed", "external_model/train_loss"):
        assert back["scalars"][tag] == scalars[tag]
    assert back["scalars"]["charts/phase"] == [(1000, 0.0), (51000, 1.0)]  # where it changes
    assert back["phases"] == rec["phases"] and back["episodes"] == rec["episodes"]
    again = forked.run(  # the command line in a fresh interpreter
        ["-m", "common.series", tmp_path / "s.jsonl.gz", "--out", tmp_path / "again.jsonl.gz"], ROOT, fresh=True
    )
    assert again.returncode == 0, again.stderr  # a series file read and written again: the same text
    assert gzip.decompress((tmp_path / "again.jsonl.gz").read_bytes()) == gzip.decompress(
        (tmp_path / "s.jsonl.gz").read_bytes()
    )


def test_a_series_written_over_one_of_its_inputs_is_whole_or_untouched(tmp_path):
    """Runs are added to a committed series by naming it as input and output: the file is replaced once the new one is
    complete, and an error (or Ctrl-C) while writing leaves it as it was, with no temporary file beside it."""
    write_run(tmp_path / "sweep", "m", 1, 10_000, 0.5)
    (run,), _ = analyze.find_runs([tmp_path / "sweep"])
    rec = series.record(run, analyze.read_scalars(run.path))
    path = tmp_path / "s.jsonl.gz"
    series.write([rec, rec, rec], path)
    before = path.read_bytes()
    with pytest.raises(TypeError):  # a record that cannot be written, after the first has been
        series.write([rec, {**rec, "phases": object()}], path)
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["s.jsonl.gz", "sweep"]
    assert len(series.read(path)) == 3
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # as open() makes a file, not mkstemp's private one


@pytest.mark.parametrize("module", ["common.series", "common.analyze"])
def test_a_file_that_is_no_series_and_an_out_folder_that_is_missing_are_one_line(tmp_path, module):
    (tmp_path / "bad.jsonl.gz").write_text("not gzip\n")
    out = ["--out", tmp_path / ("s.jsonl.gz" if module == "common.series" else "analysis")]
    proc = forked.run(["-m", module, tmp_path / "bad.jsonl.gz", *out], ROOT)
    assert proc.returncode == 1 and proc.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'bad.jsonl.gz'} is not a series file that can be read (Not a gzipped file (b'no'))"
    ], proc.stderr
    if module == "common.series":
        missing = forked.run(["-m", module, tmp_path / "bad.jsonl.gz", "--out", tmp_path / "no" / "s.jsonl.gz"], ROOT)
        assert (
            missing.returncode == 1
            and missing.stderr.strip() == f"error: --out's folder {tmp_path / 'no'} does not exist"
        )
        (tmp_path / "d.jsonl.gz").mkdir()
        folder = forked.run(["-m", module, tmp_path / "bad.jsonl.gz", "--out", tmp_path / "d.jsonl.gz"], ROOT)
        assert folder.returncode == 1 and folder.stderr.strip() == f"error: {tmp_path / 'd.jsonl.gz'} is a folder"
        (tmp_path / "d.jsonl.gz").rmdir()
        (tmp_path / "other.jsonl.gz").write_bytes(gzip.compress(b'{"run": "x"}\n'))  # JSON, but no record of ours
        with pytest.raises(ValueError, match="other.jsonl.gz is not a series file: its record 1 has no tags"):
            series.read(tmp_path / "other.jsonl.gz")
        (tmp_path / "other.jsonl.gz").unlink()
        body = bytearray(gzip.compress(b'{"tags": {}}\n' * 1000))
        body[30:40] = b"\xff" * 10  # a gzip header that reads, a body that does not
        (tmp_path / "other.jsonl.gz").write_bytes(bytes(body))
        with pytest.raises(ValueError, match="other.jsonl.gz is not a series file that can be read"):
            series.read(tmp_path / "other.jsonl.gz")
        (tmp_path / "other.jsonl.gz").unlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl.gz"]


def test_the_analysis_refuses_a_frontier_without_its_runs_or_a_baseline(tmp_path):
    write_run(tmp_path, "ppo", 1, 10_000, 0.5)
    cases = [
        (["--frontier", "nope", "--baseline", "ppo"], "error: --frontier: no runs of nope; methods: ppo"),
        (["--frontier", "ppo"], "error: --frontier needs --baseline"),
        (["--task-window", "0"], "error: --task-window, --comparisons and --robust-window must be at least 1"),
    ]
    for flags, message in cases:
        result = analyse(str(tmp_path), "--changed-threshold", "1", *flags)
        assert result.returncode == 1 and result.stderr.startswith(message), result.stderr


def test_the_robustness_readings_are_those_their_flags_name(tmp_path):
    for method, relearn in (("ppo", 30_000), ("interest", 12_000)):
        for seed in (1, 2, 3):
            write_run(tmp_path / "runs", method, seed, relearn + 1000 * seed, 0.9)
    flags = ["--baseline", "ppo", "--frontier", "ppo", "--span", "1", "--reps", "50"]
    flags += ["--changed-threshold", "1", "--eval-threshold", "1", "--train-threshold", "1"]
    readings = {}
    for name, extra in (("default", []), ("custom", ["--robust-factors", "0.05", "1", "1.5", "--robust-spans", "3"])):
        result = analyse(str(tmp_path / "runs"), *flags, *extra, "--out", str(tmp_path / name))
        assert result.returncode == 0, result.stderr
        rows = json.loads((tmp_path / name / "results.json").read_text())["robustness"]
        readings[name] = next(r for r in rows if r["method"] == "interest" and r["phase"] == 1)["readings"]
    assert list(readings["default"]) == [
        *("threshold x0.5, span 1", "threshold x1, span 1", "threshold x2, span 1"),
        *("span 5", "span 10", "span 30", "mean log10 loss, first 200k"),
    ]
    assert list(readings["custom"]) == [
        *("threshold x0.05, span 1", "threshold x1, span 1", "threshold x1.5, span 1", "span 3"),
        "mean log10 loss, first 200k",
    ]
    assert readings["custom"]["threshold x1, span 1"] == readings["default"]["threshold x1, span 1"]
    # at 0.05 x 1 the loss (0.1-0.11 after re-learning) never gets below: both arms count the phase's length, ratio 1;
    # at 1 and 1.5 (between 0.11 and 5) the interest arm's 11k-14k steps against ppo's 29k-32k: well below 1
    assert readings["custom"]["threshold x0.05, span 1"]["iqm"] == 1.0
    assert readings["custom"]["threshold x1.5, span 1"]["iqm"] < 0.5
    for flag, value in (("--robust-factors", "0"), ("--robust-spans", "0")):
        result = analyse(str(tmp_path / "runs"), *flags, flag, value)
        assert result.returncode == 1 and result.stderr.strip() == (
            "error: --robust-factors must be positive and --robust-spans at least 1"
        )
    result = analyse(str(tmp_path / "runs"), *flags, "--robust-factors", "0.5", "2")
    assert result.stderr.strip() == "error: --robust-factors must include 1 (the pre-registered threshold)"
    result = analyse(str(tmp_path / "runs"), *flags, "--robust-spans", "5", "5")
    assert result.returncode == 1 and result.stderr.strip() == "error: --robust-spans names a value twice: 5 5"
    result = analyse(str(tmp_path / "runs"), *flags, "--robust-factors", "1", "1.0000001")  # both read "x1"
    assert result.returncode == 1 and result.stderr.strip() == "error: --robust-factors names a value twice: 1 1"


def test_the_continuous_studys_task_bar_reads_f1s_return_before_the_change(tmp_path):
    """taskbar.py: asked when F1's IQM of the return over the task window in the first phase is at or above -400 (the
    bar itself included), whatever F1's second phase or another arm does; an analysis without that row is one line."""
    script = ROOT / "docs/results/continuous-interest/taskbar.py"

    def results(f1_before):
        def row(method, phase, iqm):
            return {"env": "E", "phase": phase, "method": method, "return_window": {"iqm": iqm, "low": 0, "high": 0}}

        return {"task": [row("f1", 0, f1_before), row("f1", 1, -1000.0), row("i1", 0, -100.0), row("i1", 1, -100.0)]}

    for f1_before, code in ((-173.0, 0), (-400.0, 0), (-400.5, 3)):
        (tmp_path / "results.json").write_text(json.dumps(results(f1_before)))
        done = forked.run([script, tmp_path / "results.json", "f1"], tmp_path)
        assert done.returncode == code, done.stderr
        assert done.stdout.startswith("asked: " if code == 0 else "not asked: ") and f"{f1_before:g}" in done.stdout
    missing = forked.run([script, tmp_path / "results.json", "f2"], tmp_path)
    assert missing.returncode == 1 and missing.stderr.count("\n") == 1 and "0 task rows of f2" in missing.stderr


def test_the_continuous_studys_thresholds_come_from_f1s_first_phase_alone(tmp_path):
    """threshold.py: 3 x the IQM over F1's runs of each loss's median over the second half of the first phase's
    evaluations, rounded up to 2 digits; the first half (high: an untrained model) and other arms never count."""
    threshold = load_script("threshold", ROOT / "docs/results/continuous-interest/threshold.py")
    assert [threshold.round_up(v) for v in (0.0012301, 0.0013, 2.0, 123.0, 9.96)] == [0.0013, 0.0013, 2.0, 130.0, 10.0]
    assert threshold.level(np.array([9.0, 9.0, 1.0, 3.0, 2.0])) == 2.0  # odd: the last 3 of 5, the middle one kept
    assert threshold.level(np.array([9.0, 9.0, 1.0, 3.0])) == 2.0

    def write(method, seed, before, after):
        run_dir = tmp_path / f"runs/PendulumMotorChange-v1__{method}__{seed}__{1000 + seed}"
        with SummaryWriter(run_dir) as writer:
            for i, value in enumerate([*before, *after]):
                writer.add_scalar("charts/phase", int(i >= len(before)), 1000 * (i + 1))
                for tag in ("train_loss", "eval_loss", "eval_loss_changed"):
                    writer.add_scalar(f"external_model/{tag}", value, 1000 * (i + 1))
        (run_dir / "finished.json").write_text("{}")

    for seed in (1, 2, 3, 4):  # F1's second half: 0.1 + 0.001 i + 0.0001 seed, i = 25..49: its median at i = 37
        write("f1", seed, [1.0] * 25 + [0.1 + 0.001 * i + 0.0001 * seed for i in range(25, 50)], [5.0] * 20)
        write("other", seed, [0.001] * 50, [0.001] * 20)  # another arm, 100x lower: never read
    for seed, level in enumerate((0.125, 0.125, 0.125, 0.25, 1.0), start=1):  # IQM 1/6, median 1/8, mean 0.325
        write("g1", seed, [9.0] * 25 + [level] * 25, [5.0] * 20)
    made = forked.run(["-m", "common.series", tmp_path / "runs", "--out", tmp_path / "s.jsonl.gz"], ROOT)
    assert made.returncode == 0, made.stderr
    # by hand: medians 0.1371-0.1374, their IQM (the middle two of 4) 0.13725, x3 = 0.41175, rounded up: 0.42
    assert threshold.thresholds(tmp_path / "s.jsonl.gz", "f1") == {"train": 0.42, "eval": 0.42, "changed": 0.42}
    # 3 x the IQM over five runs (0.5), not their median (0.38) or mean (0.98)
    assert threshold.thresholds(tmp_path / "s.jsonl.gz", "g1") == {"train": 0.5, "eval": 0.5, "changed": 0.5}
    result = forked.run([ROOT / "docs/results/continuous-interest/threshold.py", tmp_path / "s.jsonl.gz", "f1"], ROOT)
    assert result.stdout == "--train-threshold 0.42 --eval-threshold 0.42 --changed-threshold 0.42\n"
    assert result.stderr == "threshold.py: 4 finished runs of f1\n"
    result = forked.run([ROOT / "docs/results/continuous-interest/threshold.py", tmp_path / "s.jsonl.gz", "nope"], ROOT)
    assert result.returncode == 1 and result.stderr == f"error: no finished runs of nope in {tmp_path / 's.jsonl.gz'}\n"


def test_the_continuous_studys_old_world_reading_takes_its_windows_whole_and_an_iqm_over_runs(tmp_path):
    """oldworld.py: per run, the mean of old_world_interest - old_world_rows over the points at 27,000-40,000 (and
    beside, 22,000-26,000), both ends in, every point there; per arm, the IQM over its runs (not their mean or
    median); points outside and other arms never count."""

    def write(method, seed, excess, skip=()):  # the excess: {window: value}, 1.0 outside both
        run_dir = tmp_path / f"runs/PendulumMotorChange-v1__{method}__{seed}__{1000 + seed}"
        with SummaryWriter(run_dir) as writer:
            for step in range(2_000, 41_000, 1_000):
                window = "reading" if step >= 27_000 else "beside" if step >= 22_000 else "outside"
                # the last point of the reading (of 14) and the first beside it (of 5) move their mean by +-0.01
                end = {40_000: 0.14, 22_000: -0.05}.get(step, 0.0)
                writer.add_scalar("charts/phase", int(step > 20_000), step)
                writer.add_scalar("external_model/eval_loss_changed", 0.1, step)
                if step not in skip:
                    writer.add_scalar("poi/old_world_rows", 0.25, step)
                    writer.add_scalar("poi/old_world_interest", 0.25 + excess.get(window, 1.0) + end, step)
        (run_dir / "finished.json").write_text("{}")

    # per run 0.02, 0.03, 0.04, 0.08, 0.51 (and their negatives beside): the IQM of 5 (the middle three) 0.05, where
    # their median is 0.04 and their mean 0.136
    for seed, value in enumerate((0.01, 0.02, 0.03, 0.07, 0.5), start=1):
        write("i1", seed, {"reading": value, "beside": -value})
    for seed in (1, 2, 3, 4):
        write("f3", seed, {"reading": 0.5, "beside": 0.5})
    write("gap", 1, {}, skip=(30_000,))
    made = forked.run(["-m", "common.series", tmp_path / "runs", "--out", tmp_path / "s.jsonl.gz"], ROOT)
    assert made.returncode == 0, made.stderr
    oldworld = load_script("oldworld", ROOT / "docs/results/continuous-interest/oldworld.py")
    found = oldworld.readings(tmp_path / "s.jsonl.gz", ["i1"])
    (iqm, low, high, runs), (beside, *_) = found["i1"].values()
    assert (round(iqm, 6), runs, round(beside, 6)) == (0.05, 5, -0.05) and 0.0199 < low <= iqm <= high < 0.5101
    result = forked.run([ROOT / "docs/results/continuous-interest/oldworld.py", tmp_path / "s.jsonl.gz", "f3"], ROOT)
    assert result.stdout.splitlines()[2:] == [
        "| f3 | 27,000-40,000 | 4 | +0.510 [+0.510, +0.510] |",
        "| f3 | 22,000-26,000 (beside) | 4 | +0.490 [+0.490, +0.490] |",
    ]
    result = forked.run([ROOT / "docs/results/continuous-interest/oldworld.py", tmp_path / "s.jsonl.gz", "gap"], ROOT)
    assert result.returncode == 1
    assert result.stderr == "error: gap: old-world shares missing at steps 27,000-40,000: 30000\n"
    result = forked.run([ROOT / "docs/results/continuous-interest/oldworld.py", tmp_path / "s.jsonl.gz", "nope"], ROOT)
    assert result.returncode == 1 and result.stderr == f"error: no runs of nope in {tmp_path / 's.jsonl.gz'}\n"


def test_the_continuous_studys_where_reading_takes_three_windows_per_run_and_an_iqm_over_runs(tmp_path):
    """where.py: per run, the mean of the changed-region share logged in the last BEFORE steps before the change (the
    second phase's first logged step), the first AFTER from it and the run's last BEFORE (it ends one step after its
    last logged step); per arm, the IQM over its runs. The points next to each window carry other values, so a window
    one point too wide or too narrow moves its mean."""

    def write(method, seed, delta, phases=2, skip=None):
        run_dir = tmp_path / f"runs/PendulumMotorChange-v1__{method}__{seed}__{1000 + seed}"
        with SummaryWriter(run_dir) as writer:
            for step in range(1_000, 201_000, 1_000):  # the change logged first at 101,000
                phase = int(step > 100_000) if phases == 2 else 0
                value = 0.9 if step <= 50_000 else 0.2 if step <= 100_000 else 0.5 if step <= 150_000 else 0.3
                writer.add_scalar("charts/phase", phase, step)
                if step != skip:
                    writer.add_scalar("external_model/rollout_changed_share", value + delta, step)
                writer.add_scalar("losses/alpha", 2 * value + delta, step)  # another tag, read with --tag
        (run_dir / "finished.json").write_text("{}")

    for seed, delta in enumerate((0.01, 0.02, 0.03, 0.07, 0.5), start=1):  # the IQM of five: the middle three's mean
        write("i1", seed, delta, skip=120_000 if seed == 5 else None)  # a point missing after the change
    write("f1", 1, 0.0)
    write("flat", 1, 0.0, phases=1)
    made = forked.run(
        ["-m", "common.series", tmp_path / "runs", "--out", tmp_path / "s.jsonl.gz", "--tags", "losses/alpha"], ROOT
    )
    assert made.returncode == 0, made.stderr
    script = ROOT / "docs/results/continuous-interest/where.py"
    where = load_script("where", script)
    found = where.readings(tmp_path / "s.jsonl.gz", 50_000, 50_000, ["i1", "f1"])
    assert [round(iqm, 6) for iqm, *_ in found["i1"].values()] == [0.24, 0.54, 0.34]
    assert all(runs == 5 and low < iqm < high for iqm, low, high, runs, _ in found["i1"].values())
    assert [points for *_, points in found["i1"].values()] == [(50, 50), (49, 50), (50, 50)]
    other = where.readings(tmp_path / "s.jsonl.gz", 60_000, 20_000, ["f1"])["f1"]  # 10 more points in each 60,000
    expected = [(50 * 0.2 + 10 * 0.9) / 60, 0.5, (50 * 0.3 + 10 * 0.5) / 60]
    assert [round(iqm, 6) for iqm, *_ in other.values()] == [round(value, 6) for value in expected]
    result = forked.run([script, tmp_path / "s.jsonl.gz", "50000", "50000", "f1", "i1"], ROOT)
    assert result.stdout.splitlines()[:3] == [
        "| arm | runs | last 50,000 before the change | first 50,000 after it | last 50,000 of the run "
        "| points in a run: before, after, end |",
        "|-|-:|-|-|-|-|",
        "| f1 | 1 | 0.200 [0.200, 0.200] | 0.500 [0.500, 0.500] | 0.300 [0.300, 0.300] | 50, 50, 50 |",
    ]
    cells = result.stdout.splitlines()[3].split(" | ")  # i1: the IQMs, each with its bootstrap CI
    assert cells[:2] == ["| i1", "5"] and cells[-1] == "50, 49-50, 50 |"
    assert [cell.split(" [")[0] for cell in cells[2:5]] == ["0.240", "0.540", "0.340"]
    result = forked.run([script, "--tag", "losses/alpha", tmp_path / "s.jsonl.gz", "50000", "50000", "i1"], ROOT)
    assert result.stdout.startswith("| arm (losses/alpha) | runs |"), result.stderr
    cells = result.stdout.splitlines()[2].split(" | ")  # twice the share, every point (none skipped), to 3 digits
    assert [cell.split(" [")[0] for cell in cells[2:5]] == ["0.440", "1.04", "0.640"] and cells[-1] == "50, 50, 50 |"
    result = forked.run([script, "--tag", "losses/nope", tmp_path / "s.jsonl.gz", "50000", "50000", "f1"], ROOT)
    assert result.returncode == 1 and result.stderr.startswith("error: f1: no losses/nope logged at steps"), (
        result.stderr
    )
    for args in (
        ["--tag"],
        ["--tag", "losses/alpha"],
        ["--tag", "losses/alpha", tmp_path / "s.jsonl.gz", "1", "2"],
        [
            tmp_path / "s.jsonl.gz",
            "50000",
            "50000",
            "f1",
            "--tag",
            "losses/alpha",
        ],  # the flag comes first or not at all
    ):
        result = forked.run([script, *args], ROOT)  # a flag with too little after it: the usage line
        assert result.returncode == 1 and result.stderr.startswith("usage: where.py [--tag TAG]"), result.stderr
    for args, error in [
        (["50000", "50000", "flat"], "error: flat: 1 phases, not 2\n"),
        (["50000", "50000", "nope"], f"error: no finished runs of nope in {tmp_path / 's.jsonl.gz'}\n"),
        (["200000", "50000", "f1"], None),  # the first 1,000 steps before any point: still points in the window
        (["50000", "0", "f1"], "usage"),
        (["50000", "x", "f1"], "usage"),
        (["50000", "50000"], "usage"),
    ]:
        result = forked.run([script, tmp_path / "s.jsonl.gz", *args], ROOT)
        if error is None:
            assert result.returncode == 0, result.stderr
        else:
            assert result.returncode == 1 and result.stderr.startswith(error), result.stderr

    _, block = amendment(ROOT / "docs/results/continuous-interest/PLAN.md", "## Amendment 4")  # its commands
    values = {"R": "docs/results/continuous-interest", "P": "ppo_continuous_poi_ensemble", "A": "sac_forward_model"}
    lines = [re.sub(r"\$(\w+)", lambda m: values[m[1]], line) for line in block.splitlines()]
    p, a, r = values["P"], values["A"], values["R"]
    ppo = [f"{p}-int-coef-0", f"{p}-int-coef-0-ent-coef-0.01", f"{p}-interest-noise", p]
    sac = [f"{a}-int-coef-0", f"{a}-int-coef-0-no-autotune-alpha-0.2", f"{a}-interest-noise-int-coef-0.1"]
    assert [shlex.split(line)[1:] for line in lines if line.strip()] == [
        [f"{r}/where.py", f"{r}/ppo-series.jsonl.gz", "50000", "50000", *ppo],
        [f"{r}/where.py", f"{r}/sac-series.jsonl.gz", "6000", "10000", *sac, f"{a}-int-coef-0.1"],
    ]


def test_the_continuous_studys_commands_parse_and_name_its_arms():
    """Amendment 1's commands, their variables filled in (the algorithm files of this checkout, which bear the plan
    commit's names and flags; the worktree at the last amendment's commit): every sweep and analysis parses with its
    tool's flags, each arm's own flags are fields of its file's Args, and the baseline, frontier and judged arms are
    the sweep's labels of F1, F2, F3 and I1."""

    from common import sweep

    section, block = amendment(ROOT / "docs/results/continuous-interest/PLAN.md", "## Amendment 1")
    assert "S=../study-cont/algos" in block
    assert re.findall(r"git worktree add \.\./study-cont (\w+)", section)[-1] == "45840ae"  # Amendment 2's files
    fixed = {"S": f"{ROOT}/algos"} | dict.fromkeys(
        ("TP", "TS"), "--train-threshold 1 --eval-threshold 1 --changed-threshold 1"
    )
    values = dict(fixed)
    sweeps, analyses, thresholds = [], [], []
    for line in block.splitlines():
        line = line.split("#")[0].strip()
        if re.fullmatch(r"[A-Z]+=[^$(]*", line):
            name, value = line.split("=", 1)
            if name not in fixed:
                values[name] = value.strip('"')
            continue
        line = re.sub(r"\$(\w+)", lambda m: values.get(m[1], m[0]), line)
        if match := re.fullmatch(r"T[PS]=\$\(python (\S+) (\S+) (\S+)\) \|\| exit 1", line):
            thresholds.append(match.groups())
        elif line.startswith("python -m common.sweep"):
            assert line.endswith(" || exit 1")  # the series and the analyses wait for a sweep that finished
            sweeps.append(sweep.parse_args(shlex.split(line.removesuffix(" || exit 1"))[3:]))
        elif line.startswith("python -m common.analyze"):
            analyses.append(analyze.parse_args(shlex.split(line)[3:]))
    assert len(sweeps) == len(analyses) == len(thresholds) == 2
    arms = {
        "ppo": ("--int-coef 0", "--int-coef 0 --ent-coef 0.01", "--interest noise", ""),
        "sac": (
            "--int-coef 0",
            "--int-coef 0 --no-autotune --alpha 0.2",
            "--interest noise --int-coef 0.1",
            "--int-coef 0.1",
        ),
    }
    for (algo, own), planned, analysed, (script, series_file, f1_label) in zip(
        arms.items(), sweeps, analyses, thresholds
    ):
        file = {"ppo": "ppo_continuous_poi_ensemble", "sac": "sac_forward_model"}[algo]
        assert planned.algos == [f"{ROOT}/algos/{file}.py {flags}".strip() for flags in own] and planned.seeds == list(
            range(801, 811)
        )
        fields = {f.name for f in dataclasses.fields(load_script(file, ROOT / f"algos/{file}.py").Args)}
        for flags in own:
            for flag in re.findall(r"--([a-z-]+)", flags):
                assert flag.replace("-", "_").removeprefix("no_") in fields, flag
        f1, f2, f3, i1 = (sweep.resolve_algo(spec)[0] for spec in planned.algos)
        assert (analysed.baseline, analysed.frontier, analysed.judge) == (f1, [f1, f2, f3], [i1])
        assert [Path(f) for f in (script, series_file)] == [Path(values["R"]) / "threshold.py", *analysed.folders]
        assert f1_label == f1 and analysed.folders == [Path(values["R"]) / f"{algo}-series.jsonl.gz"]
        assert Path(analysed.out) == Path(values["R"]) / algo
        assert (analysed.span, analysed.comparisons, analysed.frontier_loss) == (10, 2, "changed")
        assert (analysed.robust_factors, analysed.robust_spans) == ([0.75, 1.0, 1.33], [5, 10, 20])
        assert (analysed.task_window, analysed.robust_window) == {"ppo": (50_000, 50_000), "sac": (7_000, 10_000)}[algo]


def test_the_continuous_studys_third_amendment_reads_i1_against_f3_with_amendment_1s_settings():
    """Amendment 3's commands: the task bar on each half's first analysis with F1's label, and a third analysis of
    each series with F3 as the baseline, F3 and I1 alone, at Amendment 1's thresholds, span, windows, readings and
    resamples."""
    _, block = amendment(ROOT / "docs/results/continuous-interest/PLAN.md", "## Amendment 3")
    values = {"R": "docs/results/continuous-interest", "P": "ppo_continuous_poi_ensemble", "A": "sac_forward_model"}
    values |= dict.fromkeys(("TP", "TS"), "--train-threshold 1 --eval-threshold 1 --changed-threshold 1")
    lines = [re.sub(r"\$(\w+)", lambda m: values[m[1]], line) for line in block.splitlines()]
    bars = [line.split(";")[0].split()[1:] for line in lines if line.startswith(f"python {values['R']}/taskbar.py")]
    assert bars == [
        [f"{values['R']}/taskbar.py", f"{values['R']}/{algo}/results.json", f"{file}-int-coef-0"]
        for algo, file in (("ppo", values["P"]), ("sac", values["A"]))
    ]
    analyses = [
        analyze.parse_args(shlex.split(line)[3:]) for line in lines if line.startswith("python -m common.analyze")
    ]
    f3 = {"ppo": f"{values['P']}-interest-noise", "sac": f"{values['A']}-interest-noise-int-coef-0.1"}
    i1 = {"ppo": values["P"], "sac": f"{values['A']}-int-coef-0.1"}
    windows = {"ppo": (50_000, 50_000), "sac": (7_000, 10_000)}
    assert len(analyses) == 2
    for algo, args in zip(("ppo", "sac"), analyses):
        assert (args.baseline, args.methods, args.frontier) == (f3[algo], [f3[algo], i1[algo]], None)
        assert args.folders == [Path(values["R"]) / f"{algo}-series.jsonl.gz"]
        assert Path(args.out) == Path(values["R"]) / f"{algo}-against-noise"
        assert (args.span, args.reps, (args.task_window, args.robust_window)) == (10, 5000, windows[algo])
        assert (args.robust_factors, args.robust_spans) == ([0.75, 1.0, 1.33], [5, 10, 20])
        assert (args.train_threshold, args.eval_threshold, args.changed_threshold) == (1.0, 1.0, 1.0)  # $TP / $TS


def test_the_mujoco_comparison_scores_runs_as_rlops_and_applies_the_bound_by_hand(tmp_path):
    compare = load_script("compare", ROOT / "docs/results/ppo-continuous-mujoco/compare.py")
    bins = {"bin": 2000, "count": [1] * 60, "return": [float(i) for i in range(60)], "length": [1] * 60}

    def record(env, seed, last_100, method="m"):
        phases = [{"start": 0, "last_100_episodes": last_100, "solved_at": None}]
        run = f"{env}__{method}__{seed}__{1000 + seed}"
        return dict(run=run, env=env, method=method, seed=seed, finished=True, tags={}, episodes=bins, phases=phases)

    records = [record("Hopper-v5", s, v) for s, v in ((1, 2000.0), (2, 2400.0), (3, 2600.0))]
    records += [record("HalfCheetah-v5", s, v) for s, v in ((1, 1000.0), (2, 1010.0), (3, 990.0))]
    records += [record("Hopper-v5", 9, -5000.0, method="other")]  # another method: not read
    series.write(records, tmp_path / "s.jsonl.gz")
    reference = {"Hopper-v5": (2382.86, 271.74), "HalfCheetah-v5": (1442.64, 46.03)}
    hopper, cheetah = compare.rows(tmp_path / "s.jsonl.gz", "m", reference)
    # Hopper by hand: mean 2333.33, std (ddof 0) sqrt(186666.67 / 3) = 249.44; the standard error of the difference
    # from the table's spread alone: 271.74^2 * 3/2 (ddof 1) * (1/3 + 1/3) = 271.74^2: 2 x 271.74 > 15% (357.43)
    assert hopper["mean"] == pytest.approx(2333.333, abs=1e-3) and hopper["std"] == pytest.approx(249.444, abs=1e-3)
    assert hopper["tolerance"] == pytest.approx(543.48) and hopper["consistent"]
    assert compare.tolerance(6, 2382.86, 271.74) == pytest.approx(470.67, abs=0.01)  # 2 x 332.81 x sqrt(1/3 + 1/6)
    # HalfCheetah: 2 x 46.03 = 92.06 < 15% of 1442.64 = 216.40; 1000 is 442.64 below
    assert cheetah["tolerance"] == pytest.approx(216.396) and not cheetah["consistent"]
    assert hopper["last_100k"] == pytest.approx(34.5)  # bins 10-59 of 60 (each one episode returning its index)
    script = [ROOT / "docs/results/ppo-continuous-mujoco/compare.py", tmp_path / "s.jsonl.gz", "m"]
    result = forked.run([*script, "Hopper-v5=2382.86,271.74", "HalfCheetah-v5=1442.64,46.03"], ROOT)
    assert result.returncode == 0, result.stderr
    assert "| Hopper-v5 | 3 | 2333.33 ± 249.44 | 2382.86 ± 271.74 | -49.53 | 543.48 | yes | 34.50 |" in result.stdout
    assert "| HalfCheetah-v5 | 3 | 1000.00 ± 8.16 | 1442.64 ± 46.03 | -442.64 | 216.40 | no | 34.50 |" in (
        result.stdout
    )
    bad = forked.run([*script, "Hopper-v5"], ROOT)
    assert bad.returncode == 1 and bad.stderr.strip() == "error: not ENV=MEAN,STD: 'Hopper-v5'"
    (tmp_path / "text.jsonl.gz").write_text("not gzip")
    for path, message in ((tmp_path / "nope.jsonl.gz", "no series file at"), (tmp_path / "text.jsonl.gz", "is not a")):
        bad = forked.run([script[0], path, "m", "Hopper-v5=1,1"], ROOT)
        assert bad.returncode == 1 and bad.stderr.startswith("error: ") and message in bad.stderr
    records[0]["phases"] = [{"start": 0, "last_100_episodes": None, "solved_at": None}]  # a run with no episode
    series.write(records, tmp_path / "none.jsonl.gz")
    bad = forked.run([script[0], tmp_path / "none.jsonl.gz", "m", "Hopper-v5=1,1"], ROOT)
    assert bad.returncode == 1 and bad.stderr == "error: Hopper-v5__m__1__1001 logged no episode\n"


def test_the_mujoco_curves_average_each_20k_steps_episodes_as_worked_by_hand(tmp_path):
    curves = load_script("curves", ROOT / "docs/results/ppo-continuous-mujoco/curves.py")
    count = [1] * 10 + [0] * 10 + [2] * 5  # 50k steps of 2,000-step bins: the middle 20k without an episode
    bins = {"bin": 2000, "count": count, "return": [float(i) * c for i, c in enumerate(count)], "length": count}
    steps, means = curves.curve(bins)
    assert steps.tolist() == [20_000, 40_000, 60_000]  # the last window holds the run's last 10k steps
    assert means[0] == 4.5 and np.isnan(means[1]) and means[2] == 22.0  # (20 + ... + 24) x 2 / 10
    with pytest.raises(ValueError, match="not a whole number of the series' 2000-step bins"):
        curves.curve(bins, width=5000)
    phases = [{"start": 0, "last_100_episodes": 10.0, "solved_at": None}]
    records = [
        dict(
            run=f"r{seed}", env="Hopper-v5", method="m", seed=seed, finished=True, tags={}, episodes=bins, phases=phases
        )
        for seed in (1, 2)
    ]
    series.write(records, tmp_path / "s.jsonl.gz")
    script = [ROOT / "docs/results/ppo-continuous-mujoco/curves.py", tmp_path / "s.jsonl.gz", "m", "Hopper-v5=1,1"]
    made = forked.run([*script, "--out", tmp_path / "c.png"], ROOT)
    assert made.returncode == 0 and (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG", made.stderr
    for flags, message in ((["--out", tmp_path / "c.svg"], "--out must name a .png"), ([], "--out")):
        bad = forked.run([*script, *flags], ROOT)
        assert bad.returncode in (1, 2) and bad.stderr.count("\n") == 1 and message in bad.stderr, bad.stderr


def test_the_ppo_mujoco_page_s_tables_re_make_from_its_committed_series():
    """compare.md and compare-v4.md are compare.py's output on the committed series (the plan's commands), and the
    page quotes their rows."""
    folder = ROOT / "docs/results/ppo-continuous-mujoco"
    page = (folder / "README.md").read_text()
    for name, table, reference in (
        ("series.jsonl.gz", "compare.md", ["Hopper-v5=2382.86,271.74", "HalfCheetah-v5=1442.64,46.03"]),
        ("series-v4.jsonl.gz", "compare-v4.md", ["HalfCheetah-v4=1442.64,46.03"]),
    ):
        made = forked.run(
            [folder / "compare.py", folder / name, "ppo_continuous_poi_ensemble-int-coef-0", *reference], ROOT
        )
        assert made.returncode == 0 and made.stdout == (folder / table).read_text(), made.stderr
        assert all(row in page for row in made.stdout.splitlines()[2:])
    # the v4 runs logged what the v5 runs did: their records differ in the run's name and env alone
    v5, v4 = (
        {rec["seed"]: rec for rec in series.read(folder / name) if "HalfCheetah" in rec["env"]}
        for name in ("series.jsonl.gz", "series-v4.jsonl.gz")
    )
    assert sorted(v4) == sorted(v5) == [701, 702, 703]
    for seed in v4:
        assert {k: v for k, v in v4[seed].items() if k not in ("run", "env")} == {
            k: v for k, v in v5[seed].items() if k not in ("run", "env")
        }


def test_the_mujoco_plans_compare_the_runs_their_sweeps_label(tmp_path):

    from common import sweep

    for study, env_args in (
        ("ppo-continuous-mujoco", ["Hopper-v5=2382.86,271.74", "HalfCheetah-v5=1442.64,46.03"]),
        ("sac-mujoco", ["Hopper-v5=2310.46,342.82"]),
    ):
        section, block = amendment(ROOT / f"docs/results/{study}/PLAN.md", "## Amendment 1")
        assert "git worktree add ../study-mujoco fc51022" in section
        block = block.replace("$R", f"docs/results/{study}")
        lines = [line for line in block.splitlines() if line.startswith("python")]
        assert lines[0].endswith(" || exit 1")  # the series and the comparison wait for a sweep that finished
        commands = [shlex.split(line.removesuffix(" || exit 1")) for line in lines]
        planned = sweep.parse_args(commands[0][3:])
        label = sweep.resolve_algo(planned.algos[0].replace("../study-mujoco/", f"{ROOT}/"))[0]
        assert commands[1][3:] == [
            "../sweeps/" + Path(planned.out).name,
            "--out",
            f"docs/results/{study}/series.jsonl.gz",
        ]
        compare = commands[2]
        assert compare[1:4] == [
            "docs/results/ppo-continuous-mujoco/compare.py",
            f"docs/results/{study}/series.jsonl.gz",
            label,
        ]
        assert compare[4:-2] == env_args and [e.split("=")[0] for e in env_args] == planned.envs


def test_the_series_keeps_each_kept_tag_and_rounds_the_rounded_ones():
    """Every tag of SERIES_TAGS a run logs comes back from the series at its steps: the losses exactly (as float32),
    the entropy, the rollouts' changed share, the skills' accuracy, weight, return and probabilities (every
    `skills/prob_<k>`) and SAC's shares of an earlier world to 4 significant digits; a tag it does not log stays
    absent, one not kept is left out."""
    from common.series import SERIES_TAGS, decode, encode

    logged = {tag: [(2048, 0.123456789), (4096, 1 / 3)] for tag in SERIES_TAGS if tag != "charts/phase"}
    logged |= {f"skills/prob_{k}": [(2048, 0.123456789), (4096, 1 / 3)] for k in range(3)}  # kept by prefix
    back = decode(encode({**logged, "skills/frequency_0": [(2048, 0.5)], "poi/mean": [(2048, 0.5)]}))
    assert set(back) == set(logged)
    for tag, points in logged.items():
        rounded = tag.startswith(
            ("losses/entropy", "external_model/rollout_changed_share", "diayn/", "skills/", "poi/old_world_")
        )
        want = [(s, float(f"{v:.4g}")) if rounded else (s, float(np.float32(v))) for s, v in points]
        assert [s for s, _ in back[tag]] == [s for s, _ in want]
        assert np.allclose([v for _, v in back[tag]], [v for _, v in want], rtol=1e-6, atol=0)
    assert {"external_model/rollout_changed_share", "diayn/disc_accuracy_fresh", "diayn/weight"} <= set(SERIES_TAGS)
    assert {"diayn/skill_env_return", "diayn/skill_env_episodes"} <= set(SERIES_TAGS)  # the DIAYN probe's task
    assert "diayn/reward_mean" in SERIES_TAGS  # the termination probe's diagnosis
    assert "diayn/skill_share" in SERIES_TAGS  # the then-task probe's
    assert {"poi/old_world_rows", "poi/old_world_interest"} <= set(SERIES_TAGS)  # the continuous study's SAC half


def test_the_series_keeps_the_tags_a_study_names_to_four_digits(tmp_path, capsys):
    """`--tags`: a study's own tags kept beside SERIES_TAGS, to 4 significant digits, at every logged step; a named
    tag a run never logged stays absent; a series made again from that series keeps them, named or not (run by
    the tool). With no finished run the tool writes nothing."""
    from common.series import main, read

    run = tmp_path / "runs" / "ColorDoorKey-6x6__ppo_poi_grad__1__1700000000"
    run.mkdir(parents=True)
    writer = SummaryWriter(str(run))
    for step in (2048, 4096):
        writer.add_scalar("charts/phase", 0, step)
        writer.add_scalar("poi/mean", 0.123456789 * step, step)
        writer.add_scalar("poi/max", 1.0, step)
        writer.add_scalar("charts/episodic_return", 1.0, step)
        writer.add_scalar("charts/episodic_length", 10, step)
    writer.close()
    (run / "finished.json").write_text("{}")
    first, again = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    assert main([str(tmp_path / "runs"), "--tags", "poi/mean", "poi/nothing", "--out", str(first)]) == 0
    assert "note: no run logged --tags poi/nothing (a typo?)" in capsys.readouterr().out
    assert analyze.find_runs([tmp_path / "runs", first])[1] == analyze.find_runs([first, first])[1] == []  # no repeat
    for episodes in ("charts/episodic_return", "charts/episodic_length"):  # kept in bins, not as points
        assert main([str(tmp_path / "runs"), "--tags", episodes, "--out", str(tmp_path / "e.jsonl.gz")]) == 1
    assert main([str(first), "--out", str(again)]) == 0  # a merge keeps them unnamed
    for path in (first, again):
        (rec,) = read(path)
        assert rec["scalars"]["poi/mean"] == [(2048, float(np.float32(252.8))), (4096, float(np.float32(505.7)))]
        assert "poi/max" not in rec["scalars"] and "poi/nothing" not in rec["scalars"]
    assert main([str(tmp_path / "runs"), "--out", str(first)]) == 0
    assert "poi/mean" not in read(first)[0]["scalars"]  # kept only when named
    (run / "finished.json").unlink()  # no finished run: nothing written, one line
    assert main([str(tmp_path / "runs"), "--out", str(tmp_path / "none.jsonl.gz")]) == 1
    assert not (tmp_path / "none.jsonl.gz").exists()


# the first DIAYN probe's rule, which the later probes' choose.py apply to their own ways: pinned by its hash
FIRST_PROBE_RULE = ROOT / "docs/results/diayn-ways-8x8/choose.py"
FIRST_PROBE_RULE_SHA256 = "b7080116e96fc6ef6e48978e92e3ca3bf7b1bc5e3fef30a481855cfc6e721ec8"


def bash_blocks(text: str) -> list[str]:
    """The ```bash blocks of `text`, in order, each with its continued lines (a backslash at the end) joined."""
    blocks = [block.replace("\\\n", " ") for block in re.findall(r"```bash\n(.*?)```", text, re.S)]
    assert len(blocks) == text.count("```bash"), "a ```bash line with more on it, or a block left open"
    return blocks


def amendment(plan: Path, heading: str) -> tuple[str, str]:
    """A study plan's amendment (its text from `heading` on) and the first bash block in it (`bash_blocks`)."""
    section = plan.read_text().split(heading)[1]
    return section, bash_blocks(section)[0]


def load_script(name: str, path):
    """A study's script loaded by its path as module `name` (two folders hold a choose.py)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_behaviour():
    return load_script("behaviour", ROOT / "docs/results/fair-test-8x8-entropy/behaviour.py")


class Scripted:
    """A policy that plays a list of actions, one a step, whatever it sees (its action has probability 1)."""

    def __init__(self, plan):
        self.plan, self.step = [ACTION_NAMES.index(a) for a in plan.split()], 0

    def get_action_and_value(self, obs, action):
        chosen = self.plan[self.step]
        self.step += 1  # one call a step, every action's probability at once
        return action, torch.where(action == chosen, 0.0, -torch.inf)


class SeededAgent:
    """`algos/ppo.py`'s agent with seeded weights and a policy head of std 1 (far from uniform), in float64 so that
    a batch of 7 rows and one of 7 x 12 give the same probabilities to the last bits that matter."""

    def __init__(self):
        ppo = load_script("ppo_for_behaviour", ROOT / "algos/ppo.py")
        torch.manual_seed(11)
        self.agent = ppo.Agent(980, 7)
        ppo.layer_init(self.agent.actor[-1], std=1.0)
        self.agent.double()

    @torch.no_grad()
    def get_action_and_value(self, obs, action):
        return self.agent.get_action_and_value(torch.as_tensor(obs).double(), action)[:2]


ACTION_NAMES = ["left", "right", "forward", "pickup", "drop", "toggle", "done"]


def test_the_behaviour_script_counts_a_hand_worked_episode():
    """ColorDoorKey-6x6, layout 7, blue opens the door (a reviewer's episode, worked by hand from the printed grid):
    the agent picks up red (facing it: step 3), fails to open the door with it (step 6), drops it (step 8, after
    which it faces it again), picks up blue (facing it: step 12), opens the door (step 17) and reaches the goal."""
    behaviour = load_behaviour()
    plan = "forward left pickup left forward toggle right drop left left forward pickup right right forward left toggle"
    plan += " forward forward right forward"
    stats = behaviour.play(Scripted(plan), "ColorDoorKey-6x6-v0", "blue", episodes=1, layout_seed=7, seed=0)
    assert stats["success"] == 1 and stats["mean_length"] == 21
    assert stats["first_key"] == {"red": 1, "blue": 0, "none": 0} and stats["episodes_carrying"] == {
        "red": 1,
        "blue": 1,
    }
    assert stats["episodes_with_a_drop"] == 1 and stats["failed_toggles_per_episode"] == {
        "red": 1,
        "blue": 0,
        "none": 0,
    }
    steps = {k: round(v * 21) for k, v in stats["steps_facing_a_key"].items()}
    assert steps == {"red": 2, "blue": 1} and round(stats["steps_facing_the_locked_door"] * 21) == 4
    assert {k: round(v * 21) for k, v in stats["steps_carrying"].items()} == {"red": 5, "blue": 9}
    assert stats["pickup_probability_facing_a_key"] == {"red": 0.5, "blue": 1.0}  # red: picked once of two
    assert round(stats["actions"]["pickup"] * 21) == 2 and round(stats["actions"]["toggle"] * 21) == 2
    empty_handed = behaviour.play(Scripted("drop " * 360), "ColorDoorKey-6x6-v0", "blue", 1, layout_seed=7, seed=0)
    assert empty_handed["episodes_with_a_drop"] == 0 and empty_handed["mean_length"] == 360  # no drop without a key


def minigrid_counts(policy, env_id, color, episodes, layout_seed, seed):
    """The behaviour script's counts by a plain loop over MiniGrid's env, one episode at a time, with the same draws
    (episode i's stream (seed, i), inverse CDF), read from the env's objects after each step."""
    counts, actions, pickups, steps = Counter(), Counter(), Counter(), 0
    for i in range(episodes):
        env = OneHotFlatObs(gym.make(env_id))
        env.unwrapped.set_correct_key_color(color)
        obs, _ = env.reset(seed=layout_seed + i)
        stream, u, picked, dropped, done = np.random.default_rng([seed, i]), env.unwrapped, [], False, False
        while not done:
            x = torch.as_tensor(obs)[None].repeat(7, 1)
            probs = policy.get_action_and_value(x, torch.arange(7))[1].exp().double().numpy()
            cumulative, draw = np.cumsum(probs), stream.random()
            action = min(int(np.sum(cumulative < draw * cumulative[-1])), 6)
            before = u.carrying.color if u.carrying is not None else "none"
            front = u.grid.get(*u.front_pos)
            facing_locked = front is not None and front.type == "door" and front.is_locked
            if front is not None and front.type == "key" and before == "none":
                counts[f"facing {front.color}"] += 1
                pickups[front.color] += probs[3]
            counts[f"carrying {before}"] += 1
            counts["facing the locked door"] += facing_locked
            counts[f"facing the locked door carrying {before}"] += facing_locked
            image = u.gen_obs()["image"]
            counts["altered"] += key_distance(image, COLOR_TO_IDX["red"]) != key_distance(image, COLOR_TO_IDX["blue"])
            actions[action] += 1
            obs, reward, terminated, truncated, _ = env.step(action)
            done, steps = terminated or truncated, steps + 1
            after = u.carrying.color if u.carrying is not None else "none"
            if before == "none" and after != "none":
                picked.append(after)
            dropped |= before != "none" and after == "none"
            if action == 5 and facing_locked and front.is_locked:
                counts[f"failed toggles {before}"] += 1
        counts["success"] += reward > 0
        counts["episodes with a drop"] += dropped
        counts[f"first {picked[0] if picked else 'none'}"] += 1
        for colour in set(picked):
            counts[f"episodes carrying {colour}"] += 1
    return counts, actions, pickups, steps


def test_the_behaviour_script_counts_what_a_plain_minigrid_loop_counts():
    behaviour = load_behaviour()
    n, policy = 12, SeededAgent()  # a policy of what it sees: the observations must reach it, each with its row
    stats = behaviour.play(policy, "ColorDoorKey-6x6-v0", "blue", episodes=n, layout_seed=40, seed=5)
    counts, actions, pickups, steps = minigrid_counts(policy, "ColorDoorKey-6x6-v0", "blue", n, 40, 5)
    assert stats["mean_length"] * n == steps and stats["success"] * n == counts["success"]
    assert {k: v * n for k, v in stats["first_key"].items()} == {
        k: counts[f"first {k}"] for k in ("red", "blue", "none")
    }
    carrying = {k: counts[f"episodes carrying {k}"] for k in ("red", "blue")}
    assert {k: v * n for k, v in stats["episodes_carrying"].items()} == carrying
    assert stats["episodes_with_a_drop"] * n == counts["episodes with a drop"]
    toggles = {k: v * n for k, v in stats["failed_toggles_per_episode"].items()}
    assert toggles == {k: counts[f"failed toggles {k}"] for k in ("red", "blue", "none")}
    assert stats["steps_facing_the_locked_door"] * steps == pytest.approx(counts["facing the locked door"])
    by_key = {k: v * steps for k, v in stats["steps_facing_the_locked_door_carrying"].items()}
    assert by_key == pytest.approx({k: counts[f"facing the locked door carrying {k}"] for k in ("red", "blue", "none")})
    assert stats["steps_the_change_alters"] * steps == pytest.approx(counts["altered"]) and counts["altered"]
    for k in ("red", "blue"):
        assert stats["steps_carrying"][k] * steps == pytest.approx(counts[f"carrying {k}"])
        assert stats["steps_facing_a_key"][k] * steps == pytest.approx(counts[f"facing {k}"])
        assert stats["pickup_probability_facing_a_key"][k] == pytest.approx(pickups[k] / counts[f"facing {k}"])
    assert [stats["actions"][a] * steps for a in behaviour.ACTIONS] == pytest.approx([actions[k] for k in range(7)])
    # what is counted happens: both keys carried, drops, failed toggles with and without a key
    assert all(carrying.values()) and counts["episodes with a drop"] and toggles["none"] and toggles["red"]


def test_the_behaviour_script_reads_a_checkpoint_left_by_a_stopped_run(tmp_path):
    """ppo_poi_progress's checkpoint holds objects of its own classes (its lagged model) beside the agent."""
    run = forked.start(
        [
            ROOT / "algos/ppo_poi_progress.py",
            "--env",
            "ColorDoorKey-6x6",
            "--seed",
            "3",
            "--runs-dir",
            tmp_path / "runs",
            "--num-envs",
            "4",
            "--num-steps",
            "64",
            "--exp-name",
            "probe",
        ],  # fmt: skip
        tmp_path,
    )
    assert run.stdout.readline().startswith("run folder: ") and run.stdout.readline().startswith("step")
    run.send_signal(signal.SIGINT)
    run.communicate(timeout=120)
    (checkpoint,) = (tmp_path / "runs").glob("*/checkpoint.pt")
    behaviour = load_behaviour()
    agent, args, values = behaviour.load_agent(checkpoint, ROOT)
    assert (args.exp_name, args.seed, values["phase"]) == ("probe", 3, 0) and values["global_step"] % 256 == 0
    stubs = behaviour._pickle_module(None)  # the file's own classes are not importable here
    saved = torch.load(checkpoint, map_location="cpu", weights_only=False, pickle_module=stubs)["stateful"]["agent"]
    assert all(torch.equal(agent.state_dict()[name], tensor) for name, tensor in saved.items())
    script = ROOT / "docs/results/fair-test-8x8-entropy/behaviour.py"
    result = forked.run([script, checkpoint, "--episodes", "3", "--out", tmp_path / "rows.jsonl"], tmp_path, fresh=True)
    assert result.returncode == 0, result.stderr
    (row,) = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    assert (row["label"], row["seed"], row["color"], row["episodes"]) == ("probe", 3, "red", 3)
    for flags, message in (
        ([tmp_path / "nope.pt"], "no such checkpoint"),
        ([checkpoint, "--random"], "give checkpoints or --random, not both"),
        (["--random", "--env", "MiniGrid-Empty-5x5-v0"], "must be a ColorDoorKey env with a red and a blue key"),
        (["--random", "--color", "green"], "--color must be one of red, blue, got green"),
    ):
        bad = forked.run([script, *flags], tmp_path)
        assert bad.returncode == 2 and message in bad.stderr.strip().splitlines()[-1], bad.stderr


def test_the_milestone_copies_are_the_last_checkpoint_at_or_before_each_milestone(tmp_path):
    copier = load_script("copy_milestones", ROOT / "docs/results/fair-test-8x8-entropy/copy_milestones.py")
    run = tmp_path / "runs" / "ColorDoorKey-8x8__ppo__5__1796398036"
    run.mkdir(parents=True)
    out, seen, last = tmp_path / "copies", {}, {}

    def write(step):  # a checkpoint as save_checkpoint writes it: a new file renamed over the last one
        torch.save(dict(values=dict(global_step=step), weights=torch.full((2,), float(step))), run / "new.pt")
        (run / "new.pt").replace(run / "checkpoint.pt")
        return copier.poll(tmp_path / "runs", out, (100, 300, 350), seen, last)

    assert write(50) == []  # the first one seen: nothing passed yet
    assert copier.poll(tmp_path / "runs", out, (100, 300, 350), seen, last) == []  # not read twice
    assert write(100) == []  # at a milestone, not past it
    assert len(write(250)) == 1  # past 100: the copy of 100's
    assert len(write(400)) == 2  # past 300 and 350 at once: both the copy of 250's
    assert len(write(500)) == 0
    copies = out / "ColorDoorKey-8x8__ppo__5"
    assert sorted(f.name for f in copies.glob("[0-9]*.pt")) == ["100.pt", "300.pt", "350.pt"]
    steps = {f.stem: copier.global_step(f) for f in copies.glob("[0-9]*.pt")}
    assert steps == {"100": 100, "300": 250, "350": 250}
    assert torch.load(copies / "300.pt")["weights"].tolist() == [250.0, 250.0]  # the whole file, not a step alone

    late = tmp_path / "runs" / "ColorDoorKey-8x8__ppo__6__1796398037"  # a run first seen after a milestone
    late.mkdir()
    torch.save(dict(values=dict(global_step=320)), late / "checkpoint.pt")
    copier.poll(tmp_path / "runs", out, (100, 300, 350), seen, last)
    assert not (out / "ColorDoorKey-8x8__ppo__6" / "300.pt").exists()  # its checkpoint before 300 was never seen


def test_the_behaviour_tables_split_the_runs_by_the_task_after_the_change(tmp_path):
    def row(label, seed, success, checkpoint, color="blue"):
        shares = dict(red=0.5, blue=0.5)
        return dict(
            checkpoint=checkpoint, label=label, seed=seed, global_step=2_250_000, color=color, env="E",
            layout_seed=1, episodes=10, success=success, first_key=dict(red=0.5, blue=0.5, none=0.0),
            episodes_carrying=shares, failed_toggles_per_episode=dict(red=1.0, blue=0.0, none=0.0),
            steps_facing_the_locked_door=0.1, steps_the_change_alters=0.8,
            steps_facing_the_locked_door_carrying=dict(red=0.05, blue=0.05, none=0.0), steps_carrying=shares,
            steps_facing_a_key=shares, pickup_probability_facing_a_key=dict(red=None, blue=0.25), actions={},
        )  # fmt: skip

    rows = [row("a", 1, 0.0, "a1/2300000.pt"), row("a", 1, 0.3, "a1/2300000.pt"), row("a", 2, 0.9, "a2/2300000.pt")]
    rows += [row("a", 3, 0.5, "a3/2300000.pt"), row("a", 3, 0.2, "a3/1900000.pt", color="red")]
    (tmp_path / "behaviour.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "random.jsonl").write_text(json.dumps(row("random", 0, 0.01, "-")) + "\n")
    runs = [dict(method="a", seed=s, phases=[{}, dict(return_window=r)]) for s, r in ((1, 0.1), (2, 0.95), (3, 0.85))]
    (tmp_path / "results.json").write_text(json.dumps(dict(runs=runs)))
    script = ROOT / "docs/results/fair-test-8x8-entropy/behaviour_table.py"
    result = forked.run([script, tmp_path], tmp_path)
    assert result.returncode == 0, result.stderr
    medians = [line for line in result.stdout.splitlines() if line.startswith("| median")]
    # at 2.3M: seeds 2 and 3 do the task (0.9 and 0.5: median 0.70), seed 1 not (its last row: 0.30); at 1.9M the one
    # row is before the change (red), in no median
    assert medians == [
        "| median, 2 runs after the change, doing the task | - | blue | - | 0.70 | 0.50 / 0.50 / 0.00 | 0.50 | 1.00 "
        "| 0.05 / 0.05 / 0.00 | 0.80 | - / 0.25 | 0.50 / 0.50 |",
        "| median, 1 run after the change, not doing it | - | blue | - | 0.30 | 0.50 / 0.50 / 0.00 | 0.50 | 1.00 "
        "| 0.05 / 0.05 / 0.00 | 0.80 | - / 0.25 | 0.50 / 0.50 |",
    ]
    (tmp_path / "random.jsonl").write_text(json.dumps(row("random", 0, 0.01, "-", color="red")) + "\n")
    mismatched = forked.run([script, tmp_path], tmp_path)
    assert mismatched.returncode == 1 and "the random policy's row is not on" in mismatched.stderr


def test_the_task_loss_diagnosis_reads_windows_around_the_change_from_event_files_and_series(tmp_path):
    """Hand-made runs (one change at 200k; an episode every 1,000 steps; the last logged step 399,999) with each
    outcome; their window means are worked out by hand, their task windows agree with common.analyze's, and the rows
    made from the committed series of the same runs agree on the return and the entropy."""

    def after_change(seed, step):  # the return of an episode after the change
        if seed in (2, 4) or step < 300_000:
            return 0.0
        if seed == 1:  # 80 of the last 100k steps' 100 episodes at 1, 20 at 0: a mean of exactly 0.8
            return 0.0 if (step // 1000) % 5 == 0 else 1.0
        return 0.875  # seed 3 learns the task after the change, seed 5 keeps it

    sweep = tmp_path / "sweep" / "runs"
    for seed in (1, 2, 3, 4, 5):
        run = sweep / f"E-v0__m__{seed}__1700000000"
        with SummaryWriter(run) as writer:
            for step in range(0, 400_000, 1000):
                changed = step >= 200_000
                before = 0.875 if seed in (1, 2, 5) else 0.25
                writer.add_scalar("charts/phase", int(changed), step)
                writer.add_scalar("charts/episodic_return", after_change(seed, step) if changed else before, step)
                writer.add_scalar("charts/episodic_length", 20, step)
                writer.add_scalar("losses/entropy", 0.25 * seed if changed else 0.125 * seed, step)
                writer.add_scalar("losses/approx_kl", 0.015625 if changed else 0.03125, step)
                writer.add_scalar("losses/clipfrac", 0.125, step)
                writer.add_scalar("losses/value_loss", 0.5 if changed else 0.25, step)
            for tag, value in (("charts/phase", 1), ("losses/entropy", 0.25 * seed)):  # the run's last logged step:
                writer.add_scalar(tag, value, 399_999)  # its last window ends at 400,000 (the series keeps the entropy)
        (run / "finished.json").write_text("{}")
    script = ROOT / "docs/results/ppo-task-loss-8x8/update_windows.py"
    made = forked.run([script, "rows", sweep, "--out", tmp_path / "rows.jsonl"], tmp_path)
    assert made.returncode == 0, made.stderr
    rows = {r["seed"]: r for r in map(json.loads, (tmp_path / "rows.jsonl").read_text().splitlines())}
    assert {seed: r["outcome"] for seed, r in rows.items()} == {1: "kept", 2: "lost", 3: "late", 4: "never", 5: "kept"}
    kept = rows[1]["windows"]
    assert rows[1]["change"] == 200_000 and rows[1]["last"] == 399_999
    assert kept["before"] == {
        "return": 0.875,
        "entropy": 0.125,
        "approx_kl": 0.03125,
        "clipfrac": 0.125,
        "value_loss": 0.25,
    }
    # after the change the return is 0 until 300k: 0-100k after it is [200k, 300k), 100k-300k is [300k, 500k), cut at
    # the run's end; the last 100k steps, [300k, 400k), hold the 100 episodes of 50 whole bins: 80 of 1 and 20 of 0
    assert kept["0-100k"]["return"] == 0.0 and kept["100k-300k"]["return"] == 0.8 and kept["end"]["return"] == 0.8
    assert kept["100k-300k"]["entropy"] == 0.25 and kept["0-100k"]["approx_kl"] == 0.015625
    assert math.isnan(kept["300k-600k"]["return"]) and math.isnan(kept["300k-600k"]["entropy"])  # past the run's end
    assert rows[1]["solved_at"][0] is not None and rows[4]["solved_at"] == [None, None]
    assert sorted(rows) == [1, 2, 3, 4, 5]
    for seed, row in rows.items():  # the outcome is the fair test's: common.analyze's task window of each phase
        scalars = analyze.read_scalars(sweep / f"E-v0__m__{seed}__1700000000")
        phases = analyze.phase_metrics(
            scalars, 10, dict(train=1.0, eval=1.0, changed=1.0), 0.8, episodes=series.episode_bins(scalars)
        )
        assert [p["return_window"] for p in phases] == [
            row["windows"]["before"]["return"],
            row["windows"]["end"]["return"],
        ]

    assert series.main([str(tmp_path / "sweep"), "--out", str(tmp_path / "s.jsonl.gz")]) == 0
    from_series = forked.run(
        [script, "rows", tmp_path / "s.jsonl.gz", "--out", tmp_path / "series_rows.jsonl"], tmp_path
    )
    assert from_series.returncode == 0, from_series.stderr
    series_rows = list(map(json.loads, (tmp_path / "series_rows.jsonl").read_text().splitlines()))
    assert sorted(r["seed"] for r in series_rows) == [1, 2, 3, 4, 5]
    for r in series_rows:
        assert r["outcome"] == rows[r["seed"]]["outcome"] and r["solved_at"] == rows[r["seed"]]["solved_at"]
        for window, means in r["windows"].items():
            for key in ("return", "entropy"):
                a, b = means[key], rows[r["seed"]]["windows"][window][key]
                assert (math.isnan(a) and math.isnan(b)) or a == pytest.approx(b, abs=1e-4), (window, key)
            assert math.isnan(means["approx_kl"])  # the series keeps no update statistics

    table = forked.run([script, "table", tmp_path / "rows.jsonl", "--pool", "m"], tmp_path)
    assert table.returncode == 0, table.stderr
    lines = table.stdout.splitlines()
    # kept: seeds 1 and 5, medians of two runs (after the change 0.8 and 0.875; entropy 0.25 and 1.25)
    assert "| kept | 2 | 0.88 | 0.00 | 0.84 | - | - | 0.84 |" in lines
    assert "| kept | 2 | 0.38 | 0.75 | 0.75 | - | - | 0.75 |" in lines
    assert "| late | 1 | 0.25 | 0.00 | 0.88 | - | - | 0.88 |" in lines
    assert "| never | 1 | 0.25 | 0.00 | 0.00 | - | - | 0.00 |" in lines
    each = [line for line in lines if line.startswith("| E-v0 | m |")]
    assert [line.split(" | ")[2] for line in each] == ["1", "2", "5"]  # did the task before the change; by entropy
    assert each[1].endswith("| 0.88 / 0.00 | 0.00 | lost |")
    missing = forked.run([script, "table", tmp_path / "nope.jsonl"], tmp_path)
    assert missing.returncode == 1 and "no rows file at" in missing.stderr.strip().splitlines()[-1]
    # the page's tests, on the two runs that did the task before the change (entropy 0.125 kept, 0.25 lost)
    tests = forked.run([script, "stats", tmp_path / "rows.jsonl", "--pool", "m"], tmp_path)
    assert tests.returncode == 0, tests.stderr
    assert tests.stdout.splitlines()[:4] == [
        "3 runs did the task before the change; 1 lost it after",
        "entropy before the change, lost: 0.25-0.25, median 0.25",
        "entropy before the change, kept: 0.12-0.62, median 0.38",
        "split at the median entropy (0.25): 1 of 2 at or below it lost the task, 0 of 1 above it",
    ]
    unknown = forked.run([script, "table", tmp_path / "rows.jsonl", "--pool", "other"], tmp_path)
    assert unknown.returncode == 1 and "no runs of ['other']" in unknown.stderr


@pytest.mark.slow
def test_a_continuation_goes_on_as_the_run_did_unless_reseeded_or_changed(tmp_path):
    """continue_run.py on the checkpoint of a stopped ppo.py run: unchanged, it logs what the uninterrupted run logged
    after that step; re-seeded or with a flag changed, it does not; bad input is a one-line error before a folder."""
    flags = ["--env", "ColorDoorKey-6x6", "--seed", "3", "--num-envs", "4", "--num-steps", "64"]
    flags += ["--total-timesteps", "3072", "--change-steps", "1536", "--checkpoint-every", "1", "--exp-name", "p"]
    flags += ["--eval-steps", "1024", "--eval-changed-min", "32"]  # small held-out sets: a quick start
    whole = forked.run([ROOT / "algos/ppo.py", *flags, "--runs-dir", tmp_path / "whole"], tmp_path)
    assert whole.returncode == 0, whole.stderr
    stopped = forked.start([ROOT / "algos/ppo.py", *flags, "--runs-dir", tmp_path / "stopped"], tmp_path)
    assert stopped.stdout.readline().startswith("run folder: ") and stopped.stdout.readline().startswith("step")
    stopped.send_signal(signal.SIGINT)
    stopped.communicate(timeout=120)
    (checkpoint,) = (tmp_path / "stopped").glob("*/checkpoint.pt")
    copy = tmp_path / "copy.pt"
    copy.write_bytes(checkpoint.read_bytes())
    script = ROOT / "docs/results/ppo-task-loss-8x8/continue_run.py"
    continue_run = load_script("continue_run", script)
    step = int(continue_run.read_header(copy)["values"]["global_step"])  # without ppo.py's classes
    assert 0 < step < 3072

    def scalars_after(folder):
        (run,) = folder.glob("ColorDoorKey-6x6__*")
        tags = analyze.read_scalars(run)
        return run, {
            tag: [(s, v) for s, v in points if s > step] for tag, points in tags.items() if tag != "charts/SPS"
        }

    _, reference = scalars_after(tmp_path / "whole")
    out = lambda name: ["--code", ROOT, "--out", tmp_path / name]  # noqa: E731
    same = forked.run([script, copy, *out("same"), "--label", "same"], tmp_path)
    assert same.returncode == 0, same.stderr
    run, continued = scalars_after(tmp_path / "same")
    assert continued == reference and run.name.startswith("ColorDoorKey-6x6__p-same__3__")
    record = json.loads((run / "continuation.json").read_text())
    assert (record["global_step"], record["sets"], record["reseed"], record["algorithm"]) == (step, {}, None, "ppo.py")
    again = forked.run([script, copy, *out("same"), "--label", "same"], tmp_path)
    assert again.returncode == 0 and "finished already" in again.stdout

    reseeded = forked.run([script, copy, *out("reseeded"), "--label", "r1", "--reseed", "1"], tmp_path)
    assert reseeded.returncode == 0, reseeded.stderr
    _, other = scalars_after(tmp_path / "reseeded")
    assert other.keys() == reference.keys() and other["losses/value_loss"] != reference["losses/value_loss"]
    assert [s for s, _ in other["losses/value_loss"]] == [s for s, _ in reference["losses/value_loss"]]

    changes = ["--label", "e", "--reseed", "2", "--set", "ent_coef=0.5", "--set", "total_timesteps=2560"]
    result = forked.run([script, copy, *out("changed"), *changes], tmp_path)
    assert result.returncode == 0, result.stderr
    _, shorter = scalars_after(tmp_path / "changed")
    assert max(s for s, _ in shorter["losses/entropy"]) == 2560  # the new budget
    assert shorter["losses/policy_loss"] != reference["losses/policy_loss"][: len(shorter["losses/policy_loss"])]
    # the same continuation stopped after its first iteration (its own checkpoint holds the changed flags) and resumed
    # by the same command ends as the one that was not stopped
    halted = forked.start([script, copy, *out("halted"), *changes], tmp_path)
    assert halted.stdout.readline().startswith("continuation: ")
    assert halted.stdout.readline().startswith("run folder: ") and halted.stdout.readline().startswith("step")
    halted.send_signal(signal.SIGINT)
    halted.communicate(timeout=120)
    (own,) = (tmp_path / "halted").glob("*/checkpoint.pt")
    saved = continue_run.read_header(own)
    assert saved["args"].ent_coef == 0.5 and step < int(saved["values"]["global_step"]) < 2560
    resumed = forked.run([script, copy, *out("halted"), *changes], tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert scalars_after(tmp_path / "halted")[1] == shorter
    other_changes = [*changes[:-3], "ent_coef=0.25", *changes[-2:]]
    refused = forked.run([script, copy, *out("halted"), *other_changes], tmp_path)
    assert refused.returncode == 1 and "was made with other changes" in refused.stderr

    # the edit itself: the arguments replaced, every random stream re-seeded from K, the rest as it was
    @dataclasses.dataclass
    class Flags:
        ent_coef: float = 0.01
        seed: int = 3

    net = {"w": torch.ones(2)}
    saved = dict(args=Flags(), rng={}, stateful=dict(agent=net, noise=torch.Generator().manual_seed(5).get_state()))
    edited = continue_run.edit(saved, {"ent_coef": "0.125"}, 7)
    assert edited["args"] == Flags(ent_coef=0.125) and edited["stateful"]["agent"] is net
    assert torch.equal(edited["stateful"]["noise"], torch.Generator().manual_seed(7000).get_state())
    random.seed(7), np.random.seed(7), torch.manual_seed(7)
    assert edited["rng"]["python"] == random.getstate() and torch.equal(edited["rng"]["torch"], torch.get_rng_state())
    assert all(np.array_equal(a, b) for a, b in zip(edited["rng"]["numpy"], np.random.get_state()))

    for bad, message in (
        ([tmp_path / "nope.pt", *out("bad"), "--label", "x"], "no checkpoint at"),
        ([copy, *out("bad"), "--label", "x", "--set", "bogus=1"], "--set bogus: the run has no such flag"),
        ([copy, *out("bad"), "--label", "x", "--set", "ent_coef=much"], "--set ent_coef: 'much' is not a float"),
        ([copy, *out("bad"), "--label", "x", "--set", "ent_coef"], "--set takes name=value"),
        ([copy, *out("bad"), "--label", "x", "--set", "seed=4"], "--set seed: cannot be set"),
        ([copy, *out("bad"), "--label", "x", "--set", f"total_timesteps={step}"], f"at step {step:,} already"),
    ):
        failed = forked.run([script, *bad], tmp_path)
        assert failed.returncode == 1 and message in failed.stderr.strip().splitlines()[-1], failed.stderr
    assert not (tmp_path / "bad").exists()

    # the probe's commands: every variant for a run that lost the task by 3M, the control for PPO's that kept it
    copies, records = tmp_path / "copies", []
    for method, seed, before, at3, at4, copy_step in (
        ("ppo-ent-coef-0.01", 1, 0.9, 0.1, 0.9, 1_843_200),  # lost by 3M (back by 4M: the probe's horizon is 3M)
        ("ppo-ent-coef-0.01", 2, 0.85, 0.9, 0.9, 1_843_200),  # kept
        ("ppo_poi_progress-interest-error", 6, 0.85, 0.9, 0.9, 1_843_200),  # kept, not PPO: nothing
        ("ppo-ent-coef-0.01", 3, 0.5, 0.9, 0.9, 1_843_200),  # never did the task before the change
        ("ppo-ent-coef-0.03", 4, 0.9, 0.0, 0.0, 1_843_200),  # an arm the probe does not read
        ("ppo-ent-coef-0.01", 5, 0.9, 0.0, 0.0, None),  # no copy
        ("ppo-ent-coef-0.01", 7, 0.9, 0.0, 0.0, 2_048_000),  # its copy is from after the change
    ):
        bins = np.arange(2000)  # 2,000-step bins, one episode each, up to 4M
        returns = np.where(bins * 2000 < 2_000_896, before, np.where(bins * 2000 < 3_000_000, at3, at4))
        episodes = {"bin": 2000, "count": [1] * 2000, "return": returns.tolist(), "length": [20] * 2000}
        tags = {"charts/phase": [[0, 2_000_896], [0, 1]], "losses/entropy": [[0, 3_999_744], [0.1, 0.1]]}
        records.append(dict(run=f"E__{method}__{seed}__1", env="E", method=method, seed=seed, finished=True,
                            tags=tags, episodes=episodes, phases=[]))  # fmt: skip
        if copy_step is not None:
            (copies / f"E__{method}__{seed}").mkdir(parents=True)
            torch.save(
                {"file": "ppo.py", "values": {"global_step": copy_step}}, copies / f"E__{method}__{seed}/1900000.pt"
            )
    series.write(records, tmp_path / "s.jsonl.gz")
    planner = ROOT / "docs/results/ppo-task-loss-8x8/continuations.py"
    base = [planner, tmp_path / "s.jsonl.gz", copies, "--code", ROOT, "--out", tmp_path / "probe"]
    planned = forked.run([*base, "--expect", "7"], tmp_path)
    assert planned.returncode == 0, planned.stderr
    lines = planned.stdout.splitlines()
    labels = [(line.split()[2].split("/")[-2], line.split("--label ")[1].split()[0]) for line in lines]
    lost, kept = "E__ppo-ent-coef-0.01__1", "E__ppo-ent-coef-0.01__2"
    assert labels == [(lost, "v0"), (lost, "v0-r2"), (lost, "ent-0.03"), (lost, "ent-0"), (kept, "v0")]
    assert all("--set=total_timesteps=3000000" in line for line in lines)
    assert [line.split("--reseed ")[1].split()[0] for line in lines] == ["1", "2", "1", "1", "1"]
    assert "--set=ent_coef=0.03" in lines[2] and "--set=ent_coef=0.0" in lines[3]
    notes = planned.stderr
    assert "__1 0.900 / 0.100 / 0.900: lost by 3,000,000, gets every variant" in notes
    assert "error__6 0.850 / 0.900 / 0.900: kept by 3,000,000, gets nothing" in notes
    assert "0.01__3 0.500" in notes and "did not do the task before the change" in notes and "__5" in notes
    assert "__7" in notes and "is from step 2,048,000, after the change" in notes and "0.03__4" not in notes
    short = forked.run([*base, "--expect", "50"], tmp_path)
    assert short.returncode == 1 and "holds 7 finished runs, not 50" in short.stderr


def test_the_follow_up_verdict_applies_the_plan_s_gates_and_outcomes(tmp_path):
    """verdict.py on hand-made analyses, one per outcome of the plan (the gates counted by hand), and on a real
    analysis of the 8x8 study's committed series (the ratio its page publishes, 0.58)."""
    verdict = load_script("verdict", ROOT / "docs/results/fair-test-8x8-entropy/verdict.py")
    arms = [*verdict.NON_INTEREST, verdict.I3]

    def folder(name, counts, cis, fragile=()):
        """counts: arm -> (doing the task before, after) of 10 runs; cis: comparator -> I3's 95% CI against it."""
        out = tmp_path / name
        runs = []
        for arm, (before, after) in zip(arms, counts):
            for i in range(10):
                phases = [{"return_window": 0.9 if i < before else 0.1}, {"return_window": 0.9 if i < after else 0.1}]
                runs.append({"method": arm, "seed": 211 + i, "finished": True, "phases": phases})
        out.mkdir()
        (out / "results.json").write_text(json.dumps({"runs": runs}))
        for a, (low, high) in cis.items():
            point = (low + high) / 2
            readings = {"threshold x1, span 10": {"iqm": point, "low": low, "high": high}, "span 30": {"iqm": 0.9}}
            if a in fragile:
                readings["span 30"]["iqm"] = 1.0  # "not below 1": fragile at 1 itself
            row = {"env": "E", "phase": 1, "method": verdict.I3, "readings": readings, "corrected": [low, high]}
            (out / f"against-{a}").mkdir()
            (out / f"against-{a}" / "results.json").write_text(json.dumps({"robustness": [row]}))
        return out

    f1, f2a, f2, f6 = verdict.NON_INTEREST
    # F1 9/6: a comparator needs at least 7 (and 6) before, 4 after; I3 passes with at least 8 / 5 (each at its bound)
    counts = [(9, 6), (9, 7), (5, 9), (7, 4), (8, 5)]
    cases = {
        "win": (counts, {f1: (0.4, 0.9), f2a: (0.5, 0.95), f6: (0.3, 0.8)}, (), 1),
        "fragile": (counts, {f1: (0.4, 0.9), f2a: (0.5, 0.95), f6: (0.3, 0.8)}, (f6,), 1),
        "win over F1 alone": ([(9, 6), (6, 7), (5, 9), (9, 3), (8, 6)], {f1: (0.4, 0.9)}, (), 2),
        "I3 fails its gate": ([(9, 6), (9, 7), (5, 9), (7, 4), (7, 6)], {f1: (0.4, 0.9), f2a: (0.5, 0.9),
                                                                         f6: (0.3, 0.8)}, (), 3),
        "no replication": (counts, {f1: (0.8, 1.2), f2a: (0.5, 0.95), f6: (0.3, 0.8)}, (), 4),
        "breadth matches": (counts, {f1: (0.4, 0.9), f2a: (0.8, 1.3), f6: (0.3, 0.8)}, (), 5),
        "cannot tell": (counts, {f1: (0.4, 0.9), f2a: (0.5, 1.1), f6: (0.3, 0.8)}, (), 6),
        "breadth at the bounds": (counts, {f1: (0.4, 0.9), f2a: (0.75, 1.0), f6: (0.3, 0.8)}, (), 5),
        "no replication at the bound": (counts, {f1: (0.6, 1.0), f2a: (0.5, 0.95), f6: (0.3, 0.8)}, (), 4),
        "the floor of 6 binds": ([(7, 6), (5, 9), (3, 3), (3, 3), (7, 6)], {f1: (0.4, 0.9)}, (), 2),
        "I3 fails after the change, no ratios made": ([(9, 6), (9, 7), (5, 9), (7, 4), (9, 4)], {}, (), 3),
        "just below them": (counts, {f1: (0.4, 0.9), f2a: (0.74, 1.3), f6: (0.3, 0.99)}, (), 6),
    }  # fmt: skip
    for name, (case_counts, cis, fragile, number) in cases.items():
        out = folder(name.replace(" ", "-"), case_counts, cis, fragile)
        result = forked.run([ROOT / "docs/results/fair-test-8x8-entropy/verdict.py", out], tmp_path)
        assert result.returncode == 0, (name, result.stderr)
        last = result.stdout.strip().splitlines()[-1]
        assert last.startswith(f"Outcome {number}{' (fragile)' if fragile else ''}: "), (name, last)
        comparators = [line.split(" | ")[0][2:] for line in result.stdout.splitlines() if "| comparator |" in line]
        assert comparators == (list(cis) or [f1, f2a, f6]), name
    table = forked.run([ROOT / "docs/results/fair-test-8x8-entropy/verdict.py", tmp_path / "win"], tmp_path).stdout
    assert f"| {f2} | 10 of 10 | 5 / 9 | not a comparator |" in table
    assert f"| {verdict.I3} | 10 of 10 | 8 / 5 | passes its gate |" in table
    (tmp_path / "win" / f"against-{f6}" / "results.json").unlink()
    missing = forked.run([ROOT / "docs/results/fair-test-8x8-entropy/verdict.py", tmp_path / "win"], tmp_path)
    assert missing.returncode == 1 and f"against-{f6}/results.json" in missing.stderr

    # the robustness row of a real analysis (the 8x8 study's error interest against PPO at entropy 0.01)
    real = tmp_path / "real"
    assert analyze.main([
        str(ROOT / "docs/results/fair-test-8x8/series.jsonl.gz"), "--baseline", f1, "--frontier", f1,
        "--judge-against-baseline", verdict.I3, "--methods", f1, verdict.I3, "--span", "10", "--changed-threshold",
        "1", "--eval-threshold", "1", "--train-threshold", "1", "--reps", "100", "--out", str(real / f"against-{f1}"),
    ]) == 0  # fmt: skip
    reading = verdict.against(real, f1)
    assert reading["ratio"] == pytest.approx(0.5802, abs=1e-4) and reading["ci"] == reading["verdict_ci"]
    assert reading["ci"][0] < reading["ratio"] < reading["ci"][1] and not reading["fragile"]


def test_the_diayn_diagnosis_splits_the_returns_between_envs_with_and_without_skills():
    """diagnosis.py on a hand-made run of two 200k-step phases: per phase's last 100k steps, the episode length,
    the skill reward, and the return of the envs with skills and of the others (all episodes less theirs)."""
    diagnosis = load_script("diagnosis", ROOT / "docs/results/diayn-ways-8x8/diagnosis.py")
    bins = {"bin": 2000, "count": [0] * 200, "return": [0.0] * 200, "length": [0.0] * 200}
    for b in range(50, 100):  # phase 0's last 100k: 4 episodes a bin, return 0.5 each, 100 steps each
        bins["count"][b], bins["return"][b], bins["length"][b] = 4, 2.0, 400.0
    for b in range(150, 200):  # phase 1's: 2 episodes a bin of return 1 and length 50
        bins["count"][b], bins["return"][b], bins["length"][b] = 2, 2.0, 100.0
    steps = range(2048, 400_000, 2048)
    scalars = {
        "losses/entropy": [(s, 1.0) for s in steps],
        "diayn/reward_mean": [(s, 1.5 if s < 200_000 else 0.5) for s in steps],
        # one episode of the bin's in the envs with skills, of return 0.2 in phase 0 (0.5 in the rest)
        "diayn/skill_env_return": [(s, 0.2 if s < 200_000 else 1.0) for s in steps],
        "diayn/skill_env_episodes": [(s, 1) for s in steps],
        # two skills: uniform before the change, 0.9 / 0.1 after it (the offset, log 2 - H(p), then 0.368)
        "skills/prob_0": [(s, 0.5 if s < 200_000 else 0.9) for s in steps],
        "skills/prob_1": [(s, 0.5 if s < 200_000 else 0.1) for s in steps],
    }
    for tag in ("diayn/reward_mean", "diayn/skill_env_return"):  # at a phase's first step: the next phase's
        scalars[tag] = sorted([*scalars[tag], (200_000, 99.0)])
    scalars["diayn/skill_env_episodes"] = sorted([*scalars["diayn/skill_env_episodes"], (200_000, 1)])
    rec = {"phases": [{"start": 0}, {"start": 200_000}], "scalars": scalars, "episodes": bins}
    first, second = diagnosis.readings(rec)
    with_skills = [(v, 1) for s, v in scalars["diayn/skill_env_return"] if 100_000 <= s < 200_000]
    n = len(with_skills)
    assert first["length"] == pytest.approx(100.0) and second["length"] == pytest.approx(50.0)
    assert first["reward"] == pytest.approx(1.5) and second["reward"] == pytest.approx(0.5)
    assert first["with_skills"] == pytest.approx(0.2) and second["with_skills"] == pytest.approx(1.0)
    assert first["without"] == pytest.approx((200 * 0.5 - n * 0.2) / (200 - n))
    assert second["without"] == pytest.approx(1.0) and not first["all_skills"]
    assert first["offset"] == pytest.approx(0.0, abs=1e-12)
    assert second["offset"] == pytest.approx(math.log(2) + 0.9 * math.log(0.9) + 0.1 * math.log(0.1))
    assert (first["episodes_with"], first["episodes_without"]) == (n, 200 - n)


def test_the_termination_probe_applies_the_first_probe_s_rules_to_its_own_ways():
    """The termination probe's choose.py: the first probe's decision over its two ways (B0 first in the ties)."""
    termination = load_script("termination", ROOT / "docs/results/diayn-termination-8x8/choose.py")
    choose = termination.rules()
    b0, b1 = termination.WAYS
    from common.sweep import resolve_algo  # the labels the plan's sweep commands give its arms

    algo = "algos/ppo_poi_diayn.py"
    for label, flags in ((b0, ""), (b1, " --diayn-coef 0.25")):
        assert label == resolve_algo(f"{algo} --diayn-bootstrap-at-termination{flags}")[0]
    assert choose.WAYS == (b0, b1) and choose.SEEDS == (561, 562, 563) and choose.HERE == termination.HERE
    assert choose.decide({b0: (1, 1, 0.5), b1: (2, 2, 0.3)}, {b0: 1, b1: 2}).startswith(f"chosen: {b1} (passes in 2")
    assert choose.decide({b0: (2, 2, 0.3), b1: (2, 2, 0.3)}, {b0: 2, b1: 2}).startswith(f"chosen: {b0} (passes in 2")
    assert "no skill study" in choose.decide({b0: (0, 1, 0.3), b1: (0, 0, 0.3)}, {b0: 1, b1: 0})
    # the rule is the first probe's file as committed at 3c1bf37 (Amendment 1): an edit there would change it
    assert hashlib.sha256(FIRST_PROBE_RULE.read_bytes()).hexdigest() == FIRST_PROBE_RULE_SHA256
    # beside.py: the first probe's readings on this folder, with the diagnostic arm
    beside = load_script("termination_beside", termination.HERE / "beside.py")
    readings = beside.readings()
    assert readings.WAYS == (b0, b1, resolve_algo(f"{algo} --diayn-coef 0")[0]) and readings.HERE == termination.HERE


def test_the_then_task_probe_applies_the_first_probe_s_rules_to_its_own_ways():
    """The then-task probe's choose.py: the first probe's decision over its two ways (T0 first in the ties), the rule
    pinned as the termination probe pins it; beside.py's share of steps with a skill over a phase's last 100k steps."""
    folder = ROOT / "docs/results/diayn-then-task-8x8"
    then_task = load_script("then_task", folder / "choose.py")
    choose = then_task.rules()
    t0, t1 = then_task.WAYS
    from common.sweep import resolve_algo  # the labels the plan's sweep command gives its ways

    algo = "algos/ppo_poi_diayn.py --skill-then-task"
    assert (t0, t1) == (resolve_algo(algo)[0], resolve_algo(f"{algo} --diayn-coef 0.25")[0])
    assert choose.WAYS == (t0, t1) and choose.SEEDS == (571, 572, 573) and choose.HERE == folder
    assert choose.decide({t0: (1, 1, 0.5), t1: (2, 2, 0.3)}, {t0: 1, t1: 2}).startswith(f"chosen: {t1} (passes in 2")
    assert choose.decide({t0: (2, 2, 0.3), t1: (2, 2, 0.3)}, {t0: 2, t1: 2}).startswith(f"chosen: {t0} (passes in 2")
    assert "no skill study" in choose.decide({t0: (0, 1, 0.3), t1: (0, 0, 0.3)}, {t0: 1, t1: 0})
    assert hashlib.sha256(FIRST_PROBE_RULE.read_bytes()).hexdigest() == FIRST_PROBE_RULE_SHA256
    beside = load_script("then_task_beside", folder / "beside.py")
    readings = beside.readings()
    ts = resolve_algo(f"{algo} --diayn-coef 0")[0]
    assert readings.WAYS == (t0, t1, ts) and readings.SEEDS == (571, 572, 573) and readings.HERE == folder
    run = lambda *phase0: dict(phases=[dict(solved=phase0[0], distinct=phase0[1]), dict(solved=True, distinct=True)])
    judged = [run(True, True), run(True, False), run(False, True), None]
    assert beside.first_phase_counts(judged) == (2, 2, 1)
    points = [(50_000, 1.0), (100_000, 0.5), (150_000, 0.3), (199_999, 0.1), (200_000, 0.9)]
    assert beside.window_share(points, 200_000) == pytest.approx(0.3)  # 100k, 150k and 199,999: [100k, 200k)
    assert np.isnan(beside.window_share(points, 40_000))


@pytest.mark.parametrize(
    "probe", ["diayn-ways-8x8", "diayn-termination-8x8", "diayn-then-task-8x8", "diayn-stronger-skills-8x8"]
)
def test_each_probe_s_page_quotes_what_its_scripts_print_from_the_committed_files(tmp_path, probe):
    """The probes' pages re-make from the repository: every line `choose.py` and `beside.py` print (the runs' table,
    the counts, the decision; the readings beside it) stands verbatim on the probe's page, and the skill study's chain
    reads its way from the last probe's decision line (`verdict.py --flags` gives the flags its plan names)."""
    folder = ROOT / "docs/results" / probe
    page = (folder / "README.md").read_text()
    scripts = ["choose.py", "beside.py"] + (["diagnosis.py"] if probe == "diayn-ways-8x8" else [])
    for script in scripts:
        printed = forked.run([folder / script], tmp_path)
        assert printed.returncode == 0, printed.stderr
        lines = [line for line in printed.stdout.splitlines() if line.strip()]
        assert len(lines) >= 3 and [line for line in lines if line not in page] == [], script
    decision = forked.run([folder / "choose.py"], tmp_path).stdout.splitlines()[-1]
    assert decision.startswith("chosen: ")
    if probe == "diayn-stronger-skills-8x8":
        flags = forked.run([ROOT / "docs/results/skills-band-8x8/verdict.py", "--flags", decision], tmp_path)
        assert (flags.returncode, flags.stdout.strip()) == (0, "--skill-then-task --diayn-coef 2"), flags.stderr


def test_the_stronger_skills_probe_applies_the_first_probe_s_rules_to_the_labels_its_sweep_gives(tmp_path):
    """The stronger-skills probe's choose.py: its ways are the labels its plan's sweep command gives, its seeds the
    plan's, the rule the hash-pinned first probe's but for its last tie-break (the fresh accuracy: ties after the counts
    go to U0); beside.py reads its folder with T0, the plan's reference arm; before the plan's commands have run, one
    line."""
    folder = ROOT / "docs/results/diayn-stronger-skills-8x8"
    stronger = load_script("stronger_skills", folder / "choose.py")
    choose = stronger.rules()
    u0, u1 = stronger.WAYS
    from common.sweep import resolve_algo

    algo = "algos/ppo_poi_diayn.py --skill-then-task"
    assert (u0, u1) == (resolve_algo(f"{algo} --diayn-coef 2")[0], resolve_algo(f"{algo} --skill-steps 64")[0])
    plan = (folder / "PLAN.md").read_text()
    command = '"$T --skill-then-task --diayn-coef 2" "$T --skill-then-task --skill-steps 64" \\ "$T --skill-then-task"'
    assert command in " ".join(plan.split())  # the plan's sweep: U0, U1 and the reference T0
    assert "--seeds 581 582 583" in plan and f"--baseline {u0} " in plan
    assert choose.WAYS == (u0, u1) and choose.SEEDS == (581, 582, 583) and choose.HERE == folder
    first_rules = load_script("first_probe_choose_for_ties", FIRST_PROBE_RULE)
    first_rules.WAYS = (u0, u1)  # the unchanged rule gives the ties below to U1's higher accuracy; here they go to U0
    passing_tie, qualifying_tie = (
        ({u0: (2, 2, 0.3), u1: (2, 2, 0.6)}, {u0: 2, u1: 2}),
        ({u0: (1, 1, 0.3), u1: (1, 1, 0.6)}, {u0: 2, u1: 2}),
    )
    assert first_rules.decide(*passing_tie).startswith(f"chosen: {u1} (passes in 2")
    assert choose.decide(*passing_tie).startswith(f"chosen: {u0} (passes in 2")
    assert first_rules.decide(*qualifying_tie).startswith(f"chosen: {u1} (qualifies in 2")
    assert choose.decide(*qualifying_tie).startswith(f"chosen: {u0} (qualifies in 2")
    assert choose.decide({u0: (1, 2, 0.6), u1: (2, 1, 0.3)}, {u0: 1, u1: 2}).startswith(f"chosen: {u1} (passes in 2")
    assert "no skill study" in choose.decide({u0: (1, 1, 0.3), u1: (1, 1, 0.6)}, {u0: 1, u1: 1})
    assert hashlib.sha256(FIRST_PROBE_RULE.read_bytes()).hexdigest() == FIRST_PROBE_RULE_SHA256
    beside = load_script("stronger_skills_beside", folder / "beside.py")
    assert beside.REFERENCE == resolve_algo(algo)[0]
    readings = beside.THEN_TASK.readings(beside.CHOOSE, diagnostic=beside.REFERENCE)
    stronger.HERE = tmp_path
    with pytest.raises(SystemExit, match="^series.jsonl.gz and results.json missing in .*PLAN.md"):
        stronger.require_results()
    (tmp_path / "series.jsonl.gz").touch()
    with pytest.raises(SystemExit, match="^results.json missing in"):
        stronger.require_results()
    (tmp_path / "results.json").touch()
    stronger.require_results()
    assert readings.WAYS == (u0, u1, beside.REFERENCE) and readings.SEEDS == (581, 582, 583) and readings.HERE == folder


def test_the_skill_maps_average_each_phase_s_last_100k_steps_and_weigh_the_goal_column(tmp_path):
    """maps.py on a hand-made run: two skills on a 4-wide grid, phase 1 from step 250k, so the phases end at 250k and
    after the last step (as common.analyze cuts them); the maps of each phase's last 100k steps, [end - 100k, end),
    averaged (one just before that window left out), the goal column (x = 2) weighed per skill, the PNG written; bad
    input gets one line."""
    import matplotlib.image

    script = ROOT / "docs/results/diayn-then-task-8x8/maps.py"
    maps = load_script("maps", script)
    run = tmp_path / "runs" / "Env__way__571__1796400000"
    writer = SummaryWriter(str(run))
    for step in range(50_000, 400_001, 50_000):
        writer.add_scalar("charts/phase", 0 if step <= 200_000 else 1, step)
    skill_a, skill_b = torch.zeros(4, 4), torch.zeros(4, 4)
    skill_a[1, 1], skill_b[3, 2] = 1.0, 1.0  # a stays left; b sits in the goal column
    early = torch.ones(4, 9)  # before the window: would spread both skills over every column
    for step, a, b in ((149_999, None, None), (150_000, skill_a, skill_b), (249_999, skill_a, skill_a)):
        image = early if a is None else torch.cat([a, torch.zeros(4, 1), b], dim=1)
        writer.add_image("skills/visitation", image.unsqueeze(0), step)
    for step in (300_000, 300_001):  # the second phase's window is [300,001, 400,001)
        image = early if step == 300_000 else torch.cat([skill_b, torch.zeros(4, 1), skill_b], 1)
        writer.add_image("skills/visitation", image.unsqueeze(0), step)
    writer.close()
    assert maps.phase_ends(maps.read_scalars(run)) == [250_000, 400_001]
    (_, weights_before, spread_before), (_, weights_after, spread_after) = maps.run_maps(run)
    assert weights_before == pytest.approx([0.0, 0.5]) and weights_after == pytest.approx([1.0, 1.0])
    assert spread_before == [1.0, 2.0] and spread_after == [1.0, 1.0]  # b's mean map: two cells at 0.5
    assert np.isnan(maps.goal_column_weight(np.zeros((4, 4)))) and np.isnan(maps.spread(np.zeros((4, 4))))
    done = forked.run([script, run, "--out", tmp_path], ROOT)
    assert done.returncode == 0, done.stderr
    assert "| Env__way__571 | 0.250 (0.500) / 1.000 (1.000) | 1.5 / 1.0 |" in done.stdout
    png = matplotlib.image.imread(tmp_path / "Env__way__571.png")
    assert png.shape[:2] == (9 * 12, 9 * 12)  # two phases of 4 rows and a line between; two skills of 4 and a gap
    with pytest.raises(ValueError, match="not square maps"):
        maps.panels(np.zeros((4, 10)))
    empty = tmp_path / "runs" / "Env__empty__571__1796400000"
    SummaryWriter(str(empty)).close()
    for folder, message in ((tmp_path / "nope", "no run folder"), (empty, "no charts/phase logged")):
        proc = forked.run([script, run, folder, "--out", tmp_path], ROOT)
        assert proc.returncode == 1 and proc.stderr.startswith("error: ") and message in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1


def test_the_diayn_probe_gate_share_counts_the_phase_iterations_with_the_weight_on():
    """beside.py's open share on a hand-made weight series: within [start, end) only, a weight of 0 closed."""
    beside = load_script("beside", ROOT / "docs/results/diayn-ways-8x8/beside.py")
    points = [(0, 1.0), (10, 0.0), (20, 1.0), (30, 0.0), (40, 1.0)]
    assert beside.open_share(points, 0, 30) == pytest.approx(2 / 3)
    assert beside.open_share(points, 10, 40) == pytest.approx(1 / 3)
    assert np.isnan(beside.open_share(points, 50, 60))


def test_the_diayn_probe_choice_passes_qualifies_and_decides_as_its_plan_says():
    """choose.py's reading of a run (hand-made phases and scalars) and its decision (amendment 1) on hand-made
    counts."""
    choose = load_script("choose", FIRST_PROBE_RULE)

    steps = range(0, 400_000, 2048)

    def run(returns, accuracies, largest=0.125, skill_returns=None, episodes=None):
        """skill_returns, episodes: each logged point's return in the envs with skills and its episodes (default:
        the phase's return, 3 episodes)."""
        phases = [
            {"start": 0, "length": 200_000, "return_window": returns[0]},
            {"start": 200_000, "length": 200_000, "return_window": returns[1]},
        ]
        scalars = {
            "diayn/skill_env_return": skill_returns or [(s, returns[s >= 200_000]) for s in steps],
            "diayn/skill_env_episodes": episodes or [(s, 3) for s in steps],
            "diayn/disc_accuracy_fresh": [(s, accuracies[s >= 200_000]) for s in steps],
            **{f"skills/prob_{k}": [(s, largest if k == 0 else (1 - largest) / 7) for s in steps] for k in range(8)},
        }
        return choose.judge({"phases": phases}, scalars)

    both = run((0.9, 0.9), (0.5, 0.5))
    assert both["passes"] and both["qualifies"]
    lost = run((0.9, 0.1), (0.5, 0.5))  # the task lost after the change, the skills distinct: qualifies
    assert not lost["passes"] and lost["qualifies"]
    assert not run((0.5, 0.9), (0.5, 0.5))["qualifies"]  # the first phase not solved
    assert not run((0.9, 0.9), (0.5, 0.2))["qualifies"]  # the skills at chance after the change
    assert not run((0.9, 0.9), (0.3, 0.3), largest=0.25)["passes"]  # accuracy within 0.1 of the largest probability
    assert not run((0.9, 0.9), (0.24, 0.24), largest=0.1)["passes"]  # 0.1 above the largest, but below 0.25
    # the task in the envs with skills: 0.5 there while every env's return is 0.9 does not solve the phase
    assert not run((0.9, 0.9), (0.5, 0.5), skill_returns=[(s, 0.5) for s in steps])["qualifies"]
    # weighted by episodes: points alternate 1.0 (1 episode) and 0.7 (3): 0.775 by episodes, 0.85 by points
    alternating = [(s, 1.0 if i % 2 else 0.7) for i, s in enumerate(steps)]
    weights = [(s, 1 if i % 2 else 3) for i, s in enumerate(steps)]
    assert not run((0.9, 0.9), (0.5, 0.5), skill_returns=alternating, episodes=weights)["qualifies"]
    assert run((0.9, 0.9), (0.5, 0.5), skill_returns=alternating)["qualifies"]  # 3 episodes each: 0.85

    ways = choose.WAYS  # ranks: (passing runs, runs solving both phases, median accuracy); passing runs qualify
    ranks, qualifying = {w: (0, 0, 0.1) for w in ways}, {w: 0 for w in ways}
    assert "no skill study on these ways" in choose.decide(ranks, qualifying)
    ranks[ways[1]], qualifying[ways[1]] = (0, 0, 0.4), 3  # qualifies in 3, but no run solves both phases: not on
    assert "no skill study on these ways" in choose.decide(ranks, qualifying)
    ranks[ways[2]], qualifying[ways[2]] = (1, 1, 0.3), 1  # the choice (one passing run) qualifies in 1 only
    ranks[ways[3]], qualifying[ways[3]] = (0, 1, 0.1), 2
    ranks[ways[0]], qualifying[ways[0]] = (0, 1, 0.2), 2  # ties on qualifying: the choice's order (the accuracy)
    assert (
        choose.decide(ranks, qualifying)
        == f"chosen: {ways[2]}; the skill study's plan uses {ways[0]} (qualifies in 2 of 3)"
    )
    ranks[ways[3]] = (0, 1, 0.25)
    assert choose.decide(ranks, qualifying).endswith(f"uses {ways[3]} (qualifies in 2 of 3)")
    qualifying[ways[2]] = 2  # the choice qualifies in 2 of 3, one of them solving both phases
    assert choose.decide(ranks, qualifying).startswith(f"chosen: {ways[2]} (qualifies in 2 of 3")
    ranks[ways[3]], qualifying[ways[3]] = (2, 2, 0.2), 2  # a way that passes in 2 of 3 is chosen first
    assert choose.decide(ranks, qualifying).startswith(f"chosen: {ways[3]} (passes in 2 of 3")
    ranks[ways[0]] = (2, 2, 0.2)  # ties go to the earlier way
    assert choose.decide(ranks, qualifying).startswith(f"chosen: {ways[0]} (passes in 2 of 3")


def test_the_skill_study_verdict_applies_its_plan_s_gates_families_and_outcomes(tmp_path):
    """verdict.py of the skill study: the way read from each kind of line the probe's `choose.decide` prints and from
    the fourth probe's committed decision (the plan's Amendment 3), the sweep's own labels for the plan's commands, and
    the verdicts on hand-made analyses (gates counted by hand, the DIAYN arms at the corrected interval, the embedding
    at 95%, the task in the envs with skills, the target, the default)."""
    from common.sweep import resolve_algo

    script = ROOT / "docs/results/skills-band-8x8/verdict.py"
    verdict = load_script("skills_verdict", script)
    choose, ways = verdict.choose, verdict.choose.WAYS
    # Amendment 3: the way is the fourth probe's, read from its committed decision as the plan's WAY= line reads it
    decision = forked.run([ROOT / "docs/results/diayn-stronger-skills-8x8/choose.py"], tmp_path)
    assert decision.returncode == 0, decision.stderr
    way_line = decision.stdout.splitlines()[-1]  # what `WAY=$(... | tail -1)` holds
    stronger = verdict.way_of(way_line)
    assert stronger == resolve_algo("algos/ppo_poi_diayn.py --skill-then-task --diayn-coef 2")[0]
    assert verdict.FLAGS[stronger] == "--skill-then-task --diayn-coef 2"
    assert set(verdict.FLAGS) == {*ways, stronger}
    printed = forked.run([script, "--flags", way_line], tmp_path)
    assert (printed.returncode, printed.stdout) == (0, "--skill-then-task --diayn-coef 2\n"), printed.stderr
    _, amended = amendment(script.parent / "PLAN.md", "## Amendment 3")
    lines = [" ".join(line.split("#")[0].split()) for line in amended.splitlines()]
    assert "KD=../study-diayn8t/algos" in lines and "git worktree add ../study-diayn8t 1143078" in amended
    assert "WAY=$(python docs/results/diayn-stronger-skills-8x8/choose.py | tail -1) || exit 1" in lines
    diayn_arms = re.findall(r'"\$KD/(ppo_poi_diayn\.py \$W[^"]*)"', amended)  # D1, D2, D0 as the sweep gets them
    assert "$K/ppo_poi_diayn" not in amended and [
        resolve_algo("algos/" + arm.replace("$W", verdict.FLAGS[stronger]))[0] for arm in diayn_arms
    ] == [verdict.arms(stronger)[role] for role in ("D1", "D2", "D0")]
    ranks, qualifying = {w: (0, 1, 0.1) for w in ways}, {w: 0 for w in ways}
    assert verdict.way_of(choose.decide(ranks, qualifying)) is None  # "... no skill study on these ways)"
    qualifying[ways[3]] = 2
    assert verdict.way_of(choose.decide(ranks, qualifying)) == ways[3]  # "chosen: W0; ... plan uses W3 (...)"
    ranks[ways[2]], qualifying[ways[2]] = (1, 1, 0.3), 2
    assert verdict.way_of(choose.decide(ranks, qualifying)) == ways[2]  # "chosen: W2 (qualifies ...: uses it)"
    ranks[ways[1]] = (2, 2, 0.3)
    assert verdict.way_of(choose.decide(ranks, qualifying)) == ways[1]  # "chosen: W1 (passes ...: uses it)"
    for line in ("| ppo_poi_diayn | 533 | missing | | | | no |", ""):  # what a crashed choose.py leaves
        with pytest.raises(ValueError, match="not a decision line"):
            verdict.way_of(line)
    for way, flags in verdict.FLAGS.items():
        commands = {
            "D1": f"ppo_poi_diayn {flags}",
            "D2": f"ppo_poi_diayn {flags} --state-sampler rollouts --skill-interest error",
            "D0": f"ppo_poi_diayn {flags} --uniform-prior-weight 1",
            "E1": "ppo_poi_emb",
            "F1": "ppo --ent-coef 0.01",
            "F2a": "ppo --ent-coef 0.02",
            "F2": "ppo --ent-coef 0.03",
            "F6": "ppo_poi_progress --interest noise --int-coef 1",
        }
        assert verdict.arms(way) == {role: resolve_algo(command)[0] for role, command in commands.items()}
    assert list(verdict.arms(None)) == ["E1", "F1", "F2a", "F2", "F6"]

    way = ways[2]  # skills in half the envs: the DIAYN arms' task needs the return in the envs with skills too
    steps = range(0, 4_000_000, 20_000)

    def folder(name, counts, cis, lost_in_skill_envs=(), unfinished=(), fragile=(), way=way, changed=None, main=None):
        """counts: role -> runs doing the task (before, after) of 10; cis: (X, A) -> (95% low, high, corrected low,
        high) of X against A; lost_in_skill_envs: DIAYN roles with one more run doing the task after the change in
        every env's episodes but not in the envs with skills; unfinished: roles whose first run did not finish;
        changed, main: settings that differ from the plan's in the comparisons' analyses and in the first one."""
        names = verdict.arms(way)
        out = tmp_path / name
        out.mkdir()
        runs, records = [], []
        for role, label in names.items():
            before, after = counts[role]
            for i in range(10):
                everywhere = [i < before, i < after + (role in lost_in_skill_envs)]
                run = f"ColorDoorKeyBand-8x8__{label}__{541 + i}__1"
                phases = [
                    {"start": k * 2_000_000, "length": 2_000_000, "return_window": 0.95 if everywhere[k] else 0.1}
                    for k in (0, 1)
                ]
                finished = not (role in unfinished and i == 0)
                runs.append({"run": run, "method": label, "seed": 541 + i, "finished": finished, "phases": phases})
                scalars = {}
                if role.startswith("D"):  # only the DIAYN file logs these
                    scalars = {
                        "diayn/skill_env_return": [(s, 0.95 if i < (before, after)[s >= 2_000_000] else 0.5) for s in
                                                   steps],
                        "diayn/skill_env_episodes": [(s, 4) for s in steps],
                        "diayn/disc_accuracy_fresh": [(s, 0.5 if i % 2 else 0.2) for s in steps],
                        **{f"skills/prob_{k}": [(s, 0.125) for s in steps] for k in range(8)},
                    }  # fmt: skip
                records.append({"run": run, "method": label, "seed": 541 + i, "finished": finished,
                                "tags": series.encode(scalars)})  # fmt: skip
        made = {**verdict.SETTINGS, "folders": ["docs/results/skills-band-8x8/series.jsonl.gz"]}
        first = {**made, "baseline": names["F1"], "comparisons": 1, **(main or {})}
        (out / "results.json").write_text(json.dumps({"settings": first, "runs": runs}))
        series.write(records, out / "series.jsonl.gz")
        rows = {}
        for (x, a), (low, high, c_low, c_high) in cis.items():
            readings = {"threshold x1, span 10": {"iqm": (low + high) / 2, "low": low, "high": high},
                        "span 30": {"iqm": 1.1 if (x, a) in fragile else 0.9}}  # fmt: skip
            rows.setdefault(a, []).append(
                {"env": "E", "phase": 1, "method": names[x], "readings": readings, "corrected": [c_low, c_high]}
            )
        for a, a_rows in rows.items():
            settings = {**made, "baseline": names[a], "comparisons": 2, **(changed or {})}
            (out / f"against-{names[a]}").mkdir()
            (out / f"against-{names[a]}" / "results.json").write_text(
                json.dumps({"settings": settings, "robustness": a_rows})
            )
        return out

    def run(out, *flags, way=way, code=0):
        done = forked.run([script, out, "--way", way, *flags], tmp_path)
        assert done.returncode == code, done.stderr
        return done.stdout if code == 0 else done.stderr

    names = verdict.arms(way)
    # F1 9 / 6: a comparator needs at least 7 (and 6) before and 4 after; an interest arm at least 8 / 5
    counts = {"D1": (8, 5), "D2": (7, 6), "D0": (8, 5), "E1": (9, 6), "F1": (9, 6), "F2a": (9, 7), "F2": (5, 9),
              "F6": (7, 4)}  # fmt: skip
    good, gain_at_95_only = (0.3, 0.8, 0.25, 0.9), (0.4, 0.95, 0.35, 1.05)
    cis = {(x, a): good for x in ("D1", "D2", "E1") for a in ("F1", "F2a", "F6", "D0")}
    cis["E1", "F2a"] = gain_at_95_only  # the embedding is read at 95%: still a win
    out = run(folder("win", counts, cis))
    assert f"| D1 | {names['D1']} | 10 of 10 | 8 / 5 | no | 5 / 5 | passes its gate |" in out
    assert f"| D2 | {names['D2']} | 10 of 10 | 7 / 6 | no | 5 / 5 | fails its gate |" in out
    assert f"| F2 | {names['F2']} | 10 of 10 | 5 / 9 | no |  | not a comparator |" in out
    assert f"| D0 | {names['D0']} | 10 of 10 | 8 / 5 | no | 5 / 5 | comparator |" in out
    assert "D1: outcome 1: a win against more than F1: D1 re-learns the changed views faster" in out
    assert "plain DIAYN is among them. Issue 34's target read literally (the gate passed, faster than D0 and F1 at " \
           "97.5%): met." in out  # fmt: skip
    assert "D2: outcome 3: D2 fails its gate: its re-learning is not judged. Issue 34's target read literally" in out
    assert "at 97.5%): not met." in out.split("D2: outcome 3")[1].splitlines()[0]  # good ratios, but the gate failed
    assert "E1: outcome 1: " in out and "D1 passes its gate and does the task in at least 8 of 10" in out
    assert (
        "runs before the change): yes." in out and "| D1 | 541 | 0.950 / 0.950 | 0.950 / 0.950 | 0.200 / 0.200" in out
    )
    assert run(tmp_path / "win", "--against").split() == [names[r] for r in ("F1", "F2a", "F6", "D0")]
    assert run(tmp_path / "win", "--judged").split() == [names[r] for r in ("D1", "D2", "E1")]

    cis["D1", "F2a"] = gain_at_95_only  # the DIAYN arms are read at 97.5%: no win; the lower end 0.35 < 0.75
    assert "D1: outcome 6: " in run(folder("corrected", counts, cis))
    cis["D1", "F2a"] = (0.8, 0.95, 0.75, 1.0)  # at the bounds of "matched"
    assert "D1: outcome 5: " in run(folder("matched", counts, cis))
    cis["D1", "F1"] = gain_at_95_only  # D / D0 below 1, D / F1 only at 95%: the target is not met
    out = run(folder("not-faster", counts, cis))
    assert "D1: outcome 4: " in out and "97.5%): not met." in out.split("D1: outcome 4")[1].splitlines()[0]
    cis = {k: good for k in cis}
    out = run(folder("fragile", counts, cis, fragile={("D1", "F6")}))
    assert "D1: outcome 1 (fragile): " in out and "E1: outcome 1: " in out

    # plain DIAYN loses the task: not a comparator, but D1 / D0 is still read for the target
    lost = {**counts, "D0": (3, 3), "F2a": (6, 7), "F6": (9, 3)}
    cis = {(x, a): good for x in ("D1", "D2", "E1") for a in ("F1", "D0")}
    cis["D1", "D0"] = (0.5, 1.1, 0.4, 1.2)
    out = run(folder("f1-alone", lost, cis))
    (d1_line,) = [line for line in out.splitlines() if line.startswith("D1: outcome")]
    assert "D1: outcome 2: a win against F1 alone" in out and d1_line.endswith("97.5%): not met.")
    assert "| D0 (not a comparator) | 0.80 | [0.50, 1.10] | [0.40, 1.20] | no |" in out and "E1: outcome 2: " in out
    assert run(tmp_path / "f1-alone", "--against").split() == [names["F1"], names["D0"]]

    # runs that do the task after the change in every env but not in the envs with skills do not count, for D1 and
    # for plain DIAYN; an unfinished run counts as not doing the task; D1 at 7 of 10 before: no default
    judged = {(x, a): good for x in ("D2", "E1") for a in ("F1", "F2a", "F6", "D0")}
    out = run(folder("skill-envs", {**counts, "D1": (7, 4), "D0": (8, 3), "F1": (8, 6)}, judged,
                     lost_in_skill_envs={"D1", "D0"}, unfinished={"F2a"}))  # fmt: skip
    assert f"| D1 | {names['D1']} | 10 of 10 | 7 / 4 | no | 5 / 5 | fails its gate |" in out
    assert f"| D0 | {names['D0']} | 10 of 10 | 8 / 3 | no | 5 / 5 | not a comparator |" in out
    assert f"| F2a | {names['F2a']} | 9 of 10 | 8 / 6 | no |  | comparator |" in out
    assert "runs before the change): no." in out
    everyone = {(x, a): good for x in ("D1", "D2", "E1") for a in ("F1", "F2a", "F6", "D0")}
    default = run(folder("default", {**counts, "D1": (7, 6), "F1": (8, 6)}, everyone))
    assert "D1: outcome 1" in default and "runs before the change): no." in default  # passes its gate at 7 (F1 8)
    # 9 of 10 before the change, but 4 after (F1 6): it fails its gate, so no default; F2a at issue 34's bar exactly
    gated = run(folder("gate-default", {**counts, "D1": (9, 4), "F2a": (8, 8)}, everyone))
    assert "D1: outcome 3" in gated and "runs before the change): no." in gated
    assert f"| F2a | {names['F2a']} | 10 of 10 | 8 / 8 | yes |  | comparator |" in gated
    floor = folder("floor", {**counts, "F1": (7, 6), "F2a": (5, 7), "F6": (6, 4)}, {})  # 6 of 10 before binds
    assert run(floor, "--against").split() == [names[r] for r in ("F1", "F6", "D0")]

    # no way: the embedding, PPO at three entropies and the noise reward
    none = "chosen: ppo_poi_diayn (no way passes or qualifies in 2 of 3: no skill study on these ways)"
    e1 = {("E1", a): good for a in ("F1", "F2a", "F6")}
    out = run(folder("no-way", counts, e1, way=None), way=none)
    assert out.startswith("No way") and "E1: outcome 1: " in out and "D1" not in out and "default" not in out
    flags = forked.run([script, "--flags", none], tmp_path)
    assert flags.returncode == 3 and "without the DIAYN arms" in flags.stderr

    # what must not pass: a missing analysis, one made with other settings, a seed or a run too many, a bad line
    (tmp_path / "win" / f"against-{names['D0']}" / "results.json").unlink()
    assert f"against-{names['D0']}/results.json" in run(tmp_path / "win", code=1)
    assert "'comparisons': 1" in run(folder("wrong", counts, cis, changed={"comparisons": 1}), code=1)
    assert "'relative': 0.5" in run(folder("relative", counts, cis, changed={"relative": 0.5}), code=1)
    assert "not from the study's series" in run(folder("two", counts, cis, changed={"folders": ["a", "b"]}), code=1)
    assert "'task_window': 200000" in run(folder("window", counts, cis, main={"task_window": 200_000}), code=1)
    # an arm without finished runs fails its gate, even where F1's count would let it pass
    few = folder("few", {**counts, "F1": (1, 1), "D2": (0, 0)}, everyone, unfinished={"D2"})
    data = json.loads((few / "results.json").read_text())
    data["runs"] = [r for r in data["runs"] if r["method"] != names["D2"]]
    (few / "results.json").write_text(json.dumps(data))
    assert f"| D2 | {names['D2']} | 0 of 10 | 0 / 0 | no | 0 / 0 | fails its gate |" in run(few)
    assert run(few, "--judged").split() == [names["D1"], names["E1"]]  # analyze refuses an arm without runs
    data = json.loads((tmp_path / "fragile" / "results.json").read_text())
    data["runs"].append({**data["runs"][0], "seed": 551})
    (tmp_path / "fragile" / "results.json").write_text(json.dumps(data))
    assert "a seed outside 541-550" in run(tmp_path / "fragile", code=1)
    data["runs"][-1]["seed"] = 541
    (tmp_path / "fragile" / "results.json").write_text(json.dumps(data))
    assert "more than 10 finished runs" in run(tmp_path / "fragile", code=1)
    assert "not a decision line" in forked.run([script, "--flags", "| a table row |"], tmp_path).stderr

    # the plan's own analysis commands (the first, and the loop's against F2a) make settings that verdict.py accepts,
    # and each setting the plan fixes is checked (SETTINGS is not read back from itself)
    plan = (script.parent / "PLAN.md").read_text()
    block = bash_blocks(plan.split("## Commands")[1])[0]
    fill = {
        "R": "docs/results/skills-band-8x8",
        "A": names["F2a"],
        "JUDGED": " ".join(verdict.interest(way)),
        "WAY": way,
    }
    commands = [
        re.sub(r"\$(\w+)", lambda m: fill[m[1]], line.split("#")[0].strip())
        for line in block.splitlines()
        if line.strip().startswith("python -m common.analyze")
    ]
    first = next(c for c in commands if c.endswith("--out docs/results/skills-band-8x8"))
    loop = next(c for c in commands if c.endswith(f"--out docs/results/skills-band-8x8/against-{names['F2a']}"))
    others = {"span": 30, "changed_threshold": 2.0, "reps": 2000, "task_window": 200_000, "relative": 0.5,
              "drop_unsuccessful": True, "methods": ["x"], "frontier_loss": "eval", "robust_factors": [1.0],
              "robust_spans": [10], "robust_window": 100_000, "seed": 1}  # fmt: skip
    for command, baseline, comparisons in ((first, names["F1"], 1), (loop, names["F2a"], 2)):
        args = analyze.parse_args(shlex.split(command)[3:])
        settings = {
            k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k not in ("folders", "out")
        }
        settings["folders"] = [str(f) for f in args.folders]
        wanted = {**verdict.SETTINGS, "baseline": baseline, "comparisons": comparisons}
        verdict.check_settings(Path("x"), settings, wanted)
        for key, other in others.items():
            with pytest.raises(ValueError):
                verdict.check_settings(Path("x"), {**settings, key: other}, wanted)


def _fm_verdict():
    module = load_script("fm_verdict", ROOT / "docs/results/fm-fair-6x6/verdict.py")
    return module


def _fm_analyses(verdict, out, wins=(), keeps=True, ratios=None, at_15=None, g1=None, **options):
    """The four analyses verdict.py reads, hand-made in common.analyze's shape, with every reading the tool writes
    (T/2's at 1.5, so that counting it would show). wins: the arms whose 99.17% upper end is 0.9 (others 1.2);
    ratios: arm -> {reading: ratio} against the frontier at T (`changed_adaptation`: the primary); at_15 / g1: arm ->
    the ratio at 1.5T / to G1 (None: left out, as the tool does where G1's IQM is 0). options: `high` (arm -> upper
    end), `floor` (G1's faithful probe floor), `peaks` and `steps` (F1's 10 runs' highest changed loss after the change
    and re-learning steps), `runs_of` (method -> runs), and any setting of the analysis at T."""
    T, high, runs_of = 0.0025, options.pop("high", {}), options.pop("runs_of", {})
    floor, peaks = options.pop("floor", 0.0016), options.pop("peaks", [0.02] * 10)
    steps = options.pop("steps", [2e5 + 1e4 * i for i in range(10)])
    arms = [*verdict.FRONTIER, *verdict.JUDGED.values()]

    def run(method, i):
        after = {"changed_highest": 0.01, "changed_adaptation": 3e5}
        if method == verdict.F1:
            after = {"changed_highest": peaks[i % 10], "changed_adaptation": steps[i % 10]}
        return {"method": method, "seed": 301 + i, "phases": [{"changed_asymptotic": 0.002}, after]}

    def frontier_rows(method, readings):  # at the whole phase's return too, at other ratios: not pre-registered
        return [{"method": method, "phase": 1, "task": task, "runs": 10, "readings": {
            k: {"ratio": r * scale, "not_judged_share": 0.25} for k, r in readings.items()}}
            for task, scale in [("return_phase", 0.5), ("return_window", 1)]]  # fmt: skip

    runs = [run(m, i) for m in arms for i in range(runs_of.get(m, 10))]
    settings = dict(verdict.SETTINGS, changed_threshold=T, comparisons=6, baseline=verdict.F1, task_baseline=None)
    settings |= {"folders": ["s.jsonl.gz"], "frontier": list(verdict.FRONTIER), "judge": list(verdict.JUDGED.values())}
    at_t = {"settings": settings | options, "verdicts": [], "frontier": [], "runs": runs, "notes": [], "aggregates": []}
    at_t["task"] = [{"method": m, "phase": k, "return_window": {"iqm": 0.9, "low": 0.85}} for m in arms for k in (0, 1)]
    ratios_15, at_15 = (
        at_15 or {},
        {"settings": settings | {"changed_threshold": 1.5 * T}, "frontier": [], "runs": runs},
    )
    to_g1 = {"settings": settings | {"baseline": verdict.G1}, "aggregates": [], "runs": runs}
    names = [*analyze.Robustness().names(10), "changed_adaptation"]
    for arm, method in verdict.JUDGED.items():
        at_t["verdicts"].append({"phase": 1, "method": method, "against": "frontier", "ratio": 0.7, "keeps_task": keeps,
                                 "corrected_high": high.get(arm, 0.9 if arm in wins else 1.2)})  # fmt: skip
        readings = dict.fromkeys(names, 0.8) | {"threshold x0.5, span 10": 1.5, "changed_adaptation": 0.7}
        at_t["frontier"] += frontier_rows(method, readings | (ratios or {}).get(arm, {}))
        at_15["frontier"] += frontier_rows(method, {"changed_adaptation": ratios_15.get(arm, 0.8)})
        at_t["aggregates"].append({"phase": 1, "method": method, "changed_adaptation_normalised": {"iqm": 0.75}})
        ratio = (g1 or {}).get(arm, 0.9)
        normalised = {} if ratio is None else {"changed_adaptation_normalised": {"iqm": ratio}}
        to_g1["aggregates"].append({"phase": 1, "method": method} | normalised)
    probe = {"runs": [{"method": verdict.G1, "phases": [{"changed_asymptotic": floor}]} for _ in range(3)]}
    files = {"results.json": at_t, "threshold-1.5T/results.json": at_15, "probe/faithful/results.json": probe}
    for name, content in (files | {"against-gaussian-ppo/results.json": to_g1}).items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(json.dumps(content))
    return out


def test_the_skill_study_s_re_runs_are_compared_with_its_committed_runs_part_for_part(tmp_path, capsys):
    """same_runs.py (Amendment 4's comparison of the maps' re-runs): a committed run written again is the same; one
    logged value changed, a phase's summary changed, or a seed the study never ran, is named, and the exit is 1."""
    folder = ROOT / "docs/results/skills-band-8x8"
    same_runs = load_script("skill_study_same_runs", folder / "same_runs.py")
    with gzip.open(folder / "series.jsonl.gz", "rt") as f:
        first, second, third = (json.loads(next(f)) for _ in range(3))
    changed = json.loads(json.dumps(second))
    tag = "external_model/eval_loss_changed"
    changed["tags"][tag][1][-1] += 1e-3  # its last logged value
    summary = json.loads(json.dumps(third))
    summary["phases"][-1]["last_100_episodes"] += 1e-6
    stranger = dict(first, seed=9999)

    def compared(records):
        path = tmp_path / "reruns.jsonl.gz"
        series.write(records, path)
        return same_runs.main([str(path)])

    assert compared([first]) == 0 and capsys.readouterr().out.endswith(": same\n")
    assert compared([first, changed, summary, stranger]) == 1
    lines = [line.split(": ", 1)[1] for line in capsys.readouterr().out.splitlines()]
    assert lines == ["same", f"differs: tag {tag}", "differs: phases", "differs: no committed run of this arm and seed"]


def test_the_forward_model_verdict_applies_the_plan_s_wins_void_readings_and_fragility(tmp_path):
    """verdict.py of the forward-model study on hand-made analyses, at the rules' edges: a win needs the 99.17% upper
    end below 1, the task kept and an arm inside the frontier's task levels; a threshold reading at or above half of
    F1's peak IQM is void; any other reading not below 1, or not made, makes a win fragile, and so does (I1, I2) a
    ratio to G1 not below 1; I1 and I2 are judged only below G1's faithful floor."""
    verdict = _fm_verdict()
    script = ROOT / "docs/results/fm-fair-6x6/verdict.py"

    def table(name, **kwargs):
        result = forked.run([script, _fm_analyses(verdict, tmp_path / name, **kwargs)], tmp_path)
        assert result.returncode == 0, (name, result.stderr)
        lines = result.stdout.splitlines()
        rows = {line[2:4]: line for line in lines if line[:4] in {f"| {a}" for a in verdict.JUDGED}}
        return lines, {arm: line.split(" | ")[-1].rstrip(" |") for arm, line in rows.items()}, rows

    lines, verdicts, rows = table("none")
    assert verdicts == dict.fromkeys(verdict.JUDGED, "no")
    assert "No win: no judged arm beats the non-interest frontier." in lines
    assert lines[:3] == [
        "T 0.0025; half of F1's peak 0.01000; void readings: none",
        "G1's faithful floor on the probe seeds 0.00160 against T 0.0025: I1 and I2 judged (amendment 1)",
        "runs short of 10: none",
    ]  # each column of a row: runs, y / F(x), upper end, not judged, returns (F1's lower ends), task, / G1, / F1
    assert rows["I1"] == (f"| I1 `{verdict.JUDGED['I1']}` | 10 | 0.70 | 1.20 | 0.25 | 0.900 (0.850) / 0.900 (0.850) "
                          "| yes | 0.90 | 0.75 | no |")  # fmt: skip
    assert rows["R2"].split(" | ")[-3:-1] == ["-", "0.75"]  # no ratio to G1 but for I1 and I2
    lines, verdicts, _ = table("win", wins=("I3",), high={"I4": 1.0})  # an upper end of exactly 1 is no win
    assert verdicts["I3"] == "**win**" and verdicts["I4"] == "no" and "Wins: I3." in lines
    _, verdicts, _ = table("task lost", wins=("I3",), keeps=False)
    assert verdicts["I3"] == "no"
    _, verdicts, _ = table("fragile", wins=("I3", "R3", "R2", "I4"), ratios={
        "I3": {"span 30": 1.0}, "R2": {"span 5": float("inf")}, "I4": {"mean log10 loss, first 200k": float("nan")}},
        at_15={"R3": 1.05})  # fmt: skip
    assert verdicts["I3"] == "**win** (fragile: span 30 1.00)"
    assert verdicts["R3"] == "**win** (fragile: threshold x1.5 1.05)"
    assert verdicts["R2"] == "**win** (fragile: span 5 inf)"
    assert verdicts["I4"] == "**win** (fragile: mean log10 loss, first 200k cannot be made)"
    _, verdicts, _ = table("gaussian", wins=("I1", "I2"), g1={"I1": 1.0, "I2": 0.99})
    assert verdicts["I1"] == "**win** (fragile: against G1 1.00)" and verdicts["I2"] == "**win**"
    _, verdicts, _ = table("gaussian not made", wins=("I2",), g1={"I2": None})
    assert verdicts["I2"] == "**win** (fragile: against G1 cannot be made)"
    lines, verdicts, _ = table("below the frontier", wins=("I3",), ratios={"I3": {"changed_adaptation": float("nan")}})
    assert verdicts["I3"] == "not judged (below the frontier's task levels)" and "Wins:" not in "\n".join(lines)
    lines, verdicts, _ = table("not measurable", wins=("I1", "I2", "I3"), floor=0.0025)  # at T: not below it
    assert verdicts["I1"] == verdicts["I2"] == "not judged (not measurable at T)" and "Wins: I3." in lines
    assert lines[1].endswith("I1 and I2 not measurable at T: not judged (amendment 1)")
    # 2T = 0.005 exactly at half of F1's peak IQM (0.01): void; 1% higher: not void (1.5T: void up to a peak of 0.0075)
    edge = {"wins": ("I3",), "ratios": {"I3": {"threshold x2, span 10": 1.3}}}
    lines, verdicts, _ = table("void", peaks=[0.01] * 10, **edge)
    assert lines[0] == "T 0.0025; half of F1's peak 0.00500; void readings: threshold x2, span 10"
    assert verdicts["I3"] == "**win**"
    lines, verdicts, _ = table("not void", peaks=[0.0101] * 10, **edge)
    assert lines[0].endswith("void readings: none")
    assert verdicts["I3"] == "**win** (fragile: threshold x2, span 10 1.30)"
    lines, _, _ = table("all void", peaks=[0.005] * 10)
    assert lines[0].endswith("threshold x2, span 10, threshold x1.5, T itself (the pre-registered reading)")
    # the peak is the IQM (the mean of the middle 6 of 10), not the median (0.0175) or the mean (0.064)
    lines, _, _ = table("peaks", peaks=[0.5, 0.001, 0.002, 0.015, 0.016, 0.017, 0.018, 0.020, 0.024, 0.030])
    assert lines[0].startswith("T 0.0025; half of F1's peak 0.00917;")
    lines, _, _ = table("short", runs_of={verdict.JUDGED["R3"]: 9})
    assert lines[2] == f"runs short of 10: {verdict.JUDGED['R3']} 9"
    needed = [line.split(": ")[1] for line in lines if line.startswith("a true ratio of ")]
    assert [int(n[2:]) for n in needed] == sorted(int(n[2:]) for n in needed)  # more runs for a ratio nearer 1
    lines, _, _ = table("identical runs", steps=[2e5] * 10)  # F1's runs all alike: any ratio shows at 10 runs
    assert [line for line in lines if line.startswith("a true ratio of ")] == [
        "a true ratio of 0.7: n=10", "a true ratio of 0.8: n=10", "a true ratio of 0.9: n=10"]  # fmt: skip

    def fails(name, message, change=None, **kwargs):
        out = _fm_analyses(verdict, tmp_path / name, **kwargs)
        if change is not None:  # one file of the fixture changed (None: deleted)
            file, edit = change
            content = json.loads((out / file).read_text())
            (out / file).unlink()
            if edit is not None:
                edit(content)
                (out / file).write_text(json.dumps(content))
        result = forked.run([script, out], tmp_path)
        assert result.returncode == 1 and message in result.stderr, (name, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr

    fails("five", "comparisons is 5, the plan's command sets 6", comparisons=5)
    fails("span", "span is 30, the plan's command sets 10", span=30)
    fails("another T", "changed_threshold is 0.005, the plan's command sets 0.0025", changed_threshold=0.005)
    fails("against R1", "baseline is 'ppo_poi_replay-model-data-uniform'", baseline="ppo_poi_replay-model-data-uniform")
    fails("probe seeds", "a run with a seed outside the claim seeds 301-310", runs_of={verdict.F1: 11})
    fails("wrong 1.5T", "changed_threshold is 0.005, the plan's command sets 0.00375",
          change=("threshold-1.5T/results.json", lambda c: c["settings"].update(changed_threshold=0.005)))  # fmt: skip
    fails(
        "g1 baseline",
        f"baseline is '{verdict.F1}', the plan's command sets '{verdict.G1}'",
        change=("against-gaussian-ppo/results.json", lambda c: c["settings"].update(baseline=verdict.F1)),
    )
    fails("absent", "no reading 'span 5' of",  # the I1 row at the pre-registered task level
          change=("results.json", lambda c: c["frontier"][1]["readings"].pop("span 5")))  # fmt: skip
    fails("one phase", "not shaped as common.analyze writes it (IndexError",
          change=("results.json", lambda c: c["runs"][0]["phases"].pop()))  # fmt: skip
    fails("no 1.5T", "threshold-1.5T/results.json: run the plan's command",
          change=("threshold-1.5T/results.json", None))  # fmt: skip


def test_the_forward_model_verdict_committed_is_what_verdict_py_prints_from_the_committed_analyses(tmp_path):
    folder = ROOT / "docs/results/fm-fair-6x6"
    printed = forked.run([folder / "verdict.py", folder], tmp_path)
    assert printed.returncode == 0 and printed.stdout == (folder / "verdict.md").read_text(), printed.stderr


def test_the_forward_model_verdict_s_detectable_ratio_is_the_plan_s_computation():
    """On the baseline study's PPO runs the largest detectable ratio is the plan's: 0.591 at 10 runs an arm (and
    common.frontier.versus's bound exactly), 0.63 at 20, 0.70 at 30, 0.82 at 100; arms of identical runs show any."""
    verdict = _fm_verdict()
    runs = json.loads((ROOT / "docs/results/cdk6x6-baseline/forward/results.json").read_text())["runs"]
    v = np.array([run["phases"][1]["changed_adaptation"] for run in runs])
    assert len(v) == 10
    high = frontier.versus(v, v, reps=5000, seed=0, level=verdict.LEVEL)[2]
    assert verdict.largest_detectable(v, 10) == pytest.approx(1 / high, rel=1e-12)
    for n, plan in [(10, 0.591), (20, 0.63), (30, 0.70), (100, 0.82)]:
        assert verdict.largest_detectable(v, n) == pytest.approx(plan, abs=0.005), n
    assert verdict.largest_detectable(np.full(10, 2e5), 10) == 1.0


def test_the_forward_model_verdict_reads_real_analyses(tmp_path):
    """verdict.py on what common.analyze writes from the committed probe runs (F1, G1, I1 and I2 on seeds 401-403,
    the claim's names and settings but for the seeds and the resamples): every reading it needs is there, and the
    ratios it reports are the analysis's own."""
    verdict = _fm_verdict()
    probe = ROOT / "docs/results/fm-fair-6x6/probe"
    series_files = [str(probe / "series.jsonl.gz"), str(probe / "faithful/series.jsonl.gz")]
    I1, I2 = verdict.JUDGED["I1"], verdict.JUDGED["I2"]
    verdict.JUDGED, verdict.FRONTIER = {"I1": I1, "I2": I2}, (verdict.F1, verdict.G1)
    verdict.SEEDS, verdict.SETTINGS["reps"], verdict.PLANNED = (401, 402, 403), 100, 3
    flags = ["--span", "10", "--eval-threshold", "0.004", "--train-threshold", "0.004", "--reps", "100"]
    claim = ["--baseline", verdict.F1, "--frontier", verdict.F1, verdict.G1, "--judge", I1, I2, "--comparisons", "6"]
    for threshold, out in [("0.0025", tmp_path), ("0.00375", tmp_path / "threshold-1.5T")]:
        assert analyze.main([*series_files, *claim, "--changed-threshold", threshold, *flags, "--out", str(out)]) == 0
    assert analyze.main([
        *series_files, "--baseline", verdict.G1, "--task-baseline", verdict.F1, "--changed-threshold", "0.0025",
        *flags, "--out", str(tmp_path / "against-gaussian-ppo"),
    ]) == 0  # fmt: skip
    (tmp_path / "probe/faithful").mkdir(parents=True)
    (tmp_path / "probe/faithful/results.json").write_text((probe / "faithful/results.json").read_text())
    results = json.loads((tmp_path / "results.json").read_text())
    # the tool's names: the analysis at T's, the 1.5T analysis's pre-registered column
    frontier_rows = [r for r in results["frontier"] if r["method"] in (I1, I2) and r["task"] == "return_window"]
    assert sorted(r["method"] for r in frontier_rows) == sorted([I1, I2])
    for row in frontier_rows:
        assert set(verdict.READINGS) | {"changed_adaptation"} <= set(row["readings"])
    rows, context = verdict.judge(tmp_path)
    assert sorted(row["method"] for row in rows) == sorted([I1, I2])
    published = {v["method"]: v for v in results["verdicts"]}
    g1 = json.loads((tmp_path / "against-gaussian-ppo/results.json").read_text())["aggregates"]
    for row in rows:  # the same numbers (NaN where the analysis could not make one)
        g1_row = next(a for a in g1 if a["phase"] == 1 and a["method"] == row["method"])
        np.testing.assert_equal(
            [row["ratio"], row["high"], row["keeps_task"], row["g1"]],
            [published[row["method"]]["ratio"], published[row["method"]]["corrected_high"],
             published[row["method"]]["keeps_task"], g1_row["changed_adaptation_normalised"]["iqm"]],
        )  # fmt: skip
    peaks = [r["phases"][1]["changed_highest"] for r in results["runs"] if r["method"] == verdict.F1]
    assert len(peaks) == 3 and context["half_peak"] == pytest.approx(sum(peaks) / 6)  # an IQM of 3 trims nothing
    assert context["floor"] == pytest.approx(0.0016, abs=5e-6) and context["T"] == 0.0025
    assert context["short"] == {I2: 1}  # one I2 probe run
    report = verdict.report(tmp_path)
    assert "I1 and I2 judged (amendment 1)" in report and "I1 `" in report and "No win" in report


def test_the_band_checks_success_count_is_the_episodes_that_reached_the_goal():
    """successes.py on hand-made bins (step limit 100): one bin with two episodes at the goal (lengths 10 and 30,
    returns 1 - 0.9 L / 100) and one at the limit, the next bin one at the limit; a bin counts in the phase its first
    step lies in; a bin with episodes and no length is refused."""
    script = load_script("successes", ROOT / "docs/results/band-9x9-ppo/successes.py")
    episodes = {"bin": 2000, "count": [3, 1], "return": [0.91 + 0.73 + 0.0, 0.0], "length": [10 + 30 + 100, 100]}
    count, reached = script.successes(episodes, 100, 0, 2000)
    assert (count, round(reached, 9)) == (3, 2.0)
    count, reached = script.successes(episodes, 100, 1, 4000)  # the first bin starts before the phase
    assert (count, round(reached, 9)) == (1, 0.0)
    with pytest.raises(ValueError, match="no length"):
        script.successes({**episodes, "length": [float("nan"), 100]}, 100, 0, 4000)


def test_the_random_policys_first_episodes_are_those_of_minigrid_replayed_alone(monkeypatch):
    """random_success.py's first episodes, 64 layouts of ColorDoorKey-6x6 at seed 1 (3 reach the goal): each world
    replayed alone in MiniGrid (seeded seed x layouts + its index, its column of the script's draws) until its first
    episode ends gives the same return and length."""
    from envs import resolve_env_id

    script = load_script("random_success", ROOT / "docs/results/band-9x9-ppo/random_success.py")
    monkeypatch.setattr(script, "LAYOUTS", 64)
    returns, lengths = script.first_episodes("ColorDoorKey-6x6", 1)
    assert (returns > 0).sum() == 3  # a few successes, so that a wrong layout or step shows
    rng, draws = np.random.default_rng(1), []
    while len(draws) < lengths.max():
        draws.append(rng.integers(7, size=64))
    for i in range(64):
        env = OneHotFlatObs(gym.make(resolve_env_id("ColorDoorKey-6x6")))
        env.reset(seed=64 + i)
        for step, actions in enumerate(draws, start=1):
            _, reward, terminated, truncated, _ = env.step(int(actions[i]))
            if terminated or truncated:
                break
        assert (returns[i], lengths[i]) == (pytest.approx(reward), step), i


def test_the_follow_up_readings_are_the_analysis_s_own_bootstrap():
    """readings.py's 95% CIs of I3 against each comparator are those of the committed analyses' robustness tables (the
    same runs, common.analyze's code path); its 98.75% CIs are wider; leaving a seed out uses the other 9 runs, and
    the halves 5 runs each (one comparator's worked here from results.json)."""
    folder = ROOT / "docs/results/fair-test-8x8-entropy"
    result = forked.run([folder / "readings.py", folder], ROOT)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for arm in (
        "ppo-ent-coef-0.01",
        "ppo-ent-coef-0.02",
        "ppo-ent-coef-0.03",
        "ppo_poi_progress-interest-noise-int-coef-1",
    ):
        line = next(line for line in lines if f"({arm}):" in line)
        numbers = [float(x) for x in re.findall(r"\d+\.\d+", line.split(": ", 1)[1])]  # 95% CI, 98.75, its CI
        point, low, high, corrected_low, corrected_high = numbers[:3] + numbers[5:]
        robustness = json.loads((folder / f"against-{arm}/results.json").read_text())["robustness"]
        row = next(r for r in robustness if r["method"] == "ppo_poi_progress-interest-error" and r["phase"] == 1)
        reading = row["readings"]["threshold x1, span 10"]
        assert (point, low, high) == tuple(round(reading[k], 3) for k in ("iqm", "low", "high")), arm
        assert corrected_low < low and corrected_high > high
    assert sum(line.startswith("    without seed ") for line in lines) == 40
    assert lines[-1].startswith("arms of 40 runs drawn from I3's and F2's: the upper end below 1 in ")
    # against PPO at 0.03, by hand from results.json: seed 215 left out (9 runs an arm), the halves 211-215 and
    # 216-220 (5 runs, IQMs by scipy), the seeds on which I3 is the faster
    from scipy.stats import trim_mean

    runs = json.loads((folder / "results.json").read_text())["runs"]
    steps = {(r["method"], r["seed"]): r["phases"][1]["changed_adaptation"] for r in runs}
    i3, f2 = "ppo_poi_progress-interest-error", "ppo-ent-coef-0.03"
    first = next(i for i, line in enumerate(lines) if f"({f2}):" in line)
    kept = [s for s in range(211, 221) if s != 215]
    point, low, high = frontier.versus(*(np.array([steps[m, s] for s in kept], float) for m in (i3, f2)), seed=0)
    assert lines[first + 5] == f"    without seed 215: {point:.3f} [{low:.3f}, {high:.3f}]"
    halves = [
        trim_mean([steps[i3, s] for s in half], 0.25) / trim_mean([steps[f2, s] for s in half], 0.25)
        for half in (range(211, 216), range(216, 221))
    ]
    faster = sum(steps[i3, s] < steps[f2, s] for s in range(211, 221))
    assert lines[first + 11].startswith(f"    halves {halves[0]:.2f} / {halves[1]:.2f}; I3 faster on {faster} seeds")


def test_the_scale_probe_reads_its_runs_and_decides_by_its_plan(tmp_path, capsys):
    """The intrinsic-scale probe's reading.py (written with its plan, before its runs) on hand-made runs through the
    plan's own series and analysis commands: its arms are the labels the plan's sweep gives; per run the interest,
    its concentration, the scale (mean interest over mean reward) and the reward at the largest interest, over the
    first 10 and next 30 logged points from the change, each over the last 10 before (checked against the same
    arithmetic on the functions the runs logged); the decision takes the candidate re-learning at most 0.85 of S0's
    steps with the task kept; an analysis made otherwise, or runs without the tags, are refused. Without the series,
    one line (a fresh interpreter: the script must not hide a module of the standard library)."""
    from common.sweep import resolve_algo

    folder = ROOT / "docs/results/int-scale-6x6"
    probe = load_script("scale_probe_reading", folder / "reading.py")
    block = bash_blocks((folder / "PLAN.md").read_text())[0]
    command = " ".join(block.split())
    error = "ppo_poi_progress.py --interest error"
    assert f'P="$S/{error}"' in command and "--seeds 901 902 903 904 905" in command
    arms = '"$P" "$P --int-scale-decay 0" "$P --int-scale reward" "$P --int-scale reward --int-scale-decay 0"'
    assert f'{arms} "$S/ppo.py --ent-coef 0.05"' in command
    specs = [error, f"{error} --int-scale-decay 0", f"{error} --int-scale reward",
             f"{error} --int-scale reward --int-scale-decay 0", "ppo.py --ent-coef 0.05"]  # fmt: skip
    assert probe.ARMS == tuple(resolve_algo(f"algos/{spec}")[0] for spec in specs)
    assert probe.SEEDS == (901, 902, 903, 904, 905) and probe.READING == "threshold x1, span 10"
    assert (probe.BEFORE, probe.FIRST, probe.NEXT, probe.RATIO_BAR, probe.TASK_MARGIN) == (10, 10, 30, 0.85, 0.02)

    s0, s1, s2, s3, f05 = probe.ARMS
    relearn = {s0: 20_000, s1: 23_000, s2: 12_000, s3: 30_000, f05: 25_000}  # S1 at 2 from 9,000 on: see below
    mean = lambda i: 1.0 + i  # noqa: E731  (i: the evaluation's index; the change is logged first at i = 50)
    largest = lambda i: (4.0 if i < 50 else 20.0) * mean(i)  # noqa: E731
    reward = lambda i: 0.5 if i < 50 else 0.02 + 0.0001 * i  # noqa: E731
    recovered = lambda i: 0.5 if i < 50 else 0.02 if i < 60 else 10.0  # noqa: E731  (S3: the reward back, and more)
    poi = {"poi/mean": mean, "poi/max": largest, "poi/intrinsic_reward_mean": reward}
    for arm, steps in relearn.items():
        logged = None if arm == f05 else {**poi, "poi/intrinsic_reward_mean": recovered} if arm == s3 else poi
        for seed in probe.SEEDS:
            write_run(tmp_path / "sweep" / "runs", arm, seed, steps + 200 * seed % 1000, 0.9, more=logged,
                      plateau=15_000 if arm == s1 else 0)  # fmt: skip
    here = tmp_path / "R"
    here.mkdir()
    for line in block.splitlines():
        if line.startswith(("python -m common.series", "python -m common.analyze")):
            line = line.replace("../sweeps/intscale", str(tmp_path / "sweep")).replace("$R", str(here))
            line = line.replace("--reps 5000", "--reps 200")  # the plan's but for the bootstrap's length
            made = forked.run(shlex.split(line.split("#")[0])[1:], ROOT, timeout=600)
            assert made.returncode == 0, made.stderr
    probe.HERE, probe.SETTINGS["reps"] = here, 200
    probe.main()
    printed = capsys.readouterr().out.splitlines()

    def window(quantity, indices):
        return np.mean([quantity(i) for i in indices])

    expected = []
    for quantity in (mean, largest, lambda i: largest(i) / mean(i), lambda i: mean(i) / reward(i),
                     lambda i: largest(i) * reward(i) / mean(i)):  # fmt: skip
        before = window(quantity, range(40, 50))
        expected += [window(quantity, range(50, 60)) / before, window(quantity, range(60, 90)) / before]
    row = next(line for line in printed if line.startswith("| S0 | 901 |"))
    assert [float(cell) for cell in row.strip("| ").split(" | ")[2:]] == pytest.approx(expected, rel=6e-3)
    assert len(expected) == 10 and expected[-2] < 1 < expected[2]  # the largest rose, the reward at it fell
    assert "S2: the largest interest rose and its reward fell (first 10) in 5 of 5 runs" in printed
    s3_row = next(line for line in printed if line.startswith("| S3 | 901 |")).strip("| ").split(" | ")
    assert float(s3_row[-2]) < 1 < float(s3_row[-1])  # the reward at the largest fell, then rose past its old level
    assert "S3: the largest interest rose and its reward fell (first 10) in 5 of 5 runs" in printed  # the first 10
    assert printed[-1] == f"decision: a claim study of S2 ({s2})" and sum("(qualifies)" in p for p in printed) == 1
    measured = {line.split(" ")[0]: float(line.split("over S0's ")[1].split(" ")[0]) for line in printed[-6:-1]}
    assert measured["S2"] < 0.85 < measured["S1"] < measured["S0"] == 1 < measured["F05"] < measured["S3"]

    results = json.loads((here / "results.json").read_text())
    for key, value in [("changed_threshold", 3.0), ("span", 5), ("task_window", 50_000), ("frontier", None)]:
        with pytest.raises(ValueError, match="not the plan's settings"):
            probe.decide({**results, "settings": {**results["settings"], key: value}})
    with pytest.raises(ValueError, match="not from the probe's series"):
        probe.decide({**results, "settings": {**results["settings"], "folders": ["a/series.jsonl.gz", "b"]}})
    records = series.read(here / "series.jsonl.gz")
    del next(rec for rec in records if rec["method"] == s0)["scalars"]["poi/max"]
    with pytest.raises(ValueError, match="lacks poi/max: make the series with the plan's --tags"):
        probe.signal(records)
    cut = series.read(here / "series.jsonl.gz")
    first = next(rec for rec in cut if rec["method"] == s0)
    first["scalars"] = {tag: points[:55] for tag, points in first["scalars"].items()}  # 5 points after the change
    with pytest.raises(ValueError, match=f"{first['run']}: ValueError..too few points around the change"):
        probe.signal(cut)
    first["scalars"]["charts/phase"] = [(1000, 0.0)]
    with pytest.raises(ValueError, match="no second phase"):
        probe.signal(cut)

    def made(ratios: dict, before: dict, after: dict) -> dict:
        rows = [{"phase": 1, "method": arm, "readings": {probe.READING: {"iqm": r, "low": r / 2, "high": r * 2}}}
                for arm, r in ratios.items()]  # fmt: skip
        task = [{"phase": phase, "method": arm, "return_window": {"iqm": value}}
                for phase, values in enumerate((before, after)) for arm, value in values.items()]  # fmt: skip
        return {"settings": results["settings"], "robustness": rows, "task": task}

    kept = {s0: 0.95, s1: 0.94, s2: 0.93, s3: 0.95, f05: 0.9}
    ratios = {s0: 1.0, s1: 0.85, s2: 0.7, s3: 0.86, f05: 0.9}
    assert probe.decide(made(ratios, kept, kept))[1] == f"decision: a claim study of S2 ({s2})"
    lost = probe.decide(made(ratios, kept, {**kept, s2: 0.92}))  # S2 lost 0.03 of the task after the change
    assert lost[1] == f"decision: a claim study of S1 ({s1})"  # at the bar, 0.85, S1 qualifies
    lost_before = probe.decide(made(ratios, {**kept, s2: 0.92, s1: 0.92}, kept))
    assert lost_before[1].startswith("decision: no claim study")  # S3, at 0.86, does not
    lines, _ = probe.decide(made({s0: 1.0, s1: 0.9}, kept, kept))
    assert lines[-1] == f"F05 ({f05}): no runs in the analysis"
    with pytest.raises(ValueError, match="no re-learning or task of S0"):
        probe.decide(made({s1: 0.5}, kept, kept))
    missing = [name for name in ("series.jsonl.gz", "results.json") if not (folder / name).exists()]
    if missing:  # before the plan's commands have run through (a partial series may be committed)
        printed = forked.run([folder / "reading.py"], tmp_path, fresh=True)
        assert printed.returncode == 1 and printed.stderr.strip().splitlines() == [
            f"{' and '.join(missing)} missing in {folder}: run the plan's commands first (PLAN.md)"
        ], printed.stderr
    else:  # the committed reading re-makes from the committed series and analysis alone
        printed = forked.run([folder / "reading.py"], tmp_path, fresh=True)
        assert printed.returncode == 0 and printed.stdout == (folder / "reading.md").read_text(), printed.stderr


def test_the_skill_study_s_diagnosis_reads_windows_episodes_and_maps_as_worked_by_hand(tmp_path):
    """diagnosis.py (the skill study's "why the guided skills do not meet the target"): a tag's window mean, the mean
    episode length of the bins inside a window, the largest skill probability; a map PNG as `common.tb` writes it
    read back cell by cell; each skill's share of its map in rows 1-2 and their mean weighted by the skills'
    probabilities over the map's window, its rows through the changed share by row (the environments page's); the
    windows of a run; a re-run's return over each phase's last 100k steps and its twin's. Every table the script
    prints from the committed files stands on the page."""
    import matplotlib.image

    folder = ROOT / "docs/results/skills-band-8x8"
    diagnosis = load_script("skill_study_diagnosis", folder / "diagnosis.py")
    points = [[10, 20, 30, 40], [1.0, 2.0, 4.0, 8.0]]
    assert diagnosis.window_mean(points, 20, 40) == 3.0 and math.isnan(diagnosis.window_mean(points, 50, 60))
    episodes = {"bin": 100, "count": [2, 0, 3, 1], "length": [30, 0, 900, 50]}  # sums of lengths per bin
    record = {"episodes": episodes, "tags": {}}
    assert diagnosis.episode_length(record, 100, 400) == 950 / 4  # bins 1-3
    assert math.isnan(diagnosis.episode_length(record, 50, 200))  # bin 1 only: no episode ended there
    assert diagnosis.episode_length(record, 0, 400) == 980 / 6
    tags = {f"skills/prob_{k}": [[0, 5], [0.125, 0.1]] for k in range(8)}
    tags["skills/prob_3"] = [[0, 5], [0.125, 0.3]]
    assert diagnosis.largest_probability(tags) == [[0, 5], [0.125, 0.3]]

    maps = np.zeros((8, 8, 8))
    maps[2, 1, 3], maps[2, 6, 3] = 1.0, 0.6  # skill 2: 1 of 1.6 in rows 1-2
    maps[5, 2, 4], maps[5, 5, 4] = 0.4, 0.4  # skill 5: half, not more
    maps[7, 4, 2] = 1.0  # skill 7: none
    maps[6, 0, 3], maps[6, 3, 3] = 1.0, 0.5  # skill 6: rows 0 and 3, none in rows 1-2; skills 0, 1, 3, 4: empty
    image = np.zeros((8, 71))
    for k in range(8):
        image[:, k * 9 : k * 9 + 8] = maps[k]
    (tmp_path / "maps").mkdir()
    label = "ppo_poi_diayn-skill-then-task-diayn-coef-2"  # the plan's maps loop names a file by the arm's label
    for name in (f"{label}_541_after", f"{label}_541_before"):
        pixels = np.repeat(np.repeat(image, 16, axis=0), 16, axis=1)  # as `python -m common.tb --scale 16` saves it
        matplotlib.image.imsave(tmp_path / "maps" / f"{name}.png", pixels, cmap="gray", vmin=0, vmax=1)
    read_back = diagnosis.skill_maps(tmp_path / "maps" / f"{label}_541_before.png")
    assert read_back.shape == (8, 8, 8) and np.abs(read_back - maps).max() <= 1 / 255
    probabilities = {f"skills/prob_{k}": [[1_900_000, 1_950_000, 3_950_000], [0.1, 0.2, 0.4]] for k in range(8)}
    probabilities["skills/prob_2"] = [[1_900_000, 1_950_000, 3_950_000], [0.1, 0.3, 0.4]]  # before: 0.2, others 0.15
    probabilities["skills/prob_4"] = [[1_900_000, 1_950_000, 3_950_000], [0.2, 0.1, 0.4]]  # largest: 0.2, 0.3, 0.4
    skill_share = [[1_900_000, 1_950_000, 3_950_000], [0.5, 0.3, 0.05]]
    run = {"method": label, "seed": 541, "tags": {**probabilities, "diayn/skill_share": skill_share}}
    rows = diagnosis.maps_table(tmp_path / "maps", [run]).splitlines()[2:]
    shares = "- - 0.62 - - 0.50 0.00 0.00"  # 1 of 1.6, 0.4 of 0.8, none, none; the empty maps have no share
    weighted = (0.2 * 0.625 + 0.15 * 0.5) / (0.2 + 3 * 0.15)  # over the skills with a map
    # through the changed share by row (rows 1-6: 0.81 0.79 0.72 0.66 0.51 0.18): skill 2 rows 1 and 6, 5 rows 2 and
    # 5, 6 rows 0 (wall: 0) and 3, 7 row 4
    changed = [0.625 * 0.81 + 0.375 * 0.18, 0.5 * 0.79 + 0.5 * 0.51, 0.72 / 3, 0.66]
    by_rows = f"{np.mean(changed):.2f}, 0.66"
    assert rows == [
        f"| D1 541 before | 0.400 | 0.150-0.200 | 0.250 | {shares} | {weighted:.3f} | 0.281 | {by_rows} |",
        f"| D1 541 after | 0.050 | 0.400-0.400 | 0.400 | {shares} | 0.281 | 0.281 | {by_rows} |",  # the plain mean
    ]
    table = (ROOT / "docs/environments.md").read_text().split("| changed share (`ColorDoorKeyBand-8x8`) |")[1]
    assert [float(v) for v in table.split("\n")[0].strip(" |").split(" | ")] == list(diagnosis.CHANGED_BY_ROW[1:7])
    with pytest.raises(ValueError, match="no map of 8 skills"):
        matplotlib.image.imsave(tmp_path / "maps" / "D1_542_before.png", np.zeros((8, 70)), cmap="gray")
        diagnosis.skill_maps(tmp_path / "maps" / "D1_542_before.png")
    episodes = {"bin": 50_000, "count": [1, 1, 2, 2, 1, 1, 1, 3], "return": [0, 0, 1.0, 0.8, 0, 0, 0.5, 2.7]}
    rerun = {"method": label, "seed": 541, "phases": [{"start": 0}, {"start": 200_000}], "episodes": episodes}
    rerun["scalars"] = {"charts/phase": [(0, 0.0), (200_000, 1.0)], "losses/entropy": [(399_999, 1.0)]}
    twin = dict(rerun, episodes=dict(episodes, count=[1, 1, 1, 1, 1, 1, 1, 1]))
    twin["scalars"] = {"losses/entropy": [(389_999, 1.0)]}  # the last phase ends at 390k: its window, bin 6 alone
    rows = diagnosis.reruns_table([rerun], [twin]).splitlines()[2:]
    assert rows == ["| D1 541 | 0.450 | 0.800 | 0.900 | 0.500 |"]  # 1.8 / 4, 3.2 / 4; 1.8 / 2, 0.5 / 1
    results = {"runs": [{"method": label, "seed": 541, "phases": [{}, {"changed_adaptation": 4096.0}]}]}
    record = {"method": label, "seed": 541, "phases": [{"start": 0}, {"start": 2_000_896}]}
    record["scalars"] = {"losses/entropy": [(2_000_896, 1.0), (3_999_744, 1.0)]}
    assert diagnosis.windows(record, diagnosis.relearning_steps(results)) == [
        (1_800_896, 2_000_896),
        (2_000_896, 2_200_896),
        (2_000_896, 2_004_992),
        (2_000_896, 3_999_745),  # to the step after the last logged one, as common.analyze's last phase
    ]

    page = (folder / "README.md").read_text()  # the page's diagnosis re-makes from the committed files alone
    printed = forked.run([folder / "diagnosis.py"], tmp_path, timeout=600)
    assert printed.returncode == 0, printed.stderr
    tables = [line for line in printed.stdout.splitlines() if line.startswith("|")]
    assert len(tables) >= 4 * 2 + 2 * 3 + 2 * 8 and not [line for line in tables if line not in page]  # heads, rows
    maps = (folder / "maps-series.jsonl.gz").exists()
    assert ("#### The maps' skills in rows 1-2" in printed.stdout) == maps


@functools.cache
def continuous_page_commands() -> tuple[tuple[str, ...], ...]:
    """The continuous study's page's commands (its Commands section), each split as the shell would, the variables
    filled in and the thresholds as threshold.py prints them from the committed series."""
    block = (ROOT / "docs/results/continuous-interest/README.md").read_text().split("## Commands")[1]
    values = {}

    def filled(line):
        return shlex.split(re.sub(r"\$(\w+)", lambda m: values[m[1]], line))

    commands = []
    for chunk in bash_blocks(block):
        for line in chunk.splitlines():
            line = line.split("   # ")[0].strip()  # a comment: three spaces, a hash and a space
            if re.match(r"\w+=", line):  # R=..., TP=$(python ...): the thresholds as the script prints them
                name, value = line.split("=", 1)
                if value.startswith("$("):
                    made = forked.run(filled(value[2:-1])[1:], ROOT)
                    assert made.returncode == 0, made.stderr
                    value = made.stdout.strip()
                values[name] = value
            elif line.startswith("python"):
                commands.append(tuple(filled(line)))
    return tuple(commands)


@pytest.mark.parametrize("out", ["ppo", "sac", "ppo-against-noise", "sac-against-noise"])
def test_the_continuous_studys_analyses_re_make_from_the_committed_series(tmp_path, out):
    """The page's analyses, re-run from the committed series (10 resamples: the point estimates do not depend on them),
    give the committed results' per-run readings, IQMs and frontier points (as text: the same numpy stack made them);
    each arm's re-learning IQM and count of runs back below T on the page are the committed results.md's for that arm
    (F1-F3: the frontier's labels in the command's order, I1 the judged one)."""
    folder = ROOT / "docs/results/continuous-interest"
    (command,) = [
        list(c[1:])
        for c in continuous_page_commands()
        if c[1:3] == ("-m", "common.analyze") and Path(c[c.index("--out") + 1]).name == out
    ]
    command[command.index("--reps") + 1], command[command.index("--out") + 1] = "10", str(tmp_path)
    assert command[command.index("--changed-threshold") + 1] == {"ppo": "0.00059", "sac": "0.0023"}[out[:3]]
    made = forked.run(command, ROOT, timeout=600)
    assert made.returncode == 0, made.stderr

    def points(value):  # the point estimates: what a run reads, an IQM, a frontier point, a ratio (no CI)
        if isinstance(value, dict):
            kept = ("iqm", "x", "y", "frontier", "ratio", "phases")
            return {k: points(v) for k, v in value.items() if k in kept or isinstance(v, dict)}
        return [points(v) for v in value] if isinstance(value, list) else value

    committed, again = (json.loads((d / "results.json").read_text()) for d in (folder / out, tmp_path))
    assert json.dumps(again["runs"], sort_keys=True) == json.dumps(committed["runs"], sort_keys=True)
    for part in ("aggregates", "frontier"):  # as text: a frontier not made is NaN in both
        assert json.dumps(points(again[part]), sort_keys=True) == json.dumps(points(committed[part]), sort_keys=True)
    if out in ("ppo", "sac"):
        start = command.index("--frontier") + 1
        arms = dict(zip(("F1", "F2", "F3"), command[start : start + 3])) | {"I1": command[command.index("--judge") + 1]}
        results = (folder / out / "results.md").read_text().split("### changed loss")[1].split("###")[0]
        rows = [row.split(" | ") for row in results.splitlines() if row.startswith("| PendulumMotorChange-v1 | 1 |")]
        committed_cells = {row[2]: (row[6], row[5].split("/")[0]) for row in rows}  # steps, runs back below T
        section = (folder / "README.md").read_text().split(f"## {out.upper()}")[1].split("\n## ")[0]
        quoted = {
            row.split(" | ")[0][2:4]: tuple(row.split(" | ")[1:3])
            for row in section.splitlines()
            if re.match(r"\| [FI]\d ", row)
        }
        assert quoted == {label: committed_cells[method] for label, method in arms.items()}


@pytest.mark.parametrize("index", range(8))
def test_the_continuous_studys_page_quotes_its_reading_scripts(capsys, monkeypatch, index):
    """Each table the page's where.py and oldworld.py commands print (at the scripts' 5,000 resamples) stands on the
    page whole: below its header line, the same rows in the same order, CIs and all, and no other row."""
    page = (ROOT / "docs/results/continuous-interest/README.md").read_text().splitlines()
    scripts = [c[1:] for c in continuous_page_commands() if c[1].endswith(("where.py", "oldworld.py"))]
    assert len(scripts) == 8
    script, *argv = scripts[index]
    module = load_script(Path(script).stem, ROOT / script)
    monkeypatch.chdir(ROOT)
    assert module.main(argv) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    tables = []  # every table on the page under this header (two readings may share one)
    for at in (i for i, line in enumerate(page) if line == printed[0]):
        tables.append(page[at : at + next(i for i, line in enumerate(page[at:] + [""]) if not line.startswith("|"))])
    assert len(printed) >= 4 and printed in tables, printed


def test_the_floor_probe_trains_as_it_says_and_compares_like_with_like(monkeypatch):
    """floor.py on a small set: with no updates B and C are the same untrained model on the new world's held-out sets
    (and A, that model on the old world's, is the error a fresh model of the file's defaults and the seed makes there);
    `train` hands the model's training whole rollouts, then the updates left, of the rows normalised and clamped as
    the file's wrappers do and their normalised deltas (worked by hand, an outlier beyond 10 std among them); A trains
    on the old world, B on the new, C on the old and then the new, all with the old world's statistics; the table's
    ratios are those of its errors."""
    from algos.ppo_continuous_poi_ensemble import Args, ForwardModel, raw_heldout_error
    from common.heldout import continuous_heldout_tensors

    floor = load_script("floor", ROOT / "docs/results/continuous-interest/floor.py")
    defaults = Args()
    (row,) = floor.probe([7], [0], steps=400, eval_steps=160)
    assert row["B"] == row["C"] and row["A"] != row["B"]
    old, new = floor.training_sets(400).values()
    statistics = (old[0].mean(0), old[0].var(0))
    torch.manual_seed(7)
    fresh = ForwardModel(3, 1, defaults.model_hidden_sizes, defaults.ensemble_size)
    heldout = continuous_heldout_tensors(floor.ENV, 0, 160, 80, "cpu")
    assert row["A"] == [raw_heldout_error(fresh, *data, *statistics) for data in heldout]

    calls = []
    monkeypatch.setattr(floor, "train_forward_model", lambda *arguments: calls.append(arguments[2:]))
    obs = torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [100.0, -1.0, 2.0]])
    actions = torch.tensor([[0.1], [0.2], [0.3]])
    by_hand = {  # mean 0.5, std 2: (normalised obs, normalised next obs - normalised obs), clamped at 10 std
        0.1: ([-0.25, -0.25, -0.25], [0.25, -0.25, 0.5]),
        0.2: ([0.25, 0.25, 0.25], [0.25, -0.25, 0.5]),
        0.3: ([10.0, -0.75, 0.75], [0.0, -0.25, 0.5]),
    }
    data = (obs, actions, obs + torch.tensor([0.5, -0.5, 1.0]))
    floor.train(None, None, data, (torch.full((3,), 0.5), torch.full((3,), 4.0)), 10, torch.Generator().manual_seed(0))
    epochs, batch = defaults.model_epochs, defaults.model_batch_size
    assert [(len(call[0]), *call[3:]) for call in calls] == [(2048, epochs, batch), (512, epochs, batch)]
    for normalised, taken, deltas, *_ in calls:
        for row_obs, action, delta in zip(normalised, taken, deltas):
            expected_obs, expected_delta = by_hand[round(float(action), 1)]
            np.testing.assert_allclose(row_obs, expected_obs, rtol=1e-6)
            np.testing.assert_allclose(delta, expected_delta, rtol=1e-6, atol=1e-6)
    monkeypatch.undo()

    trained, real_train = [], floor.train

    def recording_train(model, optimizer, data, statistics, *rest):
        trained.append((data, statistics))
        real_train(model, optimizer, data, statistics, *rest)

    monkeypatch.setattr(floor, "train", recording_train)
    (row,) = floor.probe([7], [3], steps=400, eval_steps=160)
    assert [torch.equal(data[0], new[0]) for data, _ in trained] == [False, True, False, True]  # A; B; C: old, new
    assert torch.equal(trained[0][0][0], old[0]) and torch.equal(trained[2][0][0], old[0])
    assert all(torch.equal(st[0], statistics[0]) and torch.equal(st[1], statistics[1]) for _, st in trained)
    assert row["C"] != row["B"]
    cells = floor.markdown([row]).splitlines()[2].strip("| ").split(" | ")
    ratios = [(row[top][0] / row[bottom][0], row[top][1] / row[bottom][1]) for top, bottom in ("BA", "CB", "CA")]
    assert cells[-3:] == [f"{all_:.2f} / {changed:.2f}" for all_, changed in ratios]


def fake_f1_run(root, seed):
    """A run folder as agentfloor.py reads it: at-change.pt, a checkpoint as the file writes it (its agent, model and
    envs, whose first env's normaliser holds chosen statistics, after the last iteration before the change at 150,000),
    and the end's saved agent, model and statistics; the agent at the end has a std near 0 (its actions are its means),
    the one at the change a std of 0.5; each agent, model and statistics its own."""
    import gymnasium as gym

    from algos.ppo_continuous_poi_ensemble import Agent, Args, ForwardModel, make_env
    from common.checkpoint import env_state, save_checkpoint

    folder = root / f"PendulumMotorChange-v1__F1__{seed}__1700000000"
    folder.mkdir(parents=True)
    made = {}
    for when, mean, var in (
        ("change", [0.1, -0.2, 0.5], [0.5, 0.4, 4.0]),
        ("end", [-0.3, 0.1, -1.0], [0.3, 1e-4, 9.0]),
    ):
        torch.manual_seed(len(when))
        agent, model = Agent(3, 1), ForwardModel(3, 1, Args().model_hidden_sizes, Args().ensemble_size)
        with torch.no_grad():
            agent.actor_logstd.fill_(-30.0 if when == "end" else np.log(0.5))
            agent.actor_mean[-1].weight.mul_(300.0 if when == "end" else 1.0)  # means beyond the bounds too: clipped
        made[when] = agent, model, (torch.tensor(mean), torch.tensor(var))
    agent, model, (mean, var) = made["change"]
    envs = gym.vector.SyncVectorEnv([make_env("PendulumMotorChange-v1", i, False, None, 0.99) for i in range(2)])
    envs.reset(seed=0)
    for i, env in enumerate(envs.envs):
        while not isinstance(env, gym.wrappers.NormalizeObservation):
            env = env.env
        env.obs_rms.mean, env.obs_rms.var = (mean.double().numpy(), var.double().numpy()) if i == 0 else (0.0, 1.0)
    args = Args(change_steps=(150_000,), batch_size=2048)
    values = dict(global_step=149_504, phase=0, envs=env_state(envs))
    save_checkpoint(folder, args, dict(agent=agent, model=model), dict(values, phase=1))  # one the probe refuses
    (folder / "checkpoint.pt").rename(folder / "in-phase-1.pt")
    save_checkpoint(folder, args, dict(agent=agent, model=model), values)
    (folder / "checkpoint.pt").rename(folder / "at-change.pt")
    agent, model, (mean, var) = made["end"]
    torch.save(agent.state_dict(), folder / "agent.pt")
    model.save(folder / "forward_model.pt")
    np.savez(folder / "obs_normalization.npz", mean=np.stack([mean, mean + 1]), var=np.stack([var, var]), clip=10.0)
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(folder))  # the run's log: the change at step 55, its held-out losses by phase
    losses = {
        "eval_loss": {10: 4, 20: 1, 30: 2, 40: 3, 60: 9, 70: 8, 80: 5, 90: 6},
        "eval_loss_changed": {10: 1, 20: 1, 30: 1, 40: 2, 45: 9, 60: 3, 70: 4, 80: 2, 90: 5, 95: 7},
    }
    for tag, values in losses.items():
        for step, value in values.items():
            writer.add_scalar(f"external_model/{tag}", value, step)
    for step in range(5, 100, 10):
        writer.add_scalar("charts/phase", int(step > 50), step)
    writer.close()
    return made


def test_the_continuous_page_quotes_the_agent_floor_probe_s_table():
    """agentfloor.md holds the seeds of the page's agentfloor.py command, and its runs' series those runs; the ranges
    and levels the page gives are agentfloor.md's cells over the seeds (the runs' rise also re-made from the committed
    series), the study's F1 rise (range and median) is made from the study's series, the probe's rise against each run's
    own and its models' is the ratio of the columns, and the random policy's rise (floor.md) is about two thirds of
    these runs' on a log scale."""
    from common import analyze

    agentfloor = load_script("agentfloor", ROOT / "docs/results/continuous-interest/agentfloor.py")
    (command,) = [c for c in continuous_page_commands() if c[1].endswith("agentfloor.py")]
    seeds = list(command[command.index("--seeds") + 1 : command.index(">")])
    study = ROOT / "docs/results/continuous-interest"
    table = (study / "agentfloor.md").read_text().splitlines()
    header = table[0].strip("| ").split(" | ")
    rows = [dict(zip(header, line.strip("| ").split(" | "))) for line in table if re.match(r"\| \d", line)]
    assert [row["seed"] for row in rows] == seeds and {row["updates a phase"] for row in rows} == {"584"}

    def cells(column, part):  # part 0: all held-out transitions, 1: the changed ones
        return [float(row[column].split(" / ")[part]) for row in rows]

    def span(values, digits="2f"):
        return f"{min(values):.{digits}}-{max(values):.{digits}}"

    runs, _ = analyze.find_runs([study / "agentfloor-series.jsonl.gz"])
    assert sorted(str(run.seed) for run in runs) == seeds and all(run.finished for run in runs)
    rises = {str(run.seed): agentfloor.level_ratios(run.scalars, run.path.name) for run in runs}
    assert [[f"{r:.2f}" for r in rises[row["seed"]]] for row in rows] == [
        row["the run's level after / before"].split(" / ") for row in rows
    ]
    f1, _ = analyze.find_runs([study / "ppo-series.jsonl.gz"])
    f1 = [run for run in f1 if run.method == "ppo_continuous_poi_ensemble-int-coef-0" and run.finished]
    f1_rise = [agentfloor.level_ratios(run.scalars, run.path.name)[0] for run in f1]
    rise, probe_rise = "the run's level after / before", "C/A"
    against = [[p / r for p, r in zip(cells(probe_rise, part), cells(rise, part))] for part in (0, 1)]
    c_over_d = [[c / d for c, d in zip(cells("C", part), cells("D", part))] for part in (0, 1)]
    floor_rows = [line.strip("| ").split(" | ") for line in (study / "floor.md").read_text().splitlines()]
    random_rise = [float(row[7].split(" / ")[0]) for row in floor_rows if re.match(r"\d", row[0]) and row[1] == "584"]
    page = " ".join((study / "README.md").read_text().split())
    text = page.split("**Much of the rest may be the agents' data")[1].split("not accounted for by these four runs.")[0]
    assert f"seeds {seeds[0]}-{seeds[-1]}" in text and len(f1) == 10 and "584 updates a phase" in text
    assert f"median {np.median(f1_rise):.1f})" in text
    own_models = [c / r for c, r in zip(cells("C/A", 0), cells("R end/R change", 0))]
    quoted = [span(cells(rise, 0)), span(cells(rise, 1)), span(f1_rise), span(cells("C/A", 0)), span(cells("C/A", 1))]
    quoted += [span(against[0]), span(against[1]), span(own_models), span(random_rise)]
    quoted += [
        span(cells("D/A", 0)),
        span(cells("D/A", 1)),
        span([c / b for c, b in zip(cells("C", 0), cells("B", 0))]),
    ]
    assert re.findall(r"\d\.\d\d-\d\.\d\d(?!e)", text) == quoted
    share = np.mean(np.log(random_rise)) / np.mean(np.log(cells(rise, 0)))  # "about two thirds ... on a log scale"
    assert 0.6 < share < 0.72, share
    assert re.findall(r"(\d\.\d\d)e-4-(\d\.\d\d)e-4", text) == [
        (f"{min(cells(column, 0)) * 1e4:.2f}", f"{max(cells(column, 0)) * 1e4:.2f}") for column in ("A", "R change")
    ]
    levels = [a / r for a, r in zip(cells("A", 0), cells("R change", 0))]
    assert 1.0 <= min(levels) < 1.05 and 1.95 < max(levels) < 2.05  # "1.0 to about 2.0 times"
    assert 1.15 < max(c_over_d[0]) < 1.21 and 1.2 < max(c_over_d[1]) < 1.26  # "at most about a fifth (a quarter"


def test_the_agent_floor_probe_rolls_each_saved_agent_in_its_world_and_trains_as_it_says(tmp_path, monkeypatch):
    """agentfloor.py: the agent, model and env 0's statistics of a run at the change (its checkpoint) and at its end
    (its saves); each agent acts on the observation normalised by its statistics (its actions, by hand, the clipped
    means of a near-deterministic policy), in its world (every step re-made from its state), episodes of 200 steps;
    with no updates A, B and D are a fresh model's errors, by hand, with the statistics each names (C is then B) and R
    the run's models'; with updates A trains on the data and statistics at the change, B at the end, C on both in
    turn, D on both with the statistics at the change; the ratio columns are the errors'; a missing run is a one-line
    error."""
    from algos.ppo_continuous_poi_ensemble import Agent, Args, ForwardModel, raw_heldout_error
    from common.heldout import continuous_heldout_tensors
    from envs.continuous import make_continuous_env, motor_change

    agentfloor = load_script("agentfloor", ROOT / "docs/results/continuous-interest/agentfloor.py")
    runs = tmp_path / "runs"
    made = fake_f1_run(runs, 5)
    folder = agentfloor.run_dir(runs, 5)
    saved = {when: agentfloor.saved(folder, when) for when in ("change", "end")}
    for when, (agent, model, statistics) in saved.items():
        assert all(torch.equal(agent[k], v) for k, v in made[when][0].state_dict().items())
        assert all(torch.equal(model.state_dict()[k], v) for k, v in made[when][1].state_dict().items())
        np.testing.assert_allclose(torch.stack(statistics), torch.stack(made[when][2]), rtol=1e-6)
    obs, actions, next_obs = agentfloor.collect(saved["end"][0], saved["end"][2], 1, 16 * 250, 40)
    assert obs.shape == (4000, 3) and actions.shape == (4000, 1)
    agent = Agent(3, 1)
    agent.load_state_dict(saved["end"][0])
    normalised = ((obs - torch.tensor([-0.3, 0.1, -1.0])) / (torch.tensor([0.3, 1e-4, 9.0]) + 1e-8).sqrt()).clamp(
        -10, 10
    )
    with torch.no_grad():
        means = agent.actor_mean(normalised)
    np.testing.assert_allclose(actions, means.clamp(-2.0, 2.0), atol=1e-5)
    assert (actions.abs() == 2.0).float().mean() > 0.1  # the bounds were reached and held
    world_step = np.arange(4000) // 16  # rows in (step, world) order
    goes_on = (world_step % 200 != 199)[:-16]
    np.testing.assert_array_equal(next_obs[:-16][goes_on], obs[16:][goes_on])
    for i in (0, 7):  # worlds 0 and 7 re-made in a plain loop: from their seeds, reset after 200 steps
        env = make_continuous_env("PendulumMotorChange-v1")
        motor_change(env).set_phase(1)
        state, _ = env.reset(seed=40 + i)
        for t in range(250):
            row = 16 * t + i
            np.testing.assert_array_equal(obs[row], state)
            state, _, terminated, truncated, _ = env.step(actions[row].numpy())
            np.testing.assert_array_equal(next_obs[row], state)
            if terminated or truncated:
                assert t == 199
                state, _ = env.reset()
    # the agent at the change samples its policy: its mean and 0.5 times the generator's standard normal draws
    change_obs, change_actions, _ = agentfloor.collect(saved["change"][0], saved["change"][2], 0, 16 * 3, 40)
    agent.load_state_dict(saved["change"][0])
    generator, (mean, var) = torch.Generator().manual_seed(40), made["change"][2]
    with torch.no_grad():
        means = agent.actor_mean(((change_obs - mean) / (var + 1e-8).sqrt()).clamp(-10, 10))
    noise = torch.cat([torch.randn(16, 1, generator=generator) for _ in range(3)])
    np.testing.assert_allclose(change_actions, (means + 0.5 * noise).clamp(-2.0, 2.0), atol=1e-5)
    assert (change_actions - means).abs().mean() > 0.2
    env = make_continuous_env("PendulumMotorChange-v1")  # every step re-made from its state in the new world
    motor_change(env).set_phase(1)
    env.reset(seed=0)
    for row_obs, action, row_next in zip(obs.double().numpy(), actions.numpy(), next_obs.numpy()):
        env.unwrapped.state = np.array([np.arctan2(row_obs[1], row_obs[0]), row_obs[2]])
        motor_change(env).last_obs = row_obs
        np.testing.assert_allclose(env.step(action)[0], row_next, atol=1e-4)
    assert motor_change(env).changed(obs.numpy(), actions.numpy()).mean() > 0.05  # where the new world differs

    defaults = Args()
    (row,) = agentfloor.probe(runs, [5], 0, steps=400, eval_steps=160)
    heldout = {phase: continuous_heldout_tensors("PendulumMotorChange-v1", phase, 160, 80, "cpu") for phase in (0, 1)}
    stats = {when: made[when][2] for when in made}
    torch.manual_seed(5)
    fresh = ForwardModel(3, 1, defaults.model_hidden_sizes, defaults.ensemble_size)
    by_hand = lambda model, world, of: [raw_heldout_error(model, *d, *stats[of]) for d in heldout[world]]  # noqa: E731
    np.testing.assert_allclose(row["A"], by_hand(fresh, 0, "change"), rtol=1e-6)
    np.testing.assert_allclose(row["B"], by_hand(fresh, 1, "end"), rtol=1e-6)
    np.testing.assert_allclose(row["D"], by_hand(fresh, 1, "change"), rtol=1e-6)
    assert row["B"] == row["C"] and row["A"] != row["D"] != row["B"]
    np.testing.assert_allclose(row["R change"], by_hand(made["change"][1], 0, "change"), rtol=1e-6)
    np.testing.assert_allclose(row["R end"], by_hand(made["end"][1], 1, "end"), rtol=1e-6)

    trained, real_train = [], agentfloor.floor.train

    def recording_train(model, optimizer, data, statistics, *rest):
        trained.append((data, statistics))
        models.append((model, optimizer))
        real_train(model, optimizer, data, statistics, *rest)

    models = []
    monkeypatch.setattr(agentfloor.floor, "train", recording_train)
    (row,) = agentfloor.probe(runs, [5], 3, steps=400, eval_steps=160)
    # C and D go on with A's model and optimiser (Adam's moments) after the change, each its own
    assert models[2] == models[3] and models[4] == models[5] and models[2][0] is not models[4][0]
    assert len({id(model) for model, _ in models}) == 4 and len({id(opt) for _, opt in models}) == 4
    collected = {when: agentfloor.collect(saved[when][0], saved[when][2], phase, 400, agentfloor.COLLECT_SEED)
                 for when, phase in (("change", 0), ("end", 1))}  # fmt: skip
    expected = [("change", "change"), ("end", "end"), ("change", "change"), ("end", "end")]
    expected += [("change", "change"), ("end", "change")]  # A; B; C: old, new; D: old, new with the change's statistics
    assert len(trained) == len(expected)
    for (data, statistics), (data_of, stats_of) in zip(trained, expected):
        assert all(torch.equal(a, b) for a, b in zip(data, collected[data_of]))
        np.testing.assert_allclose(torch.stack(statistics), torch.stack(stats[stats_of]), rtol=1e-6)
    assert not torch.equal(collected["change"][0], collected["end"][0])
    cells = agentfloor.markdown([row]).splitlines()[2].strip("| ").split(" | ")
    pairs = [("C", "A"), ("D", "A"), ("B", "A"), ("R end", "R change")]
    assert cells[-5:-1] == [f"{row[a][0] / row[b][0]:.2f} / {row[a][1] / row[b][1]:.2f}" for a, b in pairs]
    # the run's level: the median of a phase's second half (an odd count keeps its middle); all: 2.5 before (2 3),
    # 5.5 after (5 6); changed: 2 before (1 2 9 of 1 1 1 2 9), 5 after (2 5 7 of 3 4 2 5 7)
    assert cells[-1] == f"{5.5 / 2.5:.2f} / {5 / 2:.2f}"

    with pytest.raises(ValueError, match="0 runs of seed 6, not one with agent.pt and at-change.pt"):
        agentfloor.run_dir(runs, 6)
    (folder / "in-phase-1.pt").replace(folder / "at-change.pt")
    with pytest.raises(ValueError, match="at-change.pt: step 149504, not the last checkpoint before the change"):
        agentfloor.saved(folder, "change")


def test_the_continuous_page_quotes_the_floor_probe_s_table():
    """floor.md holds the seeds and update counts of the page's floor.py command; the ranges and levels the page gives
    for the probe are those of floor.md's cells (over the seeds, at the update count the page names)."""
    (command,) = [c for c in continuous_page_commands() if c[1].endswith("/floor.py")]
    seeds = command[command.index("--seeds") + 1 : command.index("--updates")]
    updates = command[command.index("--updates") + 1 : command.index(">")]
    table = (ROOT / "docs/results/continuous-interest/floor.md").read_text().splitlines()
    rows = [line.strip("| ").split(" | ") for line in table if re.match(r"\| \d", line)]
    assert [(row[0], row[1]) for row in rows] == [(seed, count) for seed in seeds for count in updates]
    columns = {"A": 2, "C": 4, "B/A": 5, "C/B": 6, "C/A": 7}

    def cells(count, column, part):  # part 0: all held-out transitions, 1: the changed ones
        return [float(row[columns[column]].split(" / ")[part]) for row in rows if row[1] == count]

    def span(count, column, part):
        return f"{min(cells(count, column, part)):.2f}-{max(cells(count, column, part)):.2f}"

    page = " ".join((ROOT / "docs/results/continuous-interest/README.md").read_text().split())
    probe = page.split("**Part of the rise may be the new world itself")[1].split("**Much of the rest may be")[0]
    first, second = updates
    assert f"seeds {seeds[0]}-{seeds[-1]})" in probe and len(seeds) == int(seeds[-1]) - int(seeds[0]) + 1
    assert f"trains the file's model {first} updates a phase" in probe and f"At {int(second):,} updates" in probe
    quoted = [(first, "B/A", 0), (first, "B/A", 1), (first, "C/A", 0), (first, "C/A", 1), (first, "C/B", 0)]
    quoted += [(first, "C/B", 1), (second, "B/A", 0)]
    assert re.findall(r"\d\.\d\d-\d\.\d\d(?!e)", probe) == [span(*q) for q in quoted]
    levels = [(f"{min(cells(first, arm, 0)) * 1e4:.2f}", f"{max(cells(first, arm, 0)) * 1e4:.2f}") for arm in "AC"]
    assert re.findall(r"(\d\.\d\d)e-4-(\d\.\d\d)e-4", probe) == levels
