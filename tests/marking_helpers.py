"""A small graded class with written answers to mark, made without a kernel: a solution notebook with a
manually graded question and its rubric, and a gradebook holding four students' answers (the
tests of `course mark`: tests/test_marking.py, and in a real browser tests/browser/test_marking_page.py)."""

from __future__ import annotations

import json
from contextlib import closing
from pathlib import Path

from course_grader.export import write_exports
from course_grader.grade import ManualAnswer, SubmissionResult
from course_grader.gradebook import open_gradebook, text_sha256
from course_grader.roster import parse_roster
from course_lib.runner.feedback import TestResult

ASSIGNMENT = "06_attention"
QUESTION = "ex9_answer"
RUBRIC = [
    {"points": 2, "text": "saturation and vanishing gradients"},
    {"points": 1, "text": "one of the two"},
    {"points": 0, "text": "no mechanism"},
]
ANSWERS = {
    "ada": "Without it the softmax saturates: nearly one-hot weights, and gradients close to zero.",
    "bob": "The scores get big, so the weights <b>saturate</b>.",  # markup is shown as text, never rendered
    "cy": "YOUR ANSWER HERE",  # blank: nothing to mark
    "zoë": "Um die Varianz auf 1 zu bringen.",
}


def solution_notebook() -> dict:
    def cell(kind, text, gid, **nbg):
        c = {
            "cell_type": kind,
            "id": gid.replace("_", "-"),
            "source": text,
            "metadata": {
                "nbgrader": {
                    "schema_version": 3,
                    "grade": False,
                    "solution": False,
                    "locked": True,
                    "grade_id": gid,
                    **nbg,
                }
            },
        }
        if kind == "code":
            c.update(outputs=[], execution_count=None)
        return c

    answer = cell(
        "markdown",
        "The scores' standard deviation is 8: the softmax saturates and its gradients vanish.",
        QUESTION,
        grade=True,
        solution=True,
        locked=False,
        points=2,
    )
    answer["metadata"]["course"] = {"rubric": RUBRIC}
    return {
        "cells": [
            cell("markdown", "# Exercises 06\n\n**Total: 4 points.**", "intro"),
            cell("code", "x = 1\n", "ex1_test", grade=True, points=2),
            cell(
                "markdown", "## Exercise 9: Why divide by √d_k? (★☆☆, 2 points)\n\nIn two sentences: why?", "ex9_prompt"
            ),
            answer,
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


ROSTER = "student_id,name\nada,Ada Byron\nbob,Bob Smith\ncy,Cy Young\nzoë,Zoë Müller\n"


def big_class(n: int, sections: str = "ABC") -> tuple[str, dict[str, str]]:
    """A roster of `n` students (s001, s002, ...) with a Section column (A, B, C, A, ...), and their answers."""
    ids = [f"s{i:03d}" for i in range(1, n + 1)]
    roster = "student_id,name,Section\n" + "".join(
        f"{sid},Student {sid},{sections[i % len(sections)]}\n" for i, sid in enumerate(ids)
    )
    return roster, {sid: f"Answer of {sid}: the softmax saturates." for sid in ids}


def marking_class(root: Path, answers: dict[str, str] | None = None, roster: str = ROSTER) -> Path:
    """root/solutions/06_attention.ipynb and root/grades/gradebook.db with its exports (the students'
    answers: ANSWERS, or `answers`; the class: `roster`, as a CSV file's text); returns root/grades."""
    solution = root / "solutions" / f"{ASSIGNMENT}.ipynb"
    solution.parent.mkdir(parents=True, exist_ok=True)
    solution.write_text(json.dumps(solution_notebook(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    out = root / "grades"
    with closing(open_gradebook(out)) as book:
        book.set_roster(parse_roster(roster))
        for sid, text in (answers or ANSWERS).items():
            blank = text == "YOUR ANSWER HERE"
            manual = [
                ManualAnswer(
                    QUESTION,
                    "Exercise 9: Why divide by √d_k?",
                    0.0,
                    2.0,
                    "not attempted" if blank else "to be marked",
                    "not answered yet" if blank else "",
                    text,
                    text_sha256(text),
                    "ex1_test",
                )
            ]
            passed = [TestResult("ex1_test", "Exercise 1: Shapes", 2.0, 2.0, "passed")]
            res = SubmissionResult(sid, ASSIGNMENT, 2.0, 2.0, "graded", passed, [], manual=manual)
            book.record(
                res,
                file=f"{ASSIGNMENT}.ipynb",
                submission_sha256=f"file-{sid}",
                submitted_at=None,
                submitted_from=None,
                solutions_path=str(solution),
                solutions_sha256="s1",
                run=None,
            )
        write_exports(book, out)
    return out
