"""`course export --feedback-zip canvas|moodle`: every student's feedback in the zip their LMS takes back.

Sending 300 feedback files by hand is no way to return work. Canvas and Moodle both take back a zip of
files, one or more per student, and attach each to that student's submission; each matches a file to
its student by the name its own "download all submissions" gave the student's file:

- **Canvas**, *Re-Upload Submissions* (on the assignment's page, or in the gradebook's menu of the
  assignment's column): the first two numbers between underscores in a file's name are the student's
  Canvas user id and the id of the file they handed in, as the download names it,
  `<login>_[late_]<user id>_<file id>_<name>`, and that file must be one of the submission's (Canvas's
  `Assignment#infer_comment_context_from_filename`, in instructure/canvas-lms, app/models/assignment.rb).
  The file becomes a comment on the submission ("See attached file"), shown under the name of the file
  the student handed in. So a student's feedback is a notebook,
  `<login>_<user id>_<file id>_06_attention-feedback.ipynb`, whose one Markdown cell is the feedback:
  what the student downloads under their notebook's name opens in Jupyter as their feedback.
- **Moodle**, *Upload multiple feedback files in a zip* (the assignment's grading actions; the
  assignment needs *Feedback files* turned on): a file is matched to a participant by the first part of
  its path that reads `<full name>_<participant number>_<plugin type>_<plugin>_...`, and kept as a
  feedback file under the rest of its name (`assignfeedback_file_zip_importer::
  is_valid_filename_for_import`, in moodle/moodle, mod/assign/feedback/file/importziplib.php). So a
  student's feedback is `<Full Name>_<participant number>_assignfeedback_file_06_attention-feedback.md`,
  the name and number as the download wrote them. (The participant number is Moodle's for this
  assignment: the zip goes back to the assignment it was downloaded from.)

The names come from what `course unpack` recorded: the zip entry of each student's file (the gradebook's
`unpacked` table). A student whose work did not come from this LMS's download of the assignment
(graded from a folder, unpacked from another LMS, never handed in) has no name the LMS would match, and
is left out: the export says who.
"""

from __future__ import annotations

import json
import os
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from .feedback_file import feedback_markdown
from .gradebook import Gradebook, Row
from .lms_names import CANVAS_FILE, MOODLE_PART

LAYOUTS = ("canvas", "moodle")


@dataclass
class FeedbackZip:
    layout: str
    assignment: str
    files: dict[str, bytes] = field(default_factory=dict)  # entry name -> contents
    left_out: dict[str, str] = field(default_factory=dict)  # student -> why they are not in the zip


def entry_name(entry: str, layout: str, assignment: str) -> str | None:
    """The name under which `layout`'s LMS takes back a student's feedback on `assignment`, from the name its
    download gave the student's file (`entry`); None when `entry` is not named as that LMS names a file."""
    parts = [p for p in entry.replace("\\", "/").split("/") if p]
    if layout == "canvas":
        found = CANVAS_FILE.fullmatch(parts[-1]) if parts else None
        if found is None:
            return None
        prefix = parts[-1][: len(parts[-1]) - len(found["name"])]  # <login>_[late_]<user id>_<file id>_
        return f"{prefix}{assignment}-feedback.ipynb"
    for part in parts:  # Moodle: the participant's folder, or the file itself in a flat download
        found = MOODLE_PART.fullmatch(part)
        if found is not None:
            name = found["name"].lstrip(".~") or "Participant"  # Moodle skips hidden files
            return f"{name}_{found['pid']}_assignfeedback_file_{assignment}-feedback.md"
    return None


def as_notebook(markdown: str) -> str:
    """A notebook whose one cell is `markdown` (what Canvas shows under the name of the student's notebook)."""
    cell = {"cell_type": "markdown", "id": "feedback", "metadata": {}, "source": markdown.splitlines(keepends=True)}
    nb = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def feedback_zip(book: Gradebook, layout: str, assignment: str) -> FeedbackZip:
    """Each student's feedback on `assignment` under the name `layout`'s LMS takes back (see the module)."""
    if layout not in LAYOUTS:
        raise ValueError(f"a feedback zip is for canvas or moodle, not {layout!r}")
    rows = book.rows(assignment=assignment)
    if not rows:
        known = sorted({r.assignment for r in book.rows()})
        raise ValueError(f"the gradebook has no grades for {assignment} (it has: {', '.join(known) or 'none'})")
    made = FeedbackZip(layout, assignment)
    for r in rows:
        why = _left_out(book, r, layout)
        if why:
            made.left_out[r.student] = why
            continue
        name = entry_name(book.unpacked(r.student, assignment)["entry"], layout, assignment)
        text = feedback_markdown(r)
        made.files[name] = (as_notebook(text) if layout == "canvas" else text).encode("utf-8")
    return made


def _left_out(book: Gradebook, r: Row, layout: str) -> str:
    """Why a row's feedback cannot go into `layout`'s zip ("" when it can)."""
    if r.enrolment == "dropped":
        return "dropped"
    record = book.unpacked(r.student, r.assignment)
    if record is None:
        return "never handed in" if r.status == "not submitted" else "not unpacked from an LMS download"
    if entry_name(record["entry"], layout, r.assignment) is None:
        return f"unpacked from a download that is not {layout.capitalize()}'s ({record['entry']})"
    return ""


def write_feedback_zip(book: Gradebook, out: Path, layout: str, assignment: str) -> tuple[Path, FeedbackZip]:
    """`out/feedback-<layout>-<assignment>.zip`, written whole through a temporary file; (its path, what it holds)."""
    made = feedback_zip(book, layout, assignment)
    path = Path(out) / f"feedback-{layout}-{assignment}.zip"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f, zipfile.ZipFile(f, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in sorted(made.files.items()):
                zf.writestr(name, data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path, made
