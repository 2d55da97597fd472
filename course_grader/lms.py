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

What the layouts look like (read from the LMSs' own code, and what this module relies on):

- canvas: "Download Submissions" gives flat files named
  `<login>_<user id>_<attachment id>_<file name>`, e.g. `doejane_12345_67890_06_attention.ipynb`.
  <login> is the student's sortable name ("Doe, Jane") with everything but letters and digits
  removed, lower-cased (accents and other scripts kept: `müllerzoë`); it is left out under anonymous
  grading. A late submission has `late` after it (`doejane_late_12345_...`, matched in any case).
  A file name the student had already used gets `-1`, `-2`, ... (`06_attention-1.ipynb`). Text and
  URL submissions come as `<login>_<user id>_text.html` / `_link.html`. Canvas writes the zip's
  entries when the zip is made, so their times are the time of the download, not of the submission:
  no timestamp.txt is written from them (a warning says so; Canvas's submissions API gives the
  times: `read_canvas_times`), and the late flag, Canvas's own verdict, is recorded. Between several
  notebooks of one student the one with the highest attachment id (Canvas numbers uploads in order)
  is the newest.
- moodle: "Download all submissions" gives, by default (Moodle >= 3.1), a folder per participant
  and submission plugin, `<Full Name>_<participant id>_assignsubmission_file_/06_attention.ipynb`,
  or, with "Download submissions in folders" off, flat files
  `<Full Name>_<participant id>_assignsubmission_file_06_attention.ipynb`. The participant id is
  Moodle's per-assignment id (what its grading worksheet shows as "Participant 123456"); underscores
  in the name become spaces; under blind marking the name is "Participant". Other plugins'
  parts (`assignsubmission_onlinetext_`, ...) are ignored. Entry times are the upload times.
- plain: `<student id>/<anything>.ipynb`, as a JupyterHub export or a hand-made zip gives; one
  folder around everything (`submissions/<id>/...`, as zipping a folder gives) is looked through
  when it holds several students. Entry times are the files' times when zipped.
- auto: the layout that fits the names (Moodle's `_assignsubmission_` marker, Canvas's
  `_<digits>_<digits>_` files, folders otherwise); the report says which one was read.

Students: each entry's LMS key (Canvas user id, Moodle participant id, the plain folder) is first
looked up in the mappings the teacher gave (`--map 'Anh_Nguyen_731006=s123'`, by the key or by the
id the student would otherwise be written as; `course unpack` keeps them in the gradebook and passes
them to every later unpacking), then in the roster with `Roster.find`: the LMS id (the roster's id,
or an extra column such as Canvas's `ID` or Moodle's `ID number`), then the name (Canvas's squashed
`doejane` too), then the login. A key that fits two roster students matches neither: the student
gets an id made from the LMS key (`Zoe_Muller_123456`: letters and digits, accents dropped, the LMS
id kept so namesakes stay apart) and a warning names the entry and says how to map it; so do
students the roster lacks, and every student when there is no roster (the warnings are the map back
from folder to entry).

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
import itertools
import json
import os
import re
import stat
import struct
import tempfile
import unicodedata
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from course_lib.runner.notebook import exact_filenames

from .roster import Roster, Student

MB = 1024 * 1024
MAX_NOTEBOOK_BYTES = 20 * MB  # one notebook without its outputs (`--max-size`; figures can make a notebook 30 MB)
READ_LIMIT = 1024 * MB  # one notebook as handed in: the most that is read at all (as `course grade`)
MAX_TOTAL_BYTES = 4 * 1024 * MB  # every notebook written, uncompressed
LAYOUTS = ("auto", "canvas", "moodle", "plain")
ASSIGNMENT = re.compile(r"\d{2}_[A-Za-z0-9][A-Za-z0-9_-]*")
SYSTEM_FILES = {"__macosx", ".ds_store", "thumbs.db", "desktop.ini"}
TIME_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"  # nbgrader's timestamp.txt

# <login>_[late_]<user id>_<attachment id>_<file name>; the login has a letter, so an anonymous
# `12345_67890_06_x.ipynb` is not read as login "12345".
CANVAS_FILE = re.compile(
    r"(?:(?P<login>[^\W_]*[^\W\d_][^\W_]*)_)?(?:(?P<late>(?i:late))_)?"
    r"(?P<uid>\d+)_(?P<aid>\d+)_(?P<name>.+)"
)
CANVAS_TEXT = re.compile(
    r"(?:(?P<login>[^\W_]*[^\W\d_][^\W_]*)_)?(?:(?P<late>(?i:late))_)?"
    r"(?P<uid>\d+)_(?:text|link)\.html"
)
MOODLE_PART = re.compile(r"(?P<name>.*?)_(?P<pid>\d+)_assignsubmission_(?P<plugin>[a-z0-9]+)_(?P<rest>.*)")
RESUBMISSION = re.compile(r"(?P<stem>.*?)(?:-(?P<dash>\d+)| ?\((?P<paren>\d+)\))?")


class UnpackError(ValueError):
    """The zip cannot be unpacked; the message says what was expected and what was found."""


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


@dataclass
class _Entry:
    info: zipfile.ZipInfo
    name: str  # the entry's name as the zip spells it (decoded)
    key: str  # the LMS key of the student: Canvas user id, Moodle participant id, plain folder
    label: str  # the student's name or login as the entry gives it ("" when none)
    file: str  # the file's name as the student handed it in (Canvas / Moodle prefixes removed)
    nested: bool = False  # the file was in a subfolder of the student's folder
    late: bool = False  # Canvas's flag
    order: int = 0  # Canvas attachment id (uploads are numbered in order); 0 elsewhere
    text: bool = False  # an LMS part that is not a file (Canvas text/URL entry, Moodle online text)


# --- names ----------------------------------------------------------------------------------------


def _decoded(info: zipfile.ZipInfo) -> str:
    """The entry's name. Zips without the UTF-8 flag are read by Python as cp437; many tools
    (Windows' own, older LMSs) write UTF-8 without setting it, so such names are re-read as UTF-8."""
    name = info.filename
    if not info.flag_bits & 0x800:
        try:
            name = name.encode("cp437").decode("utf-8")
        except (UnicodeEncodeError, UnicodeDecodeError):
            pass
    return name.replace("\\", "/")


def _unsafe(name: str, info: zipfile.ZipInfo) -> str:
    """Why an entry must not be touched ("" when it is fine)."""
    if stat.S_ISLNK(info.external_attr >> 16):
        return "is a symbolic link"
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        return "has an absolute name"
    if ".." in name.split("/"):
        return "has '..' in its name"
    if "\x00" in name:
        return "has a NUL character in its name"
    return ""


def _ignored(name: str) -> bool:
    return any(p.startswith(".") or p.casefold() in SYSTEM_FILES for p in name.split("/") if p)


def _ascii(text: str) -> str:
    plain = unicodedata.normalize("NFKD", text)
    return "".join(c for c in plain if not unicodedata.combining(c))


def safe_id(label: str, key: str = "") -> str:
    """A folder name made from an LMS label and key: ASCII letters, digits and `_` only
    ("Zoë Müller", "123456" -> "Zoe_Muller_123456"; "李雷", "654321" -> "student_654321")."""
    base = re.sub(r"[^A-Za-z0-9]+", "_", _ascii(label)).strip("_")[:48] or "student"
    return f"{base}_{key}" if key and key != label else base


def _check_folder_name(sid: str, what: str) -> None:
    if (
        not sid
        or sid in (".", "..")
        or sid.startswith(".")
        or any(c in sid for c in "/\\\x00")
        or any(unicodedata.category(c) == "Cc" for c in sid)
        or len(sid.encode()) > 200
    ):
        raise UnpackError(
            f"{what} gives the student id {sid!r}, which cannot be a folder name; expected a "
            "name without '/', '\\' or control characters that does not start with '.'"
        )


def _check_assignment(assignment: str) -> str:
    name = assignment[:-6] if assignment.endswith(".ipynb") else assignment
    if not ASSIGNMENT.fullmatch(name or ""):
        raise UnpackError(
            f"the assignment must be named like 06_attention (two digits, '_', a name of letters, "
            f"digits, '_' or '-'), as its notebook in solutions/ is; got {assignment!r}"
        )
    return name


def _resubmission(file: str) -> tuple[str, int]:
    """("06_attention", 2) for 06_attention-2.ipynb or "06_Attention (2).ipynb"."""
    stem = file.rsplit("/", 1)[-1]
    stem = stem[:-6] if stem.casefold().endswith(".ipynb") else stem
    m = RESUBMISSION.fullmatch(stem)
    n = m["dash"] or m["paren"]
    return re.sub(r"[\s-]+", "_", m["stem"].strip()).casefold(), int(n) if n else 0


# --- reading each layout --------------------------------------------------------------------------


def _read_canvas(name: str, info: zipfile.ZipInfo) -> _Entry | None:
    if "/" in name:
        return None
    text = CANVAS_TEXT.fullmatch(name)
    if text:
        return _Entry(info, name, text["uid"], text["login"] or "", name, late=bool(text["late"]), text=True)
    m = CANVAS_FILE.fullmatch(name)
    if not m:
        return None
    return _Entry(info, name, m["uid"], m["login"] or "", m["name"], late=bool(m["late"]), order=int(m["aid"]))


def _read_moodle(name: str, info: zipfile.ZipInfo) -> _Entry | None:
    first, _, inner = name.partition("/")
    m = MOODLE_PART.fullmatch(first)
    if not m:
        return None
    label = m["name"].strip()
    if m["plugin"] != "file":
        return _Entry(info, name, m["pid"], label, first, text=True)
    if inner:  # a folder per participant: <prefix>_assignsubmission_file_/<path>
        if m["rest"]:
            return None
        return _Entry(info, name, m["pid"], label, inner, nested="/" in inner)
    return _Entry(info, name, m["pid"], label, m["rest"]) if m["rest"] else None


def _read_plain(name: str, info: zipfile.ZipInfo) -> _Entry | None:
    folder, _, inner = name.partition("/")
    if not inner:
        return None
    return _Entry(info, name, folder, folder, inner, nested="/" in inner)


def _wrapper(names: list[str]) -> str:
    """The one folder around every entry, when it holds several student folders ("" otherwise)."""
    tops = {n.split("/", 1)[0] for n in names}
    if len(tops) != 1 or any(n.count("/") < 2 for n in names):
        return ""
    top = tops.pop()
    return top if len({n.split("/")[1] for n in names}) >= 2 else ""


def _lms(pairs: list[tuple[str, zipfile.ZipInfo]]) -> str:
    """ "moodle" or "canvas" when the names fit that LMS, else ""."""
    moodle = sum(1 for n, i in pairs if _read_moodle(n, i))
    canvas = sum(1 for n, i in pairs if _read_canvas(n, i))
    if moodle and moodle >= canvas:
        return "moodle"
    if canvas and canvas >= len(pairs) / 2:
        return "canvas"
    return ""


def _choose_layout(pairs: list[tuple[str, zipfile.ZipInfo]], layout: str) -> tuple[str, str]:
    """The layout to read and the folder around everything to look through ("" for none)."""
    names = [n for n, _ in pairs]
    tops = {n.split("/", 1)[0] for n in names}
    top = tops.pop() if len(tops) == 1 and all("/" in n for n in names) else ""
    views = [("", pairs)] + ([(top, [(n[len(top) + 1 :], i) for n, i in pairs])] if top else [])
    if layout in ("auto", "canvas", "moodle"):
        for prefix, view in views:
            found = _lms(view)
            if found and layout in ("auto", found):
                return found, prefix
    if layout in ("auto", "plain") and any("/" in n for n in names):
        return "plain", _wrapper(names)
    if layout != "auto":
        return layout, ""  # as asked: every name that does not fit is a warning
    shown = ", ".join(names[:3]) + (" ..." if len(names) > 3 else "")
    raise UnpackError(
        f"cannot tell which LMS made this zip: its files ({shown}) are neither Canvas's "
        "<login>_<user id>_<file id>_<name>, Moodle's <Full Name>_<id>_assignsubmission_file_..., "
        "nor <student id>/<notebook>; pass the layout (canvas, moodle or plain)"
    )


# --- students -------------------------------------------------------------------------------------


def _squashed(text: str) -> str:
    """Canvas's login form of a name: letters and digits only, lower case (accents dropped here)."""
    return "".join(c for c in _ascii(text).casefold() if c.isalnum())


def _canvas_login_match(roster: Roster, login: str) -> list[Student]:
    want = _squashed(login)
    found = []
    for s in roster.students:
        words = re.findall(r"[^\W_]+", s.name)[:5]
        forms = {_squashed("".join(p)) for p in itertools.permutations(words)} if words else set()
        if want and want in forms:
            found.append(s)
    return found


def _by_label(roster: Roster, entry: _Entry, layout: str) -> tuple[Student | None, str]:
    """The roster student the entry's name or login fits (Canvas's squashed `doejane` too)."""
    if not entry.label:
        return None, ""
    student, how = roster.find(entry.label)
    if student is not None or how or layout != "canvas":
        return student, how
    found = _canvas_login_match(roster, entry.label)
    if len(found) > 1:
        return None, f"ambiguous: name fits {', '.join(s.id for s in found)}"
    return (found[0], "name") if found else (None, "")


def _match(roster: Roster, entry: _Entry, layout: str) -> tuple[Student | None, str]:
    """The roster student an entry belongs to, or None and why not ("" when nothing fits): the LMS
    key first (cross-checked against the name, so a Canvas user id that happens to be another
    student's number is not believed), then the name or login."""
    student, how = roster.find(entry.key)
    if how.startswith("ambiguous"):
        return None, f"{entry.key!r} is {how}"
    if layout == "plain":
        return student, how
    named, named_how = _by_label(roster, entry, layout)
    if student is not None:
        if named is not None and named.id != student.id:
            return None, f"its LMS id {entry.key!r} fits {student.id} but its name {entry.label!r} fits {named.id}"
        return student, how
    if named_how.startswith("ambiguous"):
        return None, f"{entry.label!r} is {named_how}"
    return named, named_how


MOODLE_MAP_NOTE = (
    " (Moodle numbers the participants of each assignment anew, so another assignment's download needs its own "
    "--map; the assignment's grading worksheet lists each 'Participant N' with the student's email)"
)


def _who_is_who(
    by_key: dict[str, list[_Entry]],
    roster: Roster | None,
    layout: str,
    maps: list[dict[str, str]],
    warnings: list[str],
) -> tuple[dict[str, str], dict[str, tuple[str, str]]]:
    """(LMS key -> student id for every student in the zip, LMS key -> (student, the name it was mapped by) for
    those the teacher mapped).
    A mapping (`--map`, by the LMS key or by the id a student would otherwise be written as; or one recorded in
    the gradebook) comes first, then the roster; every student matched by neither gets a warning that says how
    to map them."""
    ids: dict[str, str] = {}
    mapped: dict[str, tuple[str, str]] = {}
    for key, group in by_key.items():
        first = group[0]
        given, named = _mapped_to(maps, first, key)
        if given is not None:
            if roster is not None and given not in roster:
                raise UnpackError(
                    f"--map gives {first.name} the id {given!r}, which is not on the roster ({roster.source}); "
                    "expected a student id as `course roster list` shows it"
                )
            _check_folder_name(given, f"--map for {first.name}")
            ids[key], mapped[key] = given, (given, named)
            continue
        student, how = _match(roster, first, layout) if roster is not None else (None, "")
        if student is not None:
            _check_folder_name(student.id, f"the roster's student {student.id!r} ({roster.source})")
            ids[key] = student.id
            continue
        if layout == "plain":
            sid = key if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.@-]*", key) else safe_id(key)
        else:
            sid = safe_id(first.label, key)
        ids[key] = sid
        said = _unmatched(first, key, sid, how, roster, layout)
        if said:
            warnings.append(said)
    _check_one_folder_each(by_key, ids)
    return ids, mapped


def _mapped_to(maps: list[dict[str, str]], entry: _Entry, key: str) -> tuple[str | None, str]:
    """(the student the first of `maps` that knows the entry names, and by which name: its LMS key or the id it
    would otherwise be written as), or (None, "")."""
    for found in maps:
        for named in (key, safe_id(entry.label, key)):
            if named in found:
                return found[named], named
    return None, ""


def _unmatched(first: _Entry, key: str, sid: str, how: str, roster: Roster | None, layout: str) -> str:
    """The warning about a student matched to no roster student ("" when there is nothing to say)."""
    if roster is None:
        if sid == key:
            return ""
        if layout == "plain":
            return f"{first.name}: the folder name {key!r} is written as {sid!r}"
        return f"{first.name}: no roster; the student is {sid!r} (made from {first.label or key!r}, LMS id {key})"
    hint = (
        f". If you know who it is, unpack again with --map '{sid}=ID' (their id on the roster): the mapping is "
        "kept in the gradebook and used by every later unpacking" + (MOODLE_MAP_NOTE if layout == "moodle" else "")
    )
    if how:
        return f"{first.name}: not matched to the roster ({how}); written as {sid!r}{hint}"
    return f"{first.name}: {first.label or key!r} (LMS id {key}) is not in the roster; written as {sid!r}{hint}"


def _check_one_folder_each(by_key: dict[str, list[_Entry]], ids: dict[str, str]) -> None:
    folders: dict[str, str] = {}
    for key, sid in ids.items():
        clash = folders.get(sid.casefold())
        if clash is not None:
            raise UnpackError(
                f"{by_key[clash][0].name} and {by_key[key][0].name} would both be written to the folder "
                f"{sid!r}; expected one folder per student: fix the roster or the zip"
            )
        folders[sid.casefold()] = key


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


def _copy_capped(zf: zipfile.ZipFile, entry: _Entry, folder: Path, limit: int, budget: list[int]) -> Path:
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


def _names_list(entries: list[_Entry], limit: int = 3) -> str:
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
    assignment = _check_assignment(assignment)
    if layout not in LAYOUTS:
        raise UnpackError(f"unknown layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
    if output_layout not in ("course", "nbgrader"):
        raise UnpackError(f"unknown output layout {output_layout!r}; expected course or nbgrader")
    zone = _zone(tz)
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

    try:
        zf = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as err:
        raise UnpackError(f"{zip_path} cannot be read as a zip ({err})") from err
    with zf:
        return _unpack(
            zf,
            zip_path,
            dest,
            assignment,
            roster,
            layout,
            zone,
            overwrite,
            max_bytes,
            read_limit,
            max_total_bytes,
            output_layout,
            canvas_times,
            lms_map,
        )


def _unpack(
    zf: zipfile.ZipFile,
    zip_path: Path,
    dest: Path,
    assignment: str,
    roster: Roster | None,
    layout: str,
    zone: dt.tzinfo | None,
    overwrite: bool,
    max_bytes: int,
    read_limit: int,
    max_total_bytes: int,
    output_layout: str,
    canvas_times: dict[str, dt.datetime] | None,
    lms_map: dict[str, dict[str, str]] | None = None,
) -> UnpackReport:
    from .discover import loose_stem  # the rule `course grade` uses to match names

    warnings: list[str] = []
    decisions: dict[str, list[str]] = {}
    files = [i for i in zf.infolist() if not i.is_dir()]
    if not files:
        raise UnpackError(f"{zip_path} is empty (no files); expected the submissions of the class")
    pairs, ignored = [], []
    for info in files:
        name = _decoded(info)
        why = _unsafe(name, info)
        if why:
            warnings.append(f"{name}: {why}; skipped")
        elif _ignored(name):
            ignored.append(name)
        else:
            pairs.append((name, info))
    if ignored:
        warnings.append(
            f"ignored {len(ignored)} hidden or system file(s) ({', '.join(ignored[:3])}"
            f"{' ...' if len(ignored) > 3 else ''})"
        )
    if not pairs:
        raise UnpackError(f"{zip_path} has no usable files (only hidden, system or unsafe entries)")

    detected = layout == "auto"
    layout, prefix = _choose_layout(pairs, layout)
    entries: list[_Entry] = []
    for name, info in pairs:
        inner = name[len(prefix) + 1 :] if prefix else name
        if layout == "canvas":
            entry = _read_canvas(inner, info)
        elif layout == "moodle":
            entry = _read_moodle(inner, info)
        else:
            entry = _read_plain(inner, info)
        if entry is None:
            warnings.append(f"{name}: not named as a {layout} download names a student's file; skipped")
        else:
            entry.name = name
            entries.append(entry)
    if layout == "canvas" and canvas_times is None:
        warnings.append(
            "Canvas writes the time it made the zip, not the submission time, into the zip: "
            "no submission time is recorded (and none is written), so `course deadline` cannot apply late penalties; "
            "Canvas's late flag is recorded (and told in the feedback), and Canvas's own late policy "
            "applies when you import the grades. For the submission times, save Canvas's submissions "
            "API as JSON and pass --canvas-times"
        )

    # --- who is who -----------------------------------------------------------------------------
    by_key: dict[str, list[_Entry]] = {}
    for e in entries:
        by_key.setdefault(e.key, []).append(e)
    maps = [(lms_map or {}).get("", {}), (lms_map or {}).get(layout, {})]  # what is given now comes first
    ids, mapped = _who_is_who(by_key, roster, layout, maps, warnings)

    # --- which notebook: the rule `course grade` follows too (grade.resolve_notebooks) -------------
    plan: list[tuple[str, _Entry]] = []
    late: set[str] = set()
    for key, group in by_key.items():
        sid = ids[key]
        if any(e.late for e in group):
            late.add(sid)
        told = decisions.setdefault(sid, [])
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
            continue
        named = [e for e in notebooks if loose_stem(_stem(e.file)) == loose_stem(assignment)]
        candidates = named or notebooks
        if layout == "canvas":
            newest = max(candidates, key=lambda e: (e.order, _resubmission(e.file)[1], _time(e.info, zone)))
        else:
            newest = max(candidates, key=lambda e: (_time(e.info, zone), _resubmission(e.file)[1], e.name))
        if len(candidates) > 1:
            older = [e for e in candidates if e is not newest]
            warnings.append(
                f"{sid}: {len(candidates)} notebooks; kept the newest, {newest.name}; "
                f"not written: {', '.join(e.name for e in older)}"
            )
            told.append(
                f"You handed in {len(candidates)} notebooks for {assignment}: the newest, "
                f"`{_base(newest.file)}`, was graded; not graded: "
                + ", ".join(f"`{_base(e.file)}`" for e in older)
                + "."
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
        plan.append((sid, newest))
    if not plan:
        raise UnpackError(
            f"{zip_path} holds no notebook (.ipynb) for {assignment}: {len(entries)} file(s) read as "
            f"{layout}, none of them a notebook"
        )

    # --- limits: a notebook too big is one student's problem; a zip bomb stops everything --------
    total = 0
    report = UnpackReport(
        layout,
        detected,
        assignment,
        dest,
        late=late,
        warnings=warnings,
        decisions=decisions,
        labels={sid: (roster.label(sid) if roster is not None else sid) for sid in ids.values()},
        output=output_layout,
        mapped=mapped,
    )
    kept_plan = []
    for sid, e in plan:
        if e.info.file_size > read_limit:
            why = (
                f"The notebook you handed in, `{_base(e.file)}`, is {_mb(e.info.file_size)}, more than the "
                f"{_mb(read_limit)} the grader reads; it was not graded."
            )
            report.skipped[sid] = why
            warnings.append(f"{e.name}: {_mb(e.info.file_size)}, over the {_mb(read_limit)} read at all; not written")
            continue
        total += e.info.file_size
        kept_plan.append((sid, e))
    if total > max_total_bytes:
        raise UnpackError(
            f"the notebooks in {zip_path} unpack to {total} bytes, over the limit of {max_total_bytes} "
            "bytes in all; nothing was written (a zip bomb? if the class's work is real, split the zip)"
        )
    if canvas_times is not None and layout != "canvas":
        raise UnpackError("--canvas-times is for a Canvas download; this zip was read as a " + layout + " download")
    todo = []
    for sid, e in kept_plan:
        folder = dest / sid
        if folder.is_symlink() or (folder.exists() and not folder.is_dir()):
            warnings.append(f"{e.name}: {folder} exists and is not a folder; nothing written for {sid}")
            continue
        home = folder / assignment if output_layout == "nbgrader" else folder
        target = home / f"{assignment}.ipynb"
        if (target.exists() or target.is_symlink()) and not overwrite:
            report.kept[sid] = e.name
            warnings.append(f"{e.name}: {target} exists; kept it (overwrite to replace it)")
            continue
        todo.append((sid, e, folder, home, target))

    # --- write: every notebook to a temporary file, then all renamed into place --------------------
    made_folders, temps, stale = [], [], []
    budget = [max_total_bytes]
    try:
        dest.mkdir(parents=True, exist_ok=True)
        for sid, e, folder, home, target in todo:
            for f in (folder, home):
                if not f.exists():
                    f.mkdir()
                    made_folders.append(f)
            nb = _copy_capped(zf, e, home, read_limit, budget)
            size = nb.stat().st_size
            if size > max_bytes:
                kept = _without_outputs(nb)
                if kept is None or kept > max_bytes:
                    nb.unlink()
                    shown = "" if kept is None else f", {_mb(kept)} without its outputs"
                    report.skipped[sid] = (
                        f"The notebook you handed in, `{_base(e.file)}`, is {_mb(size)}{shown}, "
                        f"over the limit of {_mb(max_bytes)}; it was not graded."
                    )
                    warnings.append(
                        f"{e.name}: {_mb(size)}{shown}, over the limit of {_mb(max_bytes)} (--max-size); not written"
                    )
                    continue
                decisions.setdefault(sid, []).append(
                    f"Your notebook is {_mb(size)}, {_mb(size - kept)} of it outputs (figures, printed text); "
                    "only the answer cells are graded, so the outputs were left aside."
                )
                warnings.append(
                    f"{e.name}: {_mb(size)}, {_mb(kept)} without its outputs: written (the grader reads "
                    "only the answer cells)"
                )
            temps.append((nb, target))
            report.sha256[sid] = _sha256(nb)
            # This assignment's own time file: in nbgrader's layout its folder's timestamp.txt, otherwise
            # <assignment>.timestamp.txt beside the notebook, so that unpacking another assignment into the same
            # student folder never changes this one's time.
            stamp_path = home / ("timestamp.txt" if output_layout == "nbgrader" else f"{assignment}.timestamp.txt")
            when = None
            if layout == "canvas":
                found = (canvas_times or {}).get(e.key)
                if found is None:  # the zip's times are the download's: no submission time is better than a wrong one
                    stale.append(stamp_path)  # a time an earlier download wrote for this assignment no longer holds
                    continue
                when = found
            else:
                when = _time(e.info, zone)
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
    for sid, e, *_ in todo:
        if sid not in report.skipped:
            report.students[sid] = e.name
            report.entries[sid] = e.name
    for sid in report.skipped:
        report.entries[sid] = next(e.name for s2, e in plan if s2 == sid)
    return report


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
