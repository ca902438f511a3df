"""Read scalars back from a run's TensorBoard event files."""

from __future__ import annotations

from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def read_scalars(run_dir: str | Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag of the run as a list of (step, value), in logging order."""
    if not Path(run_dir).is_dir():
        raise FileNotFoundError(f"no run folder at {run_dir}")
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
