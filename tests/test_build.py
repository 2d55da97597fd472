"""`course build`: solutions/ -> exercises/, deterministic, nbgrader-compatible, and careful with
learners' work."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_grader.build import build, build_exercise, build_text, exercise_labels, label_problems
from course_lib import cli
from course_lib.runner.notebook import NotebookError, dumps_notebook, read_notebook, source

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = REPO / "solutions"


def _cell(cell_type, text, cid, **nbgrader):
    cell = {"cell_type": cell_type, "id": cid, "metadata": {}, "source": text}
    if nbgrader:
        cell["metadata"]["nbgrader"] = {
            "schema_version": 3,
            "grade": False,
            "solution": False,
            "locked": False,
            **nbgrader,
        }
    if cell_type == "code":
        cell["execution_count"] = 3
        cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "secret output\n"}]
    return cell


def tiny_solution() -> dict:
    """A small solution notebook with every kind of cell the build must handle."""
    cells = [
        _cell("markdown", "# Exercises 99\n\n**Total: 2 points.**\n", "intro", grade_id="intro", locked=True),
        _cell("code", "from course_lib import checks\n", "setup", grade_id="setup", locked=True),
        _cell(
            "code",
            'def f(x):\n    """Double x."""\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION\n',
            "c-answer",
            grade_id="ex1_answer",
            solution=True,
        ),
        _cell(
            "code",
            "checks.check_equal('f(1)', checks.call('f', checks.answer('f'), 1), 2)\n"
            "### BEGIN HIDDEN TESTS\nchecks.check_equal('f(5)', checks.call('f', checks.answer('f'), 5), 10)\n"
            "### END HIDDEN TESTS\n",
            "c-test",
            grade_id="ex1_test",
            grade=True,
            locked=True,
            points=2,
        ),
        _cell("code", "answer = 42\n", "c-whole", grade_id="ex2_answer", solution=True),
        _cell(
            "markdown",
            "Explain.\n\n=== BEGIN SOLUTION ===\nBecause.\n=== END SOLUTION ===\n",
            "c-text",
            grade_id="ex3_answer",
            solution=True,
        ),
        _cell("code", "print('not graded')\n", "c-plain"),
    ]
    cells[1]["metadata"]["execution"] = {"iopub.status.idle": "2026-01-01T00:00:00Z"}
    return {
        "cells": cells,
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def test_build_replaces_answers_removes_hidden_tests_and_outputs_keeps_ids_and_metadata():
    ex = build_exercise(tiny_solution(), "99_tiny.ipynb")
    by_id = {c["id"]: c for c in ex["cells"]}
    assert [c["id"] for c in ex["cells"]] == [c["id"] for c in tiny_solution()["cells"]], (
        "cell ids and order must be kept"
    )
    answer = by_id["c-answer"]["source"]
    assert answer == 'def f(x):\n    """Double x."""\n    # YOUR CODE HERE\n    raise NotImplementedError()\n', answer
    test = by_id["c-test"]["source"]
    assert "HIDDEN" not in test and "f(5)" not in test and "f(1)" in test, test
    assert by_id["c-whole"]["source"] == "# YOUR CODE HERE\nraise NotImplementedError()", by_id["c-whole"]["source"]
    assert by_id["c-text"]["source"] == "Explain.\n\nYOUR ANSWER HERE\n", by_id["c-text"]["source"]
    for cell in ex["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None, cell
        assert "execution" not in cell["metadata"], "run timestamps must not reach the exercise"
    assert by_id["c-test"]["metadata"]["nbgrader"]["points"] == 2
    assert by_id["c-test"]["metadata"]["editable"] is False and by_id["c-answer"]["metadata"]["deletable"] is False
    assert "editable" not in by_id["c-answer"]["metadata"], "answer cells must stay editable"


def test_build_output_is_deterministic_nbformat_json_with_trailing_newline(tmp_path):
    path = tmp_path / "99_tiny.ipynb"
    path.write_text(json.dumps(tiny_solution()))
    first, second = build_text(path), build_text(path)
    assert first == second
    assert first.endswith("}\n") and not first.endswith("\n\n")
    nb = nbformat.reads(first, as_version=4)
    nbformat.validate(nb)
    assert first == nbformat.writes(nb) + "\n", "the layout must be exactly nbformat's"


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda nb: nb["cells"][2].update(source="### BEGIN SOLUTION\nx = 1\n"), "without a matching"),
        (
            lambda nb: nb["cells"][2].update(source="### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n"),
            "nested",
        ),
        (lambda nb: nb["cells"][4]["metadata"]["nbgrader"].update(grade_id="ex1_answer"), "also used by cell 2"),
        (lambda nb: nb["cells"][3]["metadata"]["nbgrader"].pop("points"), "needs numeric 'points'"),
        (lambda nb: nb["cells"][6].update(source="### BEGIN SOLUTION\nx\n### END SOLUTION\n"), "no nbgrader metadata"),
        (lambda nb: nb["cells"][0].pop("id"), "has no cell id"),
    ],
)
def test_build_rejects_broken_solution_notebooks_with_a_clear_message(mutate, message):
    nb = tiny_solution()
    mutate(nb)
    with pytest.raises(NotebookError, match=message):
        build_exercise(nb, "99_tiny.ipynb")


def _course(tmp_path) -> tuple[Path, Path]:
    sol, ex = tmp_path / "solutions", tmp_path / "exercises"
    sol.mkdir()
    (sol / "99_tiny.ipynb").write_text(json.dumps(tiny_solution()))
    return sol, ex


def test_build_never_overwrites_a_learners_changes_without_force(tmp_path, capsys):
    sol, ex = _course(tmp_path)
    assert cli.main(["build", "--solutions", str(sol), "--exercises", str(ex)]) == 0
    target = ex / "99_tiny_exercises.ipynb"
    built = target.read_text()
    # The learner answers exercise 1 and saves.
    nb = read_notebook(target)
    nb["cells"][2]["source"] = "def f(x):\n    return 2 * x\n"
    learner = dumps_notebook(nb)
    target.write_text(learner)
    # The teacher changes the solution; a rebuild would replace the learner's file.
    changed = tiny_solution()
    changed["cells"][0]["source"] = "# Exercises 99 (revised)\n\n**Total: 2 points.**\n"
    (sol / "99_tiny.ipynb").write_text(json.dumps(changed))
    capsys.readouterr()
    assert cli.main(["build", "--solutions", str(sol), "--exercises", str(ex)]) == 1
    out = capsys.readouterr().out
    assert str(target) in out and "--force" in out and "rename or copy" in out, out
    assert target.read_text() == learner, "the learner's file must be left alone"
    # --check reports it as out of date and writes nothing either.
    assert cli.main(["build", "--check", "--solutions", str(sol), "--exercises", str(ex)]) == 1
    assert target.read_text() == learner
    # --force replaces it.
    assert cli.main(["build", "--force", "--solutions", str(sol), "--exercises", str(ex)]) == 0
    assert target.read_text() != learner and "revised" in target.read_text()
    assert built != target.read_text()


def test_build_replaces_an_untouched_earlier_build_and_check_reports_staleness(tmp_path, capsys):
    sol, ex = _course(tmp_path)
    assert build(sol, ex).ok
    target = ex / "99_tiny_exercises.ipynb"
    # Running the notebook (outputs, execution counts, cell metadata) does not count as a change.
    nb = read_notebook(target)
    nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "hi\n"}]
    nb["cells"][1]["execution_count"] = 1
    nb["cells"][1]["metadata"]["collapsed"] = True
    target.write_text(json.dumps(nb, indent=2))
    changed = tiny_solution()
    changed["cells"][0]["source"] = "# Exercises 99 (revised)\n\n**Total: 2 points.**\n"
    (sol / "99_tiny.ipynb").write_text(json.dumps(changed))
    report = build(sol, ex, check=True)
    assert report.stale == [target] and not report.ok
    report = build(sol, ex)
    assert report.written == [target] and not report.conflicts, report
    assert build(sol, ex, check=True).ok
    assert cli.main(["build", "--check", "--solutions", str(sol), "--exercises", str(ex)]) == 0
    assert "up to date" in capsys.readouterr().out


def test_build_check_flags_orphaned_exercises(tmp_path):
    """An exercise notebook without a solution, or under the name builds used to give it (an unchanged
    `99_tiny.ipynb` beside `99_tiny_exercises.ipynb`), is to be deleted; one a learner changed is not."""
    sol, ex = _course(tmp_path)
    build(sol, ex)
    shutil.copy(ex / "99_tiny_exercises.ipynb", ex / "98_gone_exercises.ipynb")
    shutil.copy(ex / "99_tiny_exercises.ipynb", ex / "99_tiny.ipynb")
    report = build(sol, ex, check=True)
    assert report.orphans == [ex / "98_gone_exercises.ipynb", ex / "99_tiny.ipynb"] and not report.ok, report
    nb = read_notebook(ex / "99_tiny.ipynb")
    nb["cells"][2]["source"] = "def f(x):\n    return 2 * x\n"
    (ex / "99_tiny.ipynb").write_text(dumps_notebook(nb))
    assert build(sol, ex, check=True).orphans == [ex / "98_gone_exercises.ipynb"]


def test_answer_and_test_cells_let_run_all_go_on_and_nothing_else_does():
    """JupyterLab's Run All goes past a cell tagged raises-exception: every answer and test cell of a
    built notebook has the tag (a blank exercise must not stop the run), and no other cell (an error
    in the setup cell must stop it)."""
    for path in sorted(SOLUTIONS.glob("*.ipynb")):
        built = build_exercise(read_notebook(path), path.name)
        for cell in built["cells"]:
            nbg = cell["metadata"].get("nbgrader", {})
            answer_or_test = cell["cell_type"] == "code" and (nbg.get("grade") or nbg.get("solution"))
            tagged = "raises-exception" in cell["metadata"].get("tags", [])
            assert tagged == bool(answer_or_test), (
                f"{path.name}, cell {cell['id']} ({nbg.get('grade_id')}): tagged raises-exception: {tagged}, "
                f"expected {bool(answer_or_test)}"
            )


def test_exercises_folder_is_what_course_build_writes():
    """`course build --check` on the real course (part of `make test`)."""
    proc = subprocess.run(
        [sys.executable, "-m", "course_lib.cli", "build", "--check"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"exercises/ is out of date; run `course build`.\n{proc.stdout}{proc.stderr}"


@pytest.mark.parametrize("path", sorted(SOLUTIONS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_every_exercise_has_visible_and_hidden_tests_and_enough_exercises(path):
    """DESIGN: at least five auto-graded exercises per set, each with visible and hidden tests."""
    nb = read_notebook(path)
    tests = [
        c
        for c in nb["cells"]
        if c["metadata"].get("nbgrader", {}).get("grade") and not c["metadata"]["nbgrader"].get("solution")
    ]
    assert len(tests) >= 5, f"{path.name}: {len(tests)} graded test cells, expected at least five exercises"
    for cell in tests:
        gid = cell["metadata"]["nbgrader"]["grade_id"]
        text = source(cell)
        visible, _, rest = text.partition("### BEGIN HIDDEN TESTS")
        hidden = rest.partition("### END HIDDEN TESTS")[0]
        assert "checks." in visible, f"{path.name} {gid}: no visible check a learner can run"
        assert hidden.strip(), f"{path.name} {gid}: no hidden tests"


@pytest.mark.slow
def test_course_build_matches_nbgrader_generate_assignment(tmp_path):
    """nbgrader's own generate_assignment gives the same student version as `course build`."""
    pytest.importorskip("nbgrader")
    solutions = sorted(SOLUTIONS.glob("*.ipynb"))
    assert solutions, "no solution notebooks"
    course = tmp_path / "course"
    source_dir = course / "source" / "ps"
    source_dir.mkdir(parents=True)
    for path in solutions:
        shutil.copy(path, source_dir / path.name)
    home = tmp_path / "home"
    home.mkdir()
    env = {
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "JUPYTER_CONFIG_DIR": str(home / "jc"),
        "JUPYTER_DATA_DIR": str(home / "jd"),
        "JUPYTER_RUNTIME_DIR": str(home / "jr"),
        "IPYTHONDIR": str(home / "ip"),
        "LANG": "C.UTF-8",
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "nbgrader",
            "generate_assignment",
            "ps",
            f"--CourseDirectory.root={course}",
            f"--CourseDirectory.db_url=sqlite:///{course / 'gradebook.db'}",
            "--CourseDirectory.course_id=course",
        ],
        cwd=course,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not any(home.glob("**/*.db")), "nbgrader wrote a database into the home folder"
    relevant = ("grade", "solution", "locked", "grade_id", "points", "schema_version")
    for path in solutions:
        theirs = json.loads((course / "release" / "ps" / path.name).read_text())
        ours = json.loads(build_text(path))
        assert len(theirs["cells"]) == len(ours["cells"]), path.name
        for a, b in zip(theirs["cells"], ours["cells"]):
            where = f"{path.name}, cell {b.get('id')}"
            assert a["cell_type"] == b["cell_type"], where
            assert a.get("id") == b.get("id"), where
            assert source(a) == source(b), f"{where}:\nnbgrader: {source(a)!r}\ncourse:   {source(b)!r}"
            na, nb_ = a["metadata"].get("nbgrader", {}), b["metadata"].get("nbgrader", {})
            assert {k: na.get(k) for k in relevant} == {k: nb_.get(k) for k in relevant}, where
            for key in ("deletable", "editable"):
                assert a["metadata"].get(key) == b["metadata"].get(key), f"{where}: {key}"
            assert a.get("outputs", []) == b.get("outputs", []) == [], where


# --- point labels from the metadata ---------------------------------------------------------------


def _welcome_course(tmp_path, change) -> tuple[Path, Path]:
    """A copy of lesson 00's solution notebook in tmp_path/solutions, changed by `change(nb)`."""
    sol, ex = tmp_path / "solutions", tmp_path / "exercises"
    sol.mkdir()
    nb = read_notebook(SOLUTIONS / "00_welcome.ipynb")
    change(nb)
    (sol / "00_welcome.ipynb").write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return sol, ex


def _set_points(nb, gid, value):
    next(c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == gid)["metadata"]["nbgrader"][
        "points"
    ] = value


def test_changed_points_reach_the_built_headings_and_total_and_check_names_the_drift(tmp_path, capsys):
    sol, ex = _welcome_course(tmp_path, lambda nb: _set_points(nb, "ex3_test", 5))
    assert cli.main(["build", "--solutions", str(sol), "--exercises", str(ex)]) == 0, (
        "a label drift warns, it does not stop the build"
    )
    out = capsys.readouterr().out
    assert "WARNING" in out and "Exercise 3" in out, out
    built = read_notebook(ex / "00_welcome_exercises.ipynb")
    text = "\n".join(source(c) for c in built["cells"] if c["cell_type"] == "markdown")
    assert "## Exercise 3: The receptive field of stacked convolutions (★★☆, 5 points)" in text, text
    assert "**Total: 18 points.**" in text and "Total: 16" not in text, (
        "the total must follow the metadata (16 - 3 + 5)"
    )
    assert "(★☆☆, 2 points)" in text, "the other labels (and their stars) are kept"
    assert cli.main(["build", "--check", "--solutions", str(sol), "--exercises", str(ex)]) == 1
    out = capsys.readouterr().out
    assert "00_welcome.ipynb, Exercise 3 (The receptive field of stacked convolutions)" in out, out
    assert 'the heading says "(★★☆, 3 points)" but the metadata gives 5 points (ex3_test: 5)' in out, out
    assert 'it says "**Total: 16 points.**" but the test cells\' points add up to 18 points' in out, out
    assert "fix the heading" in out and 'write "**Total: 18 points.**" in the intro' in out, out


def test_labels_say_one_point_in_the_singular(tmp_path):
    def change(nb):
        _set_points(nb, "ex1_test", 1)  # "(★☆☆, 2 points)" -> "1 point"
        _set_points(nb, "ex7_test", 2)  # "(★☆☆, 1 point)" -> "2 points"

    sol, ex = _welcome_course(tmp_path, change)
    built = build_exercise(read_notebook(sol / "00_welcome.ipynb"), "00_welcome.ipynb")
    headings = [label.heading for label in exercise_labels(built)]
    assert headings[0].endswith("(★☆☆, 1 point)") and headings[6].endswith("(★☆☆, 2 points)"), headings
    assert label_problems(built, "built") == [], "a built notebook's labels are the metadata's"
    problems = label_problems(read_notebook(sol / "00_welcome.ipynb"), "00_welcome.ipynb")
    assert len(problems) == 2 and 'says "(★☆☆, 2 points)" but the metadata gives 1 point' in problems[0], problems


def test_a_heading_without_a_label_and_an_intro_without_a_total_are_named(tmp_path):
    def change(nb):
        nb["cells"][0]["source"] = "# Exercises 00\n"
        prompt = next(c for c in nb["cells"] if c.get("id") and "Exercise 2:" in source(c))
        prompt["source"] = source(prompt).replace(" (★☆☆, 2 points)", "", 1)

    sol, ex = _welcome_course(tmp_path, change)
    problems = label_problems(read_notebook(sol / "00_welcome.ipynb"), "00_welcome.ipynb")
    assert any("Exercise 2" in p and "has no point label" in p and "(★☆☆, 2 points)" in p for p in problems), problems
    assert any('does not state the total; add "**Total: 16 points.**"' in p for p in problems), problems


@pytest.mark.parametrize("path", sorted(SOLUTIONS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_solution_labels_match_their_metadata(path):
    assert label_problems(read_notebook(path), path.name) == []


# --- what the intro says, and a release for a class ------------------------------------------------


@pytest.mark.parametrize("path", sorted(SOLUTIONS.glob("*.ipynb")), ids=lambda p: p.stem)
def test_intro_says_what_is_graded_and_the_pointer_to_solutions_is_a_self_study_cell(path):
    nb = read_notebook(path)
    intro = " ".join(source(nb["cells"][0]).split())
    assert "solutions/" not in intro, f"{path.name}: the pointer to the worked answers belongs in the self-study cell"
    for said in (
        "only the code in the answer cells",
        "A cell you add yourself is run neither by `course check` nor by your teacher's grader",
        "keep any helper function inside the answer cell that uses it",
        "earns its points part by part",
        "`course check` runs the visible tests only",
        "hidden tests, which may lower its total",
    ):
        assert said in intro, f"{path.name}: the intro should say {said!r}"
    study = [c for c in nb["cells"] if "self-study" in c["metadata"].get("tags", [])]
    assert len(study) == 1 and nb["cells"][1] is study[0], f"{path.name}: one self-study cell, right after the intro"
    assert f"`solutions/{path.name}`" in source(study[0]) and study[0]["cell_type"] == "markdown"
    mentions = [i for i, c in enumerate(nb["cells"]) if "solutions/" in source(c) and c is not study[0]]
    assert not mentions, f"{path.name}: cells {mentions} point to solutions/ outside the self-study cell"


def test_class_build_leaves_out_the_self_study_cells_and_every_pointer_to_solutions(tmp_path, capsys):
    out = tmp_path / "release"
    assert cli.main(["build", "--class", "--exercises", str(out)]) == 0
    built = sorted(out.glob("*.ipynb"))
    assert [p.name for p in built] == [f"{p.stem}_exercises.ipynb" for p in sorted(SOLUTIONS.glob("*.ipynb"))]
    for path in built:
        nb = read_notebook(path)
        assert not [c for c in nb["cells"] if "solutions/" in source(c)], f"{path.name}: a cell mentions solutions/"
        assert "solutions/" not in path.read_text(encoding="utf-8"), f"{path.name}: solutions/ is named in the file"
        normal = read_notebook(REPO / "exercises" / path.name)
        kept = [c for c in normal["cells"] if "self-study" not in c["metadata"].get("tags", [])]
        assert len(kept) == len(normal["cells"]) - 1
        assert [(c["id"], source(c)) for c in nb["cells"]] == [(c["id"], source(c)) for c in kept], (
            f"{path.name}: a class build is the normal build without the self-study cell"
        )
    assert cli.main(["build", "--class", "--check", "--exercises", str(out)]) == 0


def test_class_build_without_exercises_is_refused_and_writes_nothing(tmp_path, capsys):
    before = {p.name: p.read_bytes() for p in (REPO / "exercises").glob("*.ipynb")}
    assert cli.main(["build", "--class"]) == 2
    out = capsys.readouterr().out
    assert "--exercises DIR" in out and "exercises/" in out, out
    assert {p.name: p.read_bytes() for p in (REPO / "exercises").glob("*.ipynb")} == before


# --- manually graded answers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, gid, total",
    [
        ("06_attention", "ex9_answer", 24),
        ("07_position", "ex8_answer", 19),
        ("08_multi_head_attention", "ex7_answer", 19),
    ],
)
def test_a_written_answer_is_kept_blank_with_its_points_and_without_its_rubric(name, gid, total):
    """nbgrader's manually graded answer (grade and solution, markdown): the release keeps the cell and its
    metadata, blank; its points count in its heading and the total; the rubric is the markers' alone."""
    solution = read_notebook(SOLUTIONS / f"{name}.ipynb")
    cell = next(c for c in solution["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == gid)
    assert cell["cell_type"] == "markdown" and len(cell["metadata"]["course"]["rubric"]) >= 3
    built = json.loads(build_text(SOLUTIONS / f"{name}.ipynb", for_class=True))
    mine = next(c for c in built["cells"] if c["metadata"].get("nbgrader", {}).get("grade_id") == gid)
    assert source(mine) == "YOUR ANSWER HERE" and "course" not in mine["metadata"]
    assert mine["metadata"]["nbgrader"] == {**cell["metadata"]["nbgrader"]} and mine["metadata"]["deletable"] is False
    assert f"**Total: {total} points.**" in source(built["cells"][0]) and label_problems(solution, name) == []
    assert "YOUR ANSWER HERE" in source(built["cells"][0]), "the intro tells learners where a written answer goes"


def test_a_written_answers_points_are_counted_in_its_heading(tmp_path):
    def change(nb):
        _set_points(nb, "ex3_test", 3)
        nb["cells"].append(
            {"cell_type": "markdown", "id": "q9", "metadata": {}, "source": "## Exercise 9: Why? (★☆☆, 1 point)"}
        )
        nb["cells"].append(
            {
                "cell_type": "markdown",
                "id": "a9",
                "source": "## My answer\n\nBecause.",
                "metadata": {
                    "nbgrader": {
                        "schema_version": 3,
                        "grade": True,
                        "solution": True,
                        "locked": False,
                        "points": 2,
                        "grade_id": "ex9_answer",
                    }
                },
            }
        )

    sol, _ = _welcome_course(tmp_path, change)
    labels = exercise_labels(read_notebook(sol / "00_welcome.ipynb"))
    assert labels[-1].heading.startswith("## Exercise 9") and labels[-1].points == 2, (
        "the answer's own heading is no label"
    )
    assert labels[-1].tests == ["ex9_answer: 2 (marked by a person)"]


def test_every_exercise_notebook_the_course_names_exists():
    """The README, the guides, the lessons and the exercise sets name exercise notebooks by path
    (`exercises/06_attention_exercises.ipynb`): each must be one that `course build` writes."""
    texts = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    texts += sorted((REPO / "notebooks").glob("*.ipynb")) + sorted(SOLUTIONS.glob("*.ipynb"))
    named = re.compile(r"exercises/(\d\d_[\w-]+)\.ipynb")
    problems = [
        f"{path.relative_to(REPO)}: exercises/{m.group(1)}.ipynb"
        for path in texts
        for m in named.finditer(path.read_text(encoding="utf-8"))
        if not (REPO / "exercises" / f"{m.group(1)}.ipynb").is_file()
    ]
    assert not problems, "these exercise notebooks do not exist (the exercises are NN_name_exercises.ipynb):\n" + (
        "\n".join(problems)
    )
