"""`course merge`: a class graded in parts (`course grade --shard K/N`, a job array) and merged is the class graded
in one run, and two parts that disagree are a conflict that names what they disagree about.

The slow test grades a small class three times (whole, part 1 of 2, part 2 of 2) through the `course` command;
the others merge gradebooks written by hand (no kernel).
"""

from __future__ import annotations

import shutil
from contextlib import closing
from pathlib import Path

import pytest
from grading_helpers import WELCOME, learner, require_sandbox, write

from course_grader.discover import in_shard
from course_grader.grade import SubmissionResult
from course_grader.gradebook import Deadline, open_gradebook, parse_time, text_sha256
from course_grader.merge import MergeConflict, merge_gradebooks
from course_grader.roster import parse_roster
from course_lib import cli
from course_lib.runner.feedback import TestResult as ExerciseResult

ASSIGNMENT = "06_attention"


def course(argv: list, expect: int = 0) -> int:
    """`course ARGV` as a teacher types it; its exit status must be `expect`."""
    code = cli.main([str(a) for a in argv])
    assert code == expect, f"course {' '.join(map(str, argv))} exited with {code}, expected {expect}"
    return code


def record(out: Path, student: str, score: float, *, file: str = "f1", solutions: str = "s1") -> None:
    with closing(open_gradebook(out)) as book:
        tests = [ExerciseResult("ex1_test", "Exercise 1: Shapes", score, 2.0, "passed" if score == 2 else "failed")]
        book.record(
            SubmissionResult(student, ASSIGNMENT, score, 2.0, "graded", tests, []),
            file=f"{ASSIGNMENT}.ipynb",
            submission_sha256=f"{file}-{student}",
            submitted_at=None,
            submitted_from=None,
            solutions_path="/private/solutions/06_attention.ipynb",
            solutions_sha256=solutions,
            run=book.start_run(f"course grade --student {student}", "/private/solutions"),
        )


def base(out: Path) -> Path:
    """A class's gradebook before the parts are graded: a roster, a deadline, a mark-free grade and an adjustment."""
    with closing(open_gradebook(out)) as book:
        book.set_roster(parse_roster("student_id,name\nada,Ada Byron\nbob,Bob Smith\ncy,Cy Young\n"))
        book.set_deadline(Deadline(ASSIGNMENT, parse_time("2026-12-01T23:59+00:00"), 10, 50, 0))
    record(out, "cy", 2.0)
    with closing(open_gradebook(out)) as book:
        book.add_adjustment("cy", ASSIGNMENT, 1.0, "helped a classmate", "T")
    return out


def test_parts_copied_from_one_gradebook_merge_into_it_with_what_each_added(tmp_path):
    one, two = (base(tmp_path / "base"), tmp_path / "p2")
    shutil.copytree(one, two)
    record(one, "ada", 2.0)
    record(two, "bob", 0.0)
    with closing(open_gradebook(two)) as book:
        book.add_adjustment("bob", ASSIGNMENT, 0.5, "late upload was the LMS's fault", "T")
    report = merge_gradebooks([one, two], tmp_path / "merged")
    with closing(open_gradebook(tmp_path / "merged")) as book:
        rows = {r.student: (r.score, r.manual, r.final) for r in book.rows()}
        assert rows == {"ada": (2.0, 0.0, 2.0), "bob": (0.0, 0.5, 0.5), "cy": (2.0, 1.0, 3.0)}, rows
        assert len(book.adjustments()) == 2, f"the copied adjustment is one, not two: {book.adjustments()}"
        assert [s.id for s in book.roster().students] == ["ada", "bob", "cy"]
        assert list(book.deadlines()) == [ASSIGNMENT], book.deadlines()
        commands = [r["command"] for r in book.runs()]
    assert commands == [f"course grade --student {s}" for s in ("cy", "ada", "bob")] + ["course merge"], commands
    assert (tmp_path / "merged" / "feedback" / "bob" / f"{ASSIGNMENT}.md").is_file(), "the exports are rewritten"
    assert "merged 2 gradebook(s)" in report.lines()[0] and "3 grade(s) of 3 student(s)" in report.lines()[0], (
        report.lines()
    )


def test_two_parts_grading_one_attempt_differently_is_a_conflict_that_names_it(tmp_path):
    one, two = base(tmp_path / "p1"), tmp_path / "p2"
    shutil.copytree(one, two)
    record(one, "ada", 2.0)
    record(two, "ada", 0.0)
    with pytest.raises(MergeConflict, match=r"grade ada's 06_attention \(attempt 1\) differently: 2 / 2 .*p1.*0 / 2"):
        merge_gradebooks([one, two], tmp_path / "merged")
    assert not (tmp_path / "merged" / "gradebook.db").exists(), "a conflict writes nothing"


def test_a_regrade_in_one_part_replaces_the_copied_grade(tmp_path):
    one, two = base(tmp_path / "p1"), tmp_path / "p2"
    shutil.copytree(one, two)
    record(two, "cy", 1.0, solutions="s2")  # the same file graded again with new solutions: cy's history has the old
    report = merge_gradebooks([one, two], tmp_path / "merged")
    with closing(open_gradebook(tmp_path / "merged")) as book:
        assert {r.student: r.score for r in book.rows()} == {"cy": 1.0}, book.rows()
        assert [h["score"] for h in book.history("cy", ASSIGNMENT)] == [2.0], book.history("cy", ASSIGNMENT)
    assert any("cy, 06_attention (attempt 1): 1 / 2" in s and "replaced 2 / 2" in s for s in report.superseded), (
        report.superseded
    )


def test_two_deadlines_or_two_roster_entries_are_conflicts(tmp_path):
    one, two = base(tmp_path / "p1"), base(tmp_path / "p2")
    with closing(open_gradebook(two)) as book:
        book.set_deadline(Deadline(ASSIGNMENT, parse_time("2026-12-02T23:59+00:00"), 10, 50, 0))
    with pytest.raises(
        MergeConflict, match=r"two different deadlines for 06_attention: due 2026-12-01T23:59.*p1.*due "
    ):
        merge_gradebooks([one, two], tmp_path / "merged")
    three = tmp_path / "p3"
    with closing(open_gradebook(three)) as book:
        book.set_roster(parse_roster("student_id,name\nada,Ada Lovelace\n"))
    with pytest.raises(MergeConflict, match=r"two different roster entries for ada: name 'Ada Byron' in .*p1"):
        merge_gradebooks([one, three], tmp_path / "merged")


def test_marks_keep_the_mark_they_replaced_and_a_removed_adjustment_stays_removed(tmp_path):
    from marking_helpers import ANSWERS, QUESTION, marking_class

    one = marking_class(tmp_path / "c1")
    with closing(open_gradebook(one)) as book:
        first = book.add_mark("ada", ASSIGNMENT, QUESTION, 1.0, grader="T1", answer_sha256=text_sha256(ANSWERS["ada"]))
        bonus = book.add_adjustment("bob", ASSIGNMENT, 1.0, "a bonus given by mistake", "T1")
    two = tmp_path / "c2"
    shutil.copytree(one, two)
    with closing(open_gradebook(two)) as book:  # a second grader overrules the first; the bonus is taken back
        book.add_mark(
            "ada", ASSIGNMENT, QUESTION, 2.0, grader="T2", answer_sha256=text_sha256(ANSWERS["ada"]), seen=first
        )
        book.remove_adjustment(bonus, "T2", "given by mistake")
    with closing(open_gradebook(one)) as book:
        book.add_mark("bob", ASSIGNMENT, QUESTION, 1.0, grader="T1", answer_sha256=text_sha256(ANSWERS["bob"]))
    merge_gradebooks([one, two], tmp_path / "merged")
    with closing(open_gradebook(tmp_path / "merged")) as book:
        marks = {(m.student, m.points): m for m in book.marks()}
        assert sorted(marks) == [("ada", 1.0), ("ada", 2.0), ("bob", 1.0)], sorted(marks)
        assert marks[("ada", 2.0)].replaces == marks[("ada", 1.0)].id, "the overruling mark names the one it replaced"
        assert marks[("ada", 1.0)].replaces is None and marks[("bob", 1.0)].replaces is None, marks
        assert book.adjustments() == [], f"the removed bonus must not count: {book.adjustments()}"
        [kept] = book.adjustments(removed=True)
        assert (kept.removed_by, kept.removed_reason) == ("T2", "given by mistake"), kept
        rows = {r.student: r.final for r in book.rows()}
    assert rows["ada"] == 4.0 and rows["bob"] == 3.0, f"ada: 2 + the later mark 2; bob: 2 + 1, no bonus: {rows}"


def test_merge_says_what_it_needs(tmp_path, capsys):
    one = base(tmp_path / "p1")
    course(["merge", str(one), str(tmp_path / "nothing"), "--out", str(tmp_path / "m")], expect=2)
    said = capsys.readouterr().out
    assert "no gradebook in" in said, said
    two = tmp_path / "p2"
    shutil.copytree(one, two)
    record(two, "ada", 2.0)
    course(["merge", str(two), "--out", str(one)], expect=2)
    said = capsys.readouterr().out
    assert f"{one} holds a gradebook already" in said, said
    course(["merge", str(one), str(two), "--out", str(one)])
    with closing(open_gradebook(one)) as book:
        assert [r.student for r in book.rows()] == ["ada", "cy"], book.rows()
    assert (one / "feedback" / "ada" / f"{ASSIGNMENT}.md").is_file(), "the merged gradebook's exports are written"


@pytest.mark.slow
def test_two_shards_merged_equal_one_run_of_the_whole_class(tmp_path, capsys):
    require_sandbox()
    ids = ["ana", "ben", "cato", "dee", "eli", "fay", "gus"]
    part = {sid: 1 if in_shard(sid, 1, 2) else 2 for sid in ids}
    people = [next(s for s in ids if part[s] == 1), next(s for s in ids if part[s] == 2)]
    people += [s for s in ids if s not in people][:2]  # four students, both parts given at least one
    subs = tmp_path / "submissions"
    answers = [learner(), learner(blank=("ex2_answer",)), learner({"ex3_answer": "x = 'wrong'\n"}), None]
    for sid, nb in zip(people, answers, strict=True):
        if nb is not None:  # the last one never hands anything in
            write(subs / sid / WELCOME.name, nb)
    write(subs / people[0] / "00_welcome.timestamp.txt", "2026-12-03 10:00:00 UTC\n")  # late: a penalty
    solutions = tmp_path / "solutions"
    write(solutions / WELCOME.name, WELCOME.read_bytes())
    roster = write(tmp_path / "roster.csv", "student_id,name\n" + "".join(f"{s},{s.title()} X\n" for s in people))
    start = tmp_path / "start"
    course(["roster", "import", str(roster), "--out", str(start)])
    course(["deadline", "00_welcome", "2026-12-01T23:59+00:00", "--out", str(start)])
    grade = ["grade", str(subs), "--solutions", str(solutions), "--assignment", "00_welcome"]
    for name, shard in (("whole", None), ("part-1", "1/2"), ("part-2", "2/2")):
        shutil.copytree(start, tmp_path / name)
        extra = ["--shard", shard] if shard else []
        course([*grade, "--out", str(tmp_path / name), *extra])
    course(["merge", str(tmp_path / "part-1"), str(tmp_path / "part-2"), "--out", str(tmp_path / "merged")])

    def grades(out: Path) -> dict:
        with closing(open_gradebook(out)) as book:
            return {
                (r.student, r.assignment): (
                    (r.status, r.score, r.late_penalty, r.final, r.attempt, r.submitted_at),
                    [(t["grade_id"], t["points"], t["status"], t.get("message")) for t in r.tests],
                )
                for r in book.rows()
            }

    whole, merged = grades(tmp_path / "whole"), grades(tmp_path / "merged")
    assert merged == whole, f"merged parts differ from one run:\n{merged}\n{whole}"
    assert len(whole) == 4 and whole[(people[0], "00_welcome")][0][2] > 0, f"the class is four, one late: {whole}"
    parts = [{k[0] for k in grades(tmp_path / name)} for name in ("part-1", "part-2")]
    assert parts[0] and parts[1] and not parts[0] & parts[1], f"two parts, each a different share of the class: {parts}"

    def feedback(out: Path) -> dict[str, str]:
        return {p.relative_to(out).as_posix(): p.read_text() for p in sorted((out / "feedback").rglob("*.*"))}

    assert feedback(tmp_path / "merged") == feedback(tmp_path / "whole")
