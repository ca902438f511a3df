"""How big each algorithm file is, and how far each variant is from `algos/ppo.py`: the table of the
docs' contributing page (a test keeps that table equal to this tool's output).

    python -m common.sizes            # markdown table: lines, and lines added / removed against ppo.py

A variant's lines added against ppo.py are its idea (flags, modules, its interest, their logging);
its lines removed are what of ppo.py it changes. Counted by difflib on the files' lines, as
`diff algos/ppo.py algos/<file>.py | grep -c '^>'` (and `'^<'`) would count them.
"""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from common.console import OneLineParser

ALGOS = Path(__file__).resolve().parents[1] / "algos"
BASE = "ppo"
CONTINUOUS = ("ppo_continuous_poi_ensemble", "sac_forward_model")
"""files with their own base (CleanRL's continuous PPO, SAC): their diff against ppo.py says little"""


def changed_lines(base: list[str], other: list[str]) -> tuple[int, int]:
    """(lines added, lines removed) to turn `base` into `other`."""
    added = removed = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, base, other, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            removed += i2 - i1
        if tag in ("replace", "insert"):
            added += j2 - j1
    return added, removed


def size_rows(algos: Path = ALGOS) -> list[dict]:
    """One row per algorithm file: its lines, and for a discrete variant its lines added and removed against ppo.py."""
    base = (algos / f"{BASE}.py").read_text().splitlines()
    rows = []
    for path in sorted(algos.glob("*.py"), key=lambda p: (p.stem != BASE, p.stem in CONTINUOUS, p.stem)):
        if path.stem == "__init__":
            continue
        lines = path.read_text().splitlines()
        row = dict(file=path.name, lines=len(lines), added=None, removed=None)
        if path.stem not in (BASE, *CONTINUOUS):
            row["added"], row["removed"] = changed_lines(base, lines)
        rows.append(row)
    return rows


def markdown(rows: list[dict]) -> str:
    out = ["| file | lines | against ppo.py: added | removed |", "|-|-:|-:|-:|"]
    for row in rows:
        added = "-" if row["added"] is None else f"+{row['added']}"
        removed = "-" if row["removed"] is None else f"-{row['removed']}"
        out.append(f"| `algos/{row['file']}` | {row['lines']} | {added} | {removed} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> None:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    print(markdown(size_rows()))


if __name__ == "__main__":
    main()
