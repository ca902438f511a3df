"""The probe's readings beside the choice (PLAN.md, "Beside them, no rule of their own"), per run, from the
committed series and `results.json` alone:

    python docs/results/diayn-ways-8x8/beside.py

Per phase: the entropy over its last 100k steps (`entropy_window`), the step it was first solved (the mean return of
100 episodes first at least 0.8, counted from the phase's start: `solved_at`), the largest skill probability over
its last 100k steps (choose.py's reading), and the share of its iterations with the DIAYN weight above 0
(`diayn/weight`: below 1 only where a gate closes it, W3); after the change, the steps until the changed views'
held-out loss (EMA span 10) is back below 1 (`changed_adaptation`; "not back" where it never is).
"""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
from common.series import read  # noqa: E402


def _choose():
    """choose.py beside this file (by its path: another folder's `choose` module may be loaded already)."""
    spec = importlib.util.spec_from_file_location("diayn_ways_choose", Path(__file__).resolve().parent / "choose.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HERE, SEEDS, WAYS, largest_probability = (
    getattr(_choose(), name) for name in ("HERE", "SEEDS", "WAYS", "largest_probability")
)


def open_share(points: list, start: float, end: float) -> float:
    """The share of the phase's logged iterations whose DIAYN weight is above 0."""
    weights = [v for s, v in points if start <= s < end]
    return float(np.mean([w > 0 for w in weights])) if weights else float("nan")


def main() -> None:
    results = {r["run"]: r for r in json.loads((HERE / "results.json").read_text())["runs"]}
    records = {(rec["method"], rec["seed"]): rec for rec in read(HERE / "series.jsonl.gz") if rec["finished"]}
    print(
        "| way | seed | entropy, last 100k | first solved (steps into the phase) | largest skill probability "
        "| DIAYN weight on (share of iterations) | changed views back below 1 after (steps) |"
    )
    print("|-|-|-|-|-|-|-|")
    for way in WAYS:
        for seed in SEEDS:
            rec = records.get((way, seed))
            if rec is None or rec["run"] not in results:
                print(f"| {way} | {seed} | missing | | | | |")
                continue
            phases = results[rec["run"]]["phases"]
            ends = [p["start"] + p["length"] for p in phases]
            solved = [
                "never" if s["solved_at"] is None else f"{s['solved_at'] - s['start']:,.0f}" for s in rec["phases"]
            ]
            weight = rec["scalars"].get("diayn/weight", [])
            cells = [
                " / ".join(f"{p['entropy_window']:.3f}" for p in phases),
                " / ".join(solved),
                " / ".join(f"{largest_probability(rec['scalars'], end):.3f}" for end in ends),
                " / ".join(f"{open_share(weight, p['start'], end):.2f}" for p, end in zip(phases, ends)),
                f"{phases[1]['changed_adaptation']:,.0f}" if phases[1]["changed_reached"] else "not back",
            ]
            print(f"| {way} | {seed} | {' | '.join(cells)} |")


if __name__ == "__main__":
    main()
