"""How an LMS names the files of its "download all submissions" zip: which entry is whose file (`read_entries`).

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

An entry whose name is unsafe (absolute, `..`, a symbolic link), a hidden or system file, or a file not named as
the layout names a student's file is a warning, never an entry.
"""

from __future__ import annotations

import re
import stat
import zipfile
from dataclasses import dataclass
from pathlib import Path

SYSTEM_FILES = {"__macosx", ".ds_store", "thumbs.db", "desktop.ini"}

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
class Entry:
    info: zipfile.ZipInfo
    name: str  # the entry's name as the zip spells it (decoded)
    key: str  # the LMS key of the student: Canvas user id, Moodle participant id, plain folder
    label: str  # the student's name or login as the entry gives it ("" when none)
    file: str  # the file's name as the student handed it in (Canvas / Moodle prefixes removed)
    nested: bool = False  # the file was in a subfolder of the student's folder
    late: bool = False  # Canvas's flag
    order: int = 0  # Canvas attachment id (uploads are numbered in order); 0 elsewhere
    text: bool = False  # an LMS part that is not a file (Canvas text/URL entry, Moodle online text)


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


def resubmission(file: str) -> tuple[str, int]:
    """("06_attention", 2) for 06_attention-2.ipynb or "06_Attention (2).ipynb"."""
    stem = file.rsplit("/", 1)[-1]
    stem = stem[:-6] if stem.casefold().endswith(".ipynb") else stem
    m = RESUBMISSION.fullmatch(stem)
    n = m["dash"] or m["paren"]
    return re.sub(r"[\s-]+", "_", m["stem"].strip()).casefold(), int(n) if n else 0


def _read_canvas(name: str, info: zipfile.ZipInfo) -> Entry | None:
    if "/" in name:
        return None
    text = CANVAS_TEXT.fullmatch(name)
    if text:
        return Entry(info, name, text["uid"], text["login"] or "", name, late=bool(text["late"]), text=True)
    m = CANVAS_FILE.fullmatch(name)
    if not m:
        return None
    return Entry(info, name, m["uid"], m["login"] or "", m["name"], late=bool(m["late"]), order=int(m["aid"]))


def _read_moodle(name: str, info: zipfile.ZipInfo) -> Entry | None:
    first, _, inner = name.partition("/")
    m = MOODLE_PART.fullmatch(first)
    if not m:
        return None
    label = m["name"].strip()
    if m["plugin"] != "file":
        return Entry(info, name, m["pid"], label, first, text=True)
    if inner:  # a folder per participant: <prefix>_assignsubmission_file_/<path>
        if m["rest"]:
            return None
        return Entry(info, name, m["pid"], label, inner, nested="/" in inner)
    return Entry(info, name, m["pid"], label, m["rest"]) if m["rest"] else None


def _read_plain(name: str, info: zipfile.ZipInfo) -> Entry | None:
    folder, _, inner = name.partition("/")
    if not inner:
        return None
    return Entry(info, name, folder, folder, inner, nested="/" in inner)


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


def read_entries(zf: zipfile.ZipFile, zip_path: Path, layout: str, warnings: list[str]) -> tuple[str, list[Entry]]:
    """(The layout read: `layout`, or the one the names fit for "auto"; the zip's files as that layout's
    entries). Every file passed over is a warning."""
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
    layout, prefix = _choose_layout(pairs, layout)
    entries: list[Entry] = []
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
    return layout, entries
