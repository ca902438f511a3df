"""Adaptation after the change of this study's methods against ppo.py's runs of the interest study,
and against its noise control (`ppo_poi_progress --interest noise`: an intrinsic reward of uniform
draws through the same gate and mixing).

    python docs/results/shaping-6x6/against_ppo.py

ppo.py and the control train today as they did for that study (same seeds, same benchmark
settings), so their per-run metrics in ../interest-study-6x6/results.json stand in for those arms
here; a ratio's interval resamples both arms' runs (common.analyze.ratio_estimates, as the
study's tables).
"""

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))
from common.analyze import ratio_estimates  # noqa: E402

PPO, NOISE = "ppo-model-target-key_distance", "ppo_poi_progress-interest-noise"


def after_change(runs: list[dict], metric: str) -> dict[str, np.ndarray]:
    """Per method, each run's `metric` in the phase after the change (censored at the phase's length)."""
    per_method = {}
    for run in runs:
        per_method.setdefault(run["method"], []).append(run["phases"][1][metric])
    return {m: np.array(v) for m, v in per_method.items()}


def main() -> None:
    study = json.loads((HERE.parent / "interest-study-6x6" / "results.json").read_text())["runs"]
    here = json.loads((HERE / "results.json").read_text())["runs"]
    columns = [
        ("held-out loss < 1 after the change / PPO", "eval_adaptation", PPO),
        ("changed views < 1 / PPO", "changed_adaptation", PPO),
        ("changed views < 1 / the noise control", "changed_adaptation", NOISE),
    ]
    print("| method | runs | " + " | ".join(title for title, _, _ in columns) + " |")
    print("|-|-|" + "-|" * len(columns))
    ratios = [
        ratio_estimates(after_change(here, metric), after_change(study, metric)[base], reps=5000, seed=0)
        for _, metric, base in columns
    ]
    runs_per_method = {m: len(v) for m, v in after_change(here, "eval_adaptation").items()}
    for method in sorted(ratios[0]):
        cells = [f"{r:.2f} [{lo:.2f}, {hi:.2f}]" for r, lo, hi in (column[method] for column in ratios)]
        print(f"| {method} | {runs_per_method[method]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
