"""`--bf16 auto|on|off`: what `auto` resolves to on this machine (result-neutral: it only reads the hardware).

`auto` is `on` where the device computes bfloat16 natively, so that the PPO update's matrix products run
faster in it: a CUDA device that supports bfloat16, or a CPU with AVX512-BF16 or AMX; `off` elsewhere
(emulated bfloat16 is slower than float32). The run records the resolved value, not `auto`, in its
hyperparameter table, args.json and checkpoint, so a resumed run keeps what it started with.
"""

from __future__ import annotations

import torch

from common.console import say


def native_bf16(cuda: bool) -> str | None:
    """What computes bfloat16 natively on the device a run with `--cuda` = `cuda` trains on (as the
    files pick it: CUDA when asked for and available, else the CPU), or None."""
    if cuda and torch.cuda.is_available():
        return "CUDA" if torch.cuda.is_bf16_supported() else None
    if torch.cpu._is_amx_tile_supported():
        return "AMX"
    if torch.cpu._is_avx512_bf16_supported():
        return "AVX512-BF16"
    return None


def resolve_bf16(choice: str, cuda: bool) -> str:
    """`choice` ("auto", "on" or "off") as "on" or "off"; an `auto` says what it resolved to, and why."""
    if choice != "auto":
        return choice
    native = native_bf16(cuda)
    resolved = "on" if native else "off"
    say(f"--bf16 auto: {resolved} ({native or 'no native bfloat16 on this device'})")
    return resolved
