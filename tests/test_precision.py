"""`--bf16 auto|on|off`: what `auto` resolves to, with the hardware detection mocked, and what a run records."""

import importlib

import pytest
import torch
import tyro

from common.checkpoint import save_checkpoint
from common.checks import check_and_fill
from common.precision import resolve_bf16
from common.runs import hparams_markdown, parse_args
from tests.test_checks import DISCRETE  # every discrete file


def mock_hardware(monkeypatch, *, amx=False, avx512_bf16=False, cuda=False, cuda_bf16=False):
    """The machine as the detection sees it: the CPU's instruction sets and a CUDA device, if any."""
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(
        torch.cuda, "is_bf16_supported", lambda including_emulation=True: cuda_bf16 and not including_emulation
    )
    # a GPU that only emulates bfloat16 reports it unless asked for native support: here it has none that way


# (hardware, --cuda, what auto resolves to): the run trains on CUDA when asked for and available, else on
# the CPU, and it is that device whose bfloat16 counts
CASES = [
    (dict(amx=True), True, "on"),
    (dict(amx=True, avx512_bf16=True), False, "on"),
    (dict(avx512_bf16=True), True, "off"),  # bfloat16 instructions, but the files train slower with them
    (dict(), True, "off"),  # an AVX2 CPU: bfloat16 emulated, slower than float32
    (dict(cuda=True, cuda_bf16=True), True, "on"),
    (dict(cuda=True, cuda_bf16=False, amx=True), True, "off"),  # trains on the GPU, which lacks it
    (dict(cuda=True, cuda_bf16=False, amx=True), False, "on"),  # --no-cuda: trains on the CPU
    (dict(cuda=True, cuda_bf16=True), False, "off"),
    (dict(cuda=False, amx=True), True, "on"),  # --cuda without a device: the CPU
]


@pytest.mark.parametrize("hardware, cuda, resolved", CASES)
def test_auto_resolves_by_the_device_the_run_trains_on(monkeypatch, capsys, hardware, cuda, resolved):
    mock_hardware(monkeypatch, **hardware)
    assert resolve_bf16("auto", cuda) == resolved
    line = capsys.readouterr().out
    assert line.count("\n") == 1 and line.startswith(f"--bf16 auto: {resolved} (")


@pytest.mark.parametrize("choice", ["on", "off"])
@pytest.mark.parametrize("hardware, cuda, _", [CASES[0], CASES[-1]])  # the first and the last hardware
def test_on_and_off_are_kept_whatever_the_hardware(monkeypatch, capsys, hardware, cuda, _, choice):
    mock_hardware(monkeypatch, **hardware)
    assert resolve_bf16(choice, cuda) == choice
    assert capsys.readouterr().out == ""  # nothing to say: the run does what it was told


@pytest.mark.parametrize("name", DISCRETE)
def test_each_file_records_what_auto_resolved_to(monkeypatch, capsys, name):
    """The default is off (the null-arm rule: docs/results/bf16-fair-6x6); `auto` is resolved with the other
    defaults, before the run starts, into the args object (which args.json and a checkpoint save) and so into the
    hyperparameter table; filled in again as --resume fills the saved flags, on a machine that would resolve `auto`
    otherwise, they keep what the run started with."""
    module = importlib.import_module(f"algos.{name}")
    args = check_and_fill(module.Args(env="ColorDoorKey-6x6"), module.RANGES, module.fill_in_defaults)
    assert args.bf16 == "off"
    for hardware, resolved in [(dict(amx=True), "on"), (dict(avx512_bf16=True), "off")]:
        mock_hardware(monkeypatch, **hardware)
        args = check_and_fill(module.Args(env="ColorDoorKey-6x6", bf16="auto"), module.RANGES, module.fill_in_defaults)
        assert args.bf16 == resolved and f"|bf16|{resolved}|" in hparams_markdown(args)
        assert f"--bf16 auto: {resolved}" in capsys.readouterr().out
        mock_hardware(monkeypatch, amx=resolved == "off")  # the resumed run's machine differs
        check_and_fill(args, module.RANGES, module.fill_in_defaults)  # what --resume does with the saved flags
        assert args.bf16 == resolved


@pytest.mark.parametrize("value", ["yes", "true", "bf16", ""])
def test_a_value_other_than_auto_on_off_is_refused(capsys, value):
    module = importlib.import_module("algos.ppo")
    with pytest.raises(SystemExit) as stop:
        tyro.cli(module.Args, args=["--bf16", value])
    assert stop.value.code != 0
    assert "auto" in capsys.readouterr().err  # the choices are named


def test_a_resumed_run_keeps_what_it_resolved_to(tmp_path, monkeypatch):
    """--resume with the run's own command (as a sweep repeats it): `--bf16 auto` agrees with the "on" the run
    saved, whatever this machine would resolve it to; a checkpoint from before `auto|on|off` holds the old
    switch, a bool, and resumes as what it meant."""
    module = importlib.import_module("algos.ppo")
    for saved_bf16, resolved in [("on", "on"), ("off", "off"), (True, "on"), (False, "off")]:
        run_dir = tmp_path / str(saved_bf16)
        run_dir.mkdir()
        saved = check_and_fill(module.Args(env="ColorDoorKey-6x6", bf16="on"), module.RANGES, module.fill_in_defaults)
        saved.bf16 = saved_bf16
        save_checkpoint(run_dir, saved, {}, dict(global_step=0))
        mock_hardware(monkeypatch)  # this machine: no fast bfloat16
        args, _ = parse_args(
            module.Args, module.RANGES, module.fill_in_defaults, ["--bf16", "auto", "--resume", str(run_dir)]
        )
        assert args.bf16 == resolved
    with pytest.raises(SystemExit):  # another explicit value is still refused
        parse_args(
            module.Args, module.RANGES, module.fill_in_defaults, ["--bf16", "on", "--resume", str(tmp_path / "off")]
        )
