"""The three places that name the course's dependencies agree: the two projects' pyproject.toml files
(lower bounds: pyproject.toml for course_lib, course_grader/pyproject.toml for the grader),
constraints.txt (the exact tested versions) and environment.yml (conda users)."""

from __future__ import annotations

import re
from pathlib import Path

import tomllib
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[1]
PROJECTS = [REPO / "pyproject.toml", REPO / "course_grader" / "pyproject.toml"]  # course_lib, then the grader
OWN = {canonicalize_name(tomllib.loads(p.read_text())["project"]["name"]) for p in PROJECTS}  # installed from here


def _pyproject_requirements() -> list[Requirement]:
    """Every third-party requirement of both projects (the grader's requirement of course-lib is the course's own)."""
    reqs = []
    for path in PROJECTS:
        project = tomllib.loads(path.read_text())["project"]
        reqs += project["dependencies"]
        for extra in project.get("optional-dependencies", {}).values():
            reqs += extra
    return [r for r in map(Requirement, reqs) if canonicalize_name(r.name) not in OWN]


def _constraints() -> dict[str, str]:
    pins = {}
    for line in (REPO / "constraints.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", line)
        assert match, f"constraints.txt line {line!r} is not of the form name==version"
        pins[canonicalize_name(match.group(1))] = match.group(2)
    return pins


def _environment_pins() -> tuple[dict[str, str], list[str]]:
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pip_section = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    pins, other = {}, []
    for item in pip_section:
        match = re.fullmatch(r"([A-Za-z0-9_.\-]+)==(\S+)", item)
        if match:
            pins[canonicalize_name(match.group(1))] = match.group(2)
        else:
            other.append(item)
    return pins, other


def test_every_dependency_is_pinned_in_constraints_and_satisfies_its_lower_bound():
    pins = _constraints()
    for req in _pyproject_requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is a dependency in pyproject.toml but has no pin in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {req.name}=={pins[name]}, outside pyproject.toml's range {req.specifier}"
        )


def test_environment_yml_names_the_same_packages_and_versions():
    env_pins, other = _environment_pins()
    pins = _constraints()
    wanted = {canonicalize_name(r.name) for r in _pyproject_requirements()}
    assert set(env_pins) == wanted, (
        f"environment.yml pins {sorted(env_pins)}, pyproject.toml depends on {sorted(wanted)}; "
        f"missing: {sorted(wanted - set(env_pins))}, extra: {sorted(set(env_pins) - wanted)}"
    )
    for name, version in env_pins.items():
        assert pins.get(name) == version, (
            f"environment.yml pins {name}=={version} but constraints.txt pins {name}=={pins.get(name)}"
        )
    assert other == ["-e .[dev]", "-e ./course_grader"], (
        f"environment.yml should install the course's two packages with '-e .[dev]' and '-e ./course_grader', "
        f"got {other}"
    )


def test_environment_yml_python_matches_the_tested_python():
    env = yaml.safe_load((REPO / "environment.yml").read_text())
    pythons = [d for d in env["dependencies"] if isinstance(d, str) and d.startswith("python")]
    assert pythons == ["python=3.11"], f"environment.yml should ask for python=3.11 (the tested version), got {pythons}"


def test_torch_pin_is_satisfied_by_the_local_cpu_wheel():
    # 2.13.0 must satisfy the pin: an unpinned or newer torch would pull a multi-GB CUDA build.
    pin = _constraints()["torch"]
    assert pin == "2.13.0", f"torch should be pinned to 2.13.0 (the CPU wheel the course is tested with), got {pin}"


def test_the_two_projects_are_installed_together_by_make_and_conda():
    makefile = (REPO / "Makefile").read_text()
    assert '-e ".[dev,site]" -e ./course_grader' in makefile, "make install must install course_lib and the grader"
    assert "course_grader/pyproject.toml" in makefile.split("$(STAMP):", 1)[1].splitlines()[0], (
        "the install must be redone when the grader's dependencies change"
    )
    assert len(OWN) == 2, f"two projects with two names, got {OWN}"
