"""The then-task probe's choice (PLAN.md): the first probe's rules, `../diayn-ways-8x8/choose.py` with its
amendment 1, applied to this probe's two ways and seeds, from the committed series and results alone.

    python docs/results/diayn-then-task-8x8/choose.py

Prints the runs' table, each way's counts and the decision line, in the first probe's words.
"""

import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve().parent
WAYS = ("ppo_poi_diayn-skill-then-task", "ppo_poi_diayn-skill-then-task-diayn-coef-0.25")
SEEDS = (571, 572, 573)


def rules():
    """The first probe's choose.py, reading this probe's folder, ways and seeds."""
    spec = importlib.util.spec_from_file_location("first_probe_choose", HERE.parent / "diayn-ways-8x8" / "choose.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.HERE, module.WAYS, module.SEEDS = HERE, WAYS, SEEDS
    return module


if __name__ == "__main__":
    rules().main()
