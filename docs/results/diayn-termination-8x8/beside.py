"""The termination probe's readings beside the choice: the first probe's `beside.py` on this folder, its two ways
and its diagnostic arm S (`--diayn-coef 0`, Amendment 1), from the committed series and results alone.

    python docs/results/diayn-termination-8x8/beside.py
"""

import importlib.util
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIRST = HERE.parent / "diayn-ways-8x8"
DIAGNOSTIC = "ppo_poi_diayn-diayn-coef-0"


def readings():
    """The first probe's beside.py, reading this probe's folder, ways (and S) and seeds (from choose.py here)."""
    modules = {}
    for name, path in (("termination_choose", HERE / "choose.py"), ("first_probe_beside", FIRST / "beside.py")):
        spec = importlib.util.spec_from_file_location(name, path)
        modules[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(modules[name])
    choose, module = modules["termination_choose"], modules["first_probe_beside"]
    module.HERE, module.WAYS, module.SEEDS = HERE, (*choose.WAYS, DIAGNOSTIC), choose.SEEDS
    return module


if __name__ == "__main__":
    readings().main()
