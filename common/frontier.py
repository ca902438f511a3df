"""The non-interest frontier: how fast the external model re-learns at a given task level when nothing
about the model steers the agent, and where an interest arm falls against it.

Each non-interest arm is a point (x = its task level, y = its re-learning IQM; lower y is better, higher
x is better). The frontier is the set of points no other point dominates (x at least as high and y
at least as low, one of them strictly), joined by straight lines in order of x. At a task level x it
gives F(x): interpolated between the two frontier points around x; above the highest frontier x,
that point's y (no non-interest arm does the task that well; the frontier is held flat, which favours
the frontier); below the lowest, nan (the arm does the task less than every non-interest arm: not
judged). An interest arm's ratio is y / F(x) (steps), or 10^(y - F(x)) for a log10 loss (the
ratio of geometric-mean losses); its CI resamples every arm's runs and rebuilds the frontier each time.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import trim_mean


def pareto(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the points no other dominates, in order of x (ties in x: the lowest y only)."""
    keep = []
    for i, (x, y) in enumerate(points):
        dominated = any((ox >= x and oy <= y) and (ox > x or oy < y) for j, (ox, oy) in enumerate(points) if j != i)
        duplicate = any(j < i and (ox, oy) == (x, y) for j, (ox, oy) in enumerate(points))
        if not dominated and not duplicate:
            keep.append(i)
    return sorted(keep, key=lambda i: points[i][0])


def frontier_at(points: list[tuple[float, float]], x: float) -> float:
    """F(x) of the frontier of `points` (see the module docstring)."""
    front = [points[i] for i in pareto(points)]
    xs, ys = [p[0] for p in front], [p[1] for p in front]
    if x < xs[0]:
        return math.nan
    if x >= xs[-1]:
        return ys[-1]
    return float(np.interp(x, xs, ys))


def compare(y: float, f: float, log: bool) -> float:
    """The arm's value against the frontier's: a ratio of steps, or of geometric-mean losses."""
    if log:
        return 10.0 ** (y - f)
    return y / f if f > 0 else (math.inf if y > 0 else 1.0)  # a frontier that re-learns at once: no arm beats it


def iqm(values: np.ndarray, axis: int | None = -1) -> np.ndarray:
    """The interquartile mean (25% trimmed mean) along `axis`, None: over every value (rliable's IQM). Bitwise scipy's
    `trim_mean`, computed as it computes it (partition, slice, mean) without its per-call argument handling, which
    costs ten times the arithmetic on a few runs and dominated every 5,000-resample bootstrap; an input that is not
    of floats, empty, holding a NaN, not a plain array (masked, matrix) or 0-d, or an axis not an int, goes through
    scipy itself."""
    values = np.asanyarray(values)
    plain = type(values) is np.ndarray and values.ndim and (axis is None or isinstance(axis, int))
    if not plain or values.dtype.kind != "f" or values.size == 0 or np.isnan(values).any():
        return trim_mean(values, 0.25, axis=axis)
    if axis is None:
        values, axis = values.ravel(), 0
    n = values.shape[axis]
    cut = int(0.25 * n)
    kept = np.partition(values, (cut, n - cut - 1), axis)
    index = [slice(None)] * kept.ndim
    index[axis] = slice(cut, n - cut)
    return np.mean(kept[tuple(index)], axis=axis)


def resampled_iqms(values: np.ndarray, reps: int, rng: np.random.Generator, size: int | None = None) -> np.ndarray:
    """IQMs of `reps` bootstrap resamples of `values` (runs drawn with replacement), of `size` runs each (default:
    as many as `values` holds)."""
    values = np.asarray(values, dtype=float)
    return iqm(values[rng.integers(len(values), size=(reps, size or len(values)))], axis=1)


def against_frontier(
    frontier_runs: dict[str, tuple[np.ndarray, np.ndarray]],
    arm: tuple[np.ndarray, np.ndarray],
    log: bool = False,
    reps: int = 5000,
    seed: int = 0,
    levels: tuple[float, ...] = (0.95,),
) -> dict:
    """An arm against the frontier of the non-interest arms. `frontier_runs`: per arm, its runs' (x, y);
    `arm`: the judged arm's runs' (x, y). Returns x, y, F(x), the ratio and, per CI level, its
    percentile interval in `cis` (resamples where F is nan, the arm below the frontier's range, count as
    unbounded), and the share of resamples in which the arm was not judged."""
    empty = [name for name, (x, _) in frontier_runs.items() if len(x) == 0]
    if empty or len(arm[0]) == 0:
        raise ValueError(f"no runs with both measures for {' '.join(empty) or 'the arm placed against the frontier'}")
    points = [(float(iqm(x)), float(iqm(y))) for x, y in frontier_runs.values()]
    x, y = float(iqm(arm[0])), float(iqm(arm[1]))
    f = frontier_at(points, x)
    rng = np.random.default_rng(seed)
    arm_idx = rng.integers(len(arm[0]), size=(reps, len(arm[0])))  # x and y resampled together: the same runs
    arm_x, arm_y = iqm(np.asarray(arm[0], float)[arm_idx], axis=1), iqm(np.asarray(arm[1], float)[arm_idx], axis=1)
    resampled = []
    for fx, fy in frontier_runs.values():
        idx = rng.integers(len(fx), size=(reps, len(fx)))
        resampled.append((iqm(np.asarray(fx, float)[idx], axis=1), iqm(np.asarray(fy, float)[idx], axis=1)))
    ratios = np.empty(reps)
    for r in range(reps):
        fr = frontier_at([(px[r], py[r]) for px, py in resampled], arm_x[r])
        ratios[r] = math.inf if math.isnan(fr) else compare(arm_y[r], fr, log)
    out = {
        "x": x,
        "y": y,
        "frontier": f,
        "ratio": compare(y, f, log) if not math.isnan(f) else math.nan,
        "not_judged_share": float(np.mean(np.isinf(ratios))),
    }
    out["cis"] = {}
    for level in levels:
        tail = 100 * (1 - level) / 2
        low, high = np.percentile(ratios, [tail, 100 - tail], method="inverted_cdf")  # no interpolation with inf
        out["cis"][level] = (float(low), float(high))
    return out


def versus(
    values: np.ndarray, base: np.ndarray, log: bool = False, reps: int = 5000, seed: int = 0, level: float = 0.95
) -> tuple[float, float, float]:
    """A method's IQM against a baseline's: their ratio (steps), or 10^(difference) (log10 losses), with a
    percentile interval that resamples the runs of both (the baseline's IQM is an estimate too)."""
    values, base = np.asarray(values, float).ravel(), np.asarray(base, float).ravel()
    rng = np.random.default_rng(seed)
    num = iqm(values[rng.integers(len(values), size=(reps, len(values)))], axis=1)
    den = iqm(base[rng.integers(len(base), size=(reps, len(base)))], axis=1)
    tail = 100 * (1 - level) / 2
    with np.errstate(divide="ignore", invalid="ignore"):  # a resample of the baseline at 0: an unbounded ratio
        low, high = np.nanpercentile(10.0 ** (num - den) if log else num / den, [tail, 100 - tail])
    point = 10.0 ** (iqm(values) - iqm(base)) if log else iqm(values) / iqm(base)
    return float(point), float(low), float(high)
