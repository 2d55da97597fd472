"""`course unpack`: an LMS's "download all submissions" zip  ->  SUBMISSIONS_DIR/<student_id>/NN_name.ipynb

A teacher downloads every submission of one assignment as one zip; `course grade` wants one folder
per student holding the notebook under the assignment's name. `unpack` reads the zip (never
trusting it), finds each student's notebook, maps the student to the roster's id, and writes

    dest/<student_id>/<assignment>.ipynb     the newest notebook the student handed in
    dest/<student_id>/<assignment>.timestamp.txt
                                             its time, in nbgrader's format: 2026-11-23 14:03:07.000000 UTC
                                             (for Canvas only from its submissions API: `canvas_times`)

Each assignment's time has a file of its own (and a record in the gradebook, `course unpack` keeps it with
the file's hash), so unpacking week 13 into the same student folders leaves week 2's times as they were.

or, with `output_layout="nbgrader"` (`course unpack --output-layout nbgrader --to submitted`), nbgrader's
own layout, `dest/<student_id>/<assignment>/<assignment>.ipynb` with `timestamp.txt` beside it, which
`nbgrader autograde` reads as it is (and `course grade` too).

What it decided about each student's files (renamed, several notebooks, files that are not notebooks,
a notebook too large, Canvas's late flag) is in the report (`decisions`, `skipped`, `late`), which
`course unpack` keeps in the gradebook: the notes reach grades.json and the student's feedback when
`course grade` grades the file written, and a notebook not written gets a row with its reason.

The steps, one function each: the zip's names read as the layout's entries (`lms_names.read_entries`:
how Canvas, Moodle and a plain zip name their files), each entry matched to a student
(`lms_students.who_is_who`), each student's notebook chosen (`_plan`), the limits checked
(`_within_limits`) and the targets (`_targets`), then every file written (`_write`).

Files: of a student's notebooks, those named like the assignment once case, punctuation and what
copies and resubmissions add are ignored (`-1`, ` (1)`, `Copy of`, `_final`: `discover.loose_stem`, the
rule `course grade` follows too) are the candidates, else all of them; the newest (Canvas: the
upload order; otherwise the zip time, then the resubmission number) is written, and the student is
told which one was graded and which were not. Files that are not notebooks are skipped with one warning per
student; `__MACOSX/`, `.DS_Store`, `Thumbs.db` and every hidden file or folder (`.ipynb_checkpoints/`)
with one summary warning.

Safety (the zip is untrusted): nothing is written by an entry's name, only to
`dest/<id>/<assignment>.ipynb` and `dest/<id>/<assignment>.timestamp.txt`, with ids checked as single safe folder
names; entries with absolute names, `..`, or that are symbolic links are skipped with a warning;
declared sizes are checked against `read_limit` (per notebook: one over it is not written, and the
student's row says why) and `max_total_bytes` (all of them: a zip bomb stops everything) before
anything is written, and the bytes read are counted too; a notebook larger than `max_bytes` is
written only if it fits once its outputs are left aside (the grader reads only its answer cells);
ids that would share a folder (also on a file system that ignores case) stop the unpacking with an
error; an existing notebook is kept unless
`overwrite=True`; every file is written to a temporary name first, and only when every notebook has
been read are they renamed into place, so a failed unpacking leaves `dest` as it was.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import struct
import tempfile
import zipfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from course_lib.runner.notebook import exact_filenames

from .lms_names import Entry, UnpackError, read_entries, resubmission
from .lms_students import safe_id as safe_id  # one of this module's public names
from .lms_students import who_is_who
from .roster import Roster

MB = 1024 * 1024
MAX_NOTEBOOK_BYTES = 20 * MB  # one notebook without its outputs (`--max-size`; figures can make a notebook 30 MB)
READ_LIMIT = 1024 * MB  # one notebook as handed in: the most that is read at all (as `course grade`)
MAX_TOTAL_BYTES = 4 * 1024 * MB  # every notebook written, uncompressed
LAYOUTS = ("auto", "canvas", "moodle", "plain")
ASSIGNMENT = re.compile(r"\d{2}_[A-Za-z0-9][A-Za-z0-9_-]*")
TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"  # nbgrader's timestamp.txt


@dataclass
class UnpackReport:
    layout: str  # "canvas", "moodle" or "plain": the layout read
    detected: bool  # True when `layout="auto"` chose it
    assignment: str  # the NN_name every notebook was written as
    dest: Path  # the submissions folder written to
    students: dict[str, str] = field(default_factory=dict)  # id -> the zip entry written as its notebook
    kept: dict[str, str] = field(default_factory=dict)  # id -> the entry NOT written: its notebook was there
    times: dict[str, str] = field(default_factory=dict)  # id -> the time written to its time file (nbgrader's format)
    when: dict[str, str] = field(default_factory=dict)  # id -> the same time in ISO 8601, UTC (the gradebook's)
    late: set[str] = field(default_factory=set)  # ids whose submission Canvas marked late
    warnings: list[str] = field(default_factory=list)  # each names the zip entry it is about
    decisions: dict[str, list[str]] = field(default_factory=dict)  # id -> what the student is told (feedback)
    skipped: dict[str, str] = field(default_factory=dict)  # id -> why no notebook was written (the row's reason)
    sha256: dict[str, str] = field(default_factory=dict)  # id -> the hash of the notebook written
    entries: dict[str, str] = field(default_factory=dict)  # id -> the zip entry chosen (written or not)
    labels: dict[str, str] = field(default_factory=dict)  # id -> "Zoë Müller (zm42)" for messages
    output: str = "course"  # course | nbgrader: the folders written
    mapped: dict[str, tuple[str, str]] = field(default_factory=dict)  # LMS key -> (student, mapped as) by --map

    def label(self, sid: str) -> str:
        return self.labels.get(sid, sid)

    def summary(self) -> str:
        how = "detected" if self.detected else "as asked"
        where = (
            f"{self.dest}/<id>/{self.assignment}/{self.assignment}.ipynb (nbgrader's layout)"
            if self.output == "nbgrader"
            else f"{self.dest}/<id>/{self.assignment}.ipynb"
        )
        lines = [
            f"Read the zip as a {self.layout} download ({how}); {len(self.students)} notebook(s) written to {where}"
        ]
        if self.kept:
            lines.append(
                f"Kept {len(self.kept)} existing notebook(s) (overwrite to replace them): "
                + ", ".join(self.label(s) for s in sorted(self.kept))
            )
        if self.skipped:
            lines.append(
                f"Not written ({len(self.skipped)}; their rows will say why): "
                + "; ".join(f"{self.label(s)}: {why}" for s, why in sorted(self.skipped.items()))
            )
        if self.late:
            lines.append(f"Marked late by Canvas: {', '.join(self.label(s) for s in sorted(self.late))}")
        if self.warnings:
            lines.append(f"{len(self.warnings)} warning(s):")
            lines += [f"  - {w}" for w in self.warnings]
        return "\n".join(lines)


@dataclass(frozen=True)
class UnpackOptions:
    """How `unpack` reads a zip and what it writes: `course unpack`'s options (see `unpack`)."""

    assignment: str  # the NN_name every notebook is written as
    roster: Roster | None = None  # the class, to match each entry to a student id
    layout: str = "auto"  # auto | canvas | moodle | plain: how the zip is laid out
    tz: dt.tzinfo | str | None = None  # the zone of the zip's times (None: this machine's)
    overwrite: bool = False  # replace notebooks already unpacked
    max_bytes: int = MAX_NOTEBOOK_BYTES  # one notebook without its outputs
    read_limit: int = READ_LIMIT  # one notebook as handed in: the most read at all
    max_total_bytes: int = MAX_TOTAL_BYTES  # every notebook written, uncompressed
    output_layout: str = "course"  # course: dest/<id>/A.ipynb; nbgrader: dest/<id>/A/A.ipynb
    canvas_times: dict[str, dt.datetime] | None = None  # Canvas user id -> submission time (`read_canvas_times`)
    lms_map: dict[str, dict[str, str]] | None = None  # layout ("" for any) -> {LMS key or id -> student id}


def _check_assignment(assignment: str) -> str:
    name = assignment[:-6] if assignment.endswith(".ipynb") else assignment
    if not ASSIGNMENT.fullmatch(name or ""):
        raise UnpackError(
            f"the assignment must be named like 06_attention (two digits, '_', a name of letters, "
            f"digits, '_' or '-'), as its notebook in solutions/ is; got {assignment!r}"
        )
    return name


# --- times ----------------------------------------------------------------------------------------


def _zone(tz: dt.tzinfo | str | None) -> dt.tzinfo | None:
    if tz is None or isinstance(tz, dt.tzinfo):
        return tz
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise UnpackError(f"unknown time zone {tz!r}; expected an IANA name such as Europe/Berlin or UTC") from err


def _extended_time(info: zipfile.ZipInfo) -> float | None:
    """The UTC modification time from the "extended timestamp" extra field (0x5455) that Info-ZIP
    and macOS write, when present: more precise than date_time and free of time zones."""
    extra, i = info.extra, 0
    while i + 4 <= len(extra):
        tag, size = struct.unpack("<HH", extra[i : i + 4])
        body = extra[i + 4 : i + 4 + size]
        if tag == 0x5455 and len(body) >= 5 and body[0] & 1:
            return float(struct.unpack("<I", body[1:5])[0])
        i += 4 + size
    return None


def _time(info: zipfile.ZipInfo, zone: dt.tzinfo | None) -> dt.datetime:
    """The entry's time in UTC; zip's own date_time is local time without a zone (read in `zone`,
    by default this machine's)."""
    exact = _extended_time(info)
    if exact is not None:
        return dt.datetime.fromtimestamp(exact, dt.timezone.utc)
    local = dt.datetime(*info.date_time)
    aware = local.replace(tzinfo=zone) if zone is not None else local.astimezone()
    return aware.astimezone(dt.timezone.utc)


# --- writing --------------------------------------------------------------------------------------


def _copy_capped(zf: zipfile.ZipFile, entry: Entry, folder: Path, limit: int, budget: list[int]) -> Path:
    """The entry's bytes in a new temporary file in `folder`, stopping at `limit` bytes or when the
    whole unpacking's `budget` is spent (the declared sizes were checked already: this counts)."""
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".unpack-", suffix=".part")
    os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide the notebook from a grader running as another user
    try:
        with os.fdopen(fd, "wb") as out, zf.open(entry.info) as src:
            size = 0
            while chunk := src.read(MB):
                size += len(chunk)
                budget[0] -= len(chunk)
                if size > limit or budget[0] < 0:
                    raise UnpackError(
                        f"{entry.name} holds more than its zip header says (over {limit} bytes, "
                        "or over the total allowed); the zip looks crafted, nothing was written"
                    )
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
    except BaseException as err:
        os.unlink(tmp)
        broken = (zipfile.BadZipFile, EOFError, OSError, NotImplementedError)
        if isinstance(err, broken) and not isinstance(err, UnpackError):
            raise UnpackError(
                f"{entry.name} cannot be read from the zip ({err}); expected an intact zip as the LMS gave it"
            ) from err
        raise
    return Path(tmp)


def _write_text(path: Path, text: str) -> Path:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".unpack-", suffix=".part")
    os.fchmod(fd, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    return Path(tmp)


def _names_list(entries: list[Entry], limit: int = 3) -> str:
    names = [e.name for e in entries]
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def unpack(
    zip_path: Path | str,
    dest: Path | str,
    *,
    assignment: str,
    roster: Roster | None = None,
    layout: str = "auto",
    tz: dt.tzinfo | str | None = None,
    overwrite: bool = False,
    max_bytes: int = MAX_NOTEBOOK_BYTES,
    read_limit: int = READ_LIMIT,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    output_layout: str = "course",
    canvas_times: dict[str, dt.datetime] | None = None,
    lms_map: dict[str, dict[str, str]] | None = None,
) -> UnpackReport:
    """Unpack an LMS's submissions zip into `dest/<student_id>/<assignment>.ipynb` (see the module's
    docstring for the layouts and rules). `tz` is the zone the zip's times were written in (an IANA
    name or a tzinfo; default this machine's). `canvas_times`: Canvas user id -> submission time
    (`read_canvas_times`). `lms_map`: layout ("" for any) -> {LMS key, or the id a student would
    otherwise be written as -> the student the teacher named}, used before the roster. Raises
    UnpackError, before writing anything, when the zip or the arguments cannot be used."""
    zip_path, dest = Path(zip_path), Path(dest)
    opts = _checked(
        UnpackOptions(
            assignment,
            roster,
            layout,
            tz,
            overwrite,
            max_bytes,
            read_limit,
            max_total_bytes,
            output_layout,
            canvas_times,
            lms_map,
        )
    )
    _check_paths(zip_path, dest)
    try:
        zf = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as err:
        raise UnpackError(f"{zip_path} cannot be read as a zip ({err})") from err
    with zf:
        return _unpack(zf, zip_path, dest, opts)


def _checked(opts: UnpackOptions) -> UnpackOptions:
    """The options with the assignment's name as its notebook is named and the time zone found, or UnpackError."""
    assignment = _check_assignment(opts.assignment)
    if opts.layout not in LAYOUTS:
        raise UnpackError(f"unknown layout {opts.layout!r}; expected one of {', '.join(LAYOUTS)}")
    if opts.output_layout not in ("course", "nbgrader"):
        raise UnpackError(f"unknown output layout {opts.output_layout!r}; expected course or nbgrader")
    return replace(opts, assignment=assignment, tz=_zone(opts.tz))


def _check_paths(zip_path: Path, dest: Path) -> None:
    """UnpackError unless `zip_path` is a zip file and `dest` a folder or a path where one can be made."""
    if not zip_path.is_file():
        raise UnpackError(
            f"no zip file at {zip_path} (expected the .zip that the LMS's 'download all submissions' gives)"
        )
    if not zipfile.is_zipfile(zip_path):
        raise UnpackError(
            f"{zip_path} is not a zip file (expected the .zip that the LMS's 'download all submissions' gives)"
        )
    if dest.exists() and not dest.is_dir():
        raise UnpackError(
            f"{dest} is a file; expected the submissions folder (a folder, or a path where one can be made)"
        )


def _unpack(zf: zipfile.ZipFile, zip_path: Path, dest: Path, opts: UnpackOptions) -> UnpackReport:
    """The steps, from the zip's names to the files in place (see the module's docstring)."""
    warnings: list[str] = []
    detected = opts.layout == "auto"
    layout, entries = read_entries(zf, zip_path, opts.layout, warnings)
    if layout == "canvas" and opts.canvas_times is None:
        warnings.append(
            "Canvas writes the time it made the zip, not the submission time, into the zip: "
            "no submission time is recorded (and none is written), so `course deadline` cannot apply late penalties; "
            "Canvas's late flag is recorded (and told in the feedback), and Canvas's own late policy "
            "applies when you import the grades. For the submission times, save Canvas's submissions "
            "API as JSON and pass --canvas-times"
        )
    by_key: dict[str, list[Entry]] = {}
    for e in entries:
        by_key.setdefault(e.key, []).append(e)
    maps = [(opts.lms_map or {}).get("", {}), (opts.lms_map or {}).get(layout, {})]  # what is given now comes first
    ids, mapped = who_is_who(by_key, opts.roster, layout, maps, warnings)
    decisions: dict[str, list[str]] = {}
    plan, late = _plan(by_key, ids, layout, opts, warnings, decisions)
    if not plan:
        raise UnpackError(
            f"{zip_path} holds no notebook (.ipynb) for {opts.assignment}: {len(entries)} file(s) read as "
            f"{layout}, none of them a notebook"
        )
    report = UnpackReport(
        layout,
        detected,
        opts.assignment,
        dest,
        late=late,
        warnings=warnings,
        decisions=decisions,
        labels={sid: (opts.roster.label(sid) if opts.roster is not None else sid) for sid in ids.values()},
        output=opts.output_layout,
        mapped=mapped,
    )
    kept_plan = _within_limits(plan, zip_path, opts, report)
    if opts.canvas_times is not None and layout != "canvas":
        raise UnpackError("--canvas-times is for a Canvas download; this zip was read as a " + layout + " download")
    todo = _targets(kept_plan, dest, opts, report)
    _write(zf, dest, todo, layout, opts, report)
    for sid, e, *_ in todo:
        if sid not in report.skipped:
            report.students[sid] = e.name
            report.entries[sid] = e.name
    for sid in report.skipped:
        report.entries[sid] = next(e.name for s2, e in plan if s2 == sid)
    return report


def _plan(
    by_key: dict[str, list[Entry]],
    ids: dict[str, str],
    layout: str,
    opts: UnpackOptions,
    warnings: list[str],
    decisions: dict[str, list[str]],
) -> tuple[list[tuple[str, Entry]], set[str]]:
    """([(student, the notebook to write)] for every student who handed one in, the students Canvas marked late);
    what is decided about each student's files is told in `decisions`."""
    plan: list[tuple[str, Entry]] = []
    late: set[str] = set()
    for key, group in by_key.items():
        sid = ids[key]
        if any(e.late for e in group):
            late.add(sid)
        newest = _newest(sid, group, layout, opts, warnings, decisions.setdefault(sid, []))
        if newest is not None:
            plan.append((sid, newest))
    return plan, late


def _newest(
    sid: str, group: list[Entry], layout: str, opts: UnpackOptions, warnings: list[str], told: list[str]
) -> Entry | None:
    """Which of a student's files is graded: the rule `course grade` follows too (discover.resolve_notebooks).
    None when the student handed in no notebook."""
    from .discover import loose_stem  # the rule `course grade` uses to match names

    assignment, zone = opts.assignment, opts.tz
    parts = [e for e in group if not e.text]
    notebooks = [e for e in parts if e.file.casefold().endswith(".ipynb")]
    others = [e for e in parts if e not in notebooks]
    if others:
        warnings.append(f"{sid}: {len(others)} file(s) that are not notebooks skipped ({_names_list(others)})")
        told.append(f"Not graded, not being notebooks: {', '.join(f'`{_base(e.file)}`' for e in others)}.")
    if not notebooks:
        handed = [e for e in group if e.text and layout == "canvas"] + others
        shown = f" ({_names_list(handed)})" if handed else ""
        warnings.append(f"{sid}: no notebook in the submission{shown}; nothing written")
        return None
    named = [e for e in notebooks if loose_stem(_stem(e.file)) == loose_stem(assignment)]
    candidates = named or notebooks
    if layout == "canvas":
        newest = max(candidates, key=lambda e: (e.order, resubmission(e.file)[1], _time(e.info, zone)))
    else:
        newest = max(candidates, key=lambda e: (_time(e.info, zone), resubmission(e.file)[1], e.name))
    if len(candidates) > 1:
        older = [e for e in candidates if e is not newest]
        warnings.append(
            f"{sid}: {len(candidates)} notebooks; kept the newest, {newest.name}; "
            f"not written: {', '.join(e.name for e in older)}"
        )
        told.append(
            f"You handed in {len(candidates)} notebooks for {assignment}: the newest, "
            f"`{_base(newest.file)}`, was graded; not graded: " + ", ".join(f"`{_base(e.file)}`" for e in older) + "."
        )
    for e in notebooks:
        if e not in candidates:
            warnings.append(f"{e.name}: not named {assignment}.ipynb while {named[0].name} is; skipped")
            told.append(f"`{_base(e.file)}` is not named like {assignment}; it was not graded.")
    if not named:
        warnings.append(f"{newest.name}: not named {assignment}.ipynb; written as {sid}/{assignment}.ipynb")
        told.append(f"Your file `{_base(newest.file)}` was graded as {assignment}.ipynb.")
    elif _base(newest.file) not in exact_filenames(assignment):  # 06_attention or 06_attention_exercises
        told.append(f"Your file `{_base(newest.file)}` was graded as {assignment}.ipynb.")
    if newest.nested:
        warnings.append(f"{newest.name}: was in a subfolder; written as {sid}/{assignment}.ipynb")
    return newest


def _within_limits(
    plan: list[tuple[str, Entry]], zip_path: Path, opts: UnpackOptions, report: UnpackReport
) -> list[tuple[str, Entry]]:
    """The plan without the notebooks over `read_limit` (one student's problem: their row says why), or
    UnpackError when all of them together are over `max_total_bytes` (a zip bomb stops everything)."""
    total = 0
    kept_plan = []
    for sid, e in plan:
        if e.info.file_size > opts.read_limit:
            why = (
                f"The notebook you handed in, `{_base(e.file)}`, is {_mb(e.info.file_size)}, more than the "
                f"{_mb(opts.read_limit)} the grader reads; it was not graded."
            )
            report.skipped[sid] = why
            report.warnings.append(
                f"{e.name}: {_mb(e.info.file_size)}, over the {_mb(opts.read_limit)} read at all; not written"
            )
            continue
        total += e.info.file_size
        kept_plan.append((sid, e))
    if total > opts.max_total_bytes:
        raise UnpackError(
            f"the notebooks in {zip_path} unpack to {total} bytes, over the limit of {opts.max_total_bytes} "
            "bytes in all; nothing was written (a zip bomb? if the class's work is real, split the zip)"
        )
    return kept_plan


def _targets(
    plan: list[tuple[str, Entry]], dest: Path, opts: UnpackOptions, report: UnpackReport
) -> list[tuple[str, Entry, Path, Path, Path]]:
    """(student, entry, their folder, the notebook's folder, the notebook's path) for each notebook to write:
    not where a file stands in the way, nor over a notebook already there (unless `overwrite`)."""
    todo = []
    for sid, e in plan:
        folder = dest / sid
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            report.warnings.append(f"{e.name}: {folder} exists and is not a folder; nothing written for {sid}")
            continue
        home = folder / opts.assignment if opts.output_layout == "nbgrader" else folder
        target = home / f"{opts.assignment}.ipynb"
        if (target.exists() or target.is_symlink()) and not opts.overwrite:
            report.kept[sid] = e.name
            report.warnings.append(f"{e.name}: {target} exists; kept it (overwrite to replace it)")
            continue
        todo.append((sid, e, folder, home, target))
    return todo


def _write(
    zf: zipfile.ZipFile,
    dest: Path,
    todo: list[tuple[str, Entry, Path, Path, Path]],
    layout: str,
    opts: UnpackOptions,
    report: UnpackReport,
) -> None:
    """Every notebook and its time file to a temporary file, then all renamed into place: a failure on the way
    leaves `dest` as it was."""
    made_folders, temps, stale = [], [], []
    budget = [opts.max_total_bytes]
    try:
        dest.mkdir(parents=True, exist_ok=True)
        for sid, e, folder, home, target in todo:
            for f in (folder, home):
                if not f.exists():
                    f.mkdir()
                    made_folders.append(f)
            nb = _notebook(zf, sid, e, home, opts, report, budget)
            if nb is None:
                continue
            temps.append((nb, target))
            report.sha256[sid] = _sha256(nb)
            # This assignment's own time file: in nbgrader's layout its folder's timestamp.txt, otherwise
            # <assignment>.timestamp.txt beside the notebook, so that unpacking another assignment into the same
            # student folder never changes this one's time.
            name = "timestamp.txt" if opts.output_layout == "nbgrader" else f"{opts.assignment}.timestamp.txt"
            stamp_path = home / name
            if layout == "canvas":
                when = (opts.canvas_times or {}).get(e.key)
                if when is None:  # the zip's times are the download's: no submission time is better than a wrong one
                    stale.append(stamp_path)  # a time an earlier download wrote for this assignment no longer holds
                    continue
            else:
                when = _time(e.info, opts.tz)
            stamp = _write_text(stamp_path, when.strftime(TIME_FORMAT) + "\n")
            temps.append((stamp, stamp_path))
            os.utime(nb, (when.timestamp(), when.timestamp()))
            os.utime(stamp, (when.timestamp(), when.timestamp()))
            report.times[sid] = when.strftime(TIME_FORMAT)
            report.when[sid] = when.astimezone(dt.timezone.utc).isoformat(timespec="seconds")
    except BaseException:
        for tmp, _ in temps:
            tmp.unlink(missing_ok=True)
        for folder in reversed(made_folders):
            try:
                folder.rmdir()
            except OSError:
                pass
        raise
    for tmp, final in temps:
        os.replace(tmp, final)
    for path in stale:
        path.unlink(missing_ok=True)


def _notebook(
    zf: zipfile.ZipFile, sid: str, e: Entry, home: Path, opts: UnpackOptions, report: UnpackReport, budget: list[int]
) -> Path | None:
    """The student's notebook in a temporary file in `home`, or None when it is over `max_bytes` even without its
    outputs (their row says why); one that fits only without its outputs is written, and the student told."""
    nb = _copy_capped(zf, e, home, opts.read_limit, budget)
    size = nb.stat().st_size
    if size <= opts.max_bytes:
        return nb
    kept = _without_outputs(nb)
    if kept is None or kept > opts.max_bytes:
        nb.unlink()
        shown = "" if kept is None else f", {_mb(kept)} without its outputs"
        report.skipped[sid] = (
            f"The notebook you handed in, `{_base(e.file)}`, is {_mb(size)}{shown}, "
            f"over the limit of {_mb(opts.max_bytes)}; it was not graded."
        )
        report.warnings.append(
            f"{e.name}: {_mb(size)}{shown}, over the limit of {_mb(opts.max_bytes)} (--max-size); not written"
        )
        return None
    report.decisions.setdefault(sid, []).append(
        f"Your notebook is {_mb(size)}, {_mb(size - kept)} of it outputs (figures, printed text); "
        "only the answer cells are graded, so the outputs were left aside."
    )
    report.warnings.append(
        f"{e.name}: {_mb(size)}, {_mb(kept)} without its outputs: written (the grader reads only the answer cells)"
    )
    return nb


def _base(file: str) -> str:
    return file.rsplit("/", 1)[-1]


def _stem(file: str) -> str:
    base = _base(file)
    return base[:-6] if base.casefold().endswith(".ipynb") else base


def _mb(n: float) -> str:
    return f"{n / MB:.1f} MB"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(MB):
            h.update(chunk)
    return h.hexdigest()


def _without_outputs(path: Path) -> int | None:
    """The size of the notebook at `path` once its outputs are left aside (what the grader reads), or
    None when it is not a notebook at all (`course grade` will say so)."""
    try:
        nb = json.loads(path.read_bytes())
        cells = nb["cells"]
        for cell in cells:
            cell.pop("outputs", None)
            cell.pop("attachments", None)
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    return len(json.dumps(nb, ensure_ascii=False).encode("utf-8"))


def read_canvas_times(path: Path) -> dict[str, dt.datetime]:
    """Submission times from Canvas's submissions API, saved as JSON: the list that
    `GET /api/v1/courses/:course/assignments/:assignment/submissions?per_page=100` returns (objects with
    `user_id` and `submitted_at`, ISO 8601 in UTC), or several such pages in one list. Canvas user id ->
    time; unsubmitted entries (`submitted_at: null`) are left out."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise UnpackError(f"cannot read {path} as the JSON of Canvas's submissions API ({err})") from None
    items = [
        x for page in (data if isinstance(data, list) else [data]) for x in (page if isinstance(page, list) else [page])
    ]
    found = {}
    for item in items:
        if not isinstance(item, dict) or "user_id" not in item:
            raise UnpackError(
                f"{path}: expected the list of submissions Canvas's API returns (objects with "
                f"user_id and submitted_at); found {str(item)[:80]!r}"
            )
        when = item.get("submitted_at")
        if when:
            when = dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
            found[str(item["user_id"])] = when.astimezone(dt.timezone.utc)
    return found
