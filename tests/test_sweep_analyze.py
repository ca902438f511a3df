"""The sweep launcher (skip finished runs, survive failed ones, Ray) and the analysis (metrics on
event files whose answers are known by construction, bad input, a tiny real sweep end to end)."""

import json
import re
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from torch.utils.tensorboard import SummaryWriter

from common import analyze, sweep
from tests import forked

ROOT = Path(__file__).resolve().parents[1]

# a stand-in algorithm: takes the sweep's flags, finishes like the real ones, or fails on demand
FAKE_ALGO = textwrap.dedent(f"""
    import argparse, signal, sys, time
    from pathlib import Path
    sys.path.insert(0, {str(ROOT)!r})
    from common.runs import mark_finished, run_name
    parser = argparse.ArgumentParser()
    for flag in ("--env", "--runs-dir", "--exp-name", "--fail-seeds", "--resume"):
        parser.add_argument(flag, default="")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--stop-seconds", type=float, default=0.0)
    args = parser.parse_args()
    print("starting", args.seed, "from", args.resume or "the start", flush=True)
    run_dir = Path(args.resume or Path(args.runs_dir) / run_name(args.env, args.exp_name, args.seed))
    def on_sigterm(signum, frame):  # as the real ones: a checkpoint, exit 143
        time.sleep(args.stop_seconds)
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "checkpoint.pt").write_text("")
        sys.exit(143)
    signal.signal(signal.SIGTERM, on_sigterm)
    time.sleep(0 if args.resume else args.sleep)
    if str(args.seed) in args.fail_seeds.split(","):
        sys.exit("diverged at step 7")
    run_dir.mkdir(parents=True, exist_ok=True)
    mark_finished(run_dir, 10, 0.1)
""")


def run_sweep(tmp_path: Path, *flags: str, fresh: bool = False) -> subprocess.CompletedProcess:
    """`python -m common.sweep` of the fake algorithm (each of its runs a process of its own), forked from the test
    process (tests/forked.py), or with `fresh` in a new interpreter."""
    script = tmp_path / "fake_algo.py"
    script.write_text(FAKE_ALGO)
    cmd = ["-m", "common.sweep", "--algos", str(script), "--envs", "E", "--out", str(tmp_path / "sw"), *flags]
    return forked.run(cmd, ROOT, fresh=fresh)


def test_sweep_skips_finished_runs_and_records_failed_ones(tmp_path):
    first = run_sweep(tmp_path, "--seeds", "1", "2", "3", "--workers", "2", "--extra", "--fail-seeds 2")
    assert first.returncode == 1, first.stdout + first.stderr
    assert (
        "FAILED E__fake_algo__2 (exit code 1; starts over on the next start)" in first.stdout
        and "diverged at step 7" in first.stdout
    )
    failed = json.loads((tmp_path / "sw/logs/E__fake_algo__2.failed.json").read_text())
    assert failed["exit_code"] == 1 and "diverged at step 7" in failed["log_tail"]
    assert len(list((tmp_path / "sw/runs").iterdir())) == 2  # seeds 1 and 3 went on and finished

    second = run_sweep(tmp_path, "--seeds", "1", "2", "3", "--workers", "2")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "skip E__fake_algo__1" in second.stdout and "skip E__fake_algo__3" in second.stdout
    assert "finished E__fake_algo__2" in second.stdout and "done 3/3 (skipped 2)" in second.stdout
    assert not (tmp_path / "sw/logs/E__fake_algo__2.failed.json").exists()
    assert len(list((tmp_path / "sw/runs").iterdir())) == 3
    log = (tmp_path / "sw/logs/E__fake_algo__2.log").read_text()
    assert log.count("starting 2") == 2  # both attempts kept in the log


def test_a_sweep_skips_the_runs_a_committed_series_holds_as_finished(tmp_path):
    from common import series

    done = {
        "run": "E__fake_algo__2__1002",
        "env": "E",
        "method": "fake_algo",
        "seed": 2,
        "finished": True,
        "tags": {},
        "episodes": {},
        "phases": [],
    }
    series.write(
        [done, {**done, "run": "E__fake_algo__3__1003", "seed": 3, "finished": False}], tmp_path / "s.jsonl.gz"
    )
    result = run_sweep(tmp_path, "--seeds", "1", "2", "3", "--workers", "1", "--done", str(tmp_path / "s.jsonl.gz"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"skip E__fake_algo__2: finished in {tmp_path / 's.jsonl.gz'} (E__fake_algo__2__1002)" in result.stdout
    assert "done 3/3 (skipped 1)" in result.stdout  # seed 3 did not finish there: it runs
    assert sorted(p.name.split("__")[2] for p in (tmp_path / "sw/runs").iterdir()) == ["1", "3"]
    missing = run_sweep(tmp_path, "--seeds", "1", "--done", str(tmp_path / "nope.jsonl.gz"))
    assert (
        missing.returncode == 1
        and missing.stderr.strip() == f"error: --done: no series file at {tmp_path / 'nope.jsonl.gz'}"
    )


def test_start_for_starts_no_run_after_its_minutes_and_the_next_start_goes_on(tmp_path):
    # one worker, runs of 3 s, a window of 0.05 min: the first run starts in it and finishes; the two queued behind
    # it come after the window and do not start (no log, no folder)
    first = run_sweep(
        tmp_path, "--seeds", "1", "2", "3", "--workers", "1", "--extra", "--sleep 3", "--start-for", "0.05"
    )
    assert first.returncode == 1, first.stdout + first.stderr
    assert "finished E__fake_algo__1" in first.stdout
    assert "2 run(s) not started: their turn came after --start-for 0.05 min" in first.stdout
    assert "failed 0" in first.stdout and "FAILED" not in first.stdout
    assert [p.name for p in (tmp_path / "sw/logs").iterdir()] == ["E__fake_algo__1.log"]
    assert [p.name.split("__")[2] for p in (tmp_path / "sw/runs").iterdir()] == ["1"]
    assert first.stdout.splitlines()[-2].endswith("running 0 | failed 0 | not started 2 | ETA -")
    again = run_sweep(tmp_path, "--seeds", "1", "2", "3", "--workers", "1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "skip E__fake_algo__1" in again.stdout and "done 3/3 (skipped 1)" in again.stdout
    bad = run_sweep(tmp_path, "--start-for", "0", fresh=True)
    assert bad.returncode == 1 and bad.stderr.strip() == "error: --start-for must be positive, got 0.0"


@pytest.mark.slow
def test_sweep_on_a_local_ray_instance(tmp_path):
    import ray  # noqa: F401  (pinned in requirements.txt: a broken install fails here rather than skips)

    # two CPUs, runs of 19 s, a window of 18 s (Ray takes a few seconds to start): seeds 1 and 2 start at once and
    # finish; seed 3's turn comes after them and it never starts
    cmd = ["--seeds", "1", "2", "3", "--workers", "2", "--backend", "ray", "--extra", "--sleep 19"]
    result = run_sweep(tmp_path, *cmd, "--start-for", "0.3", fresh=True)
    assert result.returncode == 1 and "1 run(s) not started" in result.stdout, result.stdout + result.stderr
    assert "finished E__fake_algo__1" in result.stdout and "finished E__fake_algo__2" in result.stdout
    assert sorted(p.name.split("__")[2] for p in (tmp_path / "sw/runs").iterdir()) == ["1", "2"]


def test_sweep_plans_labels_and_rejects_bad_input(tmp_path):
    runs = sweep.plan_runs(
        ["ppo", "ppo_poi_ensemble --int-coef 0.1"], ["ColorDoorKey-6x6"], [1, 2], ["--total-timesteps", "9"], tmp_path
    )
    assert [run.key.removeprefix("ColorDoorKey-6x6__") for run in runs] == [
        "ppo__1",
        "ppo_poi_ensemble-int-coef-0.1__1",
        "ppo__2",
        "ppo_poi_ensemble-int-coef-0.1__2",
    ]
    assert runs[1].command[-4:] == ("--int-coef", "0.1", "--total-timesteps", "9")
    with pytest.raises(ValueError, match="unknown algorithm 'nope'.*known: .*ppo"):
        sweep.resolve_algo("nope")
    for algos, extra in (
        (["ppo"], ["--seed", "5"]),
        (["ppo --runs_dir /tmp"], []),
        (["ppo"], ["--env=MiniGrid-Empty-5x5-v0"]),
    ):
        with pytest.raises(ValueError, match="the sweep sets these for each run"):  # the run would take the last one
            sweep.plan_runs(algos, ["ColorDoorKey-6x6"], [1, 2], extra, tmp_path)
    with pytest.raises(ValueError, match="two runs of the sweep are the same"):
        sweep.plan_runs(["ppo"], ["ColorDoorKey-6x6"], [1, 1], [], tmp_path)
    # the flags of this checkout's files are checked as each file checks them, once for each method and env
    sweep.check_flags(sweep.plan_runs(["ppo"], ["MiniGrid-Empty-5x5-v0", "ColorDoorKeyBand-8x8"], [1, 2], [], tmp_path))
    long_sac = ["--total-timesteps", "40000", "--change-steps", "20000"]
    sweep.check_flags(sweep.plan_runs(["sac_forward_model"], ["PendulumMotorChange-v1"], [1], long_sac, tmp_path))
    for algos, envs, message in [
        (["ppo"], ["ColorDoorKey-6x6", "ColorDoorKey-7x7"], "ColorDoorKey-7x7__ppo__1: unknown env 'ColorDoorKey-7x7'"),
        (["ppo"], ["Pendulum-v1"], "Pendulum-v1__ppo__1: unknown env 'Pendulum-v1'"),  # not one of this file's
        (["ppo", "ppo --num-envs 0"], ["ColorDoorKey-6x6"], "ColorDoorKey-6x6__ppo-num-envs-0__1: --num-envs must be"),
        (
            ["ppo --help"],
            ["ColorDoorKey-6x6"],
            "ColorDoorKey-6x6__ppo-help__1: --help (or another of tyro's own flags) asks",
        ),
        (
            ["sac_forward_model"],
            ["ColorDoorKey-6x6-v0"],
            "ColorDoorKey-6x6-v0__sac_forward_model__1: ColorDoorKey-6x6-v0 has",
        ),
    ]:
        with pytest.raises(ValueError, match="^" + re.escape(message)):
            sweep.check_flags(sweep.plan_runs(algos, envs, [1, 2], [], tmp_path))
    (tmp_path / "own.py").write_text("")  # a file of another checkout or project checks its own flags
    sweep.check_flags(sweep.plan_runs([str(tmp_path / "own.py")], ["E"], [1], ["--num-envs", "0"], tmp_path))
    bad = forked.run(["-m", "common.sweep", "--algos", "ppo --num-envs 0", "--envs", "ColorDoorKey-6x6", "--seeds", "1",
                      "--out", tmp_path / "bad"], ROOT)  # fmt: skip
    assert bad.returncode == 1 and bad.stderr.strip() == (
        "error: ColorDoorKey-6x6__ppo-num-envs-0__1: --num-envs must be positive, got 0"
    )
    assert not (tmp_path / "bad").exists()
    tyro_error = forked.run(["-m", "common.sweep", "--algos", "ppo", "--envs", "ColorDoorKey-6x6", "--seeds", "1",
                             "--extra", "--int-coef 0.1", "--out", tmp_path / "bad"], ROOT)  # fmt: skip
    assert tyro_error.returncode == 1 and tyro_error.stderr.strip().startswith(
        "error: ColorDoorKey-6x6__ppo__1: Unrecognized options: --int-coef, 0.1; Perhaps you meant: --ent-coef FLOAT"
    )
    assert not (tmp_path / "bad").exists()
    # a run that will not start afresh is not checked: finished, or resumed (its file checks its checkpoint's flags)
    finished = tmp_path / "old" / "runs" / "ColorDoorKey-6x6__ppo-num-envs-0__1__1700000000"
    finished.mkdir(parents=True)
    (finished / "finished.json").write_text("{}")

    def dry_run(*seeds):
        return sweep.main(["--algos", "ppo --num-envs 0", "--envs", "ColorDoorKey-6x6", "--seeds", *map(str, seeds),
                           "--out", str(tmp_path / "old"), "--dry-run"])  # fmt: skip

    assert dry_run(1) == 0 and dry_run(1, 2) == 1  # seed 2's run would start: refused
    assert dry_run(1, 2**32) == 1  # a seed numpy cannot take, whatever the file
    for flags, message in [
        (["--workers", "0"], "error: --workers must be positive, got 0"),
        (["--run-timeout", "nan"], "error: --run-timeout must be positive, got nan"),
        (["--start-for", "nan"], "error: --start-for must be positive, got nan"),
    ]:
        result = run_sweep(tmp_path, *flags, fresh=True)  # the command line in a fresh interpreter
        assert result.returncode == 1 and result.stderr.strip() == message
        assert not (tmp_path / "sw").exists()


# ---- analysis ----------------------------------------------------------------------------------


def test_ema_matches_pandas_and_a_hand_worked_case():
    assert np.allclose(analyze.ema(np.array([4.0, 0.0, 0.0]), span=3), [4.0, 2.0, 1.0])  # alpha = 0.5
    values = np.random.default_rng(0).normal(size=50)
    assert np.allclose(analyze.ema(values, 30), pd.Series(values).ewm(span=30, adjust=False).mean().to_numpy())


PER_PHASE, DROP_AT, EVERY = 100, 40, 1000  # logged points per phase, index where the loss drops, steps apart


def write_run(folder: Path, method: str, seed: int, high: float, finished: bool = True, tags=None, nan_at=None) -> None:
    """Two phases of PER_PHASE iterations; in each, the losses are `high` until index DROP_AT and
    0 after it (the eval loss NaN at index `nan_at`); the return is 0 then 1 (from DROP_AT) in phase 0 and 0
    throughout phase 1."""
    run_dir = folder / f"ColorDoorKey-6x6__{method}__{seed}__{1000 + seed}"
    writer = SummaryWriter(run_dir)
    for i in range(2 * PER_PHASE):
        step, phase, index = (i + 1) * EVERY, i // PER_PHASE, i % PER_PHASE
        loss = high if index < DROP_AT else 0.0
        scalars = {
            "charts/phase": phase,
            "external_model/train_loss": loss,
            "external_model/eval_loss": float("nan") if index == nan_at else loss,
            "charts/episodic_return": float(phase == 0 and index >= DROP_AT),
        }
        for tag, value in scalars.items():
            if tags is None or tag in tags:
                writer.add_scalar(tag, value, step)
    writer.close()
    if finished:
        (run_dir / "finished.json").write_text("{}")


def test_metrics_on_event_files_with_known_answers(tmp_path):
    write_run(tmp_path, "m", 1, high=8.0)
    runs, _ = analyze.find_runs([tmp_path])
    scalars = analyze.read_scalars(runs[0].path)
    alpha = 2 / 31
    # after the drop the smoothed loss is 8 (1 - alpha)^(j + 1) at the j-th point: below 2 once (1 - alpha)^(j + 1) < 1/4
    j = math.ceil(math.log(0.25) / math.log(1 - alpha)) - 1
    # the mean of the last 10 returns reaches 0.8 at the 8th episode of return 1
    phase0, phase1 = analyze.phase_metrics(scalars, 30, {"train": 2.0, "eval": 2.0}, 0.8, success_window=10)
    phase1_start = (PER_PHASE + 1) * EVERY  # the first step logged in phase 1
    assert phase0["start"] == 0 and phase1["start"] == phase1_start
    assert phase0["eval_adaptation"] == (DROP_AT + j + 1) * EVERY
    assert phase1["eval_adaptation"] == phase1["train_adaptation"] == (DROP_AT + j) * EVERY
    assert phase0["eval_reached"] and phase1["eval_reached"]
    assert phase1["eval_asymptotic"] == pytest.approx(8 * (1 - alpha) ** (PER_PHASE - DROP_AT))
    assert phase0["success"] and phase0["success_steps"] == (DROP_AT + 8) * EVERY
    assert not analyze.phase_metrics(scalars, 30, {"train": 2.0, "eval": 2.0}, 0.8)[0]["success"]  # 60 < 100 episodes
    # relative thresholds: phase 1's is 1.5 x phase 0's last smoothed loss, 8 (1 - alpha)^60
    _, relative = analyze.phase_metrics(scalars, 30, {"train": 2.0, "eval": 2.0}, 0.8, relative=1.5)
    level = 8 * (1 - alpha) ** (PER_PHASE - DROP_AT)
    assert relative["eval_threshold"] == pytest.approx(1.5 * level)
    jr = math.ceil(math.log(1.5 * level / 8) / math.log(1 - alpha)) - 1
    assert relative["eval_adaptation"] == (DROP_AT + jr) * EVERY
    assert not phase1["success"] and math.isnan(phase1["success_steps"])
    # never below the threshold: counted with the phase's length, and flagged
    (censored, *_) = analyze.phase_metrics(scalars, 30, {"train": -1.0, "eval": -1.0}, 0.8)
    assert not censored["eval_reached"] and censored["eval_adaptation"] == phase1_start
    # span 1 is no smoothing: the first point after the drop
    (raw, *_) = analyze.phase_metrics(scalars, 1, {"train": 2.0, "eval": 2.0}, 0.8)
    assert raw["eval_adaptation"] == (DROP_AT + 1) * EVERY
    # a threshold above the high loss: never at or above it, adapted from the start
    (never, *_) = analyze.phase_metrics(scalars, 30, {"train": 9.0, "eval": 9.0}, 0.8)
    assert never["eval_reached"] and never["eval_adaptation"] == 0


def test_the_robustness_readings_on_a_step_shaped_loss_have_known_answers():
    """A phase from step 5,000 with an evaluation every 100 steps: the loss is 8 for 10 evaluations, then 0. Smoothed
    with alpha = 2 / (n + 1) it is 8 (1 - alpha)^(j + 1) at the j-th evaluation after the drop, so each reading
    (threshold f T at span n) is 100 (11 + j) with j the first whose value is below f T; one that never gets below
    counts the phase's length; the mean log10 loss over the first 2,000 steps (before step 7,000) is that of 10
    eights and 9 zeros (floored at 1e-12)."""
    start, end, threshold = 5_000, 15_000, 2.0
    steps = start + 100.0 * np.arange(1, 101)
    values = np.where(np.arange(100) < 10, 8.0, 0.0)
    robustness = analyze.Robustness(factors=(0.5, 1.0, 2.0), spans=(5, 10, 30), window=2_000)

    def expected(factor, span, floor=0.0):  # the loss falls from 8 + floor to floor
        j = math.ceil(math.log((factor * threshold - floor) / 8) / math.log(1 - 2 / (span + 1))) - 1
        return 100.0 * (11 + j)

    readings = analyze.robust_readings(steps, values, start, end, threshold, 10, robustness)
    assert readings == {
        "threshold x0.5, span 10": expected(0.5, 10),
        "threshold x1, span 10": expected(1.0, 10),
        "threshold x2, span 10": expected(2.0, 10),
        "span 5": expected(1.0, 5),
        "span 30": expected(1.0, 30),
        "mean log10 loss, first 2k": pytest.approx((10 * math.log10(8) + 9 * -12) / 19),
    }
    assert expected(0.5, 10) > expected(1.0, 10) > expected(2.0, 10) and expected(1.0, 5) < expected(1.0, 30)
    lifted = analyze.robust_readings(steps, values + 2.0, start, end, threshold, 10, robustness)  # never below 2
    assert lifted["threshold x0.5, span 10"] == lifted["threshold x1, span 10"] == end - start
    assert lifted["threshold x2, span 10"] == expected(2.0, 10, floor=2.0) == expected(1.0, 10)


def test_adaptation_counts_from_a_delayed_rise():
    """The loss starts low (old episodes still running), rises above the threshold, falls back."""
    steps = np.arange(1, 11) * 100.0
    loss = np.array([1, 1, 5, 5, 5, 3, 1, 1, 1, 1], dtype=float)
    assert analyze.steps_to_fall_below(steps, loss, threshold=2.0, start=50) == 700 - 50
    assert math.isnan(analyze.steps_to_fall_below(steps, loss, threshold=0.5, start=50))


def test_bootstrap_is_reproducible_with_its_seed_and_leaves_numpy_alone():
    scores = {"a": np.random.default_rng(0).random((6, 1)), "b": np.random.default_rng(1).random((6, 1))}
    np.random.seed(123)
    expected_next = np.random.random()
    np.random.seed(123)
    first = analyze.interval_estimates(scores, reps=300, seed=0)
    assert np.random.random() == expected_next  # the global generator is as it was
    assert analyze.interval_estimates(scores, reps=300, seed=0) == first
    assert analyze.interval_estimates(scores, reps=300, seed=1) != first
    # a method's interval does not depend on which other methods are analysed with it
    more = {"c": np.random.default_rng(2).random((6, 1))} | scores
    assert analyze.interval_estimates(more, reps=300, seed=0)["a"] == first["a"]
    assert analyze.interval_estimates({"b": scores["b"]}, reps=300, seed=0)["b"] == first["b"]


def test_the_iqm_interval_is_the_percentile_bootstrap_of_the_interquartile_mean():
    """interval_estimates (through rliable) against the 95% percentile bootstrap of scipy's 25%-trimmed mean written
    here with numpy: the same point, and ends within Monte Carlo error (5% of the interval's width; a 90% interval
    is 6-12% off)."""
    from scipy.stats import trim_mean

    rng, resample = np.random.default_rng(3), np.random.default_rng(4)
    scores = {"normal": rng.normal(5, 2, (10, 1)), "skewed": rng.lognormal(12, 0.8, (7, 1))}
    estimates = analyze.interval_estimates(scores, reps=4000, seed=0)
    for method, x in scores.items():
        x = x.ravel()
        iqms = trim_mean(x[resample.integers(len(x), size=(4000, len(x)))], 0.25, axis=1)
        low, high = np.percentile(iqms, [2.5, 97.5])
        point, got_low, got_high = estimates[method]
        assert point == pytest.approx(trim_mean(x, 0.25))
        assert abs(got_low - low) < 0.05 * (high - low) and abs(got_high - high) < 0.05 * (high - low), method
        assert np.sort(x)[1] < got_low < point < got_high < np.sort(x)[-2]  # not the data's range


def analyse(*args: str, fresh: bool = False) -> subprocess.CompletedProcess:
    """`python -m common.analyze`, forked from the test process (tests/forked.py), or with `fresh` in a new
    interpreter."""
    cmd = ["-m", "common.analyze", *args, "--reps", "200", "--success-window", "10"]
    return forked.run(cmd, ROOT, fresh=fresh)


def test_analysis_aggregates_with_iqm_normalises_and_reports_what_is_missing(tmp_path):
    # method "slow" takes 8 per unit of loss where "base" takes 2..5: higher loss, later drop below 2
    for seed, high in enumerate([2.5, 3.0, 4.0, 5.0], start=1):
        write_run(tmp_path / "runs", "base", seed, high)
        write_run(tmp_path / "runs", "slow", seed, 8.0, finished=seed != 4)
    (tmp_path / "sweep.json").write_text(json.dumps({"runs": [{"key": "ColorDoorKey-6x6__slow__5", "label": "slow"}]}))
    result = analyse(str(tmp_path), "--baseline", "base", "--eval-threshold", "2", "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "out/results.json").read_text())
    alpha = 2 / 31

    def steps_below_2(high):  # phase 0, as in the test above
        return (DROP_AT + math.ceil(math.log(2 / high) / math.log(1 - alpha))) * EVERY

    base_steps = sorted(steps_below_2(h) for h in [2.5, 3.0, 4.0, 5.0])
    iqm = np.mean(base_steps[1:3])  # 4 runs: the IQM drops one from each end
    rows = {(r["method"], r["phase"]): r for r in data["aggregates"]}
    assert rows[("base", 0)]["eval_adaptation"]["iqm"] == pytest.approx(iqm)
    assert rows[("base", 0)]["eval_adaptation_normalised"]["iqm"] == pytest.approx(1.0)
    assert rows[("slow", 0)]["eval_adaptation_normalised"]["iqm"] == pytest.approx(steps_below_2(8.0) / iqm)
    low, high = rows[("base", 0)]["eval_adaptation"]["low"], rows[("base", 0)]["eval_adaptation"]["high"]
    assert base_steps[0] <= low <= iqm <= high <= base_steps[-1]
    assert rows[("base", 0)]["success"] == 4 and rows[("base", 1)]["success"] == 0
    table = (tmp_path / "out/results.md").read_text()
    assert "| ColorDoorKey-6x6 | 0 | slow | 4 | 4/4 | 4/4 |" in table
    assert "ColorDoorKey-6x6__slow__4__1004 did not finish" in table
    assert "1 planned run(s) have no run folder yet: ColorDoorKey-6x6__slow__5" in table
    for png in ("curves_ColorDoorKey-6x6.png", "adaptation_ColorDoorKey-6x6.png"):
        assert (tmp_path / "out" / png).stat().st_size > 10_000

    dropped = analyse(str(tmp_path), "--drop-unsuccessful", "--out", str(tmp_path / "out2"))
    assert dropped.returncode == 1 and "dropped every run" in dropped.stderr  # nobody solves phase 1

    only = analyse(str(tmp_path), "--methods", "base", "--eval-threshold", "2", "--out", str(tmp_path / "out3"))
    assert only.returncode == 0, only.stderr
    subset = json.loads((tmp_path / "out3/results.json").read_text())
    assert {r["method"] for r in subset["aggregates"]} == {"base"} and not any("slow" in n for n in subset["notes"])
    subset_rows = {(r["method"], r["phase"]): r for r in subset["aggregates"]}
    assert subset_rows[("base", 0)]["eval_adaptation"] == rows[("base", 0)]["eval_adaptation"]  # the same CI


def test_a_note_says_where_the_baseline_rarely_gets_back_below_a_threshold(tmp_path):
    def run(method, env, *after, finished=True, threshold=1.0):  # per phase after a change: whether it got back
        phases = [{"changed_threshold": threshold, "changed_reached": r} for r in (True, *after)]
        return analyze.RunInfo(Path("x"), env, method, 1, finished, phases=phases)

    # env E, after the first change: 3 of 4 runs get back (the 0.75 share: no note); after the second, 1 of the 3
    # runs that reach that phase and log the loss there (one run is a phase short, one has no threshold there: it
    # does not log the loss); an unfinished run that never got back is not counted
    runs = [run("base", "E", True, False), run("base", "E", False, True), run("base", "E", True, True)]
    runs += [run("base", "E", True, False), run("base", "E", True), run("base", "E", False, False, finished=False)]
    del runs[2].phases[2]["changed_threshold"]
    # env F: 2 of 2 runs back after the change (no note, and too few runs for one anyway); G: 3 runs, none back, with
    # the loss switched off (a threshold of 0): no note; other methods are not the baseline
    runs += [run("base", "F", True), run("base", "F", True), run("other", "E", False, False)]
    runs += [run("base", "G", False, threshold=0.0) for _ in range(3)]
    expected = (
        "E, phase 2: 1 of the 3 finished runs of the baseline base that log the changed loss get back below the "
        "changed threshold 1: its changed re-learning steps count mostly whether a run gets back (a threshold at the "
        "baseline's floor)"
    )
    assert analyze.floor_notes(runs, "base") == [expected]
    assert analyze.floor_notes(runs, None) == [] and analyze.floor_notes(runs, "other") == []  # one run: too few
    relative = analyze.floor_notes(runs, "base", relative=1.5)
    assert relative == [
        expected.replace("below the changed threshold 1", "within 1.5x their own changed level before the change")
    ]
    runs += [run("base", "F", False) for _ in range(3)]  # F: now 2 of 5 back
    assert [n[: n.index(":")] for n in analyze.floor_notes(runs, "base")] == ["E, phase 2", "F, phase 1"]

    for seed in (1, 2, 3):  # end to end: a threshold below every loss is never got back below
        write_run(tmp_path / "runs", "base", seed, 4.0)

    def notes_at(eval_threshold):  # the train loss gets back below 2 in every run
        out = tmp_path / f"out{eval_threshold}"
        flags = ["--baseline", "base", "--eval-threshold", eval_threshold, "--train-threshold", "2", "--out", str(out)]
        result = analyse(str(tmp_path), *flags)
        assert result.returncode == 0, result.stderr
        return json.loads((out / "results.json").read_text())["notes"]

    assert notes_at("-1") == []  # the eval loss switched off
    notes = notes_at("1e-9")
    assert len(notes) == 1 and notes[0].startswith("ColorDoorKey-6x6, phase 1: 0 of the 3 finished runs"), notes
    assert "the eval threshold 1e-09" in notes[0]


def test_analysis_rejects_bad_input_with_one_line(tmp_path):
    (tmp_path / "empty").mkdir()
    write_run(tmp_path / "bare", "m", 1, 1.0, tags={"charts/episodic_return"})
    write_run(tmp_path / "ok", "m", 1, 3.0)
    cases = [
        ([str(tmp_path / "nowhere")], f"error: no folder at {tmp_path / 'nowhere'}"),
        ([str(tmp_path / "empty")], f"error: no runs (TensorBoard event files) under {tmp_path / 'empty'}"),
        (
            [str(tmp_path / "bare")],
            "error: no run has the scalars the analysis needs: passed over "
            "ColorDoorKey-6x6__m__1__1001: no external_model/train_loss, external_model/eval_loss",
        ),
        ([str(tmp_path / "ok"), "--baseline", "ppo"], "error: baseline 'ppo' is not in the sweep; methods: m"),
        ([str(tmp_path / "ok"), "--methods", "m", "ppo"], "error: --methods: no runs of ppo; methods found: m"),
        (
            [str(tmp_path / "ok"), "--eval-threshold", "5"],
            "error: --eval-threshold 5 is above every run's smoothed eval "
            "loss (at most 3): every adaptation would be 0",
        ),
        (
            [str(tmp_path / "ok"), "--train-threshold", "nan"],
            "error: --train-threshold must be a finite number, got nan",
        ),
        ([str(tmp_path / "ok"), "--seed", "-1"], "error: --seed must be in [0, 4294967295] (numpy's seeds), got -1"),
        (
            [str(tmp_path / "ok"), "--out", str(tmp_path / "afile")],
            f"error: --out {tmp_path / 'afile'} is, or lies under, a file",
        ),
    ]
    (tmp_path / "afile").write_text("")
    for args, message in cases:
        result = analyse(*args, fresh=args == cases[0][0])  # the first in a fresh interpreter
        assert result.returncode == 1 and result.stderr.startswith(message), (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile", "bare", "empty", "ok"]  # no analysis folder


def test_analysis_leaves_non_finite_losses_out_and_refuses_data_it_cannot_use_in_one_line(tmp_path):
    """A NaN loss would hold the moving average at NaN (the run never back below the threshold) and an all-NaN run
    would count as re-learning at once: non-finite values are left out with a note. Series records without the parts
    a run has, a run not named as runs are, a damaged event file, a frontier arm without the frontier loss and an
    --out under a file are one-line errors before any work."""
    import gzip
    import json

    for seed in (1, 2, 3):
        write_run(tmp_path / "ok", "m", seed, 3.0)
    write_run(tmp_path / "nan", "m", 1, 3.0, nan_at=2)  # a NaN in each phase, while the loss is still high
    run_dir = next((tmp_path / "nan").iterdir())
    clean, nan = (json.loads((tmp_path / f"{n}.out" / "results.json").read_text()) if analyse(
        str(tmp_path / n), "--eval-threshold", "1", "--train-threshold", "1", "--out", str(tmp_path / f"{n}.out")
    ).returncode == 0 else None for n in ("ok", "nan"))  # fmt: skip
    seed_1 = [[p["eval_adaptation"] for p in r["phases"]] for r in clean["runs"] if r["seed"] == 1]
    assert [[p["eval_adaptation"] for p in r["phases"]] for r in nan["runs"]] == seed_1
    assert nan["notes"] == ["ColorDoorKey-6x6__m__1__1001: 2 non-finite external_model/eval_loss value(s) left out"]
    series_file = tmp_path / "s.jsonl.gz"
    assert forked.run(["-m", "common.series", tmp_path / "ok", "--out", series_file], ROOT).returncode == 0
    records = [json.loads(line) for line in gzip.open(series_file, "rt")]

    def broken(name, change):
        path = tmp_path / f"{name}.jsonl.gz"
        with gzip.open(path, "wt") as f:
            for number, rec in enumerate(records):
                f.write(json.dumps(change(dict(rec)) if number == 0 else rec) + "\n")
        return str(path)

    (tmp_path / "afile").write_text("")
    damaged = tmp_path / "damaged" / "ColorDoorKey-6x6__m__1__1001"
    damaged.mkdir(parents=True)
    event = next(run_dir.glob("events.out.tfevents*")).read_bytes()
    (damaged / "events.out.tfevents.1.h.1.0").write_bytes(event[:16] + b"\xff" * (len(event) - 20) + event[-4:])
    cases = [
        (broken("nophases", lambda r: {k: v for k, v in r.items() if k != "phases"}), "lacks or mistypes phases"),
        (broken("seedtext", lambda r: {**r, "seed": "1"}), "its record 1 lacks or mistypes seed"),
        (broken("badname", lambda r: {**r, "run": "x"}), "a record's run 'x' is not named <env>__<method>__<seed>"),
        (broken("short", lambda r: {**r, "phases": r["phases"][:1]}), "its record's phases do not fit its tags (1"),
        (str(damaged.parent), "is damaged: a record that is no TensorBoard event"),
    ]  # fmt: skip
    for folder, message in cases:  # a series holds success over 100 episodes: analyse()'s 10 would be refused
        result = forked.run(["-m", "common.analyze", folder, "--eval-threshold", "1", "--train-threshold", "1"], ROOT)
        assert result.returncode == 1 and result.stderr.count("\n") == 1 and message in result.stderr, result.stderr
    for flags, message in [
        (["--baseline", "m", "--frontier", "m", "--frontier-loss", "changed"], "no external_model/eval_loss_changed"),
        (["--out", str(tmp_path / "afile" / "sub")], "lies under, a file"),
    ]:
        result = analyse(str(tmp_path / "ok"), "--eval-threshold", "1", "--train-threshold", "1", *flags)
        assert result.returncode == 1 and message in result.stderr, result.stderr
    assert not (tmp_path / "ok" / "analysis").exists()


def test_a_tiny_real_sweep_analysed_end_to_end(tmp_path):
    # 2 envs x 1,024 steps: episodes end (6x6 times out at 360 steps) in both phases
    extra = (
        "--total-timesteps 2048 --num-envs 2 --num-steps 128 --num-minibatches 2 --eval-every 1 --eval-steps 64 "
        "--model-target key_distance --change-steps 1024"
    )
    cmd = [
        "-m",
        "common.sweep",
        "--algos",
        "ppo",
        "ppo_poi_ensemble",
        "--envs",
        "ColorDoorKey-6x6",
        "--seeds",
        "1",
        "2",
        "--out",
        str(tmp_path / "sw"),
        "--workers",
        "2",
        "--extra",
        extra,
    ]
    result = forked.run(cmd, ROOT, timeout=600)  # the sweep; its runs are processes of their own
    assert result.returncode == 0, result.stdout + result.stderr
    result = analyse(str(tmp_path / "sw"), "--baseline", "ppo", "--eval-threshold", "30", "--train-threshold", "30")
    assert result.returncode == 0, result.stderr
    data = json.loads((tmp_path / "sw/analysis/results.json").read_text())
    assert sorted((r["method"], r["seed"]) for r in data["runs"]) == [
        ("ppo", 1),
        ("ppo", 2),
        ("ppo_poi_ensemble", 1),
        ("ppo_poi_ensemble", 2),
    ]
    assert all(r["finished"] and [p["phase"] for p in r["phases"]] == [0, 1] for r in data["runs"])
    assert {(r["method"], r["phase"]) for r in data["aggregates"]} == {
        (m, p) for m in ("ppo", "ppo_poi_ensemble") for p in (0, 1)
    }
    assert "| ColorDoorKey-6x6 | 1 | ppo_poi_ensemble | 2 |" in (tmp_path / "sw/analysis/results.md").read_text()
    assert (tmp_path / "sw/analysis/adaptation_ColorDoorKey-6x6.png").is_file()


def test_of_several_attempts_of_a_run_the_finished_one_counts_else_the_latest(tmp_path):
    """find_runs keeps one folder per (env, method, seed): a finished attempt over a later unfinished one, the latest
    of several finished (with a note: a study's run was repeated) or of several unfinished."""
    from common.runs import COMPLETION_MARKER

    def attempt(seed, time, finished):
        run_dir = tmp_path / f"E__m__{seed}__{time}"
        run_dir.mkdir()
        (run_dir / "events.out.tfevents.0").touch()
        if finished:
            (run_dir / COMPLETION_MARKER).write_text("{}")

    made = [(1, 100, True), (1, 200, False), (1, 300, False), (2, 100, False), (2, 200, False)]
    for seed, time, finished in made + [(3, 200, True), (3, 100, True)]:
        attempt(seed, time, finished)
    runs, notes = analyze.find_runs([tmp_path])
    assert [(run.seed, run.path.name, run.finished) for run in runs] == [
        (1, "E__m__1__100", True),
        (2, "E__m__2__200", False),
        (3, "E__m__3__200", True),
    ]
    assert notes == ["E__m__3 finished 2 times: the latest counts (200)"]  # a repeated run is said


def test_the_asymptotic_loss_is_the_lowest_not_the_last():
    """A loss that falls to 0 and rises again: the asymptotic loss is its lowest smoothed value (0, not the last, 8),
    the highest 8, and the adaptation the steps until it first gets within the threshold (at 3,000)."""
    steps = [1000 * (i + 1) for i in range(7)]
    loss = [8.0, 8.0, 0.0, 0.0, 0.0, 8.0, 8.0]
    scalars = {"charts/phase": [(s, 0) for s in steps]} | {
        tag: list(zip(steps, loss)) for tag in ("external_model/train_loss", "external_model/eval_loss")
    }
    (phase,) = analyze.phase_metrics(scalars, 1, {"train": 2.0, "eval": 2.0}, 0.8)
    assert phase["eval_asymptotic"] == 0.0 and phase["eval_highest"] == 8.0 and phase["eval_adaptation"] == 3000


def test_the_curves_are_iqms_over_runs_at_each_point():
    """Eight runs at constant levels whose IQM is 5.5 (median 5, mean 16.9): the curve is 5.5 at every point of the
    grid, inside its band."""
    levels = [1.0, 2.0, 3.0, 4.0, 6.0, 9.0, 10.0, 100.0]
    steps = [100 * (i + 1) for i in range(10)]
    runs = [
        analyze.RunInfo(
            Path("x"),
            "E",
            "m",
            seed,
            True,
            scalars={"external_model/train_loss": [(t, level) for t in steps]},
            phases=[{"phase": 0, "start": 0, "length": 1001}],
        )
        for seed, level in enumerate(levels)
    ]
    curve = analyze.curves(runs, span=5, reps=200, seed=0, points=5)["E"]["methods"]["m"]["train_loss"]
    assert curve["iqm"] == pytest.approx([5.5] * 5)
    assert all(low <= 5.5 <= high for low, high in zip(curve["low"], curve["high"]))


def test_curve_agreement_counts_points_within_each_others_bands():
    from common.analyze import curve_agreement

    base = {"iqm": [1.0, 1.0, 1.0, 1.0], "low": [0.5, 0.5, 0.5, 0.9], "high": [1.5, 1.5, 1.5, 1.1]}
    # point 0: both inside; 1: the method's IQM outside the base band; 2: the base IQM outside the method's band;
    # 3: the method's IQM (1.2) outside the narrow base band
    other = {"iqm": [1.2, 2.0, 1.4, 1.2], "low": [0.8, 1.5, 1.3, 0.5], "high": [1.6, 2.5, 1.6, 2.0]}
    data = {
        "Env": {
            "steps": [0, 1, 2, 3],
            "phase_starts": [0],
            "methods": {"base": {"return": base}, "other": {"return": other, "eval_loss": other}},
        }
    }
    (row,) = curve_agreement(data, "base")  # eval_loss: the baseline has no such curve
    assert row == {"env": "Env", "method": "other", "curve": "return", "share": 0.25}


def test_one_interrupt_stops_the_whole_sweep_and_records_the_running_runs(tmp_path):
    import signal
    import time

    script = tmp_path / "fake_algo.py"
    script.write_text(FAKE_ALGO)
    cmd = [
        sys.executable,
        "-m",
        "common.sweep",
        "--algos",
        str(script),
        "--envs",
        "E",
        "--out",
        str(tmp_path / "sw"),
        "--seeds",
        "1",
        "2",
        "3",
        "4",
        "--workers",
        "2",
        "--extra",
        "--sleep 60",
    ]
    sweep_process = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    logs = [tmp_path / f"sw/logs/E__fake_algo__{seed}.log" for seed in (1, 2)]
    deadline = time.time() + 60
    while not all(log.is_file() and "starting" in log.read_text() for log in logs) and time.time() < deadline:
        time.sleep(0.2)
    sweep_process.send_signal(signal.SIGINT)  # as one Ctrl-C would, to the sweep alone
    output, _ = sweep_process.communicate(timeout=60)
    assert sweep_process.returncode == 130, output
    assert "stopped: 2 running run(s) stopped and recorded" in output
    for seed in (1, 2):
        failed = json.loads((tmp_path / f"sw/logs/E__fake_algo__{seed}.failed.json").read_text())
        assert failed["exit_code"] != 0
    assert not (tmp_path / "sw/logs/E__fake_algo__3.log").exists()  # queued runs never started
    assert not (tmp_path / "sw/logs/E__fake_algo__4.log").exists()

    cmd[-1] = "--sleep 0"  # the stopped runs resume (the fake skips its sleep then), the queued ones start
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    for seed in (1, 2):
        (run_dir,) = (tmp_path / "sw/runs").glob(f"E__fake_algo__{seed}__*")
        assert f"resume E__fake_algo__{seed} from {run_dir}" in again.stdout
        assert f"starting {seed} from {run_dir}" in (tmp_path / f"sw/logs/E__fake_algo__{seed}.log").read_text()
    assert len(list((tmp_path / "sw/runs").glob("*/finished.json"))) == 4


def test_a_second_signal_while_the_sweep_stops_its_runs_is_answered_not_obeyed(tmp_path):
    """GNU `timeout` sends SIGTERM, then SIGKILL or a second signal: the second must not lose the records."""
    import signal
    import time

    script = tmp_path / "fake_algo.py"
    script.write_text(FAKE_ALGO)
    cmd = [sys.executable, "-m", "common.sweep", "--algos", str(script), "--envs", "E", "--out", str(tmp_path / "sw"),
           "--seeds", "1", "2", "--workers", "2", "--extra", "--sleep 60 --stop-seconds 3"]  # fmt: skip
    sweep_process = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    logs = [tmp_path / f"sw/logs/E__fake_algo__{seed}.log" for seed in (1, 2)]
    deadline = time.time() + 60
    while not all(log.is_file() and "starting" in log.read_text() for log in logs) and time.time() < deadline:
        time.sleep(0.2)
    sweep_process.send_signal(signal.SIGTERM)
    time.sleep(1)  # the runs take 3 s to stop
    sweep_process.send_signal(signal.SIGINT)
    output, _ = sweep_process.communicate(timeout=60)
    assert sweep_process.returncode == 143 and "Traceback" not in output, output
    assert "[sweep] stopping already" in output and "stopped: 2 running run(s) stopped and recorded" in output
    for seed in (1, 2):
        assert json.loads((tmp_path / f"sw/logs/E__fake_algo__{seed}.failed.json").read_text())["exit_code"] == 143
        assert "stopped: the sweep was interrupted" in logs[seed - 1].read_text()


def test_interest_plot_normalises_by_the_level_before_the_change(tmp_path):
    from common import interest_plot

    scalars = {
        "charts/phase": [(s, 0 if s < 1000 else 1) for s in range(100, 3001, 100)],
        "poi/mean": [(s, 2.0 if s < 1000 else 20.0) for s in range(100, 3001, 100)],
        "external_model/train_loss": [(s, 5.0) for s in range(1000, 3001, 100)],
    }
    grid = np.array([-500.0, -100.0, 500.0, 1500.0])
    curves = interest_plot.relative_curves(scalars, grid, before=500)
    assert set(curves) == {"poi/mean"}  # the loss has no value before the change: left out
    np.testing.assert_allclose(curves["poi/mean"], [1.0, 1.0, 10.0, 10.0])

    for seed in (1, 2):
        run_dir = tmp_path / "runs" / f"ColorDoorKey-6x6__m__{seed}__{1000 + seed}"
        writer = SummaryWriter(run_dir)
        for tag, series in scalars.items():
            for step, value in series:
                writer.add_scalar(tag, value, step)
        writer.close()
    out = tmp_path / "fig" / "interest.png"
    assert interest_plot.main([str(tmp_path / "runs"), "--out", str(out), "--before", "500", "--after", "1500"]) == 0
    medians = json.loads(out.with_suffix(".json").read_text())["medians"]["m"]["poi/mean"]
    assert medians[0] == pytest.approx(1.0) and medians[-1] == pytest.approx(10.0) and out.stat().st_size > 10_000
    assert interest_plot.main([str(tmp_path / "runs"), "--out", str(tmp_path / "x.svg")]) == 1


def test_the_ratio_to_the_baseline_counts_the_baselines_spread():
    """Method and baseline drawn from one distribution (true ratio 1), 10 runs each: the 95% interval of
    the ratio of IQMs holds 1 in about 95% of 200 draws; dividing by the baseline's IQM as if it were exact
    and bootstrapping the method alone holds it far less often. A baseline set against itself gives 1, and a
    method whose every run is half the baseline's gives a half, inside its interval.

    The interval as if the baseline were exact is the percentile bootstrap of the method's IQM written here with
    numpy, all resamples at once (what analyze.interval_estimates computes through rliable, at a hundredth of its
    time)."""
    from scipy.stats import trim_mean

    rng, resample = np.random.default_rng(0), np.random.default_rng(1)
    holds, holds_if_exact = 0, 0
    for _ in range(200):
        method, base = rng.lognormal(12, 0.3, (10, 1)), rng.lognormal(12, 0.3, (10, 1))
        _, low, high = analyze.ratio_estimates({"m": method}, base, reps=1000, seed=0)["m"]
        holds += low <= 1 <= high
        iqms = trim_mean(method.ravel()[resample.integers(10, size=(1000, 10))], 0.25, axis=1)
        low, high = np.percentile(iqms / trim_mean(base.ravel(), 0.25), [2.5, 97.5])
        holds_if_exact += low <= 1 <= high
    assert 0.88 * 200 <= holds <= 0.99 * 200 and holds_if_exact <= holds - 10, (holds, holds_if_exact)
    estimates = analyze.ratio_estimates({"base": base, "half": base / 2}, base, reps=1000, seed=0)
    assert estimates["base"][0] == pytest.approx(1.0) and estimates["base"][1] < 1 < estimates["base"][2]
    assert estimates["half"][0] == pytest.approx(0.5) and estimates["half"][1] < 0.5 < estimates["half"][2]
