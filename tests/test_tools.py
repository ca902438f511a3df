"""The tools around runs: learning summaries, running statistics, run helpers, the POI and FLOP benchmarks."""

import math
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

from common.benchmark import poi_measurements
from common.heldout import random_policy_transitions
from common.learning_summary import phase_spans, phase_starts, recovery_steps, run_end, steps_below, steps_to_return
from common.runs import progress_line
from tests import forked
from envs import OneHotFlatObs, resolve_env_id

ROOT = Path(__file__).resolve().parents[1]


def test_phase_starts_from_the_phase_scalar():
    scalars = {"charts/phase": [(100, 0), (200, 0), (300, 1), (400, 1), (500, 2)]}
    assert phase_starts(scalars) == [0, 300, 500]
    assert phase_starts({}) == [0]


def test_phases_end_where_the_next_begins_and_the_last_one_step_after_anything_logged():
    scalars = {"charts/phase": [(100, 0), (300, 1), (500, 2)], "charts/episodic_return": [(37, 0.0), (611, 1.0)]}
    assert run_end(scalars) == 612  # a return logged after the last phase point still belongs to the run
    assert phase_spans(scalars) == [(0, 300), (300, 500), (500, 612)]
    assert phase_spans({"charts/phase": [(8, 0), (16, 0)]}) == [(0, 17)]
    assert run_end({}) == 1 and phase_spans({}) == [(0, 1)]


def test_steps_to_return_counts_from_the_phase_start_and_only_its_episodes():
    returns = [(10, 1.0), (20, 1.0), (30, 0.0), (40, 1.0), (50, 1.0), (60, 1.0)]
    # window 2, threshold 0.9: episodes at 10, 20 already qualify
    assert steps_to_return(returns, start=0, end=100, threshold=0.9, window=2) == 20
    # from 25 on: (30, 0) and (40, 1) average 0.5; (40, 50) reach 1.0 at step 50
    assert steps_to_return(returns, start=25, end=100, threshold=0.9, window=2) == 25
    assert math.isnan(steps_to_return(returns, start=25, end=45, threshold=0.9, window=2))


def test_recovery_steps_waits_for_the_moving_mean():
    evals = [(10, 1.0), (20, 1.0), (30, 9.0), (40, 3.0), (50, 1.0), (60, 1.05), (70, 1.0)]
    # level 1.0, tolerance 0.1, tail 2: means after the change at 25: 6, 2, 1.025 (at 60)
    assert recovery_steps(evals, change=25, level=1.0, tail=2, tolerance=0.1) == 35
    assert math.isnan(recovery_steps(evals, change=25, level=0.5, tail=2, tolerance=0.1))


def test_progress_line_shows_step_sps_return_loss_and_time_left():
    line = progress_line(global_step=1000, total=4000, sps=100.0, episodic_return=0.5, model_loss=0.25)
    assert "1,000/4,000" in line and "SPS    100" in line and "0.500" in line and "0.25" in line
    assert line.endswith("left 00:00:30")
    assert "return      -" in progress_line(1000, 4000, 100.0, math.nan, 0.25)
    assert "| model loss - |" in progress_line(1000, 4000, 100.0, 0.5, math.nan)  # not trained yet


def test_steps_below_uses_the_moving_mean_inside_the_phase():
    evals = [(10, 9.0), (20, 1.0), (30, 3.0), (40, 1.0), (50, 1.0)]
    # tail 2: means 5, 2, 2, 1 at steps 20, 30, 40, 50
    assert steps_below(evals, start=0, end=100, threshold=2.0, tail=2) == 30
    assert steps_below(evals, start=0, end=100, threshold=1.0, tail=2) == 50
    assert math.isnan(steps_below(evals, start=0, end=45, threshold=1.0, tail=2))
    # the window is (start, end]: an evaluation at its first step does not count, one at its end does
    assert steps_below(evals, start=20, end=100, threshold=2.0, tail=2) == 20  # (3 + 1) / 2 at step 40
    assert steps_below(evals, start=0, end=50, threshold=1.0, tail=2) == 50


def test_benchmark_times_each_poi_field_on_distinct_inputs_and_rejects_bad_flags():
    env_id = resolve_env_id("ColorDoorKey-6x6")
    data = random_policy_transitions(OneHotFlatObs(gym.make(env_id)), 200, seed=0)
    inputs = np.concatenate([data["obs"], np.eye(7)[data["actions"]]], axis=1)
    for algo in ("ppo_poi_disagreement", "ppo_poi_ensemble", "ppo_poi_grad"):
        m = poi_measurements(algo, env_id, "forward", num_steps=200, rounds=3)
        assert len(m["seconds"]) == 3 and min(m["seconds"]) > 0 and m["distinct"] == len(np.unique(inputs, axis=0))
        if algo == "ppo_poi_ensemble":  # deterministic: the same values every round
            assert m["mean_cv"] < 1e-6 and m["input_cv"] < 1e-6 and m["correlation"] > 1 - 1e-6
        else:  # MC dropout passes and random signs are drawn afresh
            assert m["mean_cv"] > 0 and m["input_cv"] > 0.01 and m["correlation"] < 1
    m = poi_measurements("ppo_poi_ensemble", env_id, "key_distance", num_steps=200, rounds=1)
    assert m["distinct"] == len(np.unique(data["obs"], axis=0))
    bad = (
        (["--algos", "ppo"], "--poi knows"),
        (["--env", "MiniGrid-Empty-5x5-v0"], "needs ColorDoorKey"),
        (["--poi-steps", "0"], "must be positive"),
    )
    for flags, message in bad:  # the first in a fresh interpreter, the others forked from this process
        proc = forked.run(["-m", "common.benchmark", "--poi", *flags], ROOT, fresh=flags == bad[0][0])
        assert proc.returncode == 1 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_benchmark_compare_exports_a_revision_and_rejects_unknown_ones(tmp_path):
    from common.benchmark import ROOT, export_revision

    head = subprocess.run(["git", "-C", str(ROOT), "show", "HEAD:algos/ppo.py"], capture_output=True)
    if head.returncode:
        pytest.skip("not a git checkout")
    assert (export_revision("HEAD", tmp_path / "head") / "algos" / "ppo.py").read_bytes() == head.stdout
    proc = forked.run(["-m", "common.benchmark", "--compare", "no-such-revision"], ROOT)
    assert proc.returncode == 1 and "not a revision" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_benchmark_checks_the_training_runs_flags_before_measuring():
    proc = forked.run(["-m", "common.benchmark", "--algos", "ppo", "--variant=--bf16 sometimes"], ROOT)
    assert proc.returncode == 1 and proc.stderr.strip().startswith(
        "error: ppo --bf16 sometimes: invalid choice 'sometimes' for argument '--bf16'"
    )
    proc = forked.run(["-m", "common.benchmark", "--algos", "ppo", "--extra", "--learning-rate -1"], ROOT)
    assert proc.returncode == 1 and proc.stderr.strip() == (
        "error: ppo: --learning-rate must be a finite number in (0, inf), got -1.0"
    )
    assert "round" not in proc.stdout  # nothing measured


@pytest.mark.parametrize("flag", ["--num-envs", "--total-timesteps", "--raw-steps", "--rounds"])
def test_benchmark_refuses_a_size_below_1_before_measuring(flag):
    proc = forked.run(["-m", "common.benchmark", "--algos", flag, "0"], ROOT)
    assert proc.returncode == 1 and proc.stderr.strip() == f"error: {flag} must be positive, got 0"
    assert "round" not in proc.stdout  # nothing measured


def test_benchmark_measures_a_continuous_file_on_its_own_env_and_rejects_mixes(tmp_path):
    bad = (
        (["--algos", "sac_forward_model", "ppo", "--env", "Pendulum-v1"], "apart from the discrete files"),
        (["--algos", "sac_forward_model", "--env", "NoSuchEnv-v0"], "unknown env"),
        (["--algos", "sac_forward_model", "--env", "Pendulum-v1", "--poi"], "steps/s and --flops only"),
        (["--algos", "sac_forward_model"], "need --env, a continuous one"),
    )
    for flags, message in bad:
        proc = forked.run(["-m", "common.benchmark", *flags], ROOT)
        assert proc.returncode == 1 and message in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    git = ["git", "-C", str(ROOT)]
    roots = subprocess.run([*git, "rev-list", "--max-parents=0", "HEAD"], capture_output=True, text=True).stdout.split()
    first = roots[0] if roots else None  # no git: nothing to compare; a shallow clone's first commit has the file
    lacks_sac = first and subprocess.run([*git, "cat-file", "-e", f"{first}:algos/sac_forward_model.py"]).returncode
    if lacks_sac:
        flags = ["--algos", "sac_forward_model", "--env", "Pendulum-v1", "--compare", first]  # refused before any run
        proc = forked.run(["-m", "common.benchmark", *flags], ROOT)
        assert proc.returncode == 1 and "has no algos/sac_forward_model.py" in proc.stderr, proc.stderr
    flags = ["--algos", "sac_forward_model", "--env", "Pendulum-v1", "--total-timesteps", "300", "--rounds", "1"]
    proc = forked.run(["-m", "common.benchmark", *flags, "--extra", "--learning-starts 200 --batch-size 32"], ROOT)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| sac_forward_model")]
    assert len(rows) == 1 and "raw env" not in proc.stdout and rows[0].endswith("| 1.00 |")
    first_line = proc.stdout.splitlines()[0]  # what the figures hold for: the machine and the checkout
    assert first_line.startswith("measured on ") and torch.backends.cpu.get_cpu_capability() in first_line
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    assert f"the checkout at {head.stdout.strip()}" in first_line or "not a git checkout" in first_line


def test_the_last_image_of_a_tag_is_read_back_and_written_upscaled(tmp_path):
    import matplotlib.image
    import torch
    from torch.utils.tensorboard import SummaryWriter

    from common.tb import last_image

    writer = SummaryWriter(str(tmp_path / "run"))
    first, last = torch.zeros(1, 2, 3), torch.tensor([[[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]]])
    writer.add_image("maps", first, 10)
    writer.add_scalar("x", 1.0, 15)
    writer.add_image("maps", last, 20)
    writer.close()
    step, png = last_image(tmp_path / "run", "maps")
    assert step == 20 and png.startswith(b"\x89PNG")
    out = tmp_path / "big.png"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "common.tb",
            str(tmp_path / "run"),
            "--image",
            "maps",
            "--out",
            str(out),
            "--scale",
            "4",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    pixels = matplotlib.image.imread(out)[..., 0]  # grey, written as RGBA
    assert pixels.shape == (8, 12) and np.allclose(pixels, np.kron(last[0].numpy(), np.ones((4, 4))), atol=1 / 255)
    missing = forked.run(["-m", "common.tb", tmp_path / "run", "--image", "nope", "--out", out], ROOT)
    assert missing.returncode == 1 and missing.stderr.strip() == f"error: no image 'nope' in {tmp_path / 'run'}"


def test_the_mean_image_over_steps_averages_what_the_run_kept(tmp_path):
    """Images at steps 10, 20, 30, then a resume from step 20 (purge_step) that logs 20 and 40 again: the window's mean
    is of the kept images only, pixel by pixel (hand-worked), and the CLI writes it."""
    import matplotlib.image
    import torch
    from torch.utils.tensorboard import SummaryWriter

    from common.tb import last_image, mean_image, read_images

    run = tmp_path / "run"
    a, b, c, d = (torch.full((1, 2, 2), v) for v in (0.0, 0.2, 1.0, 0.6))
    writer = SummaryWriter(str(run))
    for step, image in ((10, a), (20, c), (30, c)):
        writer.add_image("maps", image, step)
    writer.add_image("other", c, 15)
    writer.close()
    writer = SummaryWriter(str(run), purge_step=20)  # a resumed run: what was logged at 20 and after is dropped
    writer.add_image("maps", b, 20)
    writer.add_image("maps", d, 40)
    writer.close()
    assert [step for step, _ in read_images(run, "maps")] == [10, 20, 40]
    assert last_image(run, "maps")[0] == 40
    pixels, count = mean_image(run, "maps", 0, 40)  # a (0.0) and b (0.2); c was purged, d is at the end
    assert count == 2 and pixels.shape[:2] == (2, 2) and np.allclose(pixels, 0.1, atol=1 / 255)
    pixels, count = mean_image(run, "maps", 15, 41)
    assert count == 2 and np.allclose(pixels, 0.4, atol=1 / 255)
    with pytest.raises(ValueError, match=r"no image 'maps' at steps \[21, 40\)"):
        mean_image(run, "maps", 21, 40)
    out = tmp_path / "mean.png"
    done = forked.run(
        ["-m", "common.tb", run, "--image", "maps", "--steps", "0", "40", "--out", out, "--scale", "3"], ROOT
    )
    assert done.returncode == 0 and "the mean of 2 images at steps [0, 40)" in done.stdout, done.stderr
    assert np.allclose(matplotlib.image.imread(out)[..., 0], 0.1, atol=1 / 255)
    assert matplotlib.image.imread(out).shape[:2] == (6, 6)
    bad = forked.run(["-m", "common.tb", run, "--image", "maps", "--steps", "40", "0", "--out", out], ROOT)
    assert bad.returncode == 1 and bad.stderr.strip() == "error: --steps needs 0 <= START < END, got 40 0"
    nowhere = forked.run(["-m", "common.tb", run, "--image", "maps", "--out", tmp_path / "no" / "map.png"], ROOT)
    assert nowhere.returncode == 1 and len(nowhere.stderr.strip().splitlines()) == 1, nowhere.stderr
    for flags, said in (
        (["--out", tmp_path / "map.txt"], "error: --out must name a .png file"),  # matplotlib: a KeyError
        (["--out", out, "--scale", "100000"], "error: --scale must be in [1, 256]"),  # numpy: a MemoryError
    ):
        refused = forked.run(["-m", "common.tb", run, "--image", "maps", *flags], ROOT)
        assert refused.returncode == 1 and refused.stderr.startswith(said) and refused.stderr.count("\n") == 1


def test_event_files_are_read_in_the_order_their_writers_opened_them(tmp_path):
    """Two writers of one process opened in the same second: the 10th after the 9th, which as text sorts after it
    (the number ends the name); the second's time decides first."""
    from common.tb import creation_order

    names = ["events.out.tfevents.1700000001.host.a.b.7.0", "events.out.tfevents.1700000000.host.a.b.7.10",
             "events.out.tfevents.1700000000.host.a.b.7.9", "events.out.tfevents.odd"]  # fmt: skip
    ordered = sorted((tmp_path / name for name in names), key=creation_order)
    assert [p.name for p in ordered] == [names[3], names[2], names[1], names[0]]


def test_a_change_after_the_last_evaluation_is_summarised_without_a_peak(tmp_path):
    """A run whose last phase has no evaluation (a change a few steps before the end) has no peak after it: nan."""
    from torch.utils.tensorboard import SummaryWriter

    from common.learning_summary import summarize

    writer = SummaryWriter(str(tmp_path / "run"))
    for step in range(100, 1100, 100):
        writer.add_scalar("charts/episodic_return", 1.0, step)
        writer.add_scalar("charts/SPS", 50.0, step)
        writer.add_scalar("charts/phase", 0 if step < 1000 else 1, step)
        if step < 1000:
            writer.add_scalar("external_model/eval_loss", 2.0, step)
    writer.close()
    row = summarize(tmp_path / "run", threshold=0.8, window=3, tail=2)
    assert row["solved_phase0"] == 300 and row["eval_before_change"] == 2.0 and math.isnan(row["eval_peak_after"])


def test_benchmark_counts_a_runs_matrix_products_as_worked_by_hand():
    from common.benchmark import product_flops
    from envs import view_columns

    # one iteration of 2 envs x 4 steps, one minibatch of all 8 rows, one epoch; no episode ends
    flags = [
        "--num-envs",
        "2",
        "--num-steps",
        "4",
        "--num-minibatches",
        "1",
        "--update-epochs",
        "1",
        "--model-target",
        "key_distance",
        "--vector-env",
        "batched",
    ]
    counts = product_flops("ppo", "ColorDoorKey-6x6", 8, flags)
    columns = len(view_columns(resolve_env_id("ColorDoorKey-6x6")))

    # the agent: multiply-adds of one row through the actor and the critic
    hidden = 256 * 64
    actor, critic = columns * 256 + hidden + 64 * 7, columns * 256 + hidden + 64
    rollout = 8 * (actor + critic) + 2 * critic  # 4 steps of 2 rows, then the bootstrap value of the last observations
    forward = 8 * (actor + critic)  # the minibatch
    backward = forward + 8 * (hidden + 64 * 7) + 8 * (hidden + 64)  # the weights' gradients, and the inputs' of
    # every layer but the first (the observations need none)
    assert counts["Sequential"] == 2 * (rollout + forward + backward)

    # the external model (columns-256-256-1): one minibatch of the 8 transitions, then the held-out set's distinct views
    row = columns * 256 + 256 * 256 + 256
    training = 8 * row + 8 * row + 8 * (256 * 256 + 256)
    evaluation = counts["ExternalModel"] / 2 - training
    # at the end of the run, the phase after the change (its midpoint, step 4): the held-out set of phase 1 and its
    # changed part at the file's defaults (10,240 steps, 80 a layout, at least 256 changed), each distinct view once
    # (the key-distance model reads the view alone)
    from common.heldout import heldout_set

    sets = heldout_set(resolve_env_id("ColorDoorKey-6x6"), ["red", "blue"], 1, "key_distance", 10240, 80, 256)
    assert evaluation == row * sum(len(np.unique(part["obs"], axis=0)) for part in sets)
    assert counts["Global"] == counts["Sequential"] + counts["ExternalModel"]


def test_same_scalars_names_the_first_difference_of_two_runs():
    from common.same_scalars import first_difference

    a = {"losses/value_loss": [(128, 0.5), (256, 0.25)], "charts/phase": [(128, 0.0), (256, 1.0)]}
    assert first_difference(a, {tag: list(series) for tag, series in a.items()}) is None
    assert first_difference(a, {**a, "losses/value_loss": [(128, 0.5), (256, 0.2500001)]}) == (
        "losses/value_loss at step 256: 0.25 here, 0.2500001 at step 256 there"
    )
    assert "2 points here, 1 there" in first_difference(a, {**a, "charts/phase": [(128, 0.0)]})
    assert "only there ['poi/mean']" in first_difference(a, {**a, "poi/mean": [(128, 1.0)]})
    new = {**a, "poi/by_action/turn": [(128, 1.0)]}  # a tag only this checkout logs
    assert "only here ['poi/by_action/turn']" in first_difference(new, a)
    assert first_difference(new, a, new_tags_ok=True) is None
    assert "only there ['poi/mean']" in first_difference(a, {**a, "poi/mean": [(128, 1.0)]}, new_tags_ok=True)
    assert "0.25 here, 0.2500001" in first_difference(
        new, {**a, "losses/value_loss": [(128, 0.5), (256, 0.2500001)]}, new_tags_ok=True
    )


def test_same_scalars_with_new_tags_ok_compares_the_shared_tags_and_lists_the_new(monkeypatch, capsys):
    from common import same_scalars

    there = {"losses/value_loss": [(128, 0.5)]}
    here = {**there, "poi/by_action/turn": [(128, 1.0)]}
    monkeypatch.setattr(same_scalars, "export_revision", lambda revision, path: path)
    monkeypatch.setattr(same_scalars, "run_scalars", lambda root, *_: there if root != same_scalars.ROOT else here)
    assert same_scalars.main(["--against", "HEAD", "--algos", "ppo_poi_grad"]) == 1
    assert "DIFFERENT: tags differ: only here ['poi/by_action/turn']" in capsys.readouterr().out
    assert same_scalars.main(["--against", "HEAD", "--algos", "ppo_poi_grad", "--new-tags-ok"]) == 0
    out = capsys.readouterr().out
    assert "ppo_poi_grad: the same (1 tags, 1 points); new here: ['poi/by_action/turn']" in out
    assert "1 of 1 the same as HEAD" in out
    # --extra replaces the short runs' default flags: without a budget each run would be the file's full length
    assert same_scalars.main(["--against", "HEAD", "--algos", "ppo", "--extra", "--model-target forward"]) == 2
    assert "--extra replaces the default flags" in capsys.readouterr().err
    assert same_scalars.gives_budget("--env X --total-timesteps=2048") and same_scalars.gives_budget(
        "--total-timesteps 8"
    )
    assert not same_scalars.gives_budget("--total-timesteps-x 8 --env X")
    # a budget in the algorithm's own flags, or an empty --extra (the defaults), is not refused
    assert same_scalars.main(["--against", "HEAD", "--algos", "ppo --total-timesteps 2048", "--extra", "--env X"]) == 1
    assert same_scalars.main(["--against", "HEAD", "--algos", "ppo_poi_grad", "--extra", " "]) == 1
    capsys.readouterr()
    # a file this checkout does not have is a usage error (2), before the other revision is exported
    monkeypatch.setattr(same_scalars, "export_revision", lambda revision, path: pytest.fail("exported"))
    assert same_scalars.main(["--against", "HEAD", "--algos", "ppo", "nope --seed 1"]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"error: no algorithm file for 'nope --seed 1' in {same_scalars.ROOT / 'algos'}"
    )


@pytest.mark.slow
def test_same_scalars_finds_a_checkout_the_same_as_its_own_head_and_refuses_an_unknown_revision():
    root = Path(__file__).resolve().parents[1]
    flags = (
        "--env ColorDoorKey-6x6 --total-timesteps 512 --num-envs 2 --num-steps 128 --num-minibatches 2 --eval-steps 64"
    )
    command = [sys.executable, "-m", "common.same_scalars", "--algos", "ppo", "--extra", flags, "--against"]
    same = subprocess.run([*command, "HEAD"], capture_output=True, text=True, cwd=root)
    assert same.returncode == 0 and "1 of 1 the same as HEAD" in same.stdout, same.stdout + same.stderr
    bad = subprocess.run([*command, "nope"], capture_output=True, text=True, cwd=root)
    assert bad.returncode == 2 and bad.stderr.startswith("error: --against nope is not a revision")


TOOLS = (
    "analyze benchmark evaluate interest_by_action interest_plot learning_summary null_arm same_scalars series sizes "
    "sweep tb"
)


def test_every_tool_with_a_command_line_is_in_the_one_line_check():
    parsers = {path.stem for path in (ROOT / "common").glob("*.py") if "Parser(" in path.read_text()}
    assert parsers - {"console"} == set(TOOLS.split())
    assert not [path for path in (ROOT / "common").glob("*.py") if "argparse.ArgumentParser(" in path.read_text()]


@pytest.mark.parametrize("tool", TOOLS.split())
def test_every_tool_s_usage_error_is_one_line(tmp_path, tool):
    """A usage error (here an unknown flag, or first the arguments a tool requires) gets argparse's message as one
    line with a pointer to the tool's --help, exit 2, before any work; --help still prints the whole usage."""
    bad = forked.run(["-m", f"common.{tool}", "--nope"], ROOT)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and not bad.stdout, bad.stderr
    said = (
        "unrecognized arguments: --nope" if tool in ("benchmark", "sizes") else "the following arguments are required"
    )
    assert bad.stderr.startswith(f"error: {said}")
    assert bad.stderr.endswith(f" (python -m common.{tool} --help lists the arguments)\n")
    helped = forked.run(["-m", f"common.{tool}", "--help"], ROOT)
    assert helped.returncode == 0 and helped.stdout.startswith("usage: ") and not helped.stderr
