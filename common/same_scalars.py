"""Does this checkout train exactly as another revision? Runs algorithm files here and at `--against`,
the same short run each, and compares every scalar they log (all but `charts/SPS`, the wall clock).

    python -m common.same_scalars --against 80ac74a --algos ppo "ppo_poi_progress --interest noise"
    python -m common.same_scalars --against HEAD --algos all --extra "--total-timesteps 8192"
    python -m common.same_scalars --against main --algos ppo_poi_grad --new-tags-ok    # a change that adds logging

An algorithm is a file name in algos/ optionally followed by its own flags, as in `common.sweep`; `all`
is every file in algos/. `--extra` replaces the default flags of the short runs (not adds to them), so it
must name the budget, `--total-timesteps`. A file the other revision does not have is reported and counts as a
difference. Exit code 0 when every file logs the same tags with the same steps and bitwise-equal
values, 1 otherwise, 2 for a usage error before any run (a file this checkout does not have, a revision git
does not know, an --extra without a budget); the first difference of each file is printed. With `--new-tags-ok`
the tags that only this checkout logs are listed and left out (a change that adds logging); a tag only the other
logs still differs.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from common.benchmark import export_revision
from common.console import OneLineParser
from common.tb import read_scalars

ROOT = Path(__file__).resolve().parents[1]
IGNORED = ("charts/SPS",)
DEFAULT_FLAGS = (
    "--env ColorDoorKey-6x6 --seed 4 --total-timesteps 20480 --change-steps 10240 "
    "--model-target key_distance --eval-every 2"
)
OWN_FLAGS = {  # the continuous files on their own default env (no key colour to change); SAC learns from step 1,000
    "ppo_continuous_poi_ensemble": "--seed 4 --total-timesteps 2048",
    "sac_forward_model": "--seed 4 --total-timesteps 2048 --learning-starts 1000",
}


def run_scalars(root: Path, spec: str, flags: str, runs_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """The scalars of one run of `spec` (a file name with its own flags) from the checkout at `root`."""
    name, *own = shlex.split(spec)
    script = root / "algos" / f"{name}.py"
    if not script.is_file():
        raise FileNotFoundError(f"{name}.py is not in {root}")
    runs_dir.mkdir(parents=True)
    command = [sys.executable, str(script), *own, *shlex.split(flags), "--runs-dir", str(runs_dir)]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=root)
    if proc.returncode:
        tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise RuntimeError(f"{spec} at {root} exited {proc.returncode}: {tail}")
    (run_dir,) = runs_dir.iterdir()
    return {tag: series for tag, series in read_scalars(run_dir).items() if tag not in IGNORED}


def first_difference(a: dict, b: dict, new_tags_ok: bool = False) -> str | None:
    """None when `a` and `b` hold the same tags, steps and bitwise-equal values; else where they first part.
    With `new_tags_ok`, the tags only `a` holds are left out."""
    if set(b) - set(a) or (set(a) - set(b) and not new_tags_ok):
        return f"tags differ: only here {sorted(set(a) - set(b))}, only there {sorted(set(b) - set(a))}"
    for tag in sorted(b):
        if len(a[tag]) != len(b[tag]):
            return f"{tag}: {len(a[tag])} points here, {len(b[tag])} there"
        for (step, value), (other_step, other_value) in zip(a[tag], b[tag]):
            if step != other_step or value != other_value:
                return f"{tag} at step {step}: {value!r} here, {other_value!r} at step {other_step} there"
    return None


def gives_budget(flags: str) -> bool:
    """Whether command-line `flags` set --total-timesteps (as `--total-timesteps N` or `--total-timesteps=N`)."""
    return any(flag == "--total-timesteps" or flag.startswith("--total-timesteps=") for flag in shlex.split(flags))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = OneLineParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", required=True, help="the git revision to compare this checkout with")
    parser.add_argument("--algos", nargs="+", required=True, help="algorithm files with their own flags, or `all`")
    parser.add_argument(
        "--extra",
        default=None,
        help=f"flags of every run, in place of the defaults (discrete files {DEFAULT_FLAGS!r}, continuous "
        f"{OWN_FLAGS}), so they must give --total-timesteps",
    )
    parser.add_argument(
        "--new-tags-ok", action="store_true", help="compare the tags both log; list those only this checkout logs"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    specs = (
        sorted(p.stem for p in (ROOT / "algos").glob("*.py") if p.stem != "__init__")
        if args.algos == ["all"]
        else args.algos
    )
    extra = args.extra if args.extra and args.extra.strip() else None  # an empty --extra: the default flags
    if extra is not None and not all(gives_budget(extra + " " + spec) for spec in specs):
        print(
            "error: --extra replaces the default flags of the runs, so it (or each algorithm's own flags) must give "
            "--total-timesteps (else each run is the file's full length)",
            file=sys.stderr,
        )
        return 2
    unknown = [spec for spec in specs if not (ROOT / "algos" / f"{shlex.split(spec)[0]}.py").is_file()]
    if unknown:  # a usage error (exit 2), told apart from a difference (exit 1)
        print(f"error: no algorithm file for {unknown[0]!r} in {ROOT / 'algos'}", file=sys.stderr)
        return 2
    check = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", "--quiet", f"{args.against}^{{commit}}"], capture_output=True
    )
    if check.returncode:
        print(f"error: --against {args.against} is not a revision of the git repository at {ROOT}", file=sys.stderr)
        return 2
    differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        other = export_revision(args.against, Path(tmp) / "other")
        for i, spec in enumerate(specs):
            flags = extra or OWN_FLAGS.get(shlex.split(spec)[0], DEFAULT_FLAGS)
            try:
                here = run_scalars(ROOT, spec, flags, Path(tmp) / f"here{i}")
                there = run_scalars(other, spec, flags, Path(tmp) / f"there{i}")
                difference = first_difference(here, there, args.new_tags_ok)
            except (FileNotFoundError, RuntimeError) as error:
                difference = str(error)
            differ += difference is not None
            if difference is None:
                points = sum(len(series) for series in there.values())
                new = sorted(set(here) - set(there))
                print(
                    f"{spec}: the same ({len(there)} tags, {points} points)" + (f"; new here: {new}" if new else ""),
                    flush=True,
                )
            else:
                print(f"{spec}: DIFFERENT: {difference}", flush=True)
    print(f"{len(specs) - differ} of {len(specs)} the same as {args.against}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
