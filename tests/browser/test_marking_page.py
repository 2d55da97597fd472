"""`course mark` in a real browser, as two graders use it: the teacher starts it, opens the address it
prints, and marks one question for the whole class; a teaching assistant, in another browser profile
(a cookie of their own), marks another answer under their own name. Each mark is in the gradebook
with its grader, and in the student's feedback; the page loads nothing from anywhere else and runs
no script."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from contextlib import closing

import pytest
from labdriver import new_shots_dir
from marking_helpers import ASSIGNMENT, marking_class

from course_grader.gradebook import open_gradebook

pytestmark = pytest.mark.slow


def _start(out):
    """`course mark` as a teacher starts it; its process and the address it printed."""
    proc = subprocess.Popen([sys.executable, "-m", "course_lib.cli", "mark", "--out", str(out), "--grader", "Teacher"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    line = proc.stdout.readline()
    found = re.search(r"Marking page: (http://127\.0\.0\.1:\d+/\?token=\S+)", line)
    if not found:
        proc.kill()
        pytest.fail(f"course mark printed {line!r}, not its address")
    return proc, found[1]


def _mark(page, student_label: str, *, rubric: str | None = None, points: str | None = None, comment: str, grader: str):
    form = page.get_by_role("form", name=f"mark {student_label}")
    if rubric is not None:
        form.get_by_label("Rubric").select_option(label=rubric)
    if points is not None:
        form.get_by_label(re.compile(r"^Points")).fill(points)
    form.get_by_label("Comment").fill(comment)
    form.get_by_label("Grader").fill(grader)
    form.get_by_role("button", name=f"Save the mark for {student_label}").click()
    page.wait_for_load_state("load")


def test_two_graders_mark_one_question_for_the_class(browser, tmp_path):
    out = marking_class(tmp_path)
    proc, url = _start(out)
    shots = new_shots_dir("marking")
    requests, problems = [], []
    teacher = browser.new_context(viewport={"width": 1200, "height": 900})
    ta = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        page = teacher.new_page()
        page.on("request", lambda r: requests.append(r.url))
        page.on("console", lambda m: problems.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        page.goto(url)
        assert "token" not in page.url, "the token moves into a cookie, out of the address bar"
        page.get_by_role("link", name="Exercise 9: Why divide by √d_k?").click()
        page.wait_for_load_state("load")
        assert page.get_by_text("saturation and vanishing gradients").count() >= 1, "the rubric is on the page"
        assert page.locator("form.mark").count() == 3
        assert page.locator("b").filter(has_text="saturate").count() == 0, "a student's markup is shown as text"
        page.screenshot(path=str(shots / "question.png"), full_page=True)
        _mark(page, "Ada Byron (ada)", rubric="2: saturation and vanishing gradients", comment="Exactly right.",
              grader="Ana Ruiz")
        assert page.get_by_text(re.compile(r"Marked 2 / 2 by Ana Ruiz")).count() == 1, page.content()[:2000]

        other = ta.new_page()
        other.goto(url)
        other.goto(url.split("?")[0] + "question?" + f"a={ASSIGNMENT}&q=ex9_answer")
        _mark(other, "Bob Smith (bob)", points="1", comment="Why do they saturate?", grader="Ben Okafor (TA)")
        other.screenshot(path=str(shots / "marked.png"), full_page=True)
        assert other.get_by_text(re.compile(r"Marked 1 / 2 by Ben Okafor \(TA\)")).count() == 1
        _mark(other, "Zoë Müller (zoë)", points="7", comment="", grader="Ben Okafor (TA)")
        over = other.get_by_role("form", name="mark Zoë Müller (zoë)").get_by_label(re.compile(r"^Points"))
        assert over.evaluate("el => !el.validity.valid"), "the browser refuses more than the question's points"
    except Exception:
        page.screenshot(path=str(shots / "failure.png"), full_page=True)
        raise
    finally:
        teacher.close()
        ta.close()
        proc.terminate()
        log = proc.communicate(timeout=30)[0]
    with closing(open_gradebook(out)) as book:
        marks = [(m.student, m.points, m.grader) for m in book.marks()]
    assert marks == [("ada", 2.0, "Ana Ruiz"), ("bob", 1.0, "Ben Okafor (TA)")], (marks, log)
    assert "Why do they saturate?" in (out / "feedback" / "bob" / f"{ASSIGNMENT}.md").read_text()
    assert "2 marked (Ana Ruiz 1, Ben Okafor (TA) 1), 1 to mark" in log, log
    assert all(r.startswith("http://127.0.0.1:") for r in requests), [r for r in requests if "127.0.0.1" not in r]
    assert not problems, problems
    if not os.environ.get("COURSE_BROWSER_SHOTS"):
        shutil.rmtree(shots, ignore_errors=True)
