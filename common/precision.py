"""`--bf16 auto|on|off`: what `auto` resolves to on this machine (it draws nothing, but what it resolves to
depends on the machine, and bfloat16 changes a run's numbers: the run records it).

`auto` is `on` where the device computes bfloat16 fast enough for the PPO update's matrix products to gain:
a CUDA device that supports bfloat16, or a CPU with AMX (its tile units multiply bfloat16 matrices); `off`
elsewhere. A CPU with AVX512-BF16 but no AMX has bfloat16 dot-product instructions, yet every discrete file
trained slower with `--bf16 on` there than in float32 (0.76-0.88x, docs/benchmarks.md), so it counts as
not native. The run records the resolved value, not `auto`, in its hyperparameter table, args.json and
checkpoint, so a resumed run keeps what it started with.
"""

from __future__ import annotations

import torch

from common.console import say


def native_bf16(cuda: bool) -> str | None:
    """What computes bfloat16 fast on the device a run with `--cuda` = `cuda` trains on (as the files
    pick it: CUDA when asked for and available, else the CPU), or None."""
    if cuda and torch.cuda.is_available():
        return "CUDA" if torch.cuda.is_bf16_supported(including_emulation=False) else None
    return "AMX" if torch.cpu._is_amx_tile_supported() else None


def resolve_bf16(choice: str | bool, cuda: bool) -> str:
    """`choice` ("auto", "on" or "off") as "on" or "off"; an `auto` says what it resolved to, and why. A bool is
    the `--bf16` switch of a checkpoint from before `auto|on|off`, resumed: True is "on", False "off"."""
    if isinstance(choice, bool):
        return "on" if choice else "off"
    if choice != "auto":
        return choice
    native = native_bf16(cuda)
    resolved = "on" if native else "off"
    say(f"--bf16 auto: {resolved} ({native or 'no fast bfloat16 on this device'})")
    return resolved
