"""The continuous interest study's task bar (PLAN.md, Amendment 1): an algorithm's half is asked only if F1's IQM of
the return over the task window before the change is at or above BAR, read from the task rows of the analysis's
`results.json` (not the rounded table). Prints one line saying whether the half is asked; exit 0 if it is, 3 if not,
1 when the analysis has no such row.

    python docs/results/continuous-interest/taskbar.py docs/results/continuous-interest/ppo/results.json \
        ppo_continuous_poi_ensemble-int-coef-0
"""

import json
import sys
from pathlib import Path

BAR = -400.0


def f1_return(results: dict, f1: str) -> float:
    """F1's IQM of the return over the task window in the first phase, from `results`' task rows."""
    rows = [row for row in results["task"] if row["method"] == f1 and row["phase"] == 0 and "return_window" in row]
    if len(rows) != 1:
        raise ValueError(f"{len(rows)} task rows of {f1} before the change with a return over the window, not 1")
    return rows[0]["return_window"]["iqm"]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: taskbar.py RESULTS_JSON F1_LABEL", file=sys.stderr)
        return 1
    try:
        value = f1_return(json.loads(Path(argv[0]).read_text()), argv[1])
    except (OSError, ValueError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    asked = value >= BAR
    verb = "is at or above" if asked else "is below"
    print(f"{'asked' if asked else 'not asked'}: F1's IQM of the return before the change, {value:.6g}, {verb} {BAR:g}")
    return 0 if asked else 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
