"""`course mark`: mark written answers in a browser, one question for the whole class at a time.

Manually graded answers (nbgrader's `grade: true, solution: true`, "explain in two sentences why we
divide by √d_k") are collected by `course grade` as "to be marked". `course mark --out grades` starts a
small web app on this machine and prints an address for each grader (`--grader NAME`, once per teacher
or teaching assistant; by default one, under the login name):

    Marking page for Ana Ruiz: http://127.0.0.1:8765/?token=3bX...
    Marking page for Ben Okafor: http://127.0.0.1:8765/?token=Q9f...

- the first page lists every manually graded question of every assignment, with how many answers are
  marked and how many wait;
- a question's page shows its prompt, the model answer and the rubric (from the solution notebook
  that graded it; the rubric is the answer cell's `metadata.course.rubric`, a list of
  `{"points": 2, "text": "..."}`), then the students' answers a page at a time (`--page-size`, 25 by
  default; previous and next links), of one section or all (the roster's `Section` column, or the one
  `--section-column` names), every answer or only those still to mark. Each answer is framed as the
  student's, with the characters that could reorder the page's text written out as escapes, and has a
  form: points, a rubric item (which gives its points when no points are typed) and a comment;
- a grader given sections (`course mark --grader Ana --section A`) sees only their students, on every
  page, and a save for a student of another section is refused;
- a mark is stored in the gradebook at once (`Gradebook.add_mark`) under the name of the grader whose
  address the browser opened (never a name typed in the form), joins the score, and that student's
  feedback file is rewritten, from their rows alone, under a lock held for milliseconds however large
  the class; the class-wide exports (grades.csv, grades.json, every feedback file) are rewritten when
  the server stops (Ctrl-C, SIGTERM) and by `course export`. The latest mark of an answer counts, and a
  changed answer (a new attempt) must be marked again;
- each form says which mark of its answer the page showed. A save from a page loaded before someone
  else (or the same grader in another tab) marked that answer is refused, and the page that answers
  it shows both marks, the one on record (who, when) and the one just tried, so that the grader
  decides and saves again knowingly.

Safety: it listens on 127.0.0.1 only and answers only requests for that host; the first visit must
carry a printed token (a cookie keeps it, HttpOnly and SameSite=Strict), and that token is who the
browser marks as; every form carries a key of the same grader's, so a page loaded as one grader
cannot save as another. A page allows no scripts and loads nothing from elsewhere (its styles are
inline). Graders elsewhere reach it through an SSH tunnel (`ssh -L 8765:127.0.0.1:8765
teacher@host`), never over the network directly; give each grader only their own address.

This module saves a mark (`save_mark`) and serves the pages (`MarkingServer`, `serve`); what the pages show,
and who sees which answers, is `marking_pages`.
"""

from __future__ import annotations

import html
import secrets
import signal
import threading
import urllib.parse
from contextlib import closing
from dataclasses import replace
from http import cookies
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from course_lib.runner.feedback import MANUAL_STATUS, MARKED
from course_lib.runner.text import inert

from .export import write_exports, write_student_feedback
from .gradebook import Gradebook, StaleMark, open_gradebook, whoami
from .marking_pages import (
    CSP,
    PAGE_SIZE,
    SECTION,
    Grader,
    View,
    anchor_of,
    conflict_page,
    html_page,
    index_page,
    progress_lines,
    question_page,
    question_source,
    section_of,
)
from .marking_pages import learner_html as learner_html  # one of this module's public names

# --- saving a mark ------------------------------------------------------------------------------------


def save_mark(
    book: Gradebook,
    out: Path,
    form: dict[str, str],
    *,
    grader: str,
    sections: tuple[str, ...] = (),
    column: str = SECTION,
) -> tuple[str, str, str]:
    """Store the mark a form sent, as `grader`'s (who marks `sections`; empty: all), and rewrite that student's
    feedback file, from their rows alone (the class-wide exports wait for the server to stop, or for
    `course export`); (assignment, question, student). Raises StaleMark when the answer was marked since the
    form's page was loaded, ValueError with what is wrong otherwise."""
    assignment, gid, student = form.get("a", ""), form.get("q", ""), form.get("student", "")
    row, entry = _answer_of(book, assignment, gid, student)
    _check_section(book, student, grader, sections, column)
    if form.get("answer") and form["answer"] != entry.get("answer_sha256"):
        raise ValueError(
            f"{student}'s answer changed since this page was loaded (a new attempt was graded); "
            "reload the page and mark it again"
        )
    if entry["status"] not in (MANUAL_STATUS, MARKED):
        raise ValueError(f"{student} did not answer {gid}: there is nothing to mark")
    seen = form.get("seen", "").strip()
    if not seen.isdigit():
        raise ValueError(
            f"the form does not say which mark of {student}'s answer its page showed (got {seen!r}); "
            "reload the page and mark again"
        )
    item, points = _points(form, question_source(row.solutions_path, gid)["rubric"])
    book.add_mark(
        student,
        assignment,
        gid,
        points,
        rubric=item.get("text", "") if item else "",
        comment=form.get("comment", ""),
        grader=grader,
        answer_sha256=entry.get("answer_sha256", ""),
        seen=int(seen),
    )
    write_student_feedback(book, out, student, assignment)
    return assignment, gid, student


def _answer_of(book: Gradebook, assignment: str, gid: str, student: str) -> tuple:
    """(row, manually graded answer) of `student` to `gid`, read from that student's row alone."""
    row = next(iter(book.rows(student, assignment)), None)
    entry = None
    if row is not None and row.enrolment != "dropped":
        entry = next((t for t in row.tests if t.get("manual") and t["grade_id"] == gid), None)
    if entry is None:
        raise ValueError(f"no answer of {student!r} to {gid!r} in {assignment!r}")
    return row, entry


def _check_section(book: Gradebook, student: str, grader: str, sections: tuple[str, ...], column: str) -> None:
    """Refuse a mark from a grader who marks `sections` (not all) for a student of another section."""
    if not sections:
        return
    found = book.roster_student(student)
    theirs = section_of(found, column) if found is not None else ""
    if theirs.casefold() not in {x.casefold() for x in sections}:
        raise ValueError(
            f"{grader} marks section {', '.join(sections)}: {student} is in "
            + (f"section {theirs}" if theirs else f"no section (the roster's {column!r} is empty)")
            + "; nothing was saved"
        )


def _points(form: dict[str, str], rubric: list[dict]) -> tuple[dict | None, float]:
    """(the rubric item chosen or None, the points): typed points, else the rubric item's."""
    item = None
    if form.get("rubric", "").strip():
        try:
            item = rubric[int(form["rubric"])]
        except (ValueError, IndexError):
            raise ValueError(f"no rubric item {form['rubric']!r}") from None
    text = form.get("points", "").strip()
    if text:
        try:
            return item, float(text)
        except ValueError:
            raise ValueError(f"points must be a number, got {text!r}") from None
    if item is not None:
        return item, float(item["points"])
    raise ValueError("give the points, or choose a rubric item (its points are used)")


# --- the server --------------------------------------------------------------------------------------


def _graders(names: list[str] | str, sections: dict[str, list[str]] | None = None) -> list[Grader]:
    """A Grader for each name (the login name when none is given), with the sections given for them."""
    names = [names] if isinstance(names, str) else list(names)
    names = [n.strip() for n in names] or [whoami()]
    seen: set[str] = set()
    for name in names:
        if not name or inert(name) != name:
            raise ValueError(f"--grader needs a name, printable, e.g. --grader 'Ana Ruiz'; got {name!r}")
        if name.casefold() in seen:
            raise ValueError(f"--grader {name!r} is given twice: each grader gets one address")
        seen.add(name.casefold())
    sections = sections or {}
    unknown = [n for n in sections if n not in names]
    if unknown:
        raise ValueError(f"--section is given for {', '.join(unknown)}, who is not a --grader ({', '.join(names)})")
    return [
        Grader(name, secrets.token_urlsafe(24), secrets.token_urlsafe(24), tuple(sections.get(name, ())))
        for name in names
    ]


def check_sections(book: Gradebook, graders: list[Grader], column: str = SECTION) -> None:
    """Raise ValueError when a grader's section is one the roster's `column` does not have (a typo would give
    a TA an empty page): the message names the sections there are."""
    wanted = sorted({x for g in graders for x in g.sections})
    if not wanted:
        return
    roster = book.roster()
    if roster is None:
        raise ValueError(f"--section needs a roster with a {column!r} column: course roster import FILE")
    have = sorted({section_of(s, column) for s in roster.students} - {""})
    if not have:
        columns = sorted({k for s in roster.students for k in s.extra})
        raise ValueError(
            f"the roster has no sections in a column {column!r} (its columns: {', '.join(columns) or 'none'}); "
            "name the column that holds them with --section-column"
        )
    missing = [x for x in wanted if x.casefold() not in {h.casefold() for h in have}]
    if missing:
        raise ValueError(f"no student is in section {', '.join(missing)} (the roster's sections: {', '.join(have)})")


class MarkingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(
        self,
        out: Path,
        graders: list[str] | str = (),
        port: int = 0,
        *,
        sections: dict[str, list[str]] | None = None,
        column: str = SECTION,
        page_size: int = PAGE_SIZE,
    ):
        """`sections`: grader name -> the sections they mark (the roster's `column`); `page_size`: answers a page
        lists."""
        if page_size < 1:
            raise ValueError(f"--page-size is a number of answers, 1 or more; got {page_size}")
        self.out = Path(out)
        self.graders = _graders(graders, sections)
        self.column, self.page_size = column, page_size
        self.saved = 0  # marks saved since the server started: the class-wide exports are rewritten when it stops
        with closing(open_gradebook(self.out)) as book:
            check_sections(book, self.graders, column)
        self.lock = threading.Lock()  # one mark (and its student's feedback file) at a time: milliseconds
        super().__init__(("127.0.0.1", port), Handler)

    def finish(self) -> list[str]:
        """What stopping the server does: the class-wide exports rewritten when a mark was saved (each save wrote
        its student's feedback file only); the lines to print, with how many answers are marked."""
        lines = []
        with closing(open_gradebook(self.out)) as book:
            if self.saved:
                rows = write_exports(book, self.out)
                lines.append(
                    f"{self.saved} mark(s) saved: rewrote {self.out / 'grades.csv'}, grades.json and feedback/ "
                    f"({len(rows)} rows)"
                )
            lines += progress_lines(book)
        return lines

    def url(self, grader: Grader | str | None = None) -> str:
        """The address of `grader` (a Grader or a name; the first grader by default)."""
        g = self.grader(grader) if isinstance(grader, str) else grader or self.graders[0]
        return f"http://127.0.0.1:{self.server_address[1]}/?token={g.token}"

    def grader(self, name: str) -> Grader:
        found = next((g for g in self.graders if g.name == name), None)
        if found is None:
            raise KeyError(f"no grader {name!r}: the graders are {', '.join(g.name for g in self.graders)}")
        return found

    def by_token(self, token: str) -> Grader | None:
        """The grader whose token this is, compared in constant time with every grader's."""
        found = None
        for g in self.graders:
            if secrets.compare_digest(token.encode(), g.token.encode()):
                found = g
        return found

    def by_key(self, key: str) -> Grader | None:
        found = None
        for g in self.graders:
            if secrets.compare_digest(key.encode(), g.key.encode()):
                found = g
        return found


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

    def _forbidden(self, text: str) -> None:
        self._send(403, html_page("Forbidden", f"<p class=error>{text}</p>"))

    def _cookie(self, name: str) -> str:
        jar = cookies.SimpleCookie()
        try:
            jar.load(self.headers.get("Cookie", ""))
        except cookies.CookieError:
            return ""
        return urllib.parse.unquote(jar[name].value) if name in jar else ""

    def _allowed(self) -> bool:
        """Only this machine, by the name it was given (no DNS rebinding)."""
        port = self.server.server_address[1]
        if self.headers.get("Host", "") not in (f"127.0.0.1:{port}", f"localhost:{port}"):
            self._forbidden("Open the address that <code>course mark</code> printed (127.0.0.1).")
            return False
        return True

    def _signed_in(self) -> Grader | None:
        """The grader this browser marks as: the one whose token its cookie holds."""
        return self.server.by_token(self._cookie("course_mark"))

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if not self._allowed():
            return
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        if "token" in query:  # a grader's address: its token goes into a cookie, out of the address bar
            grader = self.server.by_token(query["token"][0])
            if grader is None:
                self._forbidden(
                    "This address's token is not one this marking page printed (it prints new ones each time it "
                    "starts): open the address <code>course mark</code> printed for you."
                )
                return
            rest = {k: v for k, v in query.items() if k != "token"}
            target = url.path + ("?" + urllib.parse.urlencode(rest, doseq=True) if rest else "")
            self._send(
                303,
                b"",
                {"Location": target, "Set-Cookie": f"course_mark={grader.token}; HttpOnly; SameSite=Strict; Path=/"},
            )
            return
        grader = self._signed_in()
        if grader is None:
            self._forbidden(
                "This page needs your token: open the whole address <code>course mark</code> printed for you, "
                "with <code>?token=...</code>."
            )
            return
        fields = {k: v[0] for k, v in query.items()}
        with closing(open_gradebook(self.server.out)) as book:
            if url.path == "/":
                self._send(200, index_page(book, grader.name, grader.sections, self.server.column))
            elif url.path == "/question":
                view, message = View.read(fields), fields.get("error", "")
                if (
                    view.section
                    and grader.sections
                    and view.section.casefold() not in map(str.casefold, grader.sections)
                ):
                    view, message = replace(view, section=""), f"You mark section {', '.join(grader.sections)} only."
                page = question_page(
                    book,
                    fields.get("a", ""),
                    fields.get("q", ""),
                    grader,
                    message,
                    view,
                    column=self.server.column,
                    page_size=self.server.page_size,
                )
                self._send(200, page)
            else:
                self._send(404, html_page("Not found", "<p><a href='/'>All questions</a></p>", grader.name))

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        if not self._allowed():
            return
        length = int(self.headers.get("Content-Length") or 0)
        if length > 200_000:
            self._send(413, html_page("Too large", "<p class=error>That form is too large.</p>"))
            return
        form = {
            k: v[0]
            for k, v in urllib.parse.parse_qs(
                self.rfile.read(length).decode("utf-8", "replace"), keep_blank_values=True
            ).items()
        }
        grader, sent_by = self._signed_in(), self.server.by_key(form.get("key", ""))
        if self.path != "/mark" or grader is None or sent_by is None:
            self._forbidden("A mark must come from a marking page, in a browser that opened a grader's address.")
            return
        if sent_by != grader:  # another grader's address was opened in this browser since the page was loaded
            was, now = html.escape(sent_by.name), html.escape(grader.name)
            self._forbidden(
                f"This page was loaded as {was}, but this browser now marks as {now}: nothing was saved. "
                f"<a href='/'>Reload the pages</a> to mark as {now}, or open {was}'s own address to mark as them."
            )
            return
        back = {"a": form.get("a", ""), "q": form.get("q", ""), **View.read(form).query()}
        stale = None
        try:
            with closing(open_gradebook(self.server.out)) as book:
                with self.server.lock:  # the mark and its student's feedback file: milliseconds, whatever the class
                    try:
                        assignment, gid, student = save_mark(
                            book,
                            self.server.out,
                            form,
                            grader=grader.name,
                            sections=grader.sections,
                            column=self.server.column,
                        )
                        self.server.saved += 1
                    except StaleMark as err:
                        stale = err
                if stale is not None:  # shown at once, from the gradebook as it is now
                    self._send(409, conflict_page(book, form, grader, stale, column=self.server.column))
                    return
        except ValueError as err:
            target = "/question?" + urllib.parse.urlencode({**back, "error": str(err)})
            self._send(303, b"", {"Location": target})
            return
        print(f"marked {student}, {assignment} {gid}: {form.get('points') or 'rubric'} by {grader.name}", flush=True)
        self._send(303, b"", {"Location": "/question?" + urllib.parse.urlencode(back) + "#" + anchor_of(student)})


def serve(
    out: Path,
    graders: list[str] | str = (),
    port: int = 0,
    *,
    sections: dict[str, list[str]] | None = None,
    column: str = SECTION,
    page_size: int = PAGE_SIZE,
) -> int:
    """Run the marking server until Ctrl-C (or SIGTERM); print each grader's address first. When it stops,
    the class-wide exports are rewritten if a mark was saved (each save rewrote its student's feedback only)."""
    server = MarkingServer(out, graders, port, sections=sections, column=column, page_size=page_size)
    for g in server.graders:
        print(f"Marking page for {g.name}: {server.url(g)}", flush=True)
    for g in server.graders:
        if g.sections:
            print(f"  {g.name} marks section {', '.join(g.sections)} only", flush=True)
    print(
        "Give each grader only their own address: it is who their marks are recorded as. (Ctrl-C to stop)",
        flush=True,
    )

    def stop(signum, frame):
        raise KeyboardInterrupt  # `kill` ends it as Ctrl-C does: with the summary

    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    print("\n".join(server.finish()))
    return 0
