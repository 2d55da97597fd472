"""What `course mark`'s pages show, as HTML: the questions (`index_page`), one question's answers a page at a
time (`question_page`), and the answer to a refused save (`conflict_page`).

Who sees what: a question's answers in roster order (`questions`), a grader's sections only, one page of them
(`View`, `visible`). Every text a learner (or an LMS) wrote is shown inert and escaped (`learner_html`), framed as
the student's; a page allows no scripts and loads nothing from elsewhere (`CSP`: its styles are inline).
The server that sends these pages and saves the marks is `marking`.
"""

from __future__ import annotations

import html
import re
import urllib.parse
from dataclasses import dataclass, replace

from course_lib.runner.feedback import MANUAL_STATUS, MARKED, num
from course_lib.runner.notebook import NotebookError, grade_id, read_notebook, source
from course_lib.runner.text import inert

from .gradebook import Gradebook, Mark, StaleMark
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


@dataclass(frozen=True)
class Grader:
    """One person who marks: their name, the token of their address (then of their browser's cookie), and
    the key their pages' forms carry (so that the token itself is never written into a page)."""

    name: str
    token: str
    key: str
    sections: tuple[str, ...] = ()  # the sections whose answers they mark (`--section`); empty: every one


# --- the HTML ---------------------------------------------------------------------------------------


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


def html_page(title: str, body: str, grader: str = "") -> bytes:
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
        return html_page("Marking", body, grader)
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
    return html_page("Marking", body, grader)


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


def anchor_of(student: str) -> str:
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
    who, anchor = _who(r), anchor_of(r.student)
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
        return html_page(
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
    return html_page(f"{assignment}: {q['exercise']}", "".join(parts), grader.name)


def _scope(grader: Grader, view: View) -> str:
    """ "; section A; still to mark": what the list is narrowed to."""
    section = view.section or ", ".join(grader.sections)
    parts = ([f"section {section}"] if section else []) + (["still to mark"] if view.todo else [])
    return "".join(f"; {x}" for x in parts)


def _card(assignment: str, gid: str, who: Learner, t: dict, rubric: list[dict], key: str, seen: int, view: View) -> str:
    """One student's answer, its mark and the form that marks it (a card without a form when there is nothing
    to mark)."""
    status = t["status"]
    head = f"<h3 id='{_e(anchor_of(who.student))}'>{_e(_who(who))} · <span class=status>{_e(status)}</span></h3>"
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
    back = "/question?" + urllib.parse.urlencode({"a": assignment, "q": gid, **view.query()}) + "#" + anchor_of(student)
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
        f"<div class='card conflict'><h3 id='{_e(anchor_of(student))}'>{_e(who)}</h3>{_answer(r, t)}"
        f"<h4>On record</h4>{theirs}<h4>Yours</h4>{mine}{form_html}"
        f"<p><a href='{_e(back)}'>Keep the mark on record, back to the question</a></p></div>"
    )
    parts += _question_text(info)  # below the decision to make, for reference
    return html_page(f"Not saved: {assignment}: {q['exercise']}", "".join(parts), grader.name)
