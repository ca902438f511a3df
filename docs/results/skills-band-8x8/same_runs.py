"""The maps' re-runs against the study's committed runs (the plan's Amendment 4): is each re-run the committed run of
its arm and seed, scalar for scalar?

    python -m common.series ../sweeps/skills8-maps --out /tmp/maps.jsonl.gz
    python docs/results/skills-band-8x8/same_runs.py /tmp/maps.jsonl.gz

For each run of the re-runs' series, the committed run of the same arm and seed: every tag the two share, point for
point (steps and values), the binned episodes and the per-phase summaries. Prints one line per re-run ("same", or
the first part that differs) and exits 1 when one differs or has no committed twin.
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from common.series import read  # noqa: E402

COMMITTED = Path(__file__).resolve().parent / "series.jsonl.gz"


def difference(rerun: dict, committed: dict) -> str | None:
    """The first part of `rerun` that differs from `committed`, or None when every shared part is the same."""
    shared = sorted(set(rerun["tags"]) & set(committed["tags"]))
    if not shared:
        return "no tag in common"
    for tag in shared:
        if rerun["tags"][tag] != committed["tags"][tag]:
            return f"tag {tag}"
    for part in ("episodes", "phases", "finished"):
        if rerun[part] != committed[part]:
            return part
    return None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: same_runs.py RERUNS.jsonl.gz", file=sys.stderr)
        return 2
    committed = {(r["method"], r["seed"]): r for r in read(COMMITTED)}
    differing = 0
    for rerun in read(Path(argv[0])):
        twin = committed.get((rerun["method"], rerun["seed"]))
        found = "no committed run of this arm and seed" if twin is None else difference(rerun, twin)
        print(f"{rerun['method']} seed {rerun['seed']}: {'same' if found is None else 'differs: ' + found}")
        differing += found is not None
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
