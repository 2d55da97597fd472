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


def _page_config(page: str) -> dict:
    """The `jupyter-config-data` JSON that JupyterLab embeds in its page."""
    start = page.index('<script id="jupyter-config-data" type="application/json">')
    start = page.index(">", start) + 1
    return json.loads(page[start : page.index("</script>", start)])


@pytest.mark.slow
def test_lab_serves_the_welcome_notebook(tmp_path):
    """`course lab` (what `make lab` runs) starts JupyterLab at the repo root, token auth on, and a
    learner's lab is clean: no news pop-up, no update check, none of nbgrader's teacher tools."""
    port, token = _free_port(), secrets.token_hex(16)
    log = open(tmp_path / "lab.log", "w")
    env = dict(os.environ, JUPYTER_TOKEN=token)
    proc = subprocess.Popen(
        [sys.executable, "-m", "course_lib.cli", "lab", "--no-browser", "--ip=127.0.0.1", f"--port={port}"],
        cwd=tmp_path,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
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
        with urllib.request.urlopen(
            f"{base}/api/contents/notebooks/00_welcome.ipynb?content=0&token={token}", timeout=5
        ) as r:
            model = json.load(r)
        assert model["type"] == "notebook", f"expected the welcome notebook, got {model['type']}"
        with urllib.request.urlopen(f"{base}/api/contents/exercises?content=0&token={token}", timeout=5) as r:
            assert json.load(r)["type"] == "directory", "the learner should see exercises/ beside notebooks/"
        with urllib.request.urlopen(f"{base}/?token={token}", timeout=10) as r:  # the URL a browser opens
            page, landed = r.read().decode(), r.geturl()
        assert r.status == 200 and "JupyterLab" in page, "the lab page did not load"
        assert "/lab/tree/notebooks/00_welcome.ipynb" in landed, (
            f"the lab should open on the welcome lesson, landed on {landed}"
        )

        # Clean for a learner: nbgrader's lab extension is disabled in the page...
        config = _page_config(page)
        assert "@jupyter/nbgrader" in config.get("disabledExtensions", []), (
            "nbgrader's lab extension should be disabled for learners; "
            f"disabledExtensions = {config.get('disabledExtensions')}"
        )
        # ... its server extensions are not loaded (the formgrader page does not exist) ...
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{base}/formgrader?token={token}", timeout=10)
        assert missing.value.code == 404, f"/formgrader should not exist for a learner, got HTTP {missing.value.code}"
        # ... and the defaults of the news and update notifications are off.
        url = f"{base}/lab/api/settings/@jupyterlab/apputils-extension:notification?token={token}"
        with urllib.request.urlopen(url, timeout=10) as r:
            schema = json.load(r)["schema"]["properties"]
        defaults = {key: schema[key]["default"] for key in ("fetchNews", "checkForUpdates")}
        assert defaults == {"fetchNews": "false", "checkForUpdates": False}, f"news/update defaults: {defaults}"
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
    nbgrader_lines = [line for line in out.splitlines() if "nbgrader" in line]
    assert not nbgrader_lines, "no nbgrader server extension should load for a learner:\n" + "\n".join(
        nbgrader_lines[:5]
    )


class _Exec(Exception):
    """Raised instead of replacing the test process with JupyterLab."""


def _lab_command(monkeypatch, tmp_path, argv: list[str]) -> tuple[list[str], dict]:
    """The command line and environment `course lab ARGV` would exec, without running it."""
    monkeypatch.chdir(tmp_path)  # lab() changes directory: undone after the test

    def fake_execv(path, args):
        raise _Exec(args, dict(os.environ))

    monkeypatch.setattr(cli.os, "execv", fake_execv)
    with pytest.raises(_Exec) as ran:
        cli.main(argv)
    return ran.value.args


def test_lab_turns_nbgrader_off_for_learners_and_on_for_teachers(monkeypatch, tmp_path):
    monkeypatch.setenv("JUPYTER_CONFIG_PATH", "/somewhere/else")
    cmd, env = _lab_command(monkeypatch, tmp_path, ["lab", "--port=9999"])
    learner = str(cli.LABCONFIG / "learner")
    assert env["JUPYTER_CONFIG_PATH"].split(os.pathsep) == [learner, "/somewhere/else"], (
        f"the learner config must come first and keep the user's path: {env['JUPYTER_CONFIG_PATH']}"
    )
    assert "--port=9999" in cmd and f"--LabApp.app_settings_dir={cli.LABCONFIG / 'settings'}" in cmd, cmd
    assert "--teacher" not in cmd, "--teacher is course lab's own option, not JupyterLab's"

    monkeypatch.setenv("JUPYTER_CONFIG_PATH", "/somewhere/else")
    cmd, env = _lab_command(monkeypatch, tmp_path, ["lab", "--teacher", "--port=9999"])
    assert env["JUPYTER_CONFIG_PATH"] == "/somewhere/else", "a teacher's lab keeps nbgrader (no learner config)"
    assert "--teacher" not in cmd and f"--LabApp.app_settings_dir={cli.LABCONFIG / 'settings'}" in cmd, cmd


def test_learner_config_disables_every_nbgrader_server_extension_the_install_enables():
    """If nbgrader adds a server extension, the learner's config must name it too."""
    from jupyter_core.paths import jupyter_config_path
    from jupyter_server.extension.config import ExtensionConfigManager

    everywhere = ExtensionConfigManager(read_config_path=jupyter_config_path()).get_jpserver_extensions()
    nbgrader = {name for name, on in everywhere.items() if name.startswith("nbgrader") and on}
    learner_file = cli.LABCONFIG / "learner" / "jupyter_server_config.d" / "course-learner.json"
    off = json.loads(learner_file.read_text())["ServerApp"]["jpserver_extensions"]
    assert nbgrader, "nbgrader (a dev dependency) should enable server extensions in this environment"
    assert nbgrader <= {name for name, on in off.items() if on is False}, (
        f"{learner_file} leaves on: {sorted(nbgrader - set(off))}"
    )
