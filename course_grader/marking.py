"""`course mark`: mark written answers in a browser, one question for the whole class at a time.

Manually graded answers (nbgrader's `grade: true, solution: true`, "explain in two sentences why we
divide by √d_k") are collected by `course grade` as "to be marked". `course mark --out grades` starts a
small web app on this machine and prints its address:

    Marking page: http://127.0.0.1:8765/?token=3bX...   (Ctrl-C to stop)

- the first page lists every manually graded question of every assignment, with how many answers are
  marked and by whom;
- a question's page shows its prompt, the model answer and the rubric (from the solution notebook
  that graded it; the rubric is the answer cell's `metadata.course.rubric`, a list of
  `{"points": 2, "text": "..."}`), then every student's answer, each with a form: points, a rubric
  item (which gives its points when no points are typed), a comment for the student, and the
  grader's name (a teacher or a teaching assistant: remembered by the browser, recorded with the mark);
- a mark is stored in the gradebook at once (`Gradebook.add_mark`), joins the score, and the exports
  (grades.csv, grades.json, the feedback files) are rewritten; the latest mark of an answer counts,
  and a changed answer (a new attempt) must be marked again.

Safety: it listens on 127.0.0.1 only and answers only requests for that host; the first visit must
carry the printed token (a cookie keeps it, HttpOnly and SameSite=Strict), every form carries it too,
and a page allows no scripts and loads nothing from elsewhere (its styles are inline). Several graders
on one machine share the server (each types their name); graders elsewhere reach it through an SSH
tunnel (`ssh -L 8765:127.0.0.1:8765 teacher@host`), never over the network directly.
"""

from __future__ import annotations

import html
import re
import secrets
import signal
import threading
import urllib.parse
from contextlib import closing
from http import cookies
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from course_lib.feedback import MANUAL_STATUS, MARKED, num
from course_lib.runner.notebook import NotebookError, grade_id, read_notebook, source

from .export import write_exports
from .gradebook import Gradebook, open_gradebook, whoami

CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 60rem; padding: 1rem 1.5rem; color: #1b1b1b; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.15rem; margin-top: 2rem; }
table { border-collapse: collapse; } td, th { padding: .3rem .7rem; border-bottom: 1px solid #ddd; text-align: left; }
.answer, .prompt, .model { white-space: pre-wrap; background: #f6f6f6; border-left: 4px solid #0072B2;
  padding: .6rem .9rem; margin: .4rem 0; font-family: ui-monospace, monospace; font-size: 14px; }
.model { border-color: #009E73; } .prompt { border-color: #999; }
.card { border: 1px solid #ccc; border-radius: 6px; padding: .6rem 1rem; margin: 1rem 0; }
.card.marked { border-color: #009E73; } .status { font-weight: 600; }
form.mark { display: grid; grid-template-columns: 8rem 1fr; gap: .4rem .8rem; align-items: start; }
form.mark label { font-weight: 600; } textarea { width: 100%; min-height: 3.2rem; }
.error { color: #B00020; font-weight: 600; } .done { color: #006B4F; }
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"


# --- what the pages show -----------------------------------------------------------------------------


def questions(book: Gradebook) -> dict[tuple[str, str], dict]:
    """(assignment, grade_id) -> {exercise, max_points, answers: [(row, entry)], solutions_path}, in
    gradebook order; dropped students' answers are left out."""
    found: dict[tuple[str, str], dict] = {}
    for r in book.rows():
        if r.enrolment == "dropped":
            continue
        for t in r.tests:
            if not t.get("manual"):
                continue
            q = found.setdefault(
                (r.assignment, t["grade_id"]),
                {
                    "exercise": t.get("exercise") or t["grade_id"],
                    "max_points": t["max_points"],
                    "answers": [],
                    "solutions_path": r.solutions_path,
                },
            )
            q["answers"].append((r, t))
    return found


def progress_lines(book: Gradebook) -> list[str]:
    """One line per question: how many answers are marked, and by whom."""
    lines = []
    for (assignment, _), q in questions(book).items():
        waiting = [t for _, t in q["answers"] if t["status"] == MANUAL_STATUS]
        marked = [t for _, t in q["answers"] if t["status"] == MARKED]
        graders = {}
        for t in marked:
            graders[t.get("grader", "?")] = graders.get(t.get("grader", "?"), 0) + 1
        by = ", ".join(f"{g} {n}" for g, n in sorted(graders.items()))
        lines.append(
            f"{assignment}, {q['exercise']}: {len(marked)} marked"
            + (f" ({by})" if by else "")
            + f", {len(waiting)} to mark, of {len(q['answers'])} students"
        )
    return lines


def question_source(path: str, gid: str) -> dict:
    """The prompt (the markdown above the answer cell, from its exercise heading), the model answer and
    the rubric of a manually graded question, read from the solution notebook that graded it."""
    try:
        nb = read_notebook(path)
    except NotebookError as err:
        return {"prompt": "", "model": "", "rubric": [], "problem": str(err)}
    cells = nb["cells"]
    at = next((i for i, c in enumerate(cells) if grade_id(c) == gid), None)
    if at is None:
        return {"prompt": "", "model": "", "rubric": [], "problem": f"{path} has no cell {gid}"}
    prompt = []
    for c in reversed(cells[:at]):
        if c["cell_type"] != "markdown":
            break
        prompt.insert(0, source(c))
        if source(c).lstrip().startswith("#"):
            break
    meta = cells[at].get("metadata", {}).get("course", {})
    rubric = meta.get("rubric", []) if isinstance(meta, dict) else []
    rubric = [x for x in rubric if isinstance(x, dict) and isinstance(x.get("points"), (int, float))]
    return {"prompt": "\n\n".join(prompt), "model": source(cells[at]), "rubric": rubric, "problem": ""}


def _e(text) -> str:
    return html.escape(str(text), quote=True)


def _page(title: str, body: str) -> bytes:
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>"
        f"<meta name=viewport content='width=device-width, initial-scale=1'><style>{CSS}</style></head>"
        f"<body>{body}</body></html>"
    ).encode("utf-8")


def index_page(book: Gradebook) -> bytes:
    qs = questions(book)
    if not qs:
        body = (
            "<h1>Marking</h1><p>No manually graded answers in this gradebook: grade an exercise set that has "
            "some (cells with nbgrader's <code>grade: true, solution: true</code>) with <code>course grade</code>."
            "</p>"
        )
        return _page("Marking", body)
    rows = []
    for (assignment, gid), q in qs.items():
        waiting = sum(1 for _, t in q["answers"] if t["status"] == MANUAL_STATUS)
        marked = sum(1 for _, t in q["answers"] if t["status"] == MARKED)
        link = "/question?" + urllib.parse.urlencode({"a": assignment, "q": gid})
        rows.append(
            f"<tr><td>{_e(assignment)}</td><td><a href='{_e(link)}'>{_e(q['exercise'])}</a></td>"
            f"<td>{num(q['max_points'])}</td><td class=done>{marked}</td><td>{waiting}</td>"
            f"<td>{len(q['answers'])}</td></tr>"
        )
    body = (
        "<h1>Marking</h1><p>One question at a time, the whole class on one page.</p>"
        "<table><tr><th>Assignment</th><th>Question</th><th>Points</th><th>Marked</th><th>To mark</th>"
        f"<th>Students</th></tr>{''.join(rows)}</table>"
    )
    return _page("Marking", body)


def question_page(book: Gradebook, assignment: str, gid: str, token: str, grader: str, message: str = "") -> bytes:
    q = questions(book).get((assignment, gid))
    if q is None:
        return _page(
            "Not found",
            f"<p class=error>No question {_e(gid)} in {_e(assignment)}.</p><p><a href='/'>All questions</a></p>",
        )
    info = question_source(q["solutions_path"], gid)
    parts = [f"<p><a href='/'>All questions</a></p><h1>{_e(assignment)}: {_e(q['exercise'])}</h1>"]
    if message:
        parts.append(f"<p class=error>{_e(message)}</p>")
    if info["problem"]:
        parts.append(f"<p class=error>{_e(info['problem'])}</p>")
    if info["prompt"]:
        parts.append(f"<h2>The question</h2><div class=prompt>{_e(info['prompt'])}</div>")
    if info["model"]:
        parts.append(f"<h2>Model answer</h2><div class=model>{_e(info['model'])}</div>")
    if info["rubric"]:
        items = "".join(f"<li><b>{num(x['points'])}</b>: {_e(x.get('text', ''))}</li>" for x in info["rubric"])
        parts.append(f"<h2>Rubric</h2><ul>{items}</ul>")
    waiting = sum(1 for _, t in q["answers"] if t["status"] == MANUAL_STATUS)
    parts.append(f"<h2>Answers ({waiting} to mark, {len(q['answers'])} students)</h2>")
    for r, t in q["answers"]:
        who = f"{r.name} ({r.student})" if r.name else r.student
        anchor = "s-" + re.sub(r"[^A-Za-z0-9_-]", "_", r.student)
        status = t["status"]
        head = f"<h3 id='{_e(anchor)}'>{_e(who)} · <span class=status>{_e(status)}</span></h3>"
        if status not in (MANUAL_STATUS, MARKED):
            parts.append(
                f"<div class=card>{head}<p>{_e(t.get('message') or status)}: 0 points, nothing to mark.</p></div>"
            )
            continue
        done = ""
        if status == MARKED:
            done = (
                f"<p class=done>Marked {num(t['points'])} / {num(t['max_points'])} by {_e(t.get('grader', '?'))} "
                f"on {_e(str(t.get('marked_at', ''))[:16].replace('T', ' '))}"
                + (f": {_e(t.get('rubric'))}" if t.get("rubric") else "")
                + "</p>"
            )
        options = "<option value=''>(none)</option>" + "".join(
            f"<option value='{i}'"
            + (" selected" if x.get("text") == t.get("rubric") else "")
            + f">{num(x['points'])}: {_e(x.get('text', ''))}</option>"
            for i, x in enumerate(info["rubric"])
        )
        form = (
            f"<form class=mark method=post action='/mark' aria-label='mark {_e(who)}'>"
            f"<input type=hidden name=token value='{_e(token)}'>"
            f"<input type=hidden name=a value='{_e(assignment)}'><input type=hidden name=q value='{_e(gid)}'>"
            f"<input type=hidden name=student value='{_e(r.student)}'>"
            f"<input type=hidden name=answer value='{_e(t.get('answer_sha256', ''))}'>"
            f"<label for='p-{_e(anchor)}'>Points (of {num(t['max_points'])})</label>"
            f"<input id='p-{_e(anchor)}' name=points type=number min=0 max='{num(t['max_points'])}' step=0.25 "
            f"value='{num(t['points']) if status == MARKED else ''}'>"
            f"<label for='r-{_e(anchor)}'>Rubric</label><select id='r-{_e(anchor)}' name=rubric>{options}</select>"
            f"<label for='c-{_e(anchor)}'>Comment</label>"
            f"<textarea id='c-{_e(anchor)}' name=comment>{_e(t.get('comment', ''))}</textarea>"
            f"<label for='g-{_e(anchor)}'>Grader</label>"
            f"<input id='g-{_e(anchor)}' name=grader value='{_e(grader)}' required>"
            f"<span></span><button type=submit>Save the mark for {_e(who)}</button></form>"
        )
        parts.append(
            f"<div class='card{' marked' if status == MARKED else ''}'>{head}"
            f"<div class=answer>{_e(t.get('answer', ''))}</div>{done}{form}</div>"
        )
    return _page(f"{assignment}: {q['exercise']}", "".join(parts))


def save_mark(book: Gradebook, out: Path, form: dict[str, str]) -> tuple[str, str, str]:
    """Store the mark a form sent; (assignment, question, student). Raises ValueError with what is wrong."""
    assignment, gid, student = form.get("a", ""), form.get("q", ""), form.get("student", "")
    q = questions(book).get((assignment, gid))
    entry = next((t for r, t in (q or {}).get("answers", []) if r.student == student), None)
    if entry is None:
        raise ValueError(f"no answer of {student!r} to {gid!r} in {assignment!r}")
    if form.get("answer") and form["answer"] != entry.get("answer_sha256"):
        raise ValueError(
            f"{student}'s answer changed since this page was loaded (a new attempt was graded); "
            "reload the page and mark it again"
        )
    if entry["status"] not in (MANUAL_STATUS, MARKED):
        raise ValueError(f"{student} did not answer {gid}: there is nothing to mark")
    grader = form.get("grader", "").strip()
    if not grader:
        raise ValueError("type your name as the grader: it is recorded with the mark")
    rubric = question_source(q["solutions_path"], gid)["rubric"]
    item = None
    if form.get("rubric", "").strip():
        try:
            item = rubric[int(form["rubric"])]
        except (ValueError, IndexError):
            raise ValueError(f"no rubric item {form['rubric']!r}") from None
    text = form.get("points", "").strip()
    if text:
        try:
            points = float(text)
        except ValueError:
            raise ValueError(f"points must be a number, got {text!r}") from None
    elif item is not None:
        points = float(item["points"])
    else:
        raise ValueError("give the points, or choose a rubric item (its points are used)")
    book.add_mark(
        student,
        assignment,
        gid,
        points,
        rubric=item.get("text", "") if item else "",
        comment=form.get("comment", ""),
        grader=grader,
        answer_sha256=entry.get("answer_sha256", ""),
    )
    write_exports(book, out)
    return assignment, gid, student


# --- the server --------------------------------------------------------------------------------------


class MarkingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, out: Path, grader: str, port: int = 0):
        self.out = Path(out)
        self.token = secrets.token_urlsafe(24)
        self.grader = grader or whoami()
        self.lock = threading.Lock()  # one mark (and its exports) at a time
        super().__init__(("127.0.0.1", port), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/?token={self.token}"


class Handler(BaseHTTPRequestHandler):
    server: MarkingServer

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass  # the terminal shows the address and each saved mark, not every request

    def _send(self, status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", CSP)
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        self.send_header("Cache-Control", "no-store")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def _cookie(self, name: str) -> str:
        jar = cookies.SimpleCookie()
        try:
            jar.load(self.headers.get("Cookie", ""))
        except cookies.CookieError:
            return ""
        return urllib.parse.unquote(jar[name].value) if name in jar else ""

    def _allowed(self) -> bool:
        """Only this machine, by the name it was given (no DNS rebinding), with the token."""
        port = self.server.server_address[1]
        if self.headers.get("Host", "") not in (f"127.0.0.1:{port}", f"localhost:{port}"):
            self._send(
                403,
                _page(
                    "Forbidden",
                    "<p class=error>Open the address that <code>course mark</code> printed (127.0.0.1).</p>",
                ),
            )
            return False
        return True

    def _authorised(self, query: dict) -> bool:
        token = self.server.token
        if secrets.compare_digest(self._cookie("course_mark"), token):
            return True
        if secrets.compare_digest(query.get("token", [""])[0], token):
            return True
        self._send(
            403,
            _page(
                "Forbidden",
                "<p class=error>This page needs the token: open the whole address "
                "<code>course mark</code> printed, with <code>?token=...</code>.</p>",
            ),
        )
        return False

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if not self._allowed():
            return
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if not self._authorised(query):
            return
        if "token" in query:  # keep the token in a cookie, and out of the address bar and the history
            rest = {k: v for k, v in query.items() if k != "token"}
            target = url.path + ("?" + urllib.parse.urlencode(rest, doseq=True) if rest else "")
            self._send(
                303,
                b"",
                {
                    "Location": target,
                    "Set-Cookie": f"course_mark={self.server.token}; HttpOnly; SameSite=Strict; Path=/",
                },
            )
            return
        grader = self._cookie("course_grader") or self.server.grader
        with closing(open_gradebook(self.server.out)) as book:
            if url.path == "/":
                self._send(200, index_page(book))
            elif url.path == "/question":
                a, q = query.get("a", [""])[0], query.get("q", [""])[0]
                self._send(200, question_page(book, a, q, self.server.token, grader, query.get("error", [""])[0]))
            else:
                self._send(404, _page("Not found", "<p><a href='/'>All questions</a></p>"))

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        if not self._allowed():
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > 200_000:
            self._send(413, _page("Too large", "<p class=error>That form is too large.</p>"))
            return
        form = {
            k: v[0]
            for k, v in urllib.parse.parse_qs(
                self.rfile.read(length).decode("utf-8", "replace"), keep_blank_values=True
            ).items()
        }
        if self.path != "/mark" or not secrets.compare_digest(form.get("token", ""), self.server.token):
            self._send(403, _page("Forbidden", "<p class=error>A mark must come from a marking page.</p>"))
            return
        back = {"a": form.get("a", ""), "q": form.get("q", "")}
        try:
            with self.server.lock, closing(open_gradebook(self.server.out)) as book:
                assignment, gid, student = save_mark(book, self.server.out, form)
        except ValueError as err:
            target = "/question?" + urllib.parse.urlencode({**back, "error": str(err)})
            self._send(303, b"", {"Location": target})
            return
        print(
            f"marked {student}, {assignment} {gid}: {form.get('points') or 'rubric'} by {form.get('grader')}",
            flush=True,
        )
        anchor = "#s-" + re.sub(r"[^A-Za-z0-9_-]", "_", student)
        grader = urllib.parse.quote(form.get("grader", "").strip())
        self._send(
            303,
            b"",
            {
                "Location": "/question?" + urllib.parse.urlencode(back) + anchor,
                "Set-Cookie": f"course_grader={grader}; SameSite=Strict; Path=/",
            },
        )


def serve(out: Path, grader: str = "", port: int = 0) -> int:
    """Run the marking server until Ctrl-C; print its address first."""
    server = MarkingServer(out, grader, port)
    print(f"Marking page: {server.url}   (Ctrl-C to stop)", flush=True)

    def stop(signum, frame):
        raise KeyboardInterrupt  # `kill` ends it as Ctrl-C does: with the summary

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    with closing(open_gradebook(out)) as book:
        for line in progress_lines(book):
            print(line)
    return 0
