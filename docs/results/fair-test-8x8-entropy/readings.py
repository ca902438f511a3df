"""The readings the page gives beside the plan's verdict (none of them pre-registered), from the committed analysis.

    python docs/results/fair-test-8x8-entropy/readings.py docs/results/fair-test-8x8-entropy

From results.json (each run's re-learning steps after the change and its return over the last 100k steps of each
phase), I3's IQM re-learning steps over each comparator's: the ratio with its 95% CI and a 98.75% one (a Bonferroni
correction over the four comparators, which the plan does not need: every comparison must hold), leaving each seed
out in turn, the halves of the seeds, and on how many seeds I3 is the faster of the two runs; then I3 against PPO at
0.03 over the runs that do the task after the change, and how often a study of n runs an arm, drawn from the observed
runs of I3 and of PPO at 0.03, would put the upper end of the 95% CI below 1. The CIs are common.frontier.versus's
(5,000 resamples, seed 0), the bootstrap of the analysis's robustness tables.
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository: common/
from common.frontier import iqm, versus

I3 = "ppo_poi_progress-interest-error"
COMPARATORS = {
    "F1": "ppo-ent-coef-0.01",
    "F2a": "ppo-ent-coef-0.02",
    "F2": "ppo-ent-coef-0.03",
    "F6": "ppo_poi_progress-interest-noise-int-coef-1",
}
SEEDS = tuple(range(211, 221))
TASK = 0.8


def ci(values, base, level=0.95) -> str:
    point, low, high = versus(np.array(values, float), np.array(base, float), reps=5000, seed=0, level=level)
    return f"{point:.3f} [{low:.3f}, {high:.3f}]"


def main(folder: Path) -> None:
    runs = json.loads((folder / "results.json").read_text())["runs"]
    steps = {(r["method"], r["seed"]): r["phases"][1]["changed_adaptation"] for r in runs}
    after = {(r["method"], r["seed"]): r["phases"][1]["return_window"] for r in runs}

    def of(method, seeds):
        return [steps[method, s] for s in seeds]

    for name, arm in COMPARATORS.items():
        corrected = ci(of(I3, SEEDS), of(arm, SEEDS), 1 - 0.05 / 4)
        print(f"I3 / {name} ({arm}): {ci(of(I3, SEEDS), of(arm, SEEDS))}, 98.75% CI {corrected}")
        for d in SEEDS:
            kept = [s for s in SEEDS if s != d]
            print(f"    without seed {d}: {ci(of(I3, kept), of(arm, kept))}")
        halves = [float(iqm(np.array(of(I3, h))) / iqm(np.array(of(arm, h)))) for h in (SEEDS[:5], SEEDS[5:])]
        faster = sum(steps[I3, s] < steps[arm, s] for s in SEEDS)
        slower = sum(steps[I3, s] > steps[arm, s] for s in SEEDS)
        print(f"    halves {halves[0]:.2f} / {halves[1]:.2f}; I3 faster on {faster} seeds, slower on {slower}")

    f2 = COMPARATORS["F2"]
    doing = {m: [steps[m, s] for s in SEEDS if after[m, s] >= TASK] for m in (I3, f2)}
    lost = [steps[f2, s] for s in SEEDS if after[f2, s] < TASK]
    print(f"over the runs doing the task after the change: I3 / F2 {ci(doing[I3], doing[f2])}")
    medians = f"{np.median(doing[f2]):,.0f} doing the task after it, {np.median(lost):,.0f} not"
    print(f"F2's median re-learning steps: {medians}")

    rng = np.random.default_rng(1)
    i3, base = np.array(of(I3, SEEDS), float), np.array(of(f2, SEEDS), float)
    for n in (10, 14, 20, 40):
        hits = sum(versus(rng.choice(i3, n), rng.choice(base, n), reps=1000, seed=k)[2] < 1 for k in range(200))
        print(f"arms of {n} runs drawn from I3's and F2's: the upper end below 1 in {hits / 200:.0%} of 200 studies")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    main(parser.parse_args().folder)
