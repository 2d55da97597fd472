"""Which student each entry of an LMS download is (`who_is_who`): the id their folder gets in the submissions.

Each entry's LMS key (Canvas user id, Moodle participant id, the plain folder) is first
looked up in the mappings the teacher gave (`--map 'Anh_Nguyen_731006=s123'`, by the key or by the
id the student would otherwise be written as; `course unpack` keeps them in the gradebook and passes
them to every later unpacking), then in the roster with `Roster.find`: the LMS id (the roster's id,
or an extra column such as Canvas's `ID` or Moodle's `ID number`), then the name (Canvas's squashed
`doejane` too), then the login. A key that fits two roster students matches neither: the student
gets an id made from the LMS key (`Zoe_Muller_123456`: letters and digits, accents dropped, the LMS
id kept so namesakes stay apart) and a warning names the entry and says how to map it; so do
students the roster lacks, and every student when there is no roster (the warnings are the map back
from folder to entry).
"""

from __future__ import annotations

import itertools
import re
import unicodedata

from .lms_names import Entry, UnpackError
from .roster import Roster, Student


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


def _by_label(roster: Roster, entry: Entry, layout: str) -> tuple[Student | None, str]:
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


def _match(roster: Roster, entry: Entry, layout: str) -> tuple[Student | None, str]:
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


def who_is_who(
    by_key: dict[str, list[Entry]],
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


def _mapped_to(maps: list[dict[str, str]], entry: Entry, key: str) -> tuple[str | None, str]:
    """(the student the first of `maps` that knows the entry names, and by which name: its LMS key or the id it
    would otherwise be written as), or (None, "")."""
    for found in maps:
        for named in (key, safe_id(entry.label, key)):
            if named in found:
                return found[named], named
    return None, ""


def _unmatched(first: Entry, key: str, sid: str, how: str, roster: Roster | None, layout: str) -> str:
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


def _check_one_folder_each(by_key: dict[str, list[Entry]], ids: dict[str, str]) -> None:
    folders: dict[str, str] = {}
    for key, sid in ids.items():
        clash = folders.get(sid.casefold())
        if clash is not None:
            raise UnpackError(
                f"{by_key[clash][0].name} and {by_key[key][0].name} would both be written to the folder "
                f"{sid!r}; expected one folder per student: fix the roster or the zip"
            )
        folders[sid.casefold()] = key
