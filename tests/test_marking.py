"""Manually graded answers: `course mark`'s pages and what a mark does (the server in a thread, spoken to
over HTTP; tests/browser/test_marking_page.py does the same in Chromium), who a mark is recorded as
(each grader's own address), a save from a page that another mark has overtaken, removed adjustments
kept on record, an older gradebook opened by this grader, and `course check` saying that a written
answer is marked by a person."""

from __future__ import annotations

import re
import sqlite3
import threading
import urllib.error
import urllib.parse
import urllib.request
from contextlib import closing
from pathlib import Path

import pytest
from grading_helpers import write
from marking_helpers import ANSWERS, ASSIGNMENT, QUESTION, marking_class

from course_grader.gradebook import SCHEMA_VERSION, StaleMark, open_gradebook
from course_grader.marking import CSP, MarkingServer, learner_html

DATA = Path(__file__).parent / "data"


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def start(out, graders=()):
    srv = MarkingServer(out, graders)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


@pytest.fixture
def server(tmp_path):
    srv = start(marking_class(tmp_path), ["Teacher"])
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def two_tas(tmp_path):
    """The teacher started `course mark --grader "Ana Ruiz" --grader "Ben Okafor"`."""
    srv = start(marking_class(tmp_path), ["Ana Ruiz", "Ben Okafor"])
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


def login(srv, name: str | None = None) -> str:
    """The cookie a browser gets from opening the address printed for grader `name` (the first by default)."""
    status, headers, _ = request(srv, "/" + srv.url(name).split("/", 3)[3])
    assert status == 303 and headers["Location"] == "/", (status, dict(headers))
    assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"], headers["Set-Cookie"]
    return headers["Set-Cookie"].split(";")[0]


QUESTION_PATH = "/question?" + urllib.parse.urlencode({"a": ASSIGNMENT, "q": QUESTION})


def forms(body: str) -> dict[str, dict[str, str]]:
    """student -> the hidden fields of the form that marks their answer, as a page holds them."""
    found = {}
    for form in re.findall(r"<form class=mark .*?</form>", body, flags=re.S):
        fields = dict(re.findall(r"<input type=hidden name=(\w+) value='([^']*)'>", form))
        found[fields["student"]] = fields
    return found


def mark(srv, cookie, fields, **values):
    """Post a page's form for one student, filled in with `values`."""
    data = {**fields, "points": "", "rubric": "", "comment": "", **values}
    return request(srv, "/mark", data, cookie=cookie)


def marks_of(out):
    with closing(open_gradebook(out)) as book:
        return book.marks()


def test_pages_need_the_token_and_this_machine(server):
    token = server.graders[0].token
    assert request(server, "/")[0] == 403
    assert request(server, "/?token=wrong")[0] == 403
    assert request(server, f"/?token={token}", host="evil.example:80")[0] == 403, "no DNS rebinding"
    cookie = login(server)
    status, headers, body = request(server, "/", cookie=cookie)
    assert status == 200 and headers["Content-Security-Policy"] == CSP and "script-src" not in CSP
    assert "Exercise 9: Why divide by √d_k?" in body and "http" not in body, "nothing from elsewhere"


def test_one_question_for_the_whole_class(server):
    cookie = login(server)
    status, _, body = request(server, QUESTION_PATH, cookie=cookie)
    assert status == 200
    assert "In two sentences: why?" in body and "its gradients vanish" in body, "the prompt and the model answer"
    assert "saturation and vanishing gradients" in body, "the rubric"
    assert body.count("<form class=mark") == 3, "ada, bob and zoë answered; cy's blank answer has nothing to mark"
    assert "&lt;b&gt;saturate&lt;/b&gt;" in body and "<b>saturate</b>" not in body, "an answer is text, never markup"
    assert "Um die Varianz auf 1 zu bringen." in body and "Zoë Müller (zoë)" in body


def test_a_mark_is_stored_with_its_grader_and_joins_the_exports(server):
    cookie = login(server)
    out = server.out
    fields = forms(request(server, QUESTION_PATH, cookie=cookie)[2])
    assert fields["ada"]["seen"] == "0", fields["ada"]
    assert request(server, "/mark", {**fields["ada"], "key": "", "rubric": "0"}, cookie=cookie)[0] == 403, (
        "a form without its key is refused"
    )
    status, headers, _ = mark(server, cookie, fields["ada"], rubric="0", comment="Exactly.")
    assert status == 303 and headers["Location"].endswith("#s-ada"), (status, dict(headers))
    [m] = marks_of(out)
    with closing(open_gradebook(out)) as book:
        rows = {r.student: r for r in book.rows()}
    assert (m.points, m.rubric, m.grader, m.replaces) == (2.0, "saturation and vanishing gradients", "Teacher", None)
    assert rows["ada"].score == 4 and rows["ada"].to_mark == 0, (rows["ada"].score, rows["ada"].to_mark)
    assert "> Exactly." in (out / "feedback" / "ada" / f"{ASSIGNMENT}.md").read_text(), "the feedback is rewritten"
    grades = (out / "grades.csv").read_text(encoding="utf-8-sig")
    assert "ada,Ada Byron,06_attention,graded,2," in grades, "the class-wide exports wait for the server to stop"
    status, headers, _ = mark(server, cookie, {**fields["bob"], "answer": ""}, points="5")
    assert status == 303 and "worth+at+most+2" in headers["Location"], headers["Location"]
    status, headers, _ = mark(server, cookie, {**fields["bob"], "answer": "an-old-answer"}, points="1")
    assert "answer+changed" in headers["Location"], "a page loaded before a new attempt cannot mark it"
    status, headers, _ = mark(server, cookie, {k: v for k, v in fields["bob"].items() if k != "seen"}, points="1")
    assert status == 303 and "reload+the+page" in headers["Location"], "a form must say which mark its page showed"
    assert len(marks_of(out)) == 1, [(x.student, x.points) for x in marks_of(out)]
    server.shutdown()
    said = server.finish()
    assert said[0].startswith("1 mark(s) saved: rewrote") and "(4 rows)" in said[0], said
    grades = (out / "grades.csv").read_text(encoding="utf-8-sig")
    assert "ada,Ada Byron,06_attention,graded,4," in grades, grades


# --- who a mark is recorded as --------------------------------------------------------------------------


def test_each_grader_has_an_address_of_their_own_and_marks_only_as_themselves(two_tas):
    ana, ben = two_tas.grader("Ana Ruiz"), two_tas.grader("Ben Okafor")
    assert ana.token != ben.token and two_tas.url("Ana Ruiz") != two_tas.url("Ben Okafor")
    ana_cookie, ben_cookie = login(two_tas, "Ana Ruiz"), login(two_tas, "Ben Okafor")
    body = request(two_tas, QUESTION_PATH, cookie=ana_cookie)[2]
    assert "Marking as <b>Ana Ruiz</b>" in body, "the page says who its marks are recorded as"
    assert "name=grader" not in body, "no field where a grader types a name"
    assert ana.token not in body and ben.token not in body, "a page holds no token: a saved page is no address"
    ana_forms = forms(body)
    assert {f["key"] for f in ana_forms.values()} == {ana.key}, ana_forms
    ben_forms = forms(request(two_tas, QUESTION_PATH, cookie=ben_cookie)[2])

    # A typed name is ignored: the mark is the token's grader's.
    status, _, _ = mark(two_tas, ana_cookie, ana_forms["ada"], points="2", grader="Prof. Keller")
    assert status == 303, status
    # A page loaded as Ben, posted from a browser signed in as Ana (or the other way round): refused.
    status, _, body = mark(two_tas, ana_cookie, ben_forms["bob"], points="0")
    assert status == 403 and "loaded as Ben Okafor" in body and "marks as Ana Ruiz" in body, (status, body)
    status, _, body = mark(two_tas, ben_cookie, ana_forms["bob"], points="0")
    assert status == 403 and "loaded as Ana Ruiz" in body, (status, body)
    assert mark(two_tas, "", ben_forms["bob"], points="0")[0] == 403, "a form without a signed-in browser"
    assert mark(two_tas, "course_mark=not-a-token", ben_forms["bob"], points="0")[0] == 403
    status, _, _ = mark(two_tas, ben_cookie, ben_forms["bob"], points="1")
    assert status == 303, status
    assert [(m.student, m.points, m.grader) for m in marks_of(two_tas.out)] == [
        ("ada", 2.0, "Ana Ruiz"),
        ("bob", 1.0, "Ben Okafor"),
    ], [(m.student, m.points, m.grader) for m in marks_of(two_tas.out)]
    page = request(two_tas, QUESTION_PATH, cookie=ben_cookie)[2]
    assert "Marked 2 / 2 by Ana Ruiz" in page and "Marked 1 / 2 by Ben Okafor" in page


def test_a_teacher_alone_gets_one_address_under_their_login_name(tmp_path, monkeypatch, capsys):
    from course_grader import marking
    from course_lib.cli import build_parser

    monkeypatch.setattr(marking, "whoami", lambda: "keller")
    srv = start(marking_class(tmp_path))
    try:
        assert [g.name for g in srv.graders] == ["keller"], srv.graders
        cookie = login(srv)
        assert "Marking as <b>keller</b>" in request(srv, "/", cookie=cookie)[2]
    finally:
        srv.shutdown()
        srv.server_close()
    args = build_parser().parse_args(["mark", "--grader", "Ana Ruiz", "--grader", "Ben Okafor"])
    assert args.grader == ["Ana Ruiz", "Ben Okafor"], args.grader
    assert build_parser().parse_args(["mark"]).grader == []
    with pytest.raises(ValueError, match="given twice"):
        MarkingServer(tmp_path / "grades", ["Ana", "ana"])
    with pytest.raises(ValueError, match="needs a name"):
        MarkingServer(tmp_path / "grades", ["Ana", " "])


# --- a save from a page that another mark has overtaken ---------------------------------------------------


def test_a_save_from_a_page_loaded_before_another_mark_is_refused_and_shows_both(two_tas):
    ana_cookie, ben_cookie = login(two_tas, "Ana Ruiz"), login(two_tas, "Ben Okafor")
    ana_page = forms(request(two_tas, QUESTION_PATH, cookie=ana_cookie)[2])
    ben_page = forms(request(two_tas, QUESTION_PATH, cookie=ben_cookie)[2])  # loaded before Ana saves
    assert mark(two_tas, ana_cookie, ana_page["zoë"], rubric="0", comment="TA1: full marks")[0] == 303

    status, _, body = mark(two_tas, ben_cookie, ben_page["zoë"], rubric="2", comment="TA2: no mechanism")
    assert status == 409, (status, body[:500])
    [on_record] = marks_of(two_tas.out)
    assert (on_record.grader, on_record.points) == ("Ana Ruiz", 2.0), "Ben's stale save changed nothing"
    assert "Not saved" in body and "marked by Ana Ruiz since your page was loaded" in body, body
    when = on_record.created_at[:16].replace("T", " ")
    assert f"Marked 2 / 2 by Ana Ruiz on {when} UTC: saturation and vanishing gradients; TA1: full marks" in body, (
        "the mark on record, who and when"
    )
    assert "Your mark, not saved: 0 / 2: no mechanism; TA2: no mechanism" in body, "the mark Ben tried to save"
    assert "Um die Varianz auf 1 zu bringen." in body, "the answer, to decide again"
    again = forms(body)["zoë"]
    assert again["seen"] == str(on_record.id) and again["key"] == two_tas.grader("Ben Okafor").key, again
    assert "<option value='2' selected>" in body and "TA2: no mechanism</textarea>" in body, "his mark, filled in"

    # Ben decides: his mark, saved knowingly, replaces Ana's; both stay on record.
    assert mark(two_tas, ben_cookie, again, rubric="2", comment="TA2: no mechanism")[0] == 303
    ana_mark, ben_mark = marks_of(two_tas.out)
    assert (ben_mark.grader, ben_mark.points, ben_mark.replaces) == ("Ben Okafor", 0.0, ana_mark.id), ben_mark

    # The same grader in two tabs: the second tab's page is overtaken by the first tab's save.
    tab1 = forms(request(two_tas, QUESTION_PATH, cookie=ana_cookie)[2])
    tab2 = forms(request(two_tas, QUESTION_PATH, cookie=ana_cookie)[2])
    assert mark(two_tas, ana_cookie, tab1["bob"], points="1")[0] == 303
    status, _, body = mark(two_tas, ana_cookie, tab2["bob"], points="2")
    assert status == 409 and "Marked 1 / 2 by Ana Ruiz" in body and "Your mark, not saved: 2 / 2" in body, body
    assert [(m.student, m.points) for m in marks_of(two_tas.out)][-1] == ("bob", 1.0)


def test_the_gradebook_refuses_a_mark_given_from_an_older_state_of_the_answer(tmp_path):
    out = marking_class(tmp_path)
    with closing(open_gradebook(out)) as book:
        sha = next(t for r in book.rows() if r.student == "ada" for t in r.tests if t.get("manual"))["answer_sha256"]
        first = book.add_mark("ada", ASSIGNMENT, QUESTION, 2, grader="Ana", answer_sha256=sha, seen=0)
        with pytest.raises(StaleMark, match="Ana marked it 2 since your page was loaded") as err:
            book.add_mark("ada", ASSIGNMENT, QUESTION, 0, grader="Ben", answer_sha256=sha, seen=0)
        assert err.value.on_record.id == first, err.value.on_record
        second = book.add_mark("ada", ASSIGNMENT, QUESTION, 0, grader="Ben", answer_sha256=sha, seen=first)
        assert [(m.id, m.grader, m.replaces) for m in book.marks()] == [(first, "Ana", None), (second, "Ben", first)]
        [row] = [r for r in book.rows() if r.student == "ada"]
        assert row.score == 2.0, "Ben's 0 counts: the latest mark"


# --- what a learner's answer can do to the page -----------------------------------------------------------


def test_an_answer_cannot_pass_for_the_page_or_reorder_it(tmp_path):
    spoof = "Good.\u202e.skram lluf :00:01 62-11-6202 no rehcaeT yb 2 / 2 dekraM\u202c\n\u2067x\u2069 \x1b[2K done"
    out = marking_class(tmp_path, {**ANSWERS, "bob": spoof})  # stored as the grader stores learner text
    # zoë's answer as a gradebook written before learner text was made inert holds it: the page's own turn
    with closing(sqlite3.connect(out / "gradebook.db")) as db, db:
        [manual] = db.execute("SELECT manual FROM results WHERE student='zoë'").fetchone()
        db.execute("UPDATE results SET manual=? WHERE student='zoë'", (manual.replace("Um die", "\u202eUm die"),))
    srv = start(out, ["Teacher"])
    try:
        body = request(srv, QUESTION_PATH, cookie=login(srv))[2]
    finally:
        srv.shutdown()
        srv.server_close()
    for ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\x1b":
        assert ch not in body, f"{ch!r} reaches the page as it is"
    for shown in ("\\u202e.skram", "dekraM\\u202c", "\\u2067x\\u2069", "\\x1b[2K", "\\u202eUm die Varianz"):
        assert shown in body, f"{shown} is not written out where the answer holds it"
    frames = {}
    for student, who in (("bob", "Bob Smith \\(bob\\)"), ("zoë", "Zoë Müller \\(zoë\\)")):
        frames[student] = re.search(
            rf"<figure class=handed-in><figcaption>Handed in by {who}, shown as the student wrote it.*?</figure>",
            body,
            flags=re.S,
        )
        assert frames[student], f"{student}'s answer is not in a frame that says it is the student's"
    assert "dekraM" in frames["bob"][0] and "Varianz" in frames["zoë"][0], "each answer inside its own frame"
    assert body.count("dekraM") == 1 and "<p class=done>" not in body, "nothing outside the frame claims a mark"
    assert learner_html("a\ud800b<\u202e") == "a\ufffdb&lt;\\u202e", learner_html("a\ud800b<\u202e")


# --- removed adjustments stay on record ---------------------------------------------------------------------


def test_removing_an_adjustment_keeps_who_removed_it_what_and_when(server, capsys):
    from course_lib import cli

    out = str(server.out)
    assert (
        cli.main(["adjust", "bob", ASSIGNMENT, "1.5", "--reason", "graded by hand", "--grader", "Ana", "--out", out])
        == 0
    )
    assert cli.main(["adjust", "bob", ASSIGNMENT, "3", "--reason", "bonus", "--out", out]) == 0
    capsys.readouterr()
    assert cli.main(["adjust", "--remove", "2", "--grader", "Prof. Keller", "--reason", "no bonus", "--out", out]) == 0
    said = capsys.readouterr().out
    assert "removed adjustment 2: bob 06_attention +3 (bonus)" in said and "removed by Prof. Keller" in said, said
    assert "final score now 3.5 / 4" in said, said
    with closing(open_gradebook(server.out)) as book:
        [kept] = book.adjustments()
        every = book.adjustments(removed=True)
        [row] = [r for r in book.rows() if r.student == "bob"]
    assert kept.id == 1 and row.manual == 1.5 and row.final == 3.5, (kept, row.manual, row.final)
    removed = every[1]
    assert (removed.id, removed.points, removed.removed_by, removed.removed_reason) == (
        2,
        3.0,
        "Prof. Keller",
        "no bonus",
    )
    assert removed.removed_at and removed.removed_at >= removed.created_at, removed
    assert "bonus" not in (server.out / "feedback" / "bob" / f"{ASSIGNMENT}.md").read_text(), "it no longer counts"

    assert cli.main(["adjust", "--list", "--out", out]) == 0
    listed = capsys.readouterr().out
    assert "graded by hand" in listed and "bonus" not in listed and "1 removed adjustment(s) not shown" in listed, (
        listed
    )
    assert cli.main(["adjust", "--list", "--removed", "--out", out]) == 0
    listed = capsys.readouterr().out
    line = next(x for x in listed.splitlines() if "bonus" in x)
    assert re.search(r"\[removed \d{4}-\d\d-\d\d \d\d:\d\d by Prof\. Keller: no bonus\]", line), line
    assert cli.main(["adjust", "--remove", "2", "--out", out]) == 2
    said = capsys.readouterr().out
    assert "adjustment 2 was already removed, by Prof. Keller on" in said, said
    assert cli.main(["adjust", "--remove", "9", "--out", out]) == 2
    said = capsys.readouterr().out
    assert "there is no adjustment number 9" in said, said


# --- an older gradebook ----------------------------------------------------------------------------------------


def test_a_gradebook_written_at_schema_2_opens_and_works(tmp_path):
    """A gradebook as schema 2 wrote it (two marks of ada's answer, adjustments 1 and 2 kept, 3 deleted by the
    old --remove) opens: its marks and adjustments count as before, removals and stale pages work."""
    out = marking_class(tmp_path / "fresh")  # the solution notebook the old gradebook's rows point to
    solutions = tmp_path / "fresh" / "solutions"
    old = tmp_path / "old"
    old.mkdir()
    with closing(sqlite3.connect(old / "gradebook.db")) as db:
        db.executescript(
            (DATA / "gradebook-schema-2.sql").read_text(encoding="utf-8").replace("SOLUTIONS", str(solutions))
        )
    with closing(open_gradebook(old)) as book:
        rows = {r.student: r for r in book.rows()}
        assert {s: (r.score, r.final) for s, r in rows.items()} == {
            "ada": (3.0, 3.0),
            "bob": (2.0, 3.5),
            "cy": (2.0, 4.0),
            "zoë": (2.0, 2.0),
        }, "the same scores as the old grader gave"
        assert [(m.grader, m.points, m.replaces) for m in book.marks()] == [
            ("Ana Ruiz", 2.0, None),
            ("Ben Okafor", 1.0, None),
        ]
        assert [(a.id, a.removed_at) for a in book.adjustments(removed=True)] == [(1, None), (2, None)]
        assert book.meta("schema") == str(SCHEMA_VERSION) == "5"
        book.remove_adjustment(2, "Prof. Keller", "not earned")
        assert [a.id for a in book.adjustments()] == [1]
        [ada] = [t for r in book.rows() if r.student == "ada" for t in r.tests if t.get("manual")]
        with pytest.raises(StaleMark):
            book.add_mark("ada", ASSIGNMENT, QUESTION, 2, grader="Ana Ruiz", answer_sha256=ada["answer_sha256"], seen=1)
        book.add_mark("ada", ASSIGNMENT, QUESTION, 2, grader="Ana Ruiz", answer_sha256=ada["answer_sha256"], seen=2)
    with closing(open_gradebook(old)) as book:  # and again, now that it is schema 5
        rows = {r.student: r for r in book.rows()}
        assert (rows["ada"].score, rows["cy"].final) == (4.0, 2.0), (rows["ada"].score, rows["cy"].final)
    srv = start(old, ["Teacher"])
    try:
        assert request(srv, QUESTION_PATH, cookie=login(srv))[0] == 200, "the marking page serves it"
    finally:
        srv.shutdown()
        srv.server_close()
    assert out.is_dir()


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
