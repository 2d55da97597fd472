"""Step 1 of grading: which notebook in a submissions folder is which student's work on which assignment.

    SUBMISSIONS_DIR/<student_id>/NN_name.ipynb   ->   Job(student, assignment, the file or why there is none)

Every folder in the submissions folder is a student; which notebook in it is which assignment's follows
one rule (`resolve_notebooks`, which `course unpack` follows too). Every file passed over is a warning
and a note for that student. Files are only ever read, and never through a symbolic link
(`read_submission`). A submission's time belongs to the student and the assignment (`submission_time`).
`in_shard` splits a class into parts, one per job of a job array (`course grade --shard K/N`).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import stat
import unicodedata
from dataclasses import dataclass, field
from datetime import timezone
from pathlib import Path

from course_lib.runner.assignment import Assignment
from course_lib.runner.notebook import exact_filenames
from course_lib.runner.process import Limits
from course_lib.runner.text import inert

from .gradebook import Gradebook, parse_time
from .roster import Roster

MAX_NOTEBOOK_BYTES = 20 * 2**20  # a notebook once its outputs are left aside (`course grade --max-size`, in MB)
MAX_SUBMISSION_BYTES = 1024 * 2**20  # the most of a file the grader reads at all, outputs included
LINK_NOTE = "is a symbolic link; the grader does not follow links, so it was not graded"
IGNORED_FOLDERS = ("__MACOSX",)  # macOS's resource forks in a zip made on a Mac
NOT_STUDENTS = ("__MACOSX", ".ipynb_checkpoints", ".git", ".Trash", ".Trashes", ".Spotlight-V100", ".fseventsd")


@dataclass
class Job:
    """One (student, assignment) to grade: the file found for it, or why there is none."""

    student: str
    solution: Path
    submission: Path | None  # the notebook chosen (under the submissions folder), None if none
    status: str = "not submitted"  # the row's status when submission is None
    why: str = ""  # the row's message when submission is None
    notes: list[str] = field(default_factory=list)  # every decision about this student's files, told in the feedback
    max_bytes: int = MAX_NOTEBOOK_BYTES  # the most the notebook may weigh without its outputs (--max-size)
    hide_hidden: bool = False  # --hide-hidden-inputs: a failed hidden test is named, not quoted
    limits: Limits | None = None  # its set's time budgets (see `Limits.from_notebook`), or the teacher's
    assignment: Assignment | None = None  # the solution notebook, read once for the whole batch


def loose_stem(name: str) -> str:
    """A notebook name without what copies, downloads and resubmissions add ("06_Attention (1)",
    "Copy of 06_attention", "06_attention-Copy1", "06-attention", "06_attention_final", "06_attention v2")
    and the exercise notebook's suffix ("06_attention_exercises"), and without case and punctuation.
    `course unpack` and `course grade` both match names with it."""
    stem = name.casefold().strip()
    stem = re.sub(r"^(copy of |kopie von |copie de )", "", stem)
    previous = None
    while previous != stem:
        previous = stem
        stem = re.sub(
            r"(\s*\(\d+\)|[-_ ]copy\d*|[-_ ]checkpoint|[-_ ]\d+"
            r"|[-_ ](final|v\d+|new|fixed|corrected|revised|exercises?))$",
            "",
            stem,
        ).strip()
    return re.sub(r"[\W_]+", "", stem)


def _hidden(name: str) -> bool:
    return name.startswith(".") or name in IGNORED_FOLDERS


def notebooks_in(folder: Path, depth: int = 3) -> tuple[list[Path], list[str]]:
    """The notebooks in a student's folder, up to `depth` folders down, never through a link; and
    what was passed over (hidden entries and __MACOSX holding notebooks, linked notebooks)."""
    found, passed = [], []
    stack = [(folder, 0)]
    while stack:
        here, level = stack.pop()
        try:
            with os.scandir(here) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            rel = Path(e.path).relative_to(folder).as_posix()
            if _hidden(e.name):
                if e.is_dir(follow_symlinks=False) or e.name.endswith(".ipynb"):
                    inner = (
                        notebooks_in(Path(e.path), depth - level - 1)[0]
                        if e.is_dir(follow_symlinks=False) and level < depth
                        else []
                    )
                    if inner or e.name.endswith(".ipynb"):
                        passed.append(f"`{rel}` (hidden or macOS metadata: ignored)")
                continue
            if e.is_symlink():
                if e.name.endswith(".ipynb"):
                    passed.append(f"`{rel}` ({LINK_NOTE.removeprefix('is ')})")
                continue
            if e.is_dir(follow_symlinks=False):
                if level < depth:
                    stack.append((Path(e.path), level + 1))
            elif e.name.endswith(".ipynb") and e.is_file(follow_symlinks=False):
                found.append(Path(e.path))
    return sorted(found), passed


def _built_from(path: Path, root: Path) -> str | None:
    raw, _, _ = read_submission(path, root)
    try:
        meta = json.loads(raw).get("metadata", {}).get("course_lib", {}) if raw else {}
        return Path(str(meta.get("built_from", ""))).stem or None if isinstance(meta, dict) else None
    except (ValueError, AttributeError, TypeError):
        return None


def resolve_notebooks(
    folder: Path, known: list[str], root: Path
) -> tuple[dict[str, tuple[Path, list[str]]], list[str]]:
    """Which notebook in a student's folder is each assignment's, by one rule (`course unpack` follows
    the same one):

    1. the candidates are the notebooks named like the assignment once case, punctuation and what copies,
       downloads and resubmissions add are ignored, anywhere in the folder: `06_attention.ipynb`,
       `06_Attention (1).ipynb`, `Copy of 06_attention.ipynb`, `06_attention_final.ipynb`,
       `work/06_attention.ipynb`;
    2. if there are none, the notebooks whose metadata says they were built from that assignment
       (`course build` records it: a renamed file);
    3. of several candidates, the most recently changed counts (the exact name at the top of the
       folder on a tie); the others are named in the feedback.

    Hidden files and folders, `__MACOSX` and links are never graded. Returns assignment -> (file,
    notes), and notes about notebooks that matched nothing."""
    found, passed = notebooks_in(folder)
    chosen: dict[str, tuple[Path, list[str]]] = {}
    used: set[Path] = set()
    loose = {a: loose_stem(a) for a in known}

    def rel(p: Path) -> str:
        return p.relative_to(folder).as_posix()

    exact = {a: exact_filenames(a) for a in known}  # 06_attention.ipynb, 06_attention_exercises.ipynb
    for a in known:  # an exact name as a symbolic link: graded as what it is (a link, so unreadable), never followed
        top = next((folder / n for n in exact[a] if (folder / n).is_symlink()), None)
        if top is not None:
            chosen[a] = (top, [])
            used.add(top)
    for rule in ("name", "metadata"):
        for a in known:
            if a in chosen:
                continue
            if rule == "name":
                cands = [f for f in found if f not in used and loose_stem(f.stem) == loose[a]]
            else:
                cands = [
                    f
                    for f in found
                    if f not in used
                    and not any(loose_stem(f.stem) == v for v in loose.values())
                    and _built_from(f, root) == a
                ]
            if not cands:
                continue
            cands.sort(key=lambda f: (-f.stat().st_mtime, not (f.parent == folder and f.name in exact[a]), rel(f)))
            best = cands[0]
            why = (
                "its name differs"
                if rule == "name"
                else "its name differs, but it was made from this assignment's notebook"
            )
            if rule == "name" and best.name in exact[a] and best.parent != folder:
                why = "it is in a subfolder"
            plain = (best.parent == folder and best.name in exact[a]) or rel(best) in {
                f"{a}/{n}" for n in exact[a]
            }  # nbgrader: <student>/<a>/<a>.ipynb
            notes = (
                []
                if plain
                else [f"Graded `{rel(best)}` as {a} ({why}; expected `{a}.ipynb` at the top of your folder)."]
            )
            if len(cands) > 1:
                notes.append(
                    f"Several notebooks could be {a}: graded the most recently changed, `{rel(best)}`; "
                    "not graded: " + ", ".join(f"`{rel(f)}`" for f in cands[1:]) + "."
                )
            chosen[a] = (best, notes)
            used.update(cands)
    extra = [f"`{rel(f)}` matches no assignment; it was not graded." for f in found if f not in used]
    if passed:
        extra.append("Not graded: " + ", ".join(passed) + ".")
    return chosen, extra


def folder_id(name: str) -> str:
    """The id a folder's name gives: in NFC form, and inert (see `course_lib.runner.text`): bytes that are not
    UTF-8 written as escapes (`\\xff`), control and bidirectional characters too, so that an id can be
    stored, exported and printed whatever the folder is called."""
    readable = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return inert(unicodedata.normalize("NFC", readable), 200)


def in_shard(sid: str, k: int, n: int) -> bool:
    """Whether student `sid` is in part `k` of `n` (1 <= k <= n) of a class graded in parts (`course grade
    --shard K/N`, one part per job of a job array): by a hash of the id as `student_key` reads it, so the
    same on every machine and in every run, and every student in exactly one part."""
    digest = hashlib.sha256(student_key(sid).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % n == k - 1


def student_key(sid: str) -> str:
    """What makes two ids the same student: Unicode form (NFC/NFD "José") and case ("Ada"/"ada") do not count."""
    return unicodedata.normalize("NFC", sid).casefold()


def discover(
    submissions: Path,
    solutions: Path,
    assignments: list[str] | None,
    roster: Roster | None = None,
    students: list[str] | None = None,
    known_ids: list[str] = (),
) -> tuple[list[Job], list[str]]:
    """The jobs to grade, and warnings about everything passed over.

    Every folder in `submissions` is a student. Ids are matched ignoring case and Unicode form: a
    folder takes the spelling of an id the gradebook (`known_ids`) or the roster already has, else
    its own name in NFC form; two folders that are the same id this way are one student (the first
    graded, a warning and a note for the other). Without a roster, a hidden folder (a leading dot) is
    a student whose row says it was not graded and why (folders that are never students, such as
    `__MACOSX` and `.ipynb_checkpoints`, are passed over with a warning). With a roster, a folder is
    the student whose id it is; a folder named otherwise (a name, an email) is matched to the roster
    (see Roster.find) with a warning, and one that matches nobody is not graded, with a warning. Rows
    for "not submitted" are made only for the assignments named in `assignments`: then every student
    (every active roster student, with a roster) gets a row for each. A dropped student (`course
    roster drop`) is not graded; an LMS's test student is graded when it hands something in, and
    never "not submitted". Links are reported, never followed.
    """
    known = {p.stem: p for p in sorted(solutions.glob("*.ipynb"))}
    if assignments:
        unknown = [a for a in assignments if Path(a).stem not in known]
        if unknown:
            raise ValueError(
                f"no solution notebook for {', '.join(unknown)} in {solutions} (it has: {', '.join(known) or 'none'})"
            )
    warnings: list[str] = []
    spelling = {student_key(k): k for k in known_ids}
    if roster is not None:
        spelling.update({student_key(s.id): s.id for s in roster.students})
    found = _student_folders(submissions, roster, spelling, warnings)
    if students:
        everyone = {student_key(s) for s in found.ids()}
        everyone |= {student_key(s.id) for s in roster.students} if roster else set()
        missing = [s for s in students if student_key(s) not in everyone]
        if missing:
            raise ValueError(
                f"no folder in {submissions} for {', '.join(missing)}" + (" and not on the roster" if roster else "")
            )
    if not found.ids() and roster is None:
        raise ValueError(f"no student folders in {submissions} (expected {submissions}/<student_id>/NN_name.ipynb)")
    resolved = {
        sid: resolve_notebooks(Path(e.path), list(known), submissions)
        for sid, e in [*found.folders.items(), *found.hidden.items()]
    }
    chosen = (
        [Path(a).stem for a in assignments] if assignments else sorted({a for f, _ in resolved.values() for a in f})
    )
    expected = {s.id for s in roster.active} if roster and assignments else set()
    wanted = {student_key(s) for s in students} if students else None
    jobs: list[Job] = []
    for sid in sorted(set(found.ids()) | expected):
        if wanted is None or student_key(sid) in wanted:
            jobs += _jobs_of(sid, found, resolved.get(sid, ({}, [])), known, chosen, bool(assignments), warnings)
    return sorted(jobs, key=lambda j: (j.student, j.solution.stem)), warnings


@dataclass
class _Folders:
    """A submissions folder's student folders, by student id."""

    folders: dict[str, os.DirEntry] = field(default_factory=dict)  # graded
    links: dict[str, os.DirEntry] = field(default_factory=dict)  # a row that says a link was not followed
    hidden: dict[str, os.DirEntry] = field(default_factory=dict)  # a row that says it was not graded
    same: dict[str, list[str]] = field(default_factory=dict)  # student id -> the other folders that are that id

    def ids(self) -> list[str]:
        return [*self.folders, *self.links, *self.hidden]

    def first(self, sid: str) -> os.DirEntry | None:
        return self.folders.get(sid) or self.links.get(sid) or self.hidden.get(sid)


def _student_folders(
    submissions: Path, roster: Roster | None, spelling: dict[str, str], warnings: list[str]
) -> _Folders:
    """Each folder of `submissions` as the student it is (see `discover`), with a warning for each passed over."""

    def preferred(e: os.DirEntry) -> tuple:
        """Of folders that are one id, the one named as the id is known, else in NFC form, comes first."""
        nfc = folder_id(e.name)
        return spelling.get(student_key(nfc), nfc) != e.name, nfc != e.name, e.name

    with os.scandir(submissions) as entries:
        listed = sorted(entries, key=preferred)
    found = _Folders()
    for e in listed:
        if not e.is_symlink() and not e.is_dir(follow_symlinks=False):
            warnings.append(f"{e.name}: a file, not a student folder; not graded")
            continue
        if e.name in NOT_STUDENTS and roster is None:  # with a roster, a listed id is graded whatever its name
            warnings.append(
                f"{e.name}: a hidden folder or macOS metadata, not a student; not graded "
                "(with a roster, a listed id is graded whatever its name)"
            )
            continue
        name = folder_id(e.name)
        sid, how = spelling.get(student_key(name), name), ""
        if roster is not None:
            student, how = roster.find(sid)
            if student is None:
                warnings.append(f"{e.name}: not on the roster{' (' + how + ')' if how else ''}; not graded")
                continue
            sid = student.id
            if how:
                warnings.append(f"{e.name}: taken as {sid} ({student.name or 'no name'}), matched by {how}")
            if student.status == "dropped":
                warnings.append(f"{e.name}: {student.label} has dropped the course (course roster drop); not graded")
                continue
        first = found.first(sid)
        if first is not None:
            if roster is not None and how:  # matched to the roster by a name or an email, not by the id's spelling
                warnings.append(f"{e.name}: {sid} already has the folder {first.name}; not graded")
            else:
                warnings.append(
                    f"{e.name}: the same student as the folder {first.name} (ids are matched ignoring "
                    f"case and Unicode form: both are {sid}); only {first.name} was graded"
                )
            found.same.setdefault(sid, []).append(e.name)
            continue
        spelling.setdefault(student_key(sid), sid)
        if e.is_symlink():
            warnings.append(f"{e.name}: {LINK_NOTE}")
            found.links[sid] = e
        elif _hidden(e.name) and roster is None:
            warnings.append(
                f"{e.name}: a hidden folder (its name starts with a dot); it has a row, but was not "
                "graded (rename it, or give a roster that lists this id)"
            )
            found.hidden[sid] = e
        else:
            found.folders[sid] = e
    return found


def _jobs_of(
    sid: str,
    found: _Folders,
    resolved: tuple[dict[str, tuple[Path, list[str]]], list[str]],
    known: dict[str, Path],
    chosen: list[str],
    named: bool,
    warnings: list[str],
) -> list[Job]:
    """One student's jobs, one for each assignment in `chosen` they handed in (every one, when the
    assignments were `named`: a "not submitted" row for the rest)."""
    notebooks, extra = resolved
    folder = found.folders.get(sid) or found.hidden.get(sid)
    graded = sid in found.folders
    for w in extra if graded else []:
        warnings.append(f"{folder.name}: {w}")
    if graded and not notebooks:
        warnings.append(f"{folder.name}: no notebook for any assignment")
    others = [
        f"The folder `{n}` is the same student id as `{(folder or found.links[sid]).name}` (ids are matched "
        "ignoring case and Unicode form); it was not graded."
        for n in found.same.get(sid, [])
    ]
    jobs = []
    for a in chosen:
        job = Job(sid, known[a], None, notes=others + list(extra if graded else []))
        if sid in found.links:
            job.status, job.why = "unreadable", f"The folder {found.links[sid].name} {LINK_NOTE}."
        elif sid in found.hidden:
            if a not in notebooks and not named:
                continue
            job.status, job.why = (
                "unreadable",
                f"The folder {found.hidden[sid].name} is hidden (its name starts with a dot), so it was not "
                "graded; rename it to grade it.",
            )
        elif a in notebooks:
            job.submission, decisions = notebooks[a]
            job.notes = decisions + job.notes
            warnings.extend(f"{folder.name}: {d}" for d in decisions)
        elif not named:
            continue  # not named: no "not submitted" row for an assignment this student never handed in
        else:
            job.why = (
                f"No {a}.ipynb was submitted."
                if graded
                else f"No folder for {sid} in the submissions; nothing was submitted."
            )
        jobs.append(job)
    return jobs


def read_submission(path: Path, root: Path | None = None) -> tuple[bytes | None, str, str]:
    """The submitted file's bytes, or (None, status, why not). Reads only a regular file and never
    through a symbolic link: not the file, not its folder, and with `root` (the submissions folder)
    no folder between `root` and the file either."""
    parts = [path.name] if root is None else list(path.relative_to(root).parts)
    try:
        folder = os.open(path.parent if root is None else root, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as err:
        if err.errno in (errno.ELOOP, errno.ENOTDIR):
            return None, "unreadable", f"The folder {path.parent.name} {LINK_NOTE}."
        return None, "not submitted", f"No {path.name} was submitted."
    try:
        for part in parts[:-1]:
            try:
                inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=folder)
            except OSError as err:
                if err.errno in (errno.ELOOP, errno.ENOTDIR):
                    return None, "unreadable", f"The folder {part} {LINK_NOTE}."
                return None, "not submitted", f"No {path.name} was submitted."
            os.close(folder)
            folder = inner
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
        except OSError as err:
            if err.errno == errno.ENOENT:
                return None, "not submitted", f"No {path.name} was submitted."
            if err.errno == errno.ELOOP:
                return None, "unreadable", f"The submitted {path.name} {LINK_NOTE}."
            return None, "unreadable", f"The submission could not be read ({err.strerror})."
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode):
                return None, "unreadable", f"The submitted {path.name} is not a regular file; it was not graded."
            if info.st_size > MAX_SUBMISSION_BYTES:
                return (
                    None,
                    "unreadable",
                    (
                        f"The submitted file is {_mb(info.st_size)}, larger than the "
                        f"{_mb(MAX_SUBMISSION_BYTES)} the grader reads; it was not graded."
                    ),
                )
            return f.read(MAX_SUBMISSION_BYTES + 1), "", ""
    finally:
        os.close(folder)


def _mb(n: float) -> str:
    return f"{n / 2**20:.1f} MB"


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def submission_time(job: Job, root: Path, book: Gradebook | None = None) -> tuple[str | None, str | None, str | None]:
    """(time, where it came from, file content hash) of a job's file. A time belongs to (student, assignment),
    never to a student's folder, and comes from the first of:

    1. what `course unpack` recorded for this assignment's file (the same hash): the LMS's time, or none;
    2. the time recorded when this same file was graded before (a regrade keeps it);
    3. the assignment's own time file: `<assignment>.timestamp.txt` beside the notebook, or nbgrader's
       `<student>/<assignment>/timestamp.txt` (nbgrader's format: its exchange and `course unpack` write them);
    4. a `timestamp.txt` at the top of the student's folder, only where `course unpack` never wrote that
       student's folder (a folder of one assignment made by hand or by nbgrader's tools).

    None when there is none: a submission without a time is never penalised. A file's modification time is
    never used: copying a folder resets it, and every student would look late."""
    if job.submission is None:
        return None, None, None
    raw, _, _ = read_submission(job.submission, root)
    digest = hashlib.sha256(raw).hexdigest() if raw is not None else None
    assignment, top = job.solution.stem, root / job.submission.relative_to(root).parts[0]
    if book is not None and digest is not None:
        found = book.unpacked(job.student, assignment)
        if found and found["sha256"] == digest and found["submitted_at"] is not None:  # "": the LMS gave no time
            return found["submitted_at"] or None, "course unpack" if found["submitted_at"] else None, digest
        when, source = book.graded_time(job.student, assignment, digest)
        if when:
            return when, source, digest
    candidates = [job.submission.with_name(f"{assignment}.timestamp.txt")]
    if job.submission.parent != top:
        candidates.append(job.submission.parent / "timestamp.txt")
    elif book is None or job.student not in book.unpacked_students():
        candidates.append(top / "timestamp.txt")
    for path in candidates:
        stamp = read_submission(path, root)[0]
        if not stamp:
            continue
        try:
            when = parse_time(stamp.decode("utf-8", "replace").splitlines()[0], tz=timezone.utc)
            return when.astimezone(timezone.utc).isoformat(timespec="seconds"), path.name, digest
        except (ValueError, IndexError):
            return None, f"unreadable {path.name}", digest
    return None, None, digest
