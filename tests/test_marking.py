"""Manually graded answers: `course mark`'s pages and what a mark does (the server in a thread, spoken to
over HTTP; tests/browser/test_marking_page.py does the same in Chromium), and `course check` saying that a
written answer is marked by a person."""

from __future__ import annotations

import threading
import urllib.error
import urllib.parse
import urllib.request
from contextlib import closing

import pytest
from grading_helpers import write
from marking_helpers import ASSIGNMENT, QUESTION, marking_class

from course_grader.gradebook import open_gradebook
from course_grader.marking import CSP, MarkingServer


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


@pytest.fixture
def server(tmp_path):
    out = marking_class(tmp_path)
    srv = MarkingServer(out, "Teacher")
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def request(srv, path, data=None, cookie="", host=None):
    """(status, headers, body) of one request, without following redirects."""
    port = srv.server_address[1]
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=urllib.parse.urlencode(data).encode() if data else None
    )
    if cookie:
        req.add_header("Cookie", cookie)
    if host:
        req.add_header("Host", host)
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(req, timeout=10) as resp:
            return resp.status, resp.headers, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read().decode()


def login(srv) -> str:
    status, headers, _ = request(srv, f"/?token={srv.token}")
    assert status == 303 and headers["Location"] == "/", headers
    assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
    return headers["Set-Cookie"].split(";")[0]


def test_pages_need_the_token_and_this_machine(server):
    assert request(server, "/")[0] == 403
    assert request(server, "/?token=wrong")[0] == 403
    assert request(server, f"/?token={server.token}", host="evil.example:80")[0] == 403, "no DNS rebinding"
    cookie = login(server)
    status, headers, body = request(server, "/", cookie=cookie)
    assert status == 200 and headers["Content-Security-Policy"] == CSP and "script-src" not in CSP
    assert "Exercise 9: Why divide by √d_k?" in body and "http" not in body, "nothing from elsewhere"


def test_one_question_for_the_whole_class(server):
    cookie = login(server)
    query = urllib.parse.urlencode({"a": ASSIGNMENT, "q": QUESTION})
    status, _, body = request(server, f"/question?{query}", cookie=cookie)
    assert status == 200
    assert "In two sentences: why?" in body and "its gradients vanish" in body, "the prompt and the model answer"
    assert "saturation and vanishing gradients" in body, "the rubric"
    assert body.count("<form class=mark") == 3, "ada, bob and zoë answered; cy's blank answer has nothing to mark"
    assert "&lt;b&gt;saturate&lt;/b&gt;" in body and "<b>saturate</b>" not in body, "an answer is text, never markup"
    assert "Um die Varianz auf 1 zu bringen." in body and "Zoë Müller (zoë)" in body


def test_a_mark_is_stored_with_its_grader_and_joins_the_exports(server):
    cookie = login(server)
    out = server.out
    with closing(open_gradebook(out)) as book:
        sha = next(t for r in book.rows() if r.student == "ada" for t in r.tests if t.get("manual"))["answer_sha256"]
    form = {
        "a": ASSIGNMENT,
        "q": QUESTION,
        "student": "ada",
        "answer": sha,
        "points": "",
        "rubric": "0",
        "comment": "Exactly.",
        "grader": "Ana (TA)",
    }
    assert request(server, "/mark", form, cookie=cookie)[0] == 403, "a form without the token is refused"
    status, headers, _ = request(server, "/mark", {**form, "token": server.token}, cookie=cookie)
    assert status == 303 and headers["Location"].endswith("#s-ada") and "course_grader=Ana" in headers["Set-Cookie"]
    with closing(open_gradebook(out)) as book:
        [mark] = book.marks()
        rows = {r.student: r for r in book.rows()}
    assert (mark.points, mark.rubric, mark.grader) == (2.0, "saturation and vanishing gradients", "Ana (TA)")
    assert rows["ada"].score == 4 and rows["ada"].to_mark == 0
    assert "> Exactly." in (out / "feedback" / "ada" / f"{ASSIGNMENT}.md").read_text(), "the feedback is rewritten"
    grades = (out / "grades.csv").read_text(encoding="utf-8-sig")
    assert "ada,Ada Byron,06_attention,graded,4," in grades
    bad = {**form, "token": server.token, "student": "bob", "points": "5", "answer": ""}
    status, headers, _ = request(server, "/mark", bad, cookie=cookie)
    assert status == 303 and "worth+at+most+2" in headers["Location"], headers["Location"]
    changed = {**form, "token": server.token, "student": "bob", "answer": "an-old-answer"}
    status, headers, _ = request(server, "/mark", changed, cookie=cookie)
    assert "answer+changed" in headers["Location"], "a page loaded before a new attempt cannot mark it"


@pytest.mark.slow
def test_course_check_says_a_written_answer_is_marked_by_a_person(tmp_path, capsys):
    from course_lib import cli

    nb = {
        "cells": [
            {
                "cell_type": "code",
                "id": "t",
                "metadata": {
                    "nbgrader": {
                        "grade": True,
                        "solution": False,
                        "points": 1,
                        "grade_id": "ex1_test",
                        "locked": True,
                        "schema_version": 3,
                    }
                },
                "source": "assert 1 + 1 == 2\n",
                "outputs": [],
                "execution_count": None,
            },
            {"cell_type": "markdown", "id": "q", "metadata": {}, "source": "## Exercise 2: Why? (★☆☆, 2 points)"},
            {
                "cell_type": "markdown",
                "id": "a",
                "metadata": {
                    "nbgrader": {
                        "grade": True,
                        "solution": True,
                        "points": 2,
                        "grade_id": "ex2_answer",
                        "locked": False,
                        "schema_version": 3,
                    }
                },
                "source": "YOUR ANSWER HERE",
            },
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = write(tmp_path / "99_why.ipynb", nb)
    assert cli.main(["check", str(path)]) == 0, "a written answer does not fail the check"
    out = capsys.readouterr().out
    assert "Exercise 2: Why?" in out and "to be marked" in out and "you have not answered yet" in out, out
    assert "1/1" in out and "2 more point(s) for written answers, marked by a person" in out, out
    nb["cells"][2]["source"] = "Because."
    write(path, nb)
    assert cli.main(["check", str(path)]) == 0
    assert "you have not answered yet" not in capsys.readouterr().out


def test_course_mark_list_counts_what_is_marked(server, capsys):
    from course_lib import cli

    assert cli.main(["mark", "--list", "--out", str(server.out)]) == 0
    out = capsys.readouterr().out
    assert "06_attention, Exercise 9: Why divide by √d_k?: 0 marked, 3 to mark, of 4 students" in out, out
