"""Checks of flag values before a run starts (result-neutral): one-line errors and notes."""

from __future__ import annotations

import math
import sys

from common.console import say


def check_range(args, name: str, low: float = -math.inf, high: float = math.inf, *, low_open: bool = False,
                high_open: bool = False) -> None:  # fmt: skip
    """Raise ValueError unless `args.<name>` is a finite number in the interval (open ends as
    given); NaN and infinities fail, whatever the bounds."""
    value = getattr(args, name)
    inside = (low < value if low_open else low <= value) and (value < high if high_open else value <= high)
    if not (math.isfinite(value) and inside):
        interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open or high == math.inf else ']'}"
        raise ValueError(f"--{name.replace('_', '-')} must be a finite number in {interval}, got {value}")


def note_whole_batches(total_timesteps: int, batch_size: int) -> None:
    """A run takes whole batches (num-envs x num-steps): one line on stderr saying what it runs
    when --total-timesteps is not a whole number of them."""
    if total_timesteps % batch_size:
        iterations = total_timesteps // batch_size
        say(f"note: --total-timesteps {total_timesteps} is not a whole number of batches of {batch_size}: the run "
            f"takes {iterations * batch_size} steps ({iterations} iterations)", sys.stderr)
