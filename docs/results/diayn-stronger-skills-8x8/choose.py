"""The stronger-skills probe's choice (PLAN.md): the first probe's rules, `../diayn-ways-8x8/choose.py` with its
amendment 1, applied to this probe's two ways and seeds, from the committed series and results alone, with one change
to its ties: the median fresh accuracy after the change is not used (U1's is read over 64 steps a skill, U0's over
32), so ties after the counts go to U0, the first way. The first probe's `main` still prints each way's median
fresh accuracy after the change: for information only.

    python docs/results/diayn-stronger-skills-8x8/choose.py

Prints the runs' table, each way's counts and the decision line, in the first probe's words.
"""

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WAYS = ("ppo_poi_diayn-skill-then-task-diayn-coef-2", "ppo_poi_diayn-skill-then-task-skill-steps-64")
SEEDS = (581, 582, 583)


def rules():
    """The first probe's choose.py, reading this probe's folder, ways and seeds."""
    spec = importlib.util.spec_from_file_location("first_probe_choose", HERE.parent / "diayn-ways-8x8" / "choose.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.HERE, module.WAYS, module.SEEDS = HERE, WAYS, SEEDS
    first_decide = module.decide

    def decide(ranks: dict, qualifying: dict) -> str:
        """The first probe's decision with every way's accuracy, its last tie-break, set equal."""
        return first_decide({way: (*rank[:2], 0.0) for way, rank in ranks.items()}, qualifying)

    module.decide = decide
    return module


def require_results() -> None:
    """One line and exit 1 where the plan's commands have not made this folder's series and results yet."""
    missing = [name for name in ("series.jsonl.gz", "results.json") if not (HERE / name).exists()]
    if missing:
        sys.exit(f"{' and '.join(missing)} missing in {HERE}: run the plan's commands first (PLAN.md)")


if __name__ == "__main__":
    require_results()
    rules().main()
