"""`course mark` for a class of hundreds: a saved mark rewrites that student's feedback file and nothing
else, from that student's rows alone (the class-wide exports when the server stops); a question's page
lists a page of answers at a time, of one section or all, every answer or only those still to mark; a
teaching assistant given a section sees only it and cannot save a mark outside it. How long a save and
a page take at 3,000 students is bench/marking.py's (bench/RESULTS.md), not a test's."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import urllib.parse
from contextlib import closing

import pytest
from marking_helpers import ASSIGNMENT, QUESTION, big_class, marking_class
from test_marking import QUESTION_PATH, forms, login, mark, request

from course_grader.gradebook import Gradebook, open_gradebook
from course_grader.marking import MarkingServer, check_sections, save_mark
from course_lib.cli import build_parser


@pytest.fixture
def big(tmp_path):
    """A class of 60 in sections A, B and C, every answer still to mark."""
    roster, answers = big_class(60)
    return marking_class(tmp_path, answers, roster)


def serve(out, graders=("Teacher",), **kwargs):
    srv = MarkingServer(out, list(graders), **kwargs)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


def stop(srv):
    srv.shutdown()
    srv.server_close()


def cards(body: str) -> list[str]:
    """The students whose answers a page shows, in order."""
    return re.findall(r"<h3 id='s-([^']+)'>", body)


def page(srv, cookie, **view) -> str:
    status, _, body = request(srv, QUESTION_PATH + ("&" + urllib.parse.urlencode(view) if view else ""), cookie=cookie)
    assert status == 200, (status, body[:300])
    return body


def section_of(sid: str) -> str:
    return "ABC"[(int(sid[1:]) - 1) % 3]


# --- a save writes one file ----------------------------------------------------------------------------------


def test_a_save_rewrites_that_students_feedback_and_leaves_every_other_file_alone(big, monkeypatch):
    files = sorted(p for p in big.rglob("*") if p.is_file() and p.name != "gradebook.db")
    assert len(files) > 60, "grades.csv, grades.json, feedback/index.csv and one feedback file per student"
    for p in files:
        os.utime(p, ns=(1_000_000_000, 1_000_000_000))  # long ago: any rewrite shows
    folder = (big / "feedback").stat().st_ino
    reads = []
    real_rows, real_roster = Gradebook.rows, Gradebook.roster

    def rows(self, student=None, assignment=None):
        reads.append(("rows", student, assignment))
        return real_rows(self, student, assignment)

    def roster(self):
        reads.append(("roster", None, None))
        return real_roster(self)

    srv = serve(big)
    try:
        cookie = login(srv)
        fields = forms(page(srv, cookie))["s007"]
        monkeypatch.setattr(Gradebook, "rows", rows)
        monkeypatch.setattr(Gradebook, "roster", roster)
        status, headers, _ = mark(srv, cookie, fields, rubric="1", comment="One of the two.")
        monkeypatch.undo()
        assert status == 303 and headers["Location"].endswith("#s-s007"), (status, dict(headers))
    finally:
        stop(srv)
    assert reads and all(r == ("rows", "s007", ASSIGNMENT) for r in reads), (
        f"a save reads only that student's rows, never the class: {reads}"
    )
    changed = [p.relative_to(big).as_posix() for p in files if p.stat().st_mtime_ns != 1_000_000_000]
    assert changed == [f"feedback/s007/{ASSIGNMENT}.md"], changed
    assert "> One of the two." in (big / "feedback" / "s007" / f"{ASSIGNMENT}.md").read_text(encoding="utf-8")
    assert (big / "feedback").stat().st_ino == folder, "the feedback folder is not replaced"
    assert srv.saved == 1
    assert srv.finish()[0].startswith("1 mark(s) saved: rewrote"), "the class-wide exports when the server stops"
    grades = (big / "grades.csv").read_text(encoding="utf-8-sig")
    assert "s007,Student s007,06_attention,graded,3," in grades, grades[:400]


def test_course_mark_rewrites_the_class_wide_exports_when_stopped_by_sigterm(big):
    proc = subprocess.Popen(
        [sys.executable, "-m", "course_lib.cli", "mark", "--out", str(big), "--grader", "Teacher", "--page-size", "5"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        first = proc.stdout.readline()
        found = re.fullmatch(r"Marking page for Teacher: (http://127\.0\.0\.1:(\d+)/\?token=\S+)\n", first)
        assert found, first

        class Remote:  # what `request` needs of a server
            server_address = ("127.0.0.1", int(found[2]))

            def url(self, name=None):
                return found[1]

        remote = Remote()
        cookie = login(remote)
        body = request(remote, QUESTION_PATH, cookie=cookie)[2]
        assert len(cards(body)) == 5, "--page-size 5"
        assert mark(remote, cookie, forms(body)["s001"], points="2")[0] == 303
        before = (big / "grades.csv").read_text(encoding="utf-8-sig")
        assert "s001,Student s001,06_attention,graded,2," in before, "not rewritten by the save"
    finally:
        proc.send_signal(signal.SIGTERM)
        said = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, said
    assert "1 mark(s) saved: rewrote" in said and "1 marked (Teacher 1), 59 to mark" in said, said
    after = (big / "grades.csv").read_text(encoding="utf-8-sig")
    assert "s001,Student s001,06_attention,graded,4," in after, after[:300]


# --- a page at a time ----------------------------------------------------------------------------------------


def test_a_page_holds_at_most_the_page_size_and_leads_to_the_next(big):
    srv = serve(big, page_size=25)
    try:
        cookie = login(srv)
        first = page(srv, cookie)
        assert cards(first) == [f"s{i:03d}" for i in range(1, 26)], cards(first)
        assert first.count("<form class=mark") == 25
        assert "Answers 1-25 of 60, page 1 of 3" in first and "previous page" not in first
        nxt = re.search(r"<a href='([^']+)' rel=next>next page</a>", first)
        assert nxt, "a link to the next page"
        second = request(srv, nxt[1].replace("&amp;", "&"), cookie=cookie)[2]
        assert cards(second)[0] == "s026" and "previous page" in second
        last = page(srv, cookie, page=3)
        assert len(cards(last)) == 10 and "next page" not in last and "Answers 51-60 of 60, page 3 of 3" in last
        assert cards(page(srv, cookie, page=99)) == cards(last), "a page past the end shows the last one"
        assert cards(page(srv, cookie, page="x")) == cards(first)

        # a save from page 2 goes back to page 2
        fields = forms(second)["s030"]
        assert fields["page"] == "2", fields
        status, headers, _ = mark(srv, cookie, fields, points="1")
        assert status == 303 and "page=2" in headers["Location"] and headers["Location"].endswith("#s-s030")
    finally:
        stop(srv)


def test_only_the_answers_still_to_mark_and_one_section(big):
    srv = serve(big, page_size=25)
    try:
        cookie = login(srv)
        fields = forms(page(srv, cookie))
        for sid in ("s001", "s002", "s004"):
            assert mark(srv, cookie, fields[sid], points="2")[0] == 303
        todo = page(srv, cookie, todo="1")
        assert cards(todo)[:3] == ["s003", "s005", "s006"] and "57 to mark, 57 students; still to mark" in todo
        assert "Marked 2 / 2" not in todo
        status, headers, _ = mark(srv, cookie, forms(todo)["s003"], points="0")
        assert status == 303 and "todo=1" in headers["Location"], "back to the same list"
        section_b = page(srv, cookie, section="B", todo="1")
        assert cards(section_b) and {section_of(s) for s in cards(section_b)} == {"B"}, cards(section_b)
        assert "19 to mark, 19 students; section B; still to mark" in section_b, re.findall(
            r"<h2>Answers.*?</h2>", section_b
        )
        assert "<option value='B' selected>B</option>" in section_b and "name=todo value=1 checked" in section_b
        assert "s002" not in cards(section_b), "marked: not in the list of those still to mark"
    finally:
        stop(srv)


# --- a teaching assistant's section --------------------------------------------------------------------------


def test_a_ta_given_a_section_sees_only_it_and_cannot_save_outside_it(big):
    srv = serve(big, ["Prof. Keller", "Ana Ruiz"], sections={"Ana Ruiz": ["A"]}, page_size=100)
    try:
        teacher, ana = login(srv, "Prof. Keller"), login(srv, "Ana Ruiz")
        hers = page(srv, ana)
        assert {section_of(s) for s in cards(hers)} == {"A"} and len(cards(hers)) == 20, cards(hers)
        assert "section A" in request(srv, "/", cookie=ana)[2], "the index says whose students they are"
        assert re.search(r">20</a></td><td>20</td></tr>", request(srv, "/", cookie=ana)[2]), "counts of A only"
        asked = page(srv, ana, section="B")
        assert "You mark section A only." in asked and {section_of(s) for s in cards(asked)} == {"A"}
        assert len(cards(page(srv, teacher))) == 60, "the teacher sees everyone"

        # a form for a student of section B, posted from Ana's browser with Ana's key: refused
        outside = {**forms(page(srv, teacher))["s002"], "key": srv.grader("Ana Ruiz").key}
        status, headers, _ = mark(srv, ana, outside, points="2")
        assert status == 303 and "Ana+Ruiz+marks+section+A%3A+s002+is+in+section+B" in headers["Location"], headers
        with closing(open_gradebook(srv.out)) as book:
            assert book.marks() == [], "nothing saved"
        assert mark(srv, ana, forms(hers)["s001"], points="2")[0] == 303
        with closing(open_gradebook(srv.out)) as book:
            assert [(m.student, m.grader) for m in book.marks()] == [("s001", "Ana Ruiz")]
    finally:
        stop(srv)
    with closing(open_gradebook(big)) as book, pytest.raises(ValueError, match="marks section A: s002 is in"):
        form = {"a": ASSIGNMENT, "q": QUESTION, "student": "s002", "points": "1", "seen": "0"}
        save_mark(book, big, form, grader="Ana", sections=("A",))


def test_sections_must_be_the_rosters(big, tmp_path):
    with pytest.raises(ValueError, match=r"no student is in section D \(the roster's sections: A, B, C\)"):
        MarkingServer(big, ["Ana"], sections={"Ana": ["D"]})
    with pytest.raises(ValueError, match="--section is given for Ben, who is not a --grader"):
        MarkingServer(big, ["Ana"], sections={"Ben": ["A"]})
    with pytest.raises(ValueError, match=r"no sections in a column 'Group' \(its columns: Section\).*--section-column"):
        MarkingServer(big, ["Ana"], sections={"Ana": ["A"]}, column="Group")
    grouped = marking_class(tmp_path / "g", {"s1": "x", "s2": "y"}, "student_id,name,Group\ns1,One,G1\ns2,Two,G2\n")
    with closing(open_gradebook(grouped)) as book:
        from course_grader.marking import _graders

        check_sections(book, _graders(["Ana"], {"Ana": ["g1"]}), "Group")  # any case
    with pytest.raises(ValueError, match="--page-size is a number of answers"):
        MarkingServer(big, ["Ana"], page_size=0)


def test_course_mark_gives_each_grader_the_sections_that_follow_them():
    args = build_parser().parse_args(
        ["mark", "--grader", "Ana", "--section", "A", "--section", "C", "--grader", "Ben", "--page-size", "10"]
    )
    assert (args.grader, args.section, args.page_size, args.section_column) == (
        ["Ana", "Ben"],
        {"Ana": ["A", "C"]},
        10,
        "Section",
    )
    assert build_parser().parse_args(["mark"]).section == {}
    with pytest.raises(SystemExit):
        build_parser().parse_args(["mark", "--section", "A"])  # before any --grader: whose?
