"""`course mark` in a real browser, as a teacher and a teaching assistant use it: the teacher starts it
with an address for each of them, each opens their own in a browser profile of their own (a cookie of
their own), and they mark one question for the whole class. Each mark is in the gradebook under the
name of the address it was saved from, and in the student's feedback; a save from a page loaded
before the other grader marked the same answer is refused and shows both marks, and saved again only
when the grader chooses to; the page loads nothing from anywhere else and runs no script."""

from __future__ import annotations

import os
import queue
import re
import shutil
import subprocess
import sys
import threading
from contextlib import closing

import pytest
from labdriver import new_shots_dir
from marking_helpers import ASSIGNMENT, big_class, marking_class

from course_grader.export import safe_name
from course_grader.gradebook import open_gradebook

pytestmark = pytest.mark.slow


GRADERS = ["Ana Ruiz", "Ben Okafor (TA)"]


def _start(out, graders=tuple(GRADERS), more=()):
    """`course mark` as a teacher starts it for `graders` (two by default, `more` options after each's
    --grader: name -> [options]); its process, the address printed for each, and a reader of what it prints."""
    more = dict(more)
    proc = subprocess.Popen(
        [sys.executable, "-m", "course_lib.cli", "mark", "--out", str(out)]
        + [arg for name in graders for arg in ("--grader", name, *more.get(name, ()))],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True)
    reader.start()
    printed, urls = [], {}
    while len(urls) < len(graders):  # one line per grader, each within a minute, or a failure (never a hang)
        try:
            printed.append(lines.get(timeout=60))
        except queue.Empty:
            break
        found = re.fullmatch(r"Marking page for (.+): (http://127\.0\.0\.1:\d+/\?token=\S+)\n", printed[-1])
        if not found:
            break
        urls[found[1]] = found[2]
    if sorted(urls) != sorted(graders) or len(set(urls.values())) != len(graders):
        proc.kill()
        pytest.fail(f"course mark printed {printed!r}, not one address per grader")
    return proc, urls, (reader, lines)


def _stop(proc, output) -> str:
    """Stop `course mark` as Ctrl-C does; what it printed after the addresses."""
    reader, lines = output
    proc.terminate()
    proc.wait(timeout=30)
    reader.join(timeout=30)
    return "".join(lines.get() for _ in range(lines.qsize()))


def _open_question(page, url):
    page.goto(url)
    assert "token" not in page.url, "the token moves into a cookie, out of the address bar"
    page.get_by_role("link", name="Exercise 9: Why divide by √d_k?").click()
    page.wait_for_load_state("load")


def _mark(page, student_label: str, *, rubric: str | None = None, points: str | None = None, comment: str):
    form = page.get_by_role("form", name=f"mark {student_label}")
    if rubric is not None:
        form.get_by_label("Rubric").select_option(label=rubric)
    if points is not None:
        form.get_by_label(re.compile(r"^Points")).fill(points)
    form.get_by_label("Comment").fill(comment)
    form.get_by_role("button", name=f"Save the mark for {student_label}").click()
    page.wait_for_load_state("load")


def _marks(out):
    with closing(open_gradebook(out)) as book:
        return book.marks()


def test_two_graders_mark_one_question_for_the_class(browser, tmp_path):
    out = marking_class(tmp_path)
    proc, urls, output = _start(out)
    shots = new_shots_dir("marking")
    requests, problems = [], []
    teacher = browser.new_context(viewport={"width": 1200, "height": 900})
    ta = browser.new_context(viewport={"width": 1200, "height": 900})
    try:
        page = teacher.new_page()
        page.on("request", lambda r: requests.append(r.url))
        page.on("console", lambda m: problems.append(f"console.{m.type}: {m.text}") if m.type == "error" else None)
        _open_question(page, urls["Ana Ruiz"])
        assert page.get_by_text("saturation and vanishing gradients").count() >= 1, "the rubric is on the page"
        assert page.locator("form.mark").count() == 3
        assert page.locator("b").filter(has_text="saturate").count() == 0, "a student's markup is shown as text"
        assert page.get_by_text(re.compile(r"^Marking as Ana Ruiz")).count() == 1, "the page says who marks"
        assert page.get_by_label("Grader").count() == 0, "no field to type a grader's name in"
        page.screenshot(path=str(shots / "question.png"), full_page=True)
        _mark(page, "Ada Byron (ada)", rubric="2: saturation and vanishing gradients", comment="Exactly right.")
        assert page.get_by_text(re.compile(r"Marked 2 / 2 by Ana Ruiz")).count() == 1, page.content()[:2000]

        other = ta.new_page()
        _open_question(other, urls["Ben Okafor (TA)"])
        _mark(other, "Bob Smith (bob)", points="1", comment="Why do they saturate?")
        other.screenshot(path=str(shots / "marked.png"), full_page=True)
        assert other.get_by_text(re.compile(r"Marked 1 / 2 by Ben Okafor \(TA\)")).count() == 1
        _mark(other, "Zoë Müller (zoë)", points="7", comment="")
        over = other.get_by_role("form", name="mark Zoë Müller (zoë)").get_by_label(re.compile(r"^Points"))
        assert over.evaluate("el => !el.validity.valid"), "the browser refuses more than the question's points"
    except Exception:
        page.screenshot(path=str(shots / "failure.png"), full_page=True)
        raise
    finally:
        teacher.close()
        ta.close()
        log = _stop(proc, output)
    marks = [(m.student, m.points, m.grader) for m in _marks(out)]
    assert marks == [("ada", 2.0, "Ana Ruiz"), ("bob", 1.0, "Ben Okafor (TA)")], (marks, log)
    assert "Why do they saturate?" in (out / "feedback" / "bob" / f"{ASSIGNMENT}.md").read_text()
    assert "2 marked (Ana Ruiz 1, Ben Okafor (TA) 1), 1 to mark" in log, log
    assert all(r.startswith("http://127.0.0.1:") for r in requests), [r for r in requests if "127.0.0.1" not in r]
    assert not problems, problems
    if not os.environ.get("COURSE_BROWSER_SHOTS"):
        shutil.rmtree(shots, ignore_errors=True)


def test_a_page_loaded_before_the_other_graders_mark_cannot_overwrite_it_unseen(browser, tmp_path):
    """Ana and Ben open the question; Ana marks Zoë's answer 2 / 2; Ben, from his page loaded before, saves
    0 / 2: refused, and he sees Ana's mark (who, when) beside his own; he saves his again, knowingly."""
    out = marking_class(tmp_path)
    proc, urls, output = _start(out)
    shots = new_shots_dir("marking-stale")
    ana_ctx = browser.new_context(viewport={"width": 1200, "height": 900})
    ben_ctx = browser.new_context(viewport={"width": 1200, "height": 900})
    ben = None
    try:
        ana, ben = ana_ctx.new_page(), ben_ctx.new_page()
        _open_question(ana, urls["Ana Ruiz"])
        _open_question(ben, urls["Ben Okafor (TA)"])
        _mark(ana, "Zoë Müller (zoë)", rubric="2: saturation and vanishing gradients", comment="TA1: full marks")
        assert [(m.grader, m.points) for m in _marks(out)] == [("Ana Ruiz", 2.0)]

        _mark(ben, "Zoë Müller (zoë)", rubric="0: no mechanism", comment="TA2: no mechanism")
        ben.screenshot(path=str(shots / "refused.png"), full_page=True)
        assert (
            ben.get_by_text(re.compile(r"^Not saved: Zoë Müller \(zoë\)'s answer was marked by Ana Ruiz")).count() == 1
        )
        [on_record] = _marks(out)
        assert (on_record.grader, on_record.points) == ("Ana Ruiz", 2.0), "Ben's stale save changed nothing"
        when = on_record.created_at[:16].replace("T", " ")
        record = ben.locator("p.record")
        assert (
            record.inner_text()
            == f"Marked 2 / 2 by Ana Ruiz on {when} UTC: saturation and vanishing gradients; TA1: full marks"
        ), record.inner_text()
        tried = ben.locator("p.tried")
        assert tried.inner_text() == "Your mark, not saved: 0 / 2: no mechanism; TA2: no mechanism", tried.inner_text()
        form = ben.get_by_role("form", name="mark Zoë Müller (zoë)")
        assert form.get_by_label("Comment").input_value() == "TA2: no mechanism", "his mark is still filled in"
        form.get_by_role("button", name="Save my mark for Zoë Müller (zoë) instead").click()
        ben.wait_for_load_state("load")
        assert ben.get_by_text(re.compile(r"Marked 0 / 2 by Ben Okafor \(TA\)")).count() == 1, ben.content()[:2000]
    except Exception:
        if ben is not None:
            ben.screenshot(path=str(shots / "failure.png"), full_page=True)
        raise
    finally:
        ana_ctx.close()
        ben_ctx.close()
        log = _stop(proc, output)
    first, second = _marks(out)
    assert [(m.grader, m.points) for m in (first, second)] == [("Ana Ruiz", 2.0), ("Ben Okafor (TA)", 0.0)], log
    assert second.replaces == first.id, "Ben's mark says which one it replaced, knowingly"
    text = (out / "feedback" / safe_name("zoë") / f"{ASSIGNMENT}.md").read_text(encoding="utf-8")
    assert "TA2: no mechanism" in text and "TA1" not in text, text
    if not os.environ.get("COURSE_BROWSER_SHOTS"):
        shutil.rmtree(shots, ignore_errors=True)


def test_a_ta_marks_her_section_a_page_at_a_time(browser, tmp_path):
    """Ana marks section A of a class of 60 (sections A, B, C), five answers a page: she narrows the list to
    the answers still to mark, goes to the next page, marks there and comes back to that page; she never
    sees another section's student."""
    roster, answers = big_class(60)
    out = marking_class(tmp_path, answers, roster)
    proc, urls, output = _start(out, ("Ana Ruiz",), {"Ana Ruiz": ["--section", "A", "--page-size", "5"]})
    shots = new_shots_dir("marking-section")
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = None
    try:
        page = context.new_page()
        _open_question(page, urls["Ana Ruiz"])
        assert page.locator("form.mark").count() == 5, "five answers a page"
        shown = page.locator("h3").all_inner_texts()
        assert all(text.startswith("Student s") for text in shown), shown
        assert page.get_by_text("Answers 1-5 of 20, page 1 of 4").count() == 2, "section A's 20, above and below"
        page.get_by_label("still to mark only").check()
        page.get_by_role("button", name="Show").click()
        page.wait_for_load_state("load")
        assert "todo=1" in page.url
        page.get_by_role("link", name="next page").first.click()
        page.wait_for_load_state("load")
        who = page.locator("h3").first.inner_text().split(" · ")[0]  # "Student s016 (s016)"
        _mark(page, who, points="2", comment="Clear.")
        page.screenshot(path=str(shots / "page2.png"), full_page=True)
        assert "page=2" in page.url and "todo=1" in page.url, page.url
        assert page.get_by_text("Answers 6-10 of 19, page 2 of 4").count() == 2, "one fewer still to mark"
    except Exception:
        if page is not None:
            page.screenshot(path=str(shots / "failure.png"), full_page=True)
        raise
    finally:
        context.close()
        log = _stop(proc, output)
    sid = who.split("(")[-1].rstrip(")")
    assert [(m.student, m.grader) for m in _marks(out)] == [(sid, "Ana Ruiz")], log
    assert (int(sid[1:]) - 1) % 3 == 0, f"{sid} is not in section A"
    assert "1 mark(s) saved: rewrote" in log, log
    if not os.environ.get("COURSE_BROWSER_SHOTS"):
        shutil.rmtree(shots, ignore_errors=True)
