"""course_lib.device: device choice from COURSE_DEVICE, seeding, and the environment report."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

from course_lib import device


def test_auto_picks_cpu_without_accelerators(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "auto")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(device, "_mps_available", lambda: False)
    choice = device.choose_device()
    assert choice.device == torch.device("cpu"), f"expected cpu, got {choice.device}"
    assert "no CUDA or MPS" in choice.reason, f"reason should say why: {choice.reason!r}"


def test_auto_prefers_cuda_then_mps(monkeypatch):
    monkeypatch.delenv("COURSE_DEVICE", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(device, "_mps_available", lambda: True)
    assert device.choose_device().device.type == "cuda"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert device.choose_device().device.type == "mps"


@pytest.mark.parametrize("value", ["CPU", " cpu ", "cpu"])
def test_explicit_cpu_is_case_and_space_insensitive(monkeypatch, value):
    monkeypatch.setenv("COURSE_DEVICE", value)
    assert device.get_device() == torch.device("cpu")


def test_unknown_value_names_the_choices(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "tpu")
    with pytest.raises(ValueError, match=r"one of auto, cpu, cuda, mps; got 'tpu'"):
        device.get_device()


def test_unavailable_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"COURSE_DEVICE=cuda, but torch sees no CUDA GPU.*auto"):
        device.get_device()


def test_unavailable_mps_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "mps")
    monkeypatch.setattr(device, "_mps_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"MPS backend is not available"):
        device.get_device()


def test_seed_everything_makes_python_numpy_and_torch_repeat():
    def draw():
        return random.random(), float(np.random.rand()), float(torch.rand(1))

    device.seed_everything(123)
    first = draw()
    device.seed_everything(123)
    second = draw()
    device.seed_everything(124)
    third = draw()
    assert first == second, f"same seed gave different numbers: {first} vs {second}"
    assert first != third, f"different seeds gave the same numbers: {first}"


@pytest.mark.parametrize("bad", [-1, 1.5, "0", True])
def test_seed_everything_rejects_bad_seeds(bad):
    with pytest.raises(ValueError, match="seed must be a non-negative int"):
        device.seed_everything(bad)


def test_environment_report_has_the_essentials(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    report = device.environment_report()
    for key in ("python", "torch", "numpy", "cuda available", "mps available", "course device", "why"):
        assert key in report, f"environment_report() lacks {key!r}: {sorted(report)}"
    assert report["torch"] == torch.__version__
    assert report["course device"] == "cpu"


def test_environment_report_survives_a_bad_setting(monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "quantum")
    report = device.environment_report()
    assert report["course device"] == "none", f"got {report['course device']!r}"
    assert "quantum" in report["why"], f"the report should say what was wrong: {report['why']!r}"
