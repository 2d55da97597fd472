"""The `course` command's environment commands: `doctor` and `lab`."""
from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from course_lib import cli

REPO = Path(__file__).resolve().parents[1]


def test_doctor_reports_versions_device_and_widgets(capsys, monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "cpu")
    status = cli.main(["doctor"])
    out = capsys.readouterr().out
    for needle in ("python", "torch", "numpy", "cuda available", "mps available", "course device", "widgets"):
        assert needle in out, f"`course doctor` output lacks {needle!r}:\n{out}"
    assert "COURSE_DEVICE=cpu" in out, f"doctor should say why it picked the device:\n{out}"
    assert "ok: ipywidgets" in out, f"widgets should be usable in this environment:\n{out}"
    assert status == 0, f"doctor exit status {status} in a healthy environment:\n{out}"


def test_doctor_flags_a_bad_device_setting(capsys, monkeypatch):
    monkeypatch.setenv("COURSE_DEVICE", "tpu")
    status = cli.main(["doctor"])
    out = capsys.readouterr().out
    assert status == 1, f"doctor should fail when COURSE_DEVICE is invalid, got {status}"
    assert "'tpu'" in out and "needs attention" in out, out


def test_doctor_flags_missing_widget_extension(capsys, monkeypatch):
    monkeypatch.setattr(cli, "_widgets_status", lambda: (False, "lab extension missing"))
    status = cli.main(["doctor"])
    out = capsys.readouterr().out
    assert status == 1 and "PROBLEM: lab extension missing" in out, out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_lab_serves_the_welcome_notebook(tmp_path):
    """`course lab` (what `make lab` runs) starts JupyterLab at the repo root, token auth on."""
    port, token = _free_port(), secrets.token_hex(16)
    log = open(tmp_path / "lab.log", "w")
    env = dict(os.environ, JUPYTER_TOKEN=token)
    proc = subprocess.Popen(
        [sys.executable, "-m", "course_lib.cli", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}"],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline, last = time.time() + 60, None
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError as err:
                last = err
                time.sleep(0.5)
        else:
            pytest.fail(f"JupyterLab did not answer within 60 s (last error: {last})")
        # Without the token the API refuses: authentication is left on.
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/api/contents/notebooks", timeout=5)
        assert refused.value.code == 403, f"expected 403 without a token, got {refused.value.code}"
        with urllib.request.urlopen(f"{base}/api/contents/notebooks/00_welcome.ipynb?content=0&token={token}", timeout=5) as r:
            model = json.load(r)
        assert model["type"] == "notebook", f"expected the welcome notebook, got {model['type']}"
        with urllib.request.urlopen(f"{base}/api/contents/exercises?content=0&token={token}", timeout=5) as r:
            assert json.load(r)["type"] == "directory", "the learner should see exercises/ beside notebooks/"
        with urllib.request.urlopen(f"{base}/?token={token}", timeout=10) as r:  # the URL a browser opens
            page, landed = r.read().decode(), r.geturl()
        assert r.status == 200 and "JupyterLab" in page, "the lab page did not load"
        assert "/lab/tree/notebooks/00_welcome.ipynb" in landed, f"the lab should open on the welcome lesson, landed on {landed}"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
    out = (tmp_path / "lab.log").read_text()
    assert "00_welcome.ipynb" in out or "http://127.0.0.1" in out, f"lab should print its URL:\n{out[-2000:]}"
