"""The grading image (`Containerfile` at the repository's root): what it installs agrees with the course's pins,
its build context lets in only what it copies, and, where a container engine works (docker or podman with a
running daemon), it builds and its `course` grades as an unprivileged user with bubblewrap at hand.
"""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess

import pytest
from grading_helpers import REPO

CONTAINERFILE = REPO / "Containerfile"


def engine() -> tuple[str | None, str]:
    """(the engine's command, or None, and why none): the first of podman and docker whose daemon answers."""
    said = []
    for name in ("podman", "docker"):
        exe = shutil.which(name)
        if exe is None:
            said.append(f"no {name}")
            continue
        try:
            probe = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError) as err:
            said.append(f"{name} info failed ({err})")
            continue
        if probe.returncode == 0:
            return exe, ""
        last = (probe.stderr or probe.stdout).strip().splitlines()[-1:] or [f"exit status {probe.returncode}"]
        said.append(f"{name} has no running daemon ({last[0][:160]})")
    return None, "; ".join(said)


def test_the_image_installs_the_pinned_torch_from_pytorchs_cpu_index_and_copies_only_the_packages():
    text = CONTAINERFILE.read_text()
    assert "--index-url https://download.pytorch.org/whl/cpu" in text, "torch must come from PyTorch's CPU index"
    pin = re.search(r"\$\(sed -n '(.*?)' constraints\.txt\)", text)
    assert pin, "the torch version is read from constraints.txt"
    torch = next(ln for ln in (REPO / "constraints.txt").read_text().splitlines() if ln.startswith("torch=="))
    extracted = subprocess.run(
        ["sed", "-n", pin.group(1), str(REPO / "constraints.txt")], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert f"torch=={extracted}" == torch, f"the image would install torch {extracted!r}; constraints.txt: {torch}"
    assert "bubblewrap" in text and re.search(r"^USER grader$", text, re.M), "bubblewrap, and a grader that is not root"
    copied = [p for line in re.findall(r"^COPY (.*)$", text, re.M) for p in line.split()[:-1]]
    rules = [ln.strip() for ln in (REPO / ".dockerignore").read_text().splitlines() if ln.strip() and ln[0] != "#"]

    def let_in(path: str) -> bool:
        keep = False
        for rule in rules:
            negated, pattern = rule.startswith("!"), rule.lstrip("!")
            if fnmatch.fnmatch(path, pattern) or path.startswith(pattern.rstrip("/") + "/"):
                keep = negated
        return keep

    assert all(let_in(p) for p in copied), f"the build context must let in what the image copies: {copied}"
    for private in ("solutions/06_attention.ipynb", ".venv/bin/python", "grading-output/gradebook.db", "submissions/a"):
        assert not let_in(private), f"{private} would be sent to the engine with the build context"


@pytest.mark.slow
def test_the_image_builds_and_its_grader_is_not_root():
    exe, why = engine()
    if exe is None:
        pytest.skip(f"no container engine works here ({why}): the image is built where one does")
    tag = "course-grader-test:latest"
    built = subprocess.run(
        [exe, "build", "-t", tag, "-f", str(CONTAINERFILE), str(REPO)], capture_output=True, text=True, timeout=3600
    )
    assert built.returncode == 0, f"{exe} build failed:\n{built.stdout[-3000:]}\n{built.stderr[-3000:]}"
    try:
        ran = subprocess.run(
            [exe, "run", "--rm", "--network", "none", "--entrypoint", "sh", tag, "-c",
             "id -u; bwrap --version; course grade --help >/dev/null && course merge --help >/dev/null && echo ok"],
            capture_output=True, text=True, timeout=600,
        )  # fmt: skip
        lines = ran.stdout.split()
        assert ran.returncode == 0 and lines[0] != "0" and "bubblewrap" in ran.stdout and lines[-1] == "ok", (
            f"in the image: {ran.stdout}\n{ran.stderr}"
        )
    finally:
        subprocess.run([exe, "rmi", "-f", tag], capture_output=True, timeout=300)
