"""`course merge OUT1 OUT2 ... --out OUT`: the gradebooks of a class graded in parts, made one.

A job array grades a class in parts (`course grade ... --shard K/N --out part-K`, one part per job, each
with its own gradebook, often a copy of the class's gradebook as it was before). `merge_gradebooks`
joins them: every table of each gradebook (see `gradebook_schema.SCHEMA`), so that the result is what one run
over the whole class would have written:

- results (the latest and every earlier attempt) and their history of replaced versions, with the runs
  that graded them (renumbered; a run that several parts share, copied from the same gradebook, is one);
- what `course unpack` recorded, deadlines, students' extensions and adjustments (a removed one stays
  removed), marks of written answers (each with the mark it replaced), the roster, the remembered LMS
  columns and the LMS ids mapped to students (`course unpack --map`; one student per LMS id).

A record found in several parts (the same row copied into each) is kept once. Two parts that disagree
are a conflict, and the merge writes nothing and names it: two different grades of one student's
attempt of an assignment, two deadlines for one assignment, two roster entries for one id, two
different records of one unpacked file, two values of one setting. One exception: a grade that another
part's history shows it replaced (a part regraded what the copied gradebook held) gives way to the
newer one. Adjustments and marks are records: what each part added is kept, and an adjustment a part
removed stays removed; still, make them in the merged gradebook rather than in the parts.

The merged gradebook is written beside the output's and then moved into place, and its exports
(`export.write_exports`) are rewritten, as after a run of `course grade`.
"""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from course_lib.runner.feedback import num

from .gradebook import Gradebook, now, open_gradebook

IGNORED_META = ("schema",)


class MergeConflict(ValueError):
    """Two gradebooks disagree about one record: says which, and what each holds."""


@dataclass
class MergeReport:
    out: Path
    inputs: list[Path]
    counts: dict[str, int] = field(default_factory=dict)  # table -> records in the merged gradebook
    superseded: list[str] = field(default_factory=list)  # grades another part had replaced, with which part
    warnings: list[str] = field(default_factory=list)  # the merged gradebook's state (see Gradebook.state_warnings)

    def lines(self) -> list[str]:
        c = self.counts
        said = [
            f"merged {len(self.inputs)} gradebook(s) into {self.out / 'gradebook.db'}: {c.get('rows', 0)} grade(s) of "
            f"{c.get('students', 0)} student(s) in {c.get('assignments', 0)} assignment(s) ({c.get('results', 0)} "
            f"attempt(s), {c.get('history', 0)} replaced version(s)), {c.get('runs', 0)} run(s), "
            f"{c.get('marks', 0)} mark(s), {c.get('adjustments', 0)} adjustment(s), {c.get('deadlines', 0)} "
            f"deadline(s), a roster of {c.get('roster', 0)}"
        ]
        said += [f"  kept the newer grade: {s}" for s in self.superseded]
        said += [f"warning: {w}" for w in self.warnings]
        return said


def _table(db: sqlite3.Connection, name: str) -> list[dict]:
    cur = db.execute(f"SELECT * FROM {name} ORDER BY rowid")  # noqa: S608 - our own table names
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur]


def _label(path: Path) -> str:
    return str(path)


def _grade(r: dict) -> str:
    return f"{num(r['score'])} / {num(r['max_score'])} ({r['status']}, graded {r['graded_at']})"


def _deadline(d: dict) -> str:
    return (
        f"due {d['due']}, -{d['percent_per_day']:g}% a started day late (at most -{d['max_percent']:g}%, grace "
        f"{d['grace_minutes']:g} min)"
    )


def _same_version(h: dict, r: dict) -> bool:
    """Whether history entry `h` is the version `r` of the same attempt (the row a later grading replaced)."""
    keys = (
        "student",
        "assignment",
        "attempt",
        "status",
        "score",
        "max_score",
        "solutions_sha256",
        "graded_at",
        "tests",
    )
    return all(h[k] == r[k] for k in keys)


def merge_gradebooks(inputs: list[Path], out: Path, command: str = "course merge") -> MergeReport:
    """Merge the gradebooks in the folders `inputs` into `out/gradebook.db` (see the module's docstring) and
    rewrite its exports. `out` may be one of the inputs; otherwise it must not hold a gradebook yet.
    Raises MergeConflict (nothing written) when two inputs disagree."""
    from .export import write_exports

    out = Path(out)
    folders = [Path(p) for p in inputs]
    if not folders:
        raise ValueError("name the gradebooks to merge: course merge part-1 part-2 ... --out grades")
    for folder in folders:
        if not (folder / "gradebook.db").is_file():
            raise ValueError(f"no gradebook in {folder} (expected {folder / 'gradebook.db'}, written by course grade)")
    resolved = [f.resolve() for f in folders]
    if len(set(resolved)) < len(resolved):
        raise ValueError("a gradebook is named twice: " + ", ".join(str(f) for f in folders))
    if (out / "gradebook.db").exists() and out.resolve() not in resolved:
        raise ValueError(
            f"{out} holds a gradebook already: name it among the gradebooks to merge (course merge {out} ... "
            f"--out {out}) or merge into a new folder"
        )
    tables: list[dict[str, list[dict]]] = []
    for folder in folders:  # opening each through Gradebook brings an older gradebook's columns up to date
        with closing(open_gradebook(folder)) as book:
            tables.append(
                {
                    name: _table(book.db, name)
                    for name in ("meta", "roster", "deadlines", "runs", "results", "history", "unpacked", "adjustments")
                    + ("marks", "extensions", "lms_map")
                }
            )
    report = MergeReport(out, folders)
    merged = _merge(folders, tables, report)
    out.mkdir(parents=True, exist_ok=True)
    draft = out / f".gradebook-merge-{os.getpid()}.db"
    draft.unlink(missing_ok=True)
    try:
        book = Gradebook(draft)
        with closing(book), book.db:
            for name, records in merged.items():
                if not records:
                    continue
                columns = list(records[0])
                marks = ",".join("?" * len(columns))
                book.db.executemany(  # into an empty gradebook (its schema version aside)
                    f"INSERT OR REPLACE INTO {name} ({','.join(columns)}) VALUES ({marks})",  # noqa: S608
                    [tuple(r[c] for c in columns) for r in records],
                )
            warnings = list(
                dict.fromkeys(w for t in tables for w in (json.loads(t["runs"][-1]["warnings"]) if t["runs"] else []))
            )
            book.db.execute(
                "INSERT INTO runs (started_at, finished_at, command, solutions, warnings, reason, changes) "
                "VALUES (?, ?, ?, '', ?, '', '[]')",
                (now(), now(), command, json.dumps(warnings, ensure_ascii=False)),
            )
        os.replace(draft, out / "gradebook.db")
    finally:
        draft.unlink(missing_ok=True)
    with closing(open_gradebook(out)) as book:
        rows = book.rows()
        report.warnings = book.state_warnings()
        write_exports(book, out)
    report.counts.update(
        {name: len(records) for name, records in merged.items()},
        rows=len(rows),
        students=len({r.student for r in rows}),
        assignments=len({r.assignment for r in rows}),
        runs=len(merged["runs"]) + 1,
    )
    return report


def _merge(folders: list[Path], tables: list[dict], report: MergeReport) -> dict[str, list[dict]]:
    """The merged records of every table, or MergeConflict: one step per table, in the order they are written."""
    runs, run_of = _merge_runs(tables)
    return {
        "meta": _merge_meta(folders, tables),
        "roster": _merge_roster(folders, tables),
        "deadlines": _merge_deadlines(folders, tables),
        "runs": runs,
        "history": _merge_history(tables, run_of),
        "results": _merge_results(folders, tables, run_of, report),
        "unpacked": _merge_unpacked(folders, tables),
        "adjustments": _merge_adjustments(tables),
        "marks": _merge_marks(tables),
        "extensions": _merge_extensions(tables),
        "lms_map": _merge_lms_map(folders, tables),
    }


def _merge_meta(folders: list[Path], tables: list[dict]) -> list[dict]:
    """The gradebook's settings (the roster's source, the LMS columns remembered for each LMS, ...): one value
    per key."""
    meta: dict[str, tuple[str, int]] = {}
    for i, t in enumerate(tables):
        for r in t["meta"]:
            if r["key"] in IGNORED_META:
                continue
            seen = meta.get(r["key"])
            if seen is not None and seen[0] != r["value"]:
                raise MergeConflict(
                    f"two different values of the gradebook's setting {r['key']!r}: {seen[0]!r} in "
                    f"{_label(folders[seen[1]])}, {r['value']!r} in {_label(folders[i])}"
                )
            meta[r["key"]] = (r["value"], i)
    return [{"key": k, "value": v} for k, (v, _) in meta.items()]


def _merge_roster(folders: list[Path], tables: list[dict]) -> list[dict]:
    """The roster: one entry per student id, in the order the first gradebook that lists them has them."""
    roster: dict[str, tuple[dict, int]] = {}
    for i, t in enumerate(tables):
        for r in sorted(t["roster"], key=lambda r: r["position"]):
            seen = roster.get(r["student"])
            same = ("name", "email", "extra", "status")
            if seen is not None and any(seen[0][k] != r[k] for k in same):
                theirs = ", ".join(f"{k} {seen[0][k]!r}" for k in same if seen[0][k] != r[k])
                ours = ", ".join(f"{k} {r[k]!r}" for k in same if seen[0][k] != r[k])
                raise MergeConflict(
                    f"two different roster entries for {r['student']}: {theirs} in {_label(folders[seen[1]])}; "
                    f"{ours} in {_label(folders[i])}"
                )
            roster.setdefault(r["student"], (r, i))
    return [{**r, "position": n} for n, (r, _) in enumerate(roster.values())]


def _merge_deadlines(folders: list[Path], tables: list[dict]) -> list[dict]:
    """The deadlines: one per assignment."""
    deadlines: dict[str, tuple[dict, int]] = {}
    for i, t in enumerate(tables):
        for r in t["deadlines"]:
            seen = deadlines.get(r["assignment"])
            if seen is not None and seen[0] != r:
                raise MergeConflict(
                    f"two different deadlines for {r['assignment']}: {_deadline(seen[0])} in "
                    f"{_label(folders[seen[1]])}; {_deadline(r)} in {_label(folders[i])}"
                )
            deadlines.setdefault(r["assignment"], (r, i))
    return [r for r, _ in deadlines.values()]


RUN_KEY = ("id", "started_at", "finished_at", "command", "solutions", "warnings", "reason", "changes")


def _merge_runs(tables: list[dict]) -> tuple[list[dict], list[dict[int, int]]]:
    """(The runs, renumbered in the order they started, for each gradebook its run ids -> the new ones). A run
    that several parts copied (the same id, the same record) is one."""
    unique: dict[tuple, dict] = {}
    for t in tables:
        for r in t["runs"]:
            unique.setdefault(tuple(r[k] for k in RUN_KEY), r)
    ordered = sorted(unique, key=lambda k: (k[1], k[0]))
    new_id = {k: n for n, k in enumerate(ordered, 1)}
    runs = [{k: v for k, v in zip(RUN_KEY, key, strict=True)} | {"id": new_id[key]} for key in ordered]
    run_of = [{r["id"]: new_id[tuple(r[k] for k in RUN_KEY)] for r in t["runs"]} for t in tables]
    return runs, run_of


def _renumbered(r: dict, run_of: dict[int, int], *columns: str) -> dict:
    """Record `r` with the runs its `columns` name renumbered as in the merged gradebook."""
    return {**r, **{c: run_of.get(r[c]) if r[c] is not None else None for c in columns}}


def _merge_history(tables: list[dict], run_of: list[dict[int, int]]) -> list[dict]:
    """Every replaced version of a grade, once."""
    history: dict[tuple, dict] = {}
    for i, t in enumerate(tables):
        for r in t["history"]:
            m = _renumbered(r, run_of[i], "run", "replaced_by_run")
            history.setdefault(tuple(m.values()), m)
    return sorted(history.values(), key=lambda h: h["replaced_at"])


def _merge_results(
    folders: list[Path], tables: list[dict], run_of: list[dict[int, int]], report: MergeReport
) -> list[dict]:
    """The grades: one per (student, assignment, attempt); a version another part's history replaced gives way
    (said in `report.superseded`)."""
    results: dict[tuple, tuple[dict, int]] = {}
    for i, t in enumerate(tables):
        for r in t["results"]:
            m = _renumbered(r, run_of[i], "run")
            key = (m["student"], m["assignment"], m["attempt"])
            seen = results.get(key)
            if seen is None or seen[0] == m:
                results.setdefault(key, (m, i))
                continue
            old, j = seen
            if any(_same_version(h, old) for h in tables[i]["history"]):
                results[key] = (m, i)
                report.superseded.append(
                    f"{key[0]}, {key[1]} (attempt {key[2]}): {_grade(m)} from {_label(folders[i])} replaced "
                    f"{_grade(old)} from {_label(folders[j])}"
                )
            elif any(_same_version(h, m) for h in tables[j]["history"]):
                report.superseded.append(
                    f"{key[0]}, {key[1]} (attempt {key[2]}): {_grade(old)} from {_label(folders[j])} replaced "
                    f"{_grade(m)} from {_label(folders[i])}"
                )
            else:
                raise MergeConflict(
                    f"two gradebooks grade {key[0]}'s {key[1]} (attempt {key[2]}) differently: {_grade(old)} in "
                    f"{_label(folders[j])}; {_grade(m)} in {_label(folders[i])}. Grade it again in one of them "
                    f"(course grade ... --student {key[0]}) and leave it out of the other, or merge without one"
                )
    return [r for r, _ in sorted(results.values(), key=lambda x: (x[0]["student"], x[0]["assignment"]))]


def _merge_unpacked(folders: list[Path], tables: list[dict]) -> list[dict]:
    """What `course unpack` recorded: one per (student, assignment)."""
    unpacked: dict[tuple, tuple[dict, int]] = {}
    for i, t in enumerate(tables):
        for r in t["unpacked"]:
            key = (r["student"], r["assignment"])
            seen = unpacked.get(key)
            if seen is not None and {k: v for k, v in seen[0].items() if k != "unpacked_at"} != {
                k: v for k, v in r.items() if k != "unpacked_at"
            }:
                raise MergeConflict(
                    f"two different unpackings of {key[0]}'s {key[1]}: {seen[0]['entry']!r} (sha256 "
                    f"{(seen[0]['sha256'] or '')[:12]}) in {_label(folders[seen[1]])}; {r['entry']!r} (sha256 "
                    f"{(r['sha256'] or '')[:12]}) in {_label(folders[i])}"
                )
            unpacked.setdefault(key, (r, i))
    return [r for r, _ in unpacked.values()]


def _merge_adjustments(tables: list[dict]) -> list[dict]:
    """Adjustments: records, once each, renumbered in the order they were made; one that a part removed (kept
    on record, no longer counted) is removed in the merged gradebook too."""
    removal = ("removed_at", "removed_by", "removed_reason")
    adjustments: dict[tuple, dict] = {}
    for t in tables:
        for r in t["adjustments"]:
            key = tuple(v for k, v in r.items() if k != "id" and k not in removal)
            seen = adjustments.get(key)
            if seen is None or (seen.get("removed_at") is None and r.get("removed_at") is not None):
                adjustments[key] = r
    ordered = sorted(adjustments.values(), key=lambda r: r["created_at"])
    return [{**r, "id": n} for n, r in enumerate(ordered, 1)]


def _mark_key(r: dict) -> tuple:
    """What a mark holds, its ids aside: the same in every part that copied it."""
    return tuple(v for k, v in r.items() if k not in ("id", "replaces"))


def _merge_marks(tables: list[dict]) -> list[dict]:
    """Marks: only ever added, once each, renumbered in the order they were given (the latest counts); the mark
    each one replaced (`replaces`, an id of its own gradebook) is found again by what it holds."""
    marks: dict[tuple, tuple[dict, int]] = {}
    key_of: list[dict[int, tuple]] = []
    for i, t in enumerate(tables):
        key_of.append({r["id"]: _mark_key(r) for r in t["marks"]})
        for r in t["marks"]:
            marks.setdefault(_mark_key(r), (r, i))
    ordered = sorted(marks.items(), key=lambda item: item[1][0]["created_at"])
    mark_id = {key: n for n, (key, _) in enumerate(ordered, 1)}
    found = []
    for key, (r, i) in ordered:
        replaced = key_of[i].get(r["replaces"]) if r.get("replaces") is not None else None
        found.append({**r, "id": mark_id[key], **({"replaces": mark_id.get(replaced)} if "replaces" in r else {})})
    return found


def _merge_extensions(tables: list[dict]) -> list[dict]:
    """Students' extensions: records, once each, renumbered in the order they were given (the latest of a
    student's assignment counts); one that a part replaced or removed stays so."""
    removal = ("removed_at", "removed_by")
    found: dict[tuple, dict] = {}
    for t in tables:
        for r in t["extensions"]:
            key = tuple(v for k, v in r.items() if k != "id" and k not in removal)
            seen = found.get(key)
            if seen is None or (seen.get("removed_at") is None and r.get("removed_at") is not None):
                found[key] = r
    ordered = sorted(found.values(), key=lambda r: (r["created_at"], r["id"]))
    return [{**r, "id": n} for n, r in enumerate(ordered, 1)]


def _merge_lms_map(folders: list[Path], tables: list[dict]) -> list[dict]:
    """The LMS ids teachers mapped to students (`course unpack --map`): one student per LMS key."""
    found: dict[tuple, tuple[dict, int]] = {}
    for i, t in enumerate(tables):
        for r in t["lms_map"]:
            key = (r["layout"], r["lms_key"])
            seen = found.get(key)
            if seen is not None and seen[0]["student"] != r["student"]:
                raise MergeConflict(
                    f"the {r['layout']} id {r['lms_key']} is mapped to {seen[0]['student']} in "
                    f"{_label(folders[seen[1]])} and to {r['student']} in {_label(folders[i])}"
                )
            found.setdefault(key, (r, i))
    return [r for r, _ in found.values()]
