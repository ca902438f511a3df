"""The stronger-skills probe's readings beside the choice (PLAN.md), from the committed series and results alone:
the then-task probe's `beside.py` on this folder, its two ways and seeds (from `choose.py` here) and T0 on the same
seeds as the reference arm: the first probe's readings, the share of steps with a skill per run, per way and for T0
how many runs solve the first phase, how many have distinct skills there, and how many both (the counts the plan's
reading is judged on), and T0's runs by `choose.py`'s readings of a way.

    python docs/results/diayn-stronger-skills-8x8/beside.py
"""

import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve().parent


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


THEN_TASK = load("then_task_beside", HERE.parent / "diayn-then-task-8x8" / "beside.py")
CHOOSE = load("stronger_skills_choose", HERE / "choose.py")
REFERENCE = "ppo_poi_diayn-skill-then-task"  # T0, the then-task probe's way, on this probe's seeds

if __name__ == "__main__":
    CHOOSE.require_results()
    THEN_TASK.main(CHOOSE, diagnostic=REFERENCE, role="reference arm")
