"""Why the guided skills re-learn no faster here: what the study's series and maps show (not in the plan; a reading
after the verdicts, for the page's "Why the guided skills do not meet the target").

    python docs/results/skills-band-8x8/diagnosis.py

From the committed series (`series.jsonl.gz`, all 80 runs), per arm, IQM [95% stratified-bootstrap CI] over its runs
(5,000 resamples, seed 0) of each run's mean over four windows: the last 200k steps before the change, the first 200k
after it (the arms' re-learning IQMs lie at 180k-323k steps, the DIAYN arms' at 201k-236k), the run's own re-learning
(from the change until its changed-views loss is back below the threshold: `results.json`) and the second phase:
- `diayn/skill_share`: the share of the rollout's steps that carry a skill (the DIAYN arms);
- the mean length of the episodes that ended in the window (a skill holds an episode's first 32 steps only);
- the skill distribution's largest probability (the largest `skills/prob_<k>`; uniform: 1/8);
- `external_model/rollout_changed_share`: the share of the rollout's transitions whose target the change alters (a
  step with a key carried always counts: the carried key is at distance 0 under its own colour only).

From the maps (`maps/<arm's label>_<seed>_<before|after>.png`, drawn by the plan's maps loop, each the mean of a run's
`skills/visitation` images over 100k steps) and the series of the runs they come from (`maps-series.jsonl.gz`), per
map: the skills' share of the rollout's steps, the range of the skills' mean probabilities over the map's steps and
the mean of each iteration's largest probability (a distribution whose favoured skill changes within the window has
mean probabilities close to uniform and a larger largest one); each
skill's share of its map in rows 1-2, where the change alters 0.79-0.81 of a random policy's steps (a random policy
puts 0.34 of its visits there), and their mean weighted by the skills' probabilities against their plain mean (above
it, the distribution favours the skills that go there); and each skill's rows read through a random policy's changed
share by row (the environments page's table), their mean and the largest: how much more of the change the skill that
goes most to the changed rows could bring on its steps. Each skill's map is scaled to its busiest cell before the mean
over images, so a share is of the scaled maps, not of the visits. And each of those runs' return over each phase's
last 100k steps (all envs) beside the committed run's of its arm and seed.
"""

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from common.analyze import interval_estimates  # noqa: E402
from common.learning_summary import run_end  # noqa: E402
from common.series import read, window_mean as bins_mean  # noqa: E402
from common.tb import decode_png  # noqa: E402

ARMS = {  # the page's names
    "ppo_poi_diayn-skill-then-task-diayn-coef-2": "D1",
    "ppo_poi_diayn-skill-then-task-diayn-coef-2-state-sampler-rollouts-skill-interest-error": "D2",
    "ppo_poi_diayn-skill-then-task-diayn-coef-2-uniform-prior-weight-1": "D0",
    "ppo_poi_emb": "E1",
    "ppo-ent-coef-0.01": "F1",
    "ppo-ent-coef-0.02": "F2a",
    "ppo-ent-coef-0.03": "F2",
    "ppo_poi_progress-interest-noise-int-coef-1": "F6",
}
SKILLS, GRID = 8, 8  # skills side by side, each GRID x GRID cells, one empty column between them
WINDOW = 200_000
MAP_STEPS = {"before": (1_900_000, 2_000_000), "after": (3_900_000, 4_000_000)}  # the plan's maps' windows
TOP_ROWS = slice(1, 3)  # rows 1-2, where the band's keys lie
# a random policy's share of steps whose key distance the change alters, by row (rows 0 and 7 are wall): the
# environments page's table for ColorDoorKeyBand-8x8 (python docs/results/shaping-6x6/change_by_cell.py)
CHANGED_BY_ROW = np.array([0.0, 0.81, 0.79, 0.72, 0.66, 0.51, 0.18, 0.0])


def window_mean(points: list, start: float, end: float) -> float:
    """The mean of a [steps, values] tag over steps in [start, end); NaN when none."""
    steps, values = np.asarray(points[0]), np.asarray(points[1], dtype=float)
    inside = (steps >= start) & (steps < end)
    return float(values[inside].mean()) if inside.any() else float("nan")


def largest_probability(tags: dict) -> list:
    """[steps, the largest of the skills' probabilities at each step]."""
    probabilities = [tags[f"skills/prob_{k}"] for k in range(SKILLS)]
    steps = probabilities[0][0]
    if any(p[0] != steps for p in probabilities):
        raise ValueError("the skills' probabilities are logged at different steps")
    return [steps, np.max([p[1] for p in probabilities], axis=0).tolist()]


def episode_length(record: dict, start: float, end: float) -> float:
    """The mean length of the episodes that ended in [start, end) (the series' 2,000-step bins inside it)."""
    return bins_mean(record["episodes"], start, end, "length")


def tag_reading(points_of):
    """A reading of one tag's window mean; None for a run that has no such tag."""
    return lambda record, start, end: (
        None if (points := points_of(record["tags"])) is None else window_mean(points, start, end)
    )


READINGS = {
    "share of the rollout's steps with a skill": tag_reading(lambda tags: tags.get("diayn/skill_share")),
    "mean episode length (steps; the limit: 640)": episode_length,
    "largest skill probability (uniform: 0.125)": tag_reading(
        lambda tags: largest_probability(tags) if "skills/prob_0" in tags else None
    ),
    "share of the rollout the change alters": tag_reading(lambda tags: tags["external_model/rollout_changed_share"]),
}


WINDOWS = ("last 200k before", "first 200k after", "its re-learning", "second phase")


def windows(record: dict, relearning: dict) -> list[tuple[float, float]]:
    """The windows of a run (WINDOWS): 200k steps before the change, 200k after, its re-learning, the second phase."""
    change = record["phases"][1]["start"]
    steps = relearning[(record["method"], record["seed"])]
    return [
        (change - WINDOW, change),
        (change, change + WINDOW),
        (change, change + steps),
        (change, run_end(record["scalars"])),
    ]


def relearning_steps(results: dict) -> dict:
    """(method, seed): the run's steps from the change until its changed-views loss is back below the threshold."""
    return {(run["method"], run["seed"]): run["phases"][1]["changed_adaptation"] for run in results["runs"]}


def series_tables(records: list[dict], relearning: dict) -> str:
    lines = []
    for reading, read_window in READINGS.items():
        runs: dict[str, list] = {}
        for record in records:
            means = [read_window(record, *w) for w in windows(record, relearning)]
            if means[0] is not None:
                runs.setdefault(ARMS.get(record["method"], record["method"]), []).append(means)
        lines += [f"#### {reading}", "", "| arm | runs | " + " | ".join(WINDOWS) + " |"]
        lines.append("|-|-:|" + "-|" * len(WINDOWS))
        for arm in sorted(runs, key=list(ARMS.values()).index):
            values = np.asarray(runs[arm])
            cells = []
            for column in range(values.shape[1]):
                iqm, low, high = interval_estimates({arm: values[:, column : column + 1]}, reps=5000, seed=0)[arm]
                digits = 0 if iqm > 10 else 3
                cells.append(f"{iqm:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]")
            lines.append(f"| {arm} | {len(values)} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


def skill_maps(path: Path) -> np.ndarray:
    """A committed map PNG back to (skills, GRID, GRID) values in [0, 1], one per cell (each cell's centre pixel)."""
    image = decode_png(path.read_bytes())
    image = image[..., 0] if image.ndim == 3 else image
    scale, width = image.shape[0] // GRID, SKILLS * (GRID + 1) - 1
    if image.shape != (GRID * scale, width * scale):
        raise ValueError(f"{path}: {image.shape} is no map of {SKILLS} skills on a {GRID}x{GRID} grid")
    cells = image[scale // 2 :: scale, scale // 2 :: scale]
    return np.stack([cells[:, k * (GRID + 1) : k * (GRID + 1) + GRID] for k in range(SKILLS)])


def map_name(path: Path) -> tuple[str, int, str]:
    """A map file's arm (the page's name, where ARMS has one), seed and window: `<arm's label>_<seed>_<when>.png`."""
    label, seed, when = path.stem.rsplit("_", 2)
    return ARMS.get(label, label), int(seed), when


def map_order(path: Path) -> tuple:
    """The page's order of the maps: by arm as ARMS orders them, then seed, before then after."""
    arm, seed, when = map_name(path)
    names = list(ARMS.values())
    return names.index(arm) if arm in names else len(names), seed, list(MAP_STEPS).index(when)


def maps_table(maps_dir: Path, records: list[dict]) -> str:
    by_run = {(ARMS.get(r["method"], r["method"]), r["seed"]): r for r in records}
    lines = [
        "| map | skills' share of the steps | skills' mean probabilities | largest probability | each skill's share of "
        "its map in rows 1-2 (skills 0-7) | weighted by the mean probabilities | unweighted "
        "| changed share by rows: mean, best skill |",
        "|-|-:|-|-:|-|-:|-:|-|",
    ]
    for path in sorted(maps_dir.glob("*.png"), key=map_order):
        arm, seed, when = map_name(path)
        maps = skill_maps(path)
        totals = maps.sum(axis=(1, 2))
        drawn = totals > 0  # a skill with no step in the window has an empty map and no share
        rows = maps.sum(axis=2)[drawn] / totals[drawn, None]  # each drawn skill's share of its map by row
        shares = np.full(SKILLS, np.nan)
        shares[drawn] = rows[:, TOP_ROWS].sum(axis=1)
        changed = rows @ CHANGED_BY_ROW  # each skill's rows read through a random policy's changed share by row
        tags = by_run[(arm, seed)]["tags"]
        probabilities = np.array([window_mean(tags[f"skills/prob_{k}"], *MAP_STEPS[when]) for k in range(SKILLS)])
        weighted = (probabilities[drawn] * shares[drawn]).sum() / probabilities[drawn].sum()
        skill_share = window_mean(tags["diayn/skill_share"], *MAP_STEPS[when])
        largest = window_mean(largest_probability(tags), *MAP_STEPS[when])  # each iteration's largest, averaged
        cells = " ".join("-" if np.isnan(share) else f"{share:.2f}" for share in shares)
        lines.append(
            f"| {arm} {seed} {when} | {skill_share:.3f} | {probabilities.min():.3f}-{probabilities.max():.3f} "
            f"| {largest:.3f} | {cells} | {weighted:.3f} | {shares[drawn].mean():.3f} "
            f"| {changed.mean():.2f}, {changed.max():.2f} |"
        )
    return "\n".join(lines)


def phase_returns(record: dict) -> tuple[float, float]:
    """A run's mean return over each phase's last 100k steps (all envs), as the task table reads it."""
    episodes, change, end = record["episodes"], record["phases"][1]["start"], run_end(record["scalars"])
    return bins_mean(episodes, max(0, change - 100_000), change), bins_mean(episodes, max(change, end - 100_000), end)


def reruns_table(reruns: list[dict], committed: list[dict]) -> str:
    """Each re-run's return over each phase's last 100k steps beside the committed run's of its arm and seed."""
    twins = {(r["method"], r["seed"]): r for r in committed}
    lines = ["| run | re-run: return before the change | after | committed run: before | after |", "|-|-:|-:|-:|-:|"]
    order = list(ARMS)
    for record in sorted(reruns, key=lambda r: (order.index(r["method"]), r["seed"])):
        returns = (*phase_returns(record), *phase_returns(twins[(record["method"], record["seed"])]))
        lines.append(f"| {ARMS[record['method']]} {record['seed']} | " + " | ".join(f"{r:.3f}" for r in returns) + " |")
    return "\n".join(lines)


def main() -> int:
    records = list(read(HERE / "series.jsonl.gz"))
    relearning = relearning_steps(json.loads((HERE / "results.json").read_text()))
    print(series_tables(records, relearning))
    maps_dir, maps_series = HERE / "maps", HERE / "maps-series.jsonl.gz"
    if maps_dir.is_dir() and maps_series.exists():
        reruns = list(read(maps_series))
        print("#### The maps' runs: the task\n")
        print(reruns_table(reruns, records) + "\n")
        print("#### The maps' skills in rows 1-2\n")
        print(maps_table(maps_dir, reruns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
