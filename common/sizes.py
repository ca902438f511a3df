"""How big each algorithm file is, and how far each variant is from `algos/ppo.py`: the table of the
docs' contributing page (a test keeps that table equal to this tool's output).

    python -m common.sizes            # markdown table: lines, and lines added / removed against ppo.py
    python -m common.sizes --parts    # where ppo.py's lines go: one row per top-level definition

A variant's lines added against ppo.py are its idea (flags, modules, its interest, their logging);
its lines removed are what of ppo.py it changes. Counted by difflib on the files' lines, as
`diff algos/ppo.py algos/<file>.py | grep -c '^>'` (and `'^<'`) would count them.
"""

from __future__ import annotations

import argparse
import ast
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


def part_rows(path: Path = ALGOS / f"{BASE}.py") -> list[dict]:
    """One row per top-level definition of `path` (the imports as one part, the `if __name__` block as "main
    block"): its lines, counted from the line after the previous part's last, so that the blank lines and the
    comments before a definition are its own and the parts add up to the file."""
    text = path.read_text()
    rows, end, head = [], 0, True
    for node in ast.parse(text).body:
        head = head and isinstance(node, (ast.Import, ast.ImportFrom, ast.Expr))
        if head or isinstance(node, (ast.Import, ast.ImportFrom)):
            name = "imports"  # with the module's docstring and the sys.path line among them
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            name = node.name
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            name = ast.unparse(node.targets[0] if isinstance(node, ast.Assign) else node.target)
        elif isinstance(node, ast.If) and ast.unparse(node.test) == "__name__ == '__main__'":
            name = "main block"
        else:
            name = ast.unparse(node).splitlines()[0]
        lines = node.end_lineno - end
        if rows and rows[-1]["part"] == name:
            rows[-1]["lines"] += lines
        else:
            rows.append(dict(part=name, lines=lines))
        end = node.end_lineno
    total = text.count("\n") + (not text.endswith("\n") and bool(text))  # as numbered: a last line without "\n" too
    if rows:
        rows[-1]["lines"] += total - end  # trailing comments or blank lines, if any
    return rows


def markdown(rows: list[dict]) -> str:
    out = ["| file | lines | against ppo.py: added | removed |", "|-|-:|-:|-:|"]
    for row in rows:
        added = "-" if row["added"] is None else f"+{row['added']}"
        removed = "-" if row["removed"] is None else f"-{row['removed']}"
        out.append(f"| `algos/{row['file']}` | {row['lines']} | {added} | {removed} |")
    return "\n".join(out)


def parts_markdown(rows: list[dict]) -> str:
    out = [f"| `algos/{BASE}.py`: part | lines |", "|-|-:|"]
    out += [f"| `{row['part']}` | {row['lines']} |" for row in rows]
    return "\n".join(out + [f"| all | {sum(row['lines'] for row in rows)} |"])


def main(argv: list[str] | None = None) -> None:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--parts", action="store_true", help="where ppo.py's lines go, by top-level definition")
    options = parser.parse_args(argv)
    print(parts_markdown(part_rows()) if options.parts else markdown(size_rows()))


if __name__ == "__main__":
    main()
