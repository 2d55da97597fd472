"""Which device the course runs on, and how to make runs repeatable.

`get_device()` reads the environment variable ``COURSE_DEVICE``:

- ``auto`` (the default): CUDA if a GPU is visible, then Apple's MPS, then the CPU;
- ``cpu``, ``cuda`` or ``mps``: exactly that device, or a clear error if it is not available.

Every lesson calls `seed_everything` first, so two runs of a notebook print the same numbers.
"""
from __future__ import annotations

import os
import platform
import random
import sys
from dataclasses import dataclass

import numpy as np
import torch

from course_lib._validate import check_int

CHOICES = ("auto", "cpu", "cuda", "mps")


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps is not None and mps.is_available())


@dataclass(frozen=True)
class DeviceChoice:
    device: torch.device  # what get_device() returns
    requested: str  # the value of COURSE_DEVICE (or "auto")
    reason: str  # one sentence a learner can read


def choose_device(requested: str | None = None) -> DeviceChoice:
    """Pick a device and say why. `requested` defaults to $COURSE_DEVICE, then "auto"."""
    if requested is None:
        requested = os.environ.get("COURSE_DEVICE", "auto")
    value = requested.strip().lower() or "auto"
    if value not in CHOICES:
        raise ValueError(
            f"COURSE_DEVICE must be one of {', '.join(CHOICES)}; got {requested!r}. "
            "Unset it (or use 'auto') to let the course pick."
        )
    cuda, mps = torch.cuda.is_available(), _mps_available()
    if value == "auto":
        if cuda:
            return DeviceChoice(torch.device("cuda"), value, "COURSE_DEVICE=auto and a CUDA GPU is available")
        if mps:
            return DeviceChoice(torch.device("mps"), value, "COURSE_DEVICE=auto and Apple's MPS is available")
        return DeviceChoice(torch.device("cpu"), value, "COURSE_DEVICE=auto and no CUDA or MPS device was found")
    if value == "cuda" and not cuda:
        raise RuntimeError(
            "COURSE_DEVICE=cuda, but torch sees no CUDA GPU "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}). "
            f"Choose one of {', '.join(CHOICES)}; 'auto' falls back to the CPU."
        )
    if value == "mps" and not mps:
        raise RuntimeError(
            "COURSE_DEVICE=mps, but Apple's MPS backend is not available on this machine. "
            f"Choose one of {', '.join(CHOICES)}; 'auto' falls back to the CPU."
        )
    return DeviceChoice(torch.device(value), value, f"COURSE_DEVICE={value}")


def get_device() -> torch.device:
    """The device lessons put their tensors on (see the module docstring)."""
    return choose_device().device


def seed_everything(seed: int = 0) -> None:
    """Seed Python's, numpy's and torch's generators (CPU and every GPU) with `seed`."""
    check_int("seed", seed, minimum=0)
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)  # also seeds CUDA and MPS generators


def environment_report() -> dict[str, str]:
    """Versions and devices, as short strings (what `course doctor` and lesson 00 print)."""
    report = {
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "torch": torch.__version__,
        "numpy": np.__version__,
        "cuda available": "yes" if torch.cuda.is_available() else "no",
        "mps available": "yes" if _mps_available() else "no",
    }
    if torch.cuda.is_available():
        report["cuda device"] = torch.cuda.get_device_name(0)
    try:
        choice = choose_device()
        report["course device"] = str(choice.device)
        report["why"] = choice.reason
    except (ValueError, RuntimeError) as err:
        report["course device"] = "none"
        report["why"] = str(err)
    report["executable"] = sys.executable
    return report
