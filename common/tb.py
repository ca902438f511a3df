"""Read scalars and images back from a run's TensorBoard event files.

A direct reader of the event files: TensorBoard's EventAccumulator checks every record's CRC
in pure Python, about 10 s per 800k-step run here; this reads the records with `struct`, parses
them with protobuf and applies the accumulator's purge rules, with the same result (a test
compares the two on real runs, a resumed one among them)."""

from __future__ import annotations

import math
import struct
from pathlib import Path

from google.protobuf.message import DecodeError
from tensorboard.compat.proto import event_pb2

HEADER = struct.Struct("<QI")  # a record: length, its masked CRC, the data, the data's masked CRC


def records(path: Path):
    """The records of one event file; a last record still being written is left out."""
    data = path.read_bytes()
    pos = 0
    while pos + HEADER.size <= len(data):
        length, _ = HEADER.unpack_from(data, pos)
        start = pos + HEADER.size
        if start + length + 4 > len(data):
            return
        yield data[start : start + length]
        pos = start + length + 4


def file_version(event) -> float:
    try:
        return float(event.file_version.split(":")[-1])
    except ValueError:
        return -1.0


def creation_order(path: Path) -> tuple:
    """Where an event file comes among a run's: by the second its writer opened it, then by the writer's number within
    its process (`events.out.tfevents.<time>.<host>.<pid>.<number>`; as text, writer 10 would sort before writer 9)."""
    parts = path.name.split(".")
    try:
        return int(parts[3]), int(parts[-1]), path.name
    except (IndexError, ValueError):
        return -1, -1, path.name


def events(run_dir: str | Path):
    """The events of a run's event files, file by file in creation order."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"no run folder at {run_dir}")
    for path in sorted((p for p in run_dir.iterdir() if "tfevents" in p.name and p.is_file()), key=creation_order):
        for record in records(path):
            try:
                event = event_pb2.Event.FromString(record)
            except DecodeError:
                raise ValueError(f"{path} is damaged: a record that is no TensorBoard event") from None
            yield event


def read_tags(run_dir: str | Path, pick) -> dict[str, list[tuple[int, object]]]:
    """Every tag's (step, value) pairs of the run, in logging order, where `pick(value)` gives a summary value's
    payload (None: not one of them), with what a restarted writer purged left out (as TensorBoard shows it): from files
    of version 2 on, a SessionLog.START at step s drops every earlier event at step >= s (`SummaryWriter(purge_step=s)`,
    what a resumed run opens); in older files a step that goes back drops its tags' later steps."""
    tags: dict[str, list[tuple[int, object]]] = {}
    version, most_recent_step = None, -math.inf
    for event in events(run_dir):
        if event.HasField("file_version"):
            version = file_version(event)
        if version is not None and version >= 2:
            if event.HasField("session_log") and event.session_log.status == event_pb2.SessionLog.START:
                tags = {tag: [(s, v) for s, v in values if s < event.step] for tag, values in tags.items()}
        elif event.step < most_recent_step and event.HasField("summary"):
            for value in event.summary.value:
                if value.tag in tags:
                    tags[value.tag] = [(s, v) for s, v in tags[value.tag] if s < event.step]
        else:
            most_recent_step = event.step
        if event.HasField("summary"):
            for value in event.summary.value:
                payload = pick(value)
                if payload is not None:
                    tags.setdefault(value.tag, []).append((event.step, payload))
    return tags


def read_scalars(run_dir: str | Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar tag of the run as a list of (step, value): `read_tags`'s rules."""
    return read_tags(run_dir, lambda value: value.simple_value if value.HasField("simple_value") else None)


def read_scalars_and_texts(
    run_dir: str | Path, texts: tuple[str, ...]
) -> tuple[dict, dict[str, list[tuple[int, str]]]]:
    """`read_scalars`, and from the same reading the (step, text) of every text logged under each tag of `texts`
    (`SummaryWriter.add_text`, which files it as `<tag>/text_summary`): [] for a tag never logged."""
    stored = {f"{tag}/text_summary": tag for tag in texts}

    def pick(value):
        if value.HasField("simple_value"):
            return value.simple_value
        if value.tag in stored and value.tensor.string_val:
            return value.tensor.string_val[0].decode(errors="replace")  # another tool's text need not be UTF-8
        return None

    scalars = read_tags(run_dir, pick)
    return scalars, {tag: scalars.pop(name, []) for name, tag in stored.items()}


def read_images(run_dir: str | Path, tag: str) -> list[tuple[int, bytes]]:
    """The (step, encoded PNG) of every image logged under `tag`, with `read_tags`'s purge rules (a resumed run's images
    after its checkpoint are its own)."""

    def pick(value):
        return value.image.encoded_image_string if value.tag == tag and value.HasField("image") else None

    return read_tags(run_dir, pick).get(tag, [])


def last_image(run_dir: str | Path, tag: str) -> tuple[int, bytes]:
    """The step and the encoded PNG of the last image logged under `tag` that the run kept (`read_images`)."""
    images = read_images(run_dir, tag)
    if not images:
        raise ValueError(f"no image {tag!r} in {run_dir}")
    return images[-1]


def decode_png(png: bytes):
    """An encoded PNG as floats in [0, 1], height x width [x channels] (TensorBoard stores a one-channel image as RGB).
    matplotlib loads here, not at the top: the scalar reader, which every analysis imports, does without it."""
    import io

    import matplotlib.image

    return matplotlib.image.imread(io.BytesIO(png), format="png")


def mean_image(run_dir: str | Path, tag: str, start: int, end: int):
    """The pixel-wise mean of the images logged under `tag` at steps in [start, end) that the run kept, and how many
    there were: a map over a stretch of the run rather than its last rollouts. Each image counts once, whatever it was
    scaled to (a `skills/visitation` image is scaled to each skill's busiest cell of its own rollouts)."""
    import numpy as np

    images = [png for step, png in read_images(run_dir, tag) if start <= step < end]
    if not images:
        raise ValueError(f"no image {tag!r} at steps [{start}, {end}) in {run_dir}")
    return np.mean([decode_png(png) for png in images], axis=0), len(images)


if __name__ == "__main__":
    import sys

    from common.console import OneLineParser

    parser = OneLineParser(
        description="Write a run's last image of a tag, or the mean of its images over steps, to a PNG file."
    )
    parser.add_argument("run_dir")
    parser.add_argument("--image", required=True, help="the tag, e.g. skills/visitation")
    parser.add_argument("--out", required=True, help="the PNG file to write")
    parser.add_argument("--scale", type=int, default=1, help="each pixel as a square of this many, 1-256")
    parser.add_argument(
        "--steps", type=int, nargs=2, metavar=("START", "END"), help="the mean of the images at steps in [START, END)"
    )
    cli = parser.parse_args()
    if not 1 <= cli.scale <= 256:
        sys.exit(f"error: --scale must be in [1, 256] (a pixel as a square of that many), got {cli.scale}")
    if not cli.out.lower().endswith(".png"):
        sys.exit(f"error: --out must name a .png file, got {cli.out}")
    if cli.steps and not 0 <= cli.steps[0] < cli.steps[1]:
        sys.exit(f"error: --steps needs 0 <= START < END, got {cli.steps[0]} {cli.steps[1]}")
    try:
        if cli.steps:
            pixels, count = mean_image(cli.run_dir, cli.image, *cli.steps)
            what = f"the mean of {count} image{'s' * (count != 1)} at steps [{cli.steps[0]}, {cli.steps[1]})"
        else:
            step, png = last_image(cli.run_dir, cli.image)
            pixels, what = None if cli.scale == 1 else decode_png(png), f"step {step}"
        if pixels is None:
            Path(cli.out).write_bytes(png)
        else:
            import matplotlib.image
            import numpy as np

            pixels = np.repeat(np.repeat(pixels, cli.scale, axis=0), cli.scale, axis=1)
            matplotlib.image.imsave(cli.out, pixels, cmap="gray" if pixels.ndim == 2 else None, vmin=0, vmax=1)
    except (OSError, ValueError) as error:
        sys.exit(f"error: {error}")
    print(f"wrote {cli.out} ({what})")
