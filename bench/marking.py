"""`course mark` at 3,000 students: one saved mark, and the question's page (its size and load time).

    python -m bench.marking [--students 3000] [--repeat 9]

A class of `--students` is written straight into a gradebook (roster and results rows inserted with
SQL, not graded: grading 3,000 notebooks would take an hour and measure something else), each with
ten test results and one written answer to mark, in three sections, with its exports written once.
The marking server then runs in a thread of this process, spoken to over HTTP on 127.0.0.1 as a
browser does, and the timings are medians of `--repeat` tries:

- a save: the POST of one mark until its answer (a redirect), which stores the mark and rewrites
  that student's feedback file; and the same followed by loading the page it redirects to (what a
  grader waits for between two marks, "from click to reloaded page");
- the question's page, a page of 25 answers: its size in bytes and its load time; the same page
  listing every answer (as the page did before it was paged), for comparison;
- what every save rewrote before (grades.csv, grades.json and every feedback file): now once, when
  the server stops, or on `course export`.

Wall-clock times depend on the machine and what else runs on it; CPU seconds (this process: the
server and the client) are printed beside them.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import re
import shutil
import statistics
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import closing
from pathlib import Path

from course_grader.export import write_exports
from course_grader.gradebook import now, open_gradebook, text_sha256
from course_grader.marking import MarkingServer
from course_grader.roster import parse_roster

ASSIGNMENT, QUESTION = "06_attention", "ex9_answer"
RUBRIC = [{"points": 2, "text": "saturation and vanishing gradients"}, {"points": 0, "text": "no mechanism"}]


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


def solution_notebook(path: Path) -> Path:
    """A solution notebook with a test and the written question, its rubric in the answer cell's metadata."""

    def cell(kind, text, gid, **nbgrader):
        meta = {"schema_version": 3, "grade": False, "solution": False, "locked": True, "grade_id": gid, **nbgrader}
        c = {"cell_type": kind, "id": gid.replace("_", "-"), "source": text, "metadata": {"nbgrader": meta}}
        return {**c, "outputs": [], "execution_count": None} if kind == "code" else c

    answer = cell("markdown", "The softmax saturates and its gradients vanish.", QUESTION, grade=True, solution=True)
    answer["metadata"]["nbgrader"].update(points=2, locked=False)
    answer["metadata"]["course"] = {"rubric": RUBRIC}
    cells = [
        cell("code", "x = 1\n", "ex1_test", grade=True, points=20),
        cell("markdown", "## Exercise 9: Why divide by √d_k? (★☆☆, 2 points)\n\nIn two sentences: why?", "ex9"),
        answer,
    ]
    nb = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False), encoding="utf-8")
    return path


def synthetic_class(out: Path, students: int, solution: Path) -> None:
    """`students` graded rows of 06_attention, each with ten tests and one written answer to mark, inserted
    directly; then the exports, once."""
    ids = [f"S{i:05d}" for i in range(students)]
    roster = "student_id,name,email,Section\n" + "".join(
        f"{sid},Student {sid},{sid.lower()}@uni.example,{'ABC'[i % 3]}\n" for i, sid in enumerate(ids)
    )
    tests = [
        {
            "grade_id": f"ex{k}_test",
            "exercise": f"Exercise {k}: Part {k}",
            "points": 2.0,
            "max_points": 2.0,
            "status": "passed",
            "message": "",
            "cause": "",
        }
        for k in range(1, 11)
    ]
    with closing(open_gradebook(out)) as book:
        book.set_roster(parse_roster(roster))
        rows = []
        for sid in ids:
            text = f"Without the scale, the scores of {sid} grow with d_k and the softmax saturates."
            manual = [
                {
                    "grade_id": QUESTION,
                    "exercise": "Exercise 9: Why divide by √d_k?",
                    "points": 0.0,
                    "max_points": 2.0,
                    "status": "to be marked",
                    "message": "",
                    "answer": text,
                    "answer_sha256": text_sha256(text),
                    "after": "ex10_test",
                }
            ]
            rows.append(
                (sid, ASSIGNMENT, 1, "graded", 20.0, 20.0, f"{ASSIGNMENT}.ipynb", f"file-{sid}", None, None,
                 str(solution), "s1", now(), 2.5, None, json.dumps(tests), "[]", json.dumps(manual, ensure_ascii=False))
            )  # fmt: skip
        with book.db:
            book.db.executemany(
                "INSERT INTO results (student, assignment, attempt, status, score, max_score, file, "
                "submission_sha256, submitted_at, submitted_from, solutions_path, solutions_sha256, graded_at, "
                "seconds, run, tests, notes, manual) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                rows,
            )
        write_exports(book, out)


class Client:
    """A browser's requests to the marking server, its cookie kept."""

    def __init__(self, server: MarkingServer):
        self.base = f"http://127.0.0.1:{server.server_address[1]}"
        self.opener = urllib.request.build_opener(_NoRedirect)
        self.cookie = ""
        status, headers, _ = self.request("/" + server.url().split("/", 3)[3])
        self.cookie = headers["Set-Cookie"].split(";")[0]

    def request(self, path: str, data: dict | None = None) -> tuple[int, dict, bytes]:
        body = urllib.parse.urlencode(data).encode() if data is not None else None
        req = urllib.request.Request(
            self.base + path, data=body, headers={"Cookie": self.cookie} if self.cookie else {}
        )
        try:
            with self.opener.open(req, timeout=600) as resp:
                return resp.status, dict(resp.headers), resp.read()
        except urllib.error.HTTPError as err:
            return err.code, dict(err.headers), err.read()


def forms(page: bytes) -> dict[str, dict[str, str]]:
    found = {}
    for form in re.findall(r"<form class=mark .*?</form>", page.decode("utf-8"), flags=re.S):
        fields = dict(re.findall(r"<input type=hidden name=(\w+) value='([^']*)'>", form))
        found[fields["student"]] = fields
    return found


def timed(fn) -> tuple[float, float, object]:
    """(wall seconds, CPU seconds of this process, result) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    got = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, got


def measure(out: Path, students: int, repeat: int) -> list[tuple[str, float, str]]:
    """The rows of the table, from a marking server on the class of `students` in `out`."""
    server = MarkingServer(out, ["Bench"], page_size=25)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    rows = []
    try:
        client = Client(server)
        path = "/question?" + urllib.parse.urlencode({"a": ASSIGNMENT, "q": QUESTION})
        loads = [timed(lambda: client.request(path)) for _ in range(repeat)]
        page = loads[-1][2][2]
        assert page.count(b"<form class=mark") == 25, "a page of 25 answers"
        saves, round_trips = [], []
        for k in range(repeat):
            fields = forms(client.request(path)[2])
            student = sorted(fields)[k % len(fields)]
            form = {**fields[student], "points": "", "rubric": "0", "comment": f"Mark {k}."}
            wall, cpu, (status, headers, _) = timed(lambda: client.request("/mark", form))  # noqa: B023
            assert status == 303 and "error=" not in headers["Location"], (status, headers)
            back = timed(lambda: client.request(headers["Location"].split("#")[0]))  # noqa: B023
            saves.append((wall, cpu))
            round_trips.append((wall + back[0], cpu + back[1]))
        index = [timed(lambda: client.request("/")) for _ in range(repeat)]
        every = "/question?" + urllib.parse.urlencode({"a": ASSIGNMENT, "q": QUESTION})
        server.page_size = students  # the page as it was before paging: every answer on it
        whole = [timed(lambda: client.request(every)) for _ in range(max(3, repeat // 3))]
    finally:
        server.shutdown()
        server.server_close()
    with closing(open_gradebook(out)) as book:
        exports = timed(lambda: write_exports(book, out))
    n = f"{students:,} students"
    med = statistics.median
    rows.append(
        (
            f"one mark saved, {n} (target under 1 s; 75.6 s before)",
            med(w for w, _ in saves),
            f"seconds, median of {repeat}; {med(c for _, c in saves):.3f} CPU s; the POST until its redirect",
        )
    )
    rows.append(
        (
            f"one mark saved and the page reloaded, {n}",
            med(w for w, _ in round_trips),
            f"seconds, median of {repeat}; {med(c for _, c in round_trips):.3f} CPU s (server and client)",
        )
    )
    rows.append(
        (f"question page, 25 answers of {n}: size", len(page) / 1024, f"KiB ({len(page):,} bytes; 4.6 MB before)")
    )
    rows.append(
        (
            f"question page, 25 answers of {n}: load time",
            med(w for w, _, _ in loads),
            f"seconds, median of {repeat}; {med(c for _, c, _ in loads):.3f} CPU s (4.3 s before)",
        )
    )
    rows.append((f"index page, {n}: load time", med(w for w, _, _ in index), f"seconds, median of {repeat}"))
    size = len(whole[-1][2][2])
    rows.append(
        (
            f"the question listing all {n} on one page (as before paging): load time",
            med(w for w, _, _ in whole),
            f"seconds, median of {len(whole)}; {size / 2**20:.1f} MiB",
        )
    )
    rows.append((f"class-wide exports, {n}: what every save rewrote before (now when the server stops)", exports[0],
                 f"seconds, one run; {exports[1]:.2f} CPU s"))  # fmt: skip
    return rows


def run(students: int = 3000, repeat: int = 9) -> list[tuple[str, float, str]]:
    """The marking rows of the benchmark table, on a synthetic class of `students` in a temporary folder."""
    root = Path(tempfile.mkdtemp(prefix="bench-marking-"))
    try:
        out = root / "grades"
        started = time.perf_counter()
        synthetic_class(out, students, solution_notebook(root / "solutions" / f"{ASSIGNMENT}.ipynb"))
        built = time.perf_counter() - started
        with contextlib.redirect_stdout(io.StringIO()):  # the server's line per saved mark
            rows = measure(out, students, repeat)
        rows.append((f"building the synthetic gradebook of {students:,} students, with its exports", built, "seconds"))
        return rows
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.marking", description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args(argv)
    load = f"load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    for what, value, details in run(args.students, args.repeat):
        print(f"{value:10.3f}  {what} ({details})")
    print(load)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
