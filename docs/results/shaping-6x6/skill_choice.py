"""How far the POI-guided skill distribution leaves the uniform one, before and after the change,
and how distinct the skills are.

    python docs/results/shaping-6x6/skill_choice.py sweeps/diayn16/runs/*

Per run and window: the mean over iterations of the largest skill probability (uniform: 1/8)
and of the distribution's KL divergence from the uniform (`skills/prob_<k>`), and the share of
drawn skills that went to the skill of highest interest when the rollout began (`poi/skill_<k>` of the
previous iteration, `skills/frequency_<k>`).
Then the skills' interest (`poi/skill_<k>`): its mean over the skills, and the top skill's over
that mean, over 300k-400k and 450k-550k. Then whether the skill of highest interest stays so
from one iteration to the next (100k-800k). Then the discriminator's accuracy on fresh skills
(`diayn/disc_accuracy_fresh`): its mean over 350k-400k and 750k-800k, and the first step after
20k where its moving mean over 10 rollouts reaches twice chance.
"""

import math
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from common.tb import read_scalars  # noqa: E402

WINDOWS = [(300_000, 400_000), (400_000, 500_000), (500_000, 800_001)]


def per_iteration(scalars: dict, prefix: str) -> tuple[np.ndarray, np.ndarray]:
    """(steps, values of shape (iterations, skills)) of the scalars `prefix<k>`."""
    keys = sorted(
        (k for k in scalars if re.fullmatch(re.escape(prefix) + r"\d+", k)), key=lambda k: int(k[len(prefix) :])
    )
    steps = np.array([s for s, _ in scalars[keys[0]]])
    return steps, np.array([[v for _, v in scalars[k]] for k in keys]).T


def skill_choice(scalars: dict) -> list[str]:
    """Per window of WINDOWS: largest skill probability, KL from the uniform, share drawn to the top-POI skill."""
    steps, probs = per_iteration(scalars, "skills/prob_")
    _, poi = per_iteration(scalars, "poi/skill_")
    _, freq = per_iteration(scalars, "skills/frequency_")
    kl = (probs * np.log(np.clip(probs * probs.shape[1], 1e-12, None))).sum(1)
    # a rollout draws its skills from the distribution the previous iteration's interest gave
    top_share = np.r_[np.nan, freq[np.arange(1, len(freq)), poi[:-1].argmax(1)]]
    cells = []
    for a, b in WINDOWS:
        w = (steps >= a) & (steps < b)
        cells.append(f"{probs[w].max(1).mean():.3f}, {kl[w].mean():.4f}, {top_share[w].mean():.3f}" if w.any() else "-")
    return cells


def skill_interest(scalars: dict) -> list[str]:
    """The skills' mean POI, then the top skill's POI over that mean, before and after the change."""
    steps, poi = per_iteration(scalars, "poi/skill_")
    windows = [(steps >= a) & (steps < b) for a, b in ((300_000, 400_000), (450_000, 550_000))]
    return [f"{poi[w].mean():.3g}" for w in windows] + [
        f"{(poi[w].max(1) / poi[w].mean(1)).mean():.2f}" for w in windows
    ]


def interest_persistence(scalars: dict) -> list[str]:
    """After the warm start (100k-800k): how often the top-interest skill is the previous iteration's
    (chance 1/K), and the correlation over skills of the log interest of consecutive iterations and of
    iterations 10 apart: near chance and 0, the skills' interest is a new draw at every rollout."""
    steps, poi = per_iteration(scalars, "poi/skill_")
    log_poi, top = np.log(poi[steps >= 100_000]), poi[steps >= 100_000].argmax(1)

    def correlation(lag: int) -> float:  # over the pairs where both iterations' interest varies between skills
        varies = log_poi.std(1) > 0
        pairs = [i for i in range(len(log_poi) - lag) if varies[i] and varies[i + lag]]
        return float(np.mean([np.corrcoef(log_poi[i], log_poi[i + lag])[0, 1] for i in pairs]))

    return [f"{(top[1:] == top[:-1]).mean():.2f}", f"{correlation(1):.2f}", f"{correlation(10):.2f}"]


def distinct_skills(scalars: dict) -> list[str]:
    """Fresh accuracy over 350k-400k and 750k-800k, and when its moving mean first reaches twice chance."""
    num_skills = len([k for k in scalars if k.startswith("skills/prob_")])
    steps, acc = (np.array(x) for x in zip(*scalars["diayn/disc_accuracy_fresh"]))
    moving = np.convolve(acc, np.ones(10) / 10, mode="full")[: len(acc)]
    moving[:9] = math.nan  # fewer than 10 rollouts yet
    passed = steps[(steps > 20_000) & (moving >= 2 / num_skills)]
    cells = [f"{acc[(steps >= a) & (steps < b)].mean():.3f}" for a, b in ((350_000, 400_001), (750_000, 800_001))]
    return cells + [f"{passed[0] / 1000:.0f}k" if len(passed) else "-"]


TABLES = [
    (
        " | ".join(f"{a // 1000}k-{b // 1000}k: max prob, KL, share to the top-POI skill" for a, b in WINDOWS),
        skill_choice,
    ),
    ("mean skill POI 300k-400k | 450k-550k | top skill's POI / mean, 300k-400k | 450k-550k", skill_interest),
    (
        "top skill as the iteration before | interest's correlation with the iteration before | 10 before",
        interest_persistence,
    ),
    ("fresh accuracy 350k-400k | 750k-800k | twice chance first reached at", distinct_skills),
]


def main(run_dirs: list[str]) -> None:
    runs = []  # (label, seed, scalars), each run's event file read once
    for run_dir in map(Path, run_dirs):
        _, label, seed, _ = run_dir.name.split("__")
        runs.append((label, int(seed), read_scalars(run_dir)))
    runs.sort(key=lambda run: run[:2])
    for i, (header, cells_of) in enumerate(TABLES):
        if i:
            print()
        print(f"| run | {header} |")
        print("|-|" + "-|" * (header.count(" | ") + 1))
        for label, seed, scalars in runs:
            print(f"| {label} seed {seed} | " + " | ".join(cells_of(scalars)) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
