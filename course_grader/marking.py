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
"""

from __future__ import annotations

import html
import re
import secrets
import signal
import threading
import urllib.parse
from contextlib import closing
from dataclasses import dataclass, replace
from http import cookies
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from course_lib.runner.feedback import MANUAL_STATUS, MARKED, num
from course_lib.runner.notebook import NotebookError, grade_id, read_notebook, source
from course_lib.runner.text import inert

from .export import write_exports, write_student_feedback
from .gradebook import Gradebook, Mark, StaleMark, open_gradebook, whoami
from .roster import Student

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
.who { background: #eef4fa; padding: .4rem .8rem; border-radius: 4px; }
figure.handed-in { margin: .6rem 0; border: 2px dashed #0072B2; border-radius: 4px; padding: 0 .5rem .3rem; }
figure.handed-in figcaption { font-size: 12px; font-weight: 600; color: #0072B2; padding-top: .2rem; }
figure.handed-in .answer { unicode-bidi: isolate; }
.record { background: #eaf6f1; padding: .3rem .6rem; } .tried { background: #fdf3e1; padding: .3rem .6rem; }
form.filters { margin: .5rem 0; } .pages { color: #444; }
"""
CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"


# --- what the pages show -----------------------------------------------------------------------------


SECTION = "Section"  # the roster's column that says a student's section (Canvas's export has it)
PAGE_SIZE = 25  # answers per page: a page of 3,000 forms is megabytes, and slow to load and to save from


@dataclass(frozen=True)
class Learner:
    """Whose answer a card shows: their id, their name and section from the roster ("" when not on it)."""

    student: str
    name: str = ""
    section: str = ""


def section_of(student: Student, column: str = SECTION) -> str:
    """The student's section: the roster's `column` (any case), "" when it has none."""
    return next((v.strip() for k, v in student.extra.items() if k.strip().casefold() == column.casefold()), "")


def learners(book: Gradebook, column: str = SECTION) -> tuple[dict[str, Learner], set[str]]:
    """The roster's students (id -> Learner, in roster order), and the ids of those who dropped."""
    roster = book.roster()
    if roster is None:
        return {}, set()
    found = {s.id: Learner(s.id, s.name, section_of(s, column)) for s in roster.students}
    return found, {s.id for s in roster.students if s.status == "dropped"}


def questions(book: Gradebook, assignment: str | None = None, column: str = SECTION) -> dict[tuple[str, str], dict]:
    """(assignment, grade_id) -> {exercise, max_points, answers: [(learner, entry)], solutions_path}, in roster
    order (of `assignment`, or of all); dropped students' answers are left out. Read without the tests and the
    rest of each row: the marking page lists answers, not scores."""
    people, dropped = learners(book, column)
    order = {sid: i for i, sid in enumerate(people)}
    found: dict[tuple[str, str], dict] = {}
    for student, a, path, manual in sorted(
        book.answers(assignment), key=lambda x: (order.get(x[0], len(order)), x[0], x[1])
    ):
        if student in dropped:
            continue
        who = people.get(student) or Learner(student)
        for t in manual:
            q = found.setdefault(
                (a, t["grade_id"]),
                {"exercise": t.get("exercise") or t["grade_id"], "max_points": t["max_points"], "answers": []},
            )
            q.setdefault("solutions_path", path)
            q["answers"].append((who, t))
    return found


@dataclass(frozen=True)
class View:
    """Which of a question's answers a page lists: one page of them, of one section or of every section the
    grader marks, every answer or only those still to mark."""

    page: int = 1
    section: str = ""  # "": every section the grader marks
    todo: bool = False  # only the answers still to mark

    @classmethod
    def read(cls, fields: dict[str, str]) -> View:
        """The view a query or a form asks for (what cannot be read is the default)."""
        page = fields.get("page", "1").strip()
        return cls(
            int(page) if page.isdigit() and int(page) > 0 else 1,
            fields.get("section", "").strip(),
            fields.get("todo", "") == "1",
        )

    def query(self, **changes) -> dict[str, str]:
        """The view as query fields (with `changes`), leaving out the defaults."""
        v = replace(self, **changes)
        return {
            k: val
            for k, val in (("page", str(v.page)), ("section", v.section), ("todo", "1" if v.todo else ""))
            if val and (k, val) != ("page", "1")
        }


def visible(answers: list[tuple[Learner, dict]], sections: tuple[str, ...], view: View) -> list[tuple[Learner, dict]]:
    """The answers a grader who marks `sections` (empty: all) sees in `view`, before paging."""
    mine = {x.casefold() for x in sections}
    want = view.section.casefold()
    return [
        (who, t)
        for who, t in answers
        if (not mine or who.section.casefold() in mine)
        and (not want or who.section.casefold() == want)
        and (not view.todo or t["status"] == MANUAL_STATUS)
    ]


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


def _plain(text) -> str:
    """A learner's (or an LMS's) text, as any page shows it: inert (course_lib.runner.text), so its bidi
    overrides and isolates and its control characters are visible escapes (`\\u202e`) that cannot reorder
    the page around them, and a lone surrogate is U+FFFD. The gradebook already stores learner text so;
    this also covers a gradebook written before it did, and the roster's names."""
    return inert(str(text).replace("\r\n", "\n"), None)


def learner_html(text) -> str:
    """A learner's text as HTML: inert, then escaped."""
    return _e(_plain(text))


def _page(title: str, body: str, grader: str = "") -> bytes:
    who = (
        f"<p class=who>Marking as <b>{_e(grader)}</b>: every mark saved from this browser is recorded under this "
        "name (it comes from the address you opened).</p>"
        if grader
        else ""
    )
    return (
        f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{_e(title)}</title>"
        f"<meta name=viewport content='width=device-width, initial-scale=1'><style>{CSS}</style></head>"
        f"<body>{who}{body}</body></html>"
    ).encode("utf-8", "replace")  # a text this page was not meant to hold never stops it


def index_page(book: Gradebook, grader: str = "", sections: tuple[str, ...] = (), column: str = SECTION) -> bytes:
    qs = questions(book, column=column)
    if not qs:
        body = (
            "<h1>Marking</h1><p>No manually graded answers in this gradebook: grade an exercise set that has "
            "some (cells with nbgrader's <code>grade: true, solution: true</code>) with <code>course grade</code>."
            "</p>"
        )
        return _page("Marking", body, grader)
    rows = []
    for (assignment, gid), q in qs.items():
        answers = visible(q["answers"], sections, View())
        waiting = sum(1 for _, t in answers if t["status"] == MANUAL_STATUS)
        marked = sum(1 for _, t in answers if t["status"] == MARKED)
        link = "/question?" + urllib.parse.urlencode({"a": assignment, "q": gid})
        todo = "/question?" + urllib.parse.urlencode({"a": assignment, "q": gid, "todo": "1"})
        rows.append(
            f"<tr><td>{_e(assignment)}</td><td><a href='{_e(link)}'>{_e(q['exercise'])}</a></td>"
            f"<td>{num(q['max_points'])}</td><td class=done>{marked}</td>"
            f"<td><a href='{_e(todo)}' aria-label='only the {waiting} still to mark'>{waiting}</a></td>"
            f"<td>{len(answers)}</td></tr>"
        )
    mine = f" Yours: section {_e(', '.join(sections))}." if sections else ""
    body = (
        f"<h1>Marking</h1><p>One question at a time, a page of students at a time.{mine}</p>"
        "<table><tr><th>Assignment</th><th>Question</th><th>Points</th><th>Marked</th><th>To mark</th>"
        f"<th>Students</th></tr>{''.join(rows)}</table>"
    )
    return _page("Marking", body, grader)


def _when(stamp) -> str:
    return str(stamp or "")[:16].replace("T", " ") + " UTC"


def _mark_line(m: Mark | dict, max_points: float, css: str = "done") -> str:
    """ "Marked 2 / 2 by Ana Ruiz on 2026-11-27 10:02 UTC: rubric item; comment", from a Mark or a marked answer."""
    get = m.get if isinstance(m, dict) else lambda key, default=None: getattr(m, key, default)
    when = get("marked_at") or get("created_at")
    text = f"Marked {num(get('points'))} / {num(max_points)} by {_e(get('grader', '?'))} on {_e(_when(when))}"
    detail = "; ".join(_e(x) for x in (get("rubric", ""), get("comment", "")) if x)
    return f"<p class={css}>{text}{': ' + detail if detail else ''}</p>"


def _who(r) -> str:
    return _plain(f"{r.name} ({r.student})" if r.name else r.student)


def _anchor(student: str) -> str:
    return "s-" + re.sub(r"[^A-Za-z0-9_-]", "_", student)


def _form(
    assignment: str,
    gid: str,
    r,
    t: dict,
    rubric: list[dict],
    key: str,
    seen: int,
    *,
    values: dict | None = None,
    button: str = "",
    view: View = View(),
) -> str:
    """The form that marks one answer. `seen` is the id of the answer's latest mark as this page shows it
    (0: none); `values` pre-fills it (a refused save, shown again); `view` is the list to go back to."""
    who, anchor = _who(r), _anchor(r.student)
    if values is None:
        marked = t["status"] == MARKED
        values = {
            "points": num(t["points"]) if marked else "",
            "rubric": next((str(i) for i, x in enumerate(rubric) if marked and x.get("text") == t.get("rubric")), ""),
            "comment": t.get("comment", "") if marked else "",
        }
    options = "<option value=''>(none)</option>" + "".join(
        f"<option value='{i}'"
        + (" selected" if str(i) == values.get("rubric") else "")
        + f">{num(x['points'])}: {_e(x.get('text', ''))}</option>"
        for i, x in enumerate(rubric)
    )
    return (
        f"<form class=mark method=post action='/mark' aria-label='mark {_e(who)}'>"
        f"<input type=hidden name=key value='{_e(key)}'>"
        f"<input type=hidden name=a value='{_e(assignment)}'><input type=hidden name=q value='{_e(gid)}'>"
        f"<input type=hidden name=student value='{_e(r.student)}'>"
        f"<input type=hidden name=answer value='{_e(t.get('answer_sha256', ''))}'>"
        f"<input type=hidden name=seen value='{seen}'>"
        + "".join(f"<input type=hidden name={k} value='{_e(v)}'>" for k, v in view.query().items())
        + f"<label for='p-{_e(anchor)}'>Points (of {num(t['max_points'])})</label>"
        f"<input id='p-{_e(anchor)}' name=points type=number min=0 max='{num(t['max_points'])}' step=0.25 "
        f"value='{_e(values.get('points', ''))}'>"
        f"<label for='r-{_e(anchor)}'>Rubric</label><select id='r-{_e(anchor)}' name=rubric>{options}</select>"
        f"<label for='c-{_e(anchor)}'>Comment</label>"
        f"<textarea id='c-{_e(anchor)}' name=comment>{_e(values.get('comment', ''))}</textarea>"
        f"<span></span><button type=submit>{_e(button or 'Save the mark for ' + who)}</button></form>"
    )


def _answer(r, t: dict) -> str:
    """The learner's answer, framed as theirs: nothing in it can pass for the page's own text."""
    return (
        f"<figure class=handed-in><figcaption>Handed in by {_e(_who(r))}, shown as the student wrote it (their "
        f"text, not this page's)</figcaption><div class=answer dir=auto>{learner_html(t.get('answer', ''))}</div>"
        "</figure>"
    )


def _question_head(assignment: str, q: dict, info: dict) -> list[str]:
    parts = [f"<p><a href='/'>All questions</a></p><h1>{_e(assignment)}: {_e(q['exercise'])}</h1>"]
    if info["problem"]:
        parts.append(f"<p class=error>{_e(info['problem'])}</p>")
    return parts


def _question_text(info: dict) -> list[str]:
    parts = []
    if info["prompt"]:
        parts.append(f"<h2>The question</h2><div class=prompt>{_e(info['prompt'])}</div>")
    if info["model"]:
        parts.append(f"<h2>Model answer</h2><div class=model>{_e(info['model'])}</div>")
    if info["rubric"]:
        items = "".join(f"<li><b>{num(x['points'])}</b>: {_e(x.get('text', ''))}</li>" for x in info["rubric"])
        parts.append(f"<h2>Rubric</h2><ul>{items}</ul>")
    return parts


def _latest_ids(book: Gradebook, assignment: str, gid: str) -> dict[str, int]:
    """student -> the id of their answer's latest mark (whichever answer it was given to)."""
    return {m.student: m.id for m in book.marks(assignment) if m.grade_id == gid}


def question_page(
    book: Gradebook,
    assignment: str,
    gid: str,
    grader: Grader,
    message: str = "",
    view: View = View(),
    *,
    column: str = SECTION,
    page_size: int = PAGE_SIZE,
) -> bytes:
    """One page of a question's answers for `grader` (their sections only), as `view` asks."""
    q = questions(book, assignment, column).get((assignment, gid))
    if q is None:
        return _page(
            "Not found",
            f"<p class=error>No question {_e(gid)} in {_e(assignment)}.</p><p><a href='/'>All questions</a></p>",
            grader.name,
        )
    info = question_source(q["solutions_path"], gid)
    parts = _question_head(assignment, q, info)
    if message:
        parts.insert(1, f"<p class=error>{_e(message)}</p>")
    parts += _question_text(info)
    shown = visible(q["answers"], grader.sections, view)
    pages = max(1, -(-len(shown) // page_size))
    view = replace(view, page=min(view.page, pages))
    first = (view.page - 1) * page_size
    window = shown[first : first + page_size]
    waiting = sum(1 for _, t in shown if t["status"] == MANUAL_STATUS)
    parts.append(f"<h2>Answers ({waiting} to mark, {len(shown)} students{_scope(grader, view)})</h2>")
    parts.append(_filters(assignment, gid, q["answers"], grader, view))
    pager = _pager(assignment, gid, view, pages, first, len(window), len(shown))
    parts.append(pager)
    latest = _latest_ids(book, assignment, gid)
    for who, t in window:
        parts.append(_card(assignment, gid, who, t, info["rubric"], grader.key, latest.get(who.student, 0), view))
    parts.append(pager)
    return _page(f"{assignment}: {q['exercise']}", "".join(parts), grader.name)


def _scope(grader: Grader, view: View) -> str:
    """ "; section A; still to mark": what the list is narrowed to."""
    section = view.section or ", ".join(grader.sections)
    parts = ([f"section {section}"] if section else []) + (["still to mark"] if view.todo else [])
    return "".join(f"; {x}" for x in parts)


def _card(assignment: str, gid: str, who: Learner, t: dict, rubric: list[dict], key: str, seen: int, view: View) -> str:
    """One student's answer, its mark and the form that marks it (a card without a form when there is nothing
    to mark)."""
    status = t["status"]
    head = f"<h3 id='{_e(_anchor(who.student))}'>{_e(_who(who))} · <span class=status>{_e(status)}</span></h3>"
    if status not in (MANUAL_STATUS, MARKED):
        why = _e(_plain(t.get("message") or status))
        return f"<div class=card>{head}<p>{why}: 0 points, nothing to mark.</p></div>"
    done = _mark_line(t, t["max_points"]) if status == MARKED else ""
    form = _form(assignment, gid, who, t, rubric, key, seen, view=view)
    card = "card marked" if status == MARKED else "card"
    return f"<div class='{card}'>{head}{_answer(who, t)}{done}{form}</div>"


def _filters(assignment: str, gid: str, answers: list[tuple[Learner, dict]], grader: Grader, view: View) -> str:
    """A form that narrows the list: a section (of those the grader marks) and "still to mark only"."""
    sections = sorted({who.section for who, _ in visible(answers, grader.sections, View()) if who.section})
    options = "<option value=''>every section</option>" if not grader.sections or len(grader.sections) > 1 else ""
    options += "".join(
        f"<option value='{_e(x)}'{' selected' if x.casefold() == view.section.casefold() else ''}>{_e(x)}</option>"
        for x in sections
    )
    pick = f"<label for=section>Section</label> <select id=section name=section>{options}</select> " if sections else ""
    todo = " checked" if view.todo else ""
    return (
        f"<form class=filters method=get action='/question' aria-label='which answers'>"
        f"<input type=hidden name=a value='{_e(assignment)}'><input type=hidden name=q value='{_e(gid)}'>{pick}"
        f"<label><input type=checkbox name=todo value=1{todo}> still to mark only</label> "
        "<button type=submit>Show</button></form>"
    )


def _pager(assignment: str, gid: str, view: View, pages: int, first: int, count: int, total: int) -> str:
    """ "Answers 26-50 of 3000, page 2 of 120 · previous · next"."""

    def link(page: int, text: str) -> str:
        href = "/question?" + urllib.parse.urlencode({"a": assignment, "q": gid, **view.query(page=page)})
        return f"<a href='{_e(href)}' rel={'prev' if page < view.page else 'next'}>{text}</a>"

    shown = f"Answers {first + 1}-{first + count} of {total}" if count else "No answers here"
    links = [link(view.page - 1, "previous page")] if view.page > 1 else []
    links += [link(view.page + 1, "next page")] if view.page < pages else []
    return f"<p class=pages>{shown}, page {view.page} of {pages}" + "".join(f" · {x}" for x in links) + "</p>"


def conflict_page(
    book: Gradebook, form: dict[str, str], grader: Grader, err: StaleMark, *, column: str = SECTION
) -> bytes:
    """What a refused save answers: the answer, the mark on record (who, when) and the mark just tried, and
    the form again, filled in as it was sent and now knowing the mark on record, to save it deliberately."""
    assignment, gid, student = form.get("a", ""), form.get("q", ""), form.get("student", "")
    view = View.read(form)
    q = questions(book, assignment, column).get((assignment, gid))
    found = next(((r, t) for r, t in (q or {}).get("answers", []) if r.student == student), None)
    if found is None:  # the answer itself is gone: nothing left to decide here
        return question_page(book, assignment, gid, grader, str(err), view, column=column)
    key = grader.key
    r, t = found
    info = question_source(q["solutions_path"], gid)
    rubric = info["rubric"]
    try:
        item = rubric[int(form.get("rubric", ""))]
    except (ValueError, IndexError):
        item = None
    tried = {
        "points": form.get("points", "").strip() or (num(item["points"]) if item else "?"),
        "grader": grader.name,
        "rubric": item.get("text", "") if item else "",
        "comment": form.get("comment", "").strip(),
    }
    mine = f"<p class=tried>Your mark, not saved: {_e(tried['points'])} / {num(t['max_points'])}" + (
        ": " + "; ".join(_e(x) for x in (tried["rubric"], tried["comment"]) if x)
        if tried["rubric"] or tried["comment"]
        else ""
    )
    mine += "</p>"
    on_record = err.on_record
    theirs = (
        _mark_line(on_record, t["max_points"], "record")
        if on_record is not None
        else "<p class=record>No mark is on record for this answer now.</p>"
    )
    who = _who(r)
    parts = _question_head(assignment, q, info)
    parts.append(
        f"<p class=error>Not saved: {_e(who)}'s answer was marked by "
        f"{_e(on_record.grader if on_record else 'someone')} since your page was loaded. Both marks are below: "
        "save yours again to replace the one on record, or keep theirs.</p>"
    )
    back = "/question?" + urllib.parse.urlencode({"a": assignment, "q": gid, **view.query()}) + "#" + _anchor(student)
    form_html = _form(
        assignment,
        gid,
        r,
        t,
        rubric,
        key,
        on_record.id if on_record else 0,
        values={"points": form.get("points", ""), "rubric": form.get("rubric", ""), "comment": form.get("comment", "")},
        button=f"Save my mark for {who} instead",
        view=view,
    )
    parts.append(
        f"<div class='card conflict'><h3 id='{_e(_anchor(student))}'>{_e(who)}</h3>{_answer(r, t)}"
        f"<h4>On record</h4>{theirs}<h4>Yours</h4>{mine}{form_html}"
        f"<p><a href='{_e(back)}'>Keep the mark on record, back to the question</a></p></div>"
    )
    parts += _question_text(info)  # below the decision to make, for reference
    return _page(f"Not saved: {assignment}: {q['exercise']}", "".join(parts), grader.name)


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


@dataclass(frozen=True)
class Grader:
    """One person who marks: their name, the token of their address (then of their browser's cookie), and
    the key their pages' forms carry (so that the token itself is never written into a page)."""

    name: str
    token: str
    key: str
    sections: tuple[str, ...] = ()  # the sections whose answers they mark (`--section`); empty: every one


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
        self._send(403, _page("Forbidden", f"<p class=error>{text}</p>"))

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
                self._send(404, _page("Not found", "<p><a href='/'>All questions</a></p>", grader.name))

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
        grader, sent_by = self._signed_in(), self.server.by_key(form.get("key", ""))
        if self.path != "/mark" or grader is None or sent_by is None:
            self._forbidden("A mark must come from a marking page, in a browser that opened a grader's address.")
            return
        if sent_by != grader:  # another grader's address was opened in this browser since the page was loaded
            self._forbidden(
                f"This page was loaded as {_e(sent_by.name)}, but this browser now marks as {_e(grader.name)}: "
                f"nothing was saved. <a href='/'>Reload the pages</a> to mark as {_e(grader.name)}, or open "
                f"{_e(sent_by.name)}'s own address to mark as them."
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
        self._send(303, b"", {"Location": "/question?" + urllib.parse.urlencode(back) + "#" + _anchor(student)})


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
