"""The null-arm rule (common/null_arm.py) on hand-worked cases, and its command on a made-up analysis."""

import json
from pathlib import Path

import numpy as np
import pytest

from common.null_arm import calibrate, main, passes, readings


@pytest.mark.parametrize(
    "current, change, null, ratio, expected",
    [
        (0.9534, (0.9560, 0.9537, 0.9568), 0.9526, False, (False, False)),  # outside, and further than the null
        (0.8909, (0.9287, 0.8779, 0.9417), 0.9059, False, (True, False)),  # inside the change's CI
        (0.8991, (0.8335, 0.6751, 0.8933), 0.7717, False, (False, True)),  # the null is further away
        (0.5, (0.75, 0.7, 0.8), 0.25, False, (False, True)),  # as far as the null, on the other side: no further
        (0.5, (0.25, 0.2, 0.3), 0.75, False, (False, True)),  # and mirrored
        (0.5, (0.7, 0.65, 0.75), 0.3, False, (False, True)),  # a tie up to float rounding is a tie
        (1.0, (1.2, 0.9, 1.5), 1.19, True, (True, False)),
        (1.0, (0.5, 0.4, 0.9), 2.0, True, (False, True)),  # half and double are as far apart in logs
        (1.0, (0.5, 0.4, 0.9), 1.9, True, (False, False)),
    ],
)
def test_the_two_readings_by_hand(current, change, null, ratio, expected):
    assert passes(current, change, null, ratio=ratio) == expected


def analysis(end_of_change):
    """A results.json as common.analyze writes it, of three arms with two runs each, two phases."""
    task = {  # (phase 0, phase 1) return over the last 100k steps: (point, low, high)
        "cur": [(0.89, 0.80, 0.92), (0.9534, 0.79, 0.9551)],
        "chg": [(0.93, 0.88, 0.94), end_of_change],
        "nul": [(0.91, 0.79, 0.94), (0.9526, 0.944, 0.955)],
    }
    relearn = {"cur": (1.0, 0.9, 1.1), "chg": (1.2, 0.9, 1.5), "nul": (1.19, 0.86, 1.6)}
    first = {"cur": (1.0, 0.9, 1.1), "chg": (3.0, 2.5, 3.5), "nul": (1.1, 0.9, 1.3)}  # the first learning: not read
    triple = lambda t: dict(iqm=t[0], low=t[1], high=t[2])  # noqa: E731
    return dict(
        settings=dict(baseline="cur", robust_window=200000),
        aggregates=[
            dict(phase=p, method=m, changed_adaptation_normalised=triple((first, relearn)[p][m]))
            for p in (0, 1)
            for m in task
        ],
        task=[
            dict(
                env="ColorDoorKey-6x6",
                phase=p,
                method=m,
                return_window=triple(task[m][p]),
                length_window=triple((20, 18, 22)),
                entropy_window=triple((0.2, 0.1, 0.3)),
            )
            for p in (0, 1)
            for m in task
        ],
        runs=[
            dict(
                method=m,
                phases=[
                    dict(return_window=task[m][0][0] + i / 100),
                    dict(
                        return_window=task[m][1][0] - i / 100,
                        changed_adaptation=100_000 * relearn[m][0] + i,
                        robust={"mean log10 loss, first 200k": 0.5 + i / 10},
                    ),
                ],
            )
            for m in task
            for i in range(2)
        ],
    )


def test_readings_name_the_measure_that_fails(tmp_path, capsys):
    rows = readings(analysis((0.956, 0.9537, 0.9568)), "cur", "chg", "nul")
    assert [any(row["readings"]) for row in rows] == [True, True, False]
    assert rows[0]["change"] == (1.2, 0.9, 1.5) and rows[0]["null"][0] == 1.19  # the re-learning after the change
    path = tmp_path / "results.json"
    path.write_text(json.dumps(analysis((0.956, 0.9537, 0.9568))))
    assert main([str(path), "--current", "cur", "--change", "chg", "--null", "nul", "--reps", "50"]) == 1
    out = capsys.readouterr().out
    assert "task at the end (return, phase 1) | 0.9534" in out and "null arm: no" in out
    passes_column = {line.split(" | ")[0].lstrip("| "): line.rsplit(" | ", 1)[1] for line in out.splitlines()[4:7]}
    assert passes_column == {
        "re-learning of the changed views (ratio to current)": "yes |",
        "task before the change (return, phase 0)": "yes |",
        "task at the end (return, phase 1)": "**no** |",
    }
    path.write_text(json.dumps(analysis((0.953, 0.95, 0.956))))  # the current's end inside the change's CI
    assert main([str(path), "--current", "cur", "--change", "chg", "--null", "nul", "--reps", "50"]) == 0
    assert "null arm: yes" in capsys.readouterr().out


def test_an_arm_the_analysis_lacks_or_another_baseline_is_one_line(tmp_path, capsys):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(analysis((0.956, 0.9537, 0.9568))))
    for flags, message in [
        (["--current", "cur", "--change", "bf16", "--null", "nul"], "not among the analysis's methods: bf16"),
        (["--current", "nul", "--change", "chg", "--null", "cur"], "--baseline nul"),
        (["--current", "cur", "--change", "cur", "--null", "nul"], "three different methods"),  # passes trivially
        (["--current", "cur", "--change", "nul", "--null", "nul"], "three different methods"),
    ]:
        with pytest.raises(SystemExit) as stop:
            main([str(path), *flags])
        assert stop.value.code == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err
    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path / "missing.json"), "--current", "a", "--change", "b", "--null", "c"])
    assert stop.value.code == 2 and "is not a file" in capsys.readouterr().err


def test_several_envs_or_no_ratio_are_refused_in_one_line(tmp_path, capsys):
    two_envs = analysis((0.956, 0.9537, 0.9568))
    two_envs["task"][0]["env"] = "ColorDoorKey-8x8"
    no_ratio = analysis((0.956, 0.9537, 0.9568))
    for row in no_ratio["aggregates"]:
        del row["changed_adaptation_normalised"]  # what analyze writes when the current code's IQM is 0
    no_robust = analysis((0.956, 0.9537, 0.9568))
    for run in no_robust["runs"]:
        del run["phases"][1]["robust"]
    path = tmp_path / "results.json"
    for results, message in [
        (two_envs, "several envs"),
        (no_ratio, "no re-learning ratio"),
        (no_robust, "'robust' missing"),
    ]:
        path.write_text(json.dumps(results))
        with pytest.raises(SystemExit) as stop:
            main([str(path), "--current", "cur", "--change", "chg", "--null", "nul", "--reps", "50"])
        err = capsys.readouterr().err
        assert stop.value.code == 2 and err.count("\n") == 1 and message in err


def test_a_change_that_needs_no_steps_is_unboundedly_far():
    assert passes(1.0, (0.0, 0.0, 0.0), 1.5, ratio=True) == (False, False)
    assert passes(1.0, (0.0, 0.0, 1.2), 0.0, ratio=True) == (True, True)


def test_identical_runs_never_fail_and_spread_runs_sometimes_do():
    """The calibration's two ends: runs all alike (every IQM and CI the same point) pass every trial; runs as
    spread as the committed ones fail some (the rule's false alarms, the reason to calibrate)."""
    alike = np.tile([150_000.0, 0.9, 0.95], (20, 1))
    assert calibrate(alike, 10, trials=20, reps=50, seed=0).tolist() == [0, 0, 0, 0]
    rng = np.random.default_rng(1)
    spread = np.column_stack([rng.normal(150_000, 30_000, 20), rng.normal(0.9, 0.05, 20), rng.normal(0.95, 0.01, 20)])
    rates = calibrate(spread, 10, trials=200, reps=200, seed=0)
    assert 0 < rates[3] < 1 and rates[3] >= rates[:3].max()  # any of three fails at least as often as each


COMMITTED = "docs/results/bf16-fair-6x6"


@pytest.mark.parametrize(
    "folder, current, expected",
    [
        ("ppo", "ppo-ent-coef-0.01", [True, True, False]),
        ("progress-error", "ppo_poi_progress-interest-error", [True, True, True]),
    ],
)
def test_the_committed_check_reads_as_its_page_says(folder, current, expected):
    results = json.loads((Path(__file__).parents[1] / COMMITTED / folder / "results.json").read_text())
    base = current.removesuffix("-ent-coef-0.01")
    rows = readings(results, current, f"{base}-bf16-on", f"{base}-bf16-off")
    assert [any(row["readings"]) for row in rows] == expected
