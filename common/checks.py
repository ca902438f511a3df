"""Checks of flag values before a run starts (result-neutral): one-line errors and notes.

Each algorithm file declares what its flags may take as a table, `RANGES`, read by `check_ranges`:
each allowed range with the flags (their field names, space-separated) that must lie in it.

    RANGES = {"positive": "num_envs num_steps", "(0, 1]": "gamma", "[0, inf)": "ent_coef vf_coef"}

"positive" is an integer above 0 (or a tuple of them, each above 0); an interval is a finite number
in it, its ends open "(" or closed "[". An optional flag left at None is not checked.
"""

from __future__ import annotations

import math
import re
import sys

from common.console import say

INTERVAL = re.compile(r"^([\[(])\s*(-?inf|[-+0-9.e]+)\s*,\s*(-?inf|[-+0-9.e]+)\s*([\])])$")


def check_range(
    args, name: str, low: float = -math.inf, high: float = math.inf, *, low_open: bool = False, high_open: bool = False
) -> None:
    """Raise ValueError unless `args.<name>` is a finite number in the interval (open ends as
    given); NaN and infinities fail, whatever the bounds."""
    value = getattr(args, name)
    inside = (low < value if low_open else low <= value) and (value < high if high_open else value <= high)
    if not (math.isfinite(value) and inside):
        opening, closing = "(" if low_open else "[", ")" if high_open or high == math.inf else "]"
        interval = f"{opening}{interval_end(low)}, {interval_end(high)}{closing}"
        raise ValueError(f"--{name.replace('_', '-')} must be a finite number in {interval}, got {value}")


def interval_end(x: float) -> str:
    """An interval's end as the table writes it: a whole number in full (4294967295, not 4.29497e+09)."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"  # an int too (int.is_integer is 3.12's)


def check_ranges(args, ranges: dict[str, str]) -> None:
    """Raise ValueError, one line naming the flag, for the first flag of `ranges` whose value is
    outside what it allows (the module's docstring says how a range is written)."""
    for allowed, names in ranges.items():
        for name in names.split():
            check_range_of(args, name, allowed)


def check_range_of(args, name: str, allowed: str) -> None:
    """Raise ValueError unless `args.<name>` lies in `allowed` ("positive" or an interval)."""
    value = getattr(args, name)
    if value is not None:
        if allowed == "positive":
            values = value if isinstance(value, tuple) else (value,)
            if not values or any(v <= 0 for v in values):
                what = "positive sizes" if isinstance(value, tuple) else "positive"
                raise ValueError(f"--{name.replace('_', '-')} must be {what}, got {value}")
            return
        match = INTERVAL.match(allowed)
        if match is None:
            raise ValueError(f"the range {allowed!r} of {name} is neither 'positive' nor an interval such as '(0, 1]'")
        low_end, low, high, high_end = match.groups()
        check_range(args, name, float(low), float(high), low_open=low_end == "(", high_open=high_end == ")")


def check_and_fill(args, ranges: dict[str, str], fill_in_defaults):
    """`args` checked against `ranges`, then given the defaults that depend on other flags by the
    file's `fill_in_defaults(args)` (which also rejects combinations that cannot run); returns `args`."""
    check_ranges(args, ranges)
    fill_in_defaults(args)
    return args


def note_whole_batches(total_timesteps: int, batch_size: int) -> None:
    """A run takes whole batches (num-envs x num-steps): one line on stderr saying what it runs
    when --total-timesteps is not a whole number of them."""
    if total_timesteps % batch_size:
        iterations = total_timesteps // batch_size
        say(
            f"note: --total-timesteps {total_timesteps} is not a whole number of batches of {batch_size}: the run "
            f"takes {iterations * batch_size} steps ({iterations} iterations)",
            sys.stderr,
        )
