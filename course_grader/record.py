"""Step 4 of grading: each result into the gradebook, as soon as it is known.

`record` commits one submission's result (the version it replaces goes into the gradebook's history first),
with its file's hash, its submission time (which belongs to the student and the assignment, see
`discover.submission_time`) and what `course unpack` decided about that file; an interrupted batch keeps
everything recorded so far. `check_provenance` refuses to mix grades from two versions of an assignment's
solutions unless the teacher says so.
"""

from __future__ import annotations

from pathlib import Path

from .discover import Job, submission_time
from .gradebook import Gradebook


def record(
    book: Gradebook,
    res,
    job: Job,
    submissions: Path,
    hashes: dict[str, tuple[Path, str]],
    run: int | None,
    warnings: list[str],
) -> str | None:
    """Commit one result (a `grade.SubmissionResult`) now; returns the hash of the file it graded."""
    submitted_at, source_of_time, digest = submission_time(job, submissions, book)
    if source_of_time and source_of_time.startswith("unreadable "):
        name = source_of_time.removeprefix("unreadable ")
        res.notes.append(f"Your folder's {name} could not be read; no submission time was recorded.")
        source_of_time = None
    if digest is None and book.has_file_graded(res.student_id, res.assignment):
        warnings.append(f"{res.student_id}/{res.assignment}: nothing submitted now; the earlier graded attempt is kept")
    _unpacked_notes(book, res, digest)
    path, sol_hash = hashes[res.assignment]
    book.record(
        res,
        file=job.submission.relative_to(submissions).as_posix() if job.submission else None,
        submission_sha256=digest,
        submitted_at=submitted_at,
        submitted_from=source_of_time,
        solutions_path=str(path),
        solutions_sha256=sol_hash,
        run=run,
    )
    return digest


def _unpacked_notes(book: Gradebook, res, digest: str | None) -> None:
    """What `course unpack` decided about this file (renamed, skipped `_final`, late by the LMS), into
    the row's notes, when the file graded is the one it wrote."""
    found = book.unpacked(res.student_id, res.assignment)
    if found and found["sha256"] and found["sha256"] == digest:
        res.notes[:0] = [n for n in found["notes"] if n not in res.notes]


def check_provenance(book: Gradebook, hashes: dict[str, tuple[Path, str]], allow_new: bool) -> list[str]:
    """Refuse to mix grades from two versions of an assignment's solutions unless the teacher says so.
    Returns lines for the log (what this run does); what the gradebook holds afterwards is said by
    `Gradebook.state_warnings`, once the run has finished."""
    said = []
    for assignment, (path, digest) in hashes.items():
        earlier = {h: p for p, h in book.solutions_used(assignment)}
        if not earlier or set(earlier) == {digest}:
            continue
        before = ", ".join(f"{p} (sha256 {h[:12]})" for h, p in earlier.items())
        if not allow_new:
            raise ValueError(
                f"{assignment} was graded before with {before}; this run would use {path} (sha256 {digest[:12]}).\n"
                f"If you forgot --solutions, pass the folder used before. If you changed the solutions on purpose, "
                f"see what would change with --dry-run, then add --new-solutions (with --reason, which the students "
                f"read) and regrade the whole class, so that every grade comes from the same version."
            )
        said.append(
            f"{assignment}: grading with new solutions {path} (sha256 {digest[:12]}); earlier grades came from {before}"
        )
    return said
