"""`course seal lessonNN`: write a checks module's table of seals from the plain values.

A checks module keeps the answers its exercises work out by hand, and the values of the mistakes its
hints name, as seals only (`course_lib.checks.core.Seals`): one table,

    SEALS = Seals({
        "cos_ab": (6, "642209b41775f26e068c", {
            "forgot to divide by the lengths (that is the plain dot product)":
                "1a4f3a0792d06e61a48d",
        }),
    })

The plain values live in a values file, a Python file that defines `VALUES` with the same layout and
values where the seals go:

    VALUES = {
        "cos_ab": (6, 4 / 9, {
            "forgot to divide by the lengths (that is the plain dot product)": 4.0,
        }),
    }

`course seal lesson01` seals every value (`seal(value, name=..., decimals=...)`) and writes the table
into the module in place of the old one; nothing else of the module changes. So when an exercise's
numbers change, the teacher edits the values file and runs the command, instead of recomputing
hashes by hand. `--check` writes nothing and fails if the table is not what the values give.

Where the values files live. They are answers: they must never travel with the `course_lib` that a
learner installs. The course keeps its own in `solutions/seals/lessonNN.py`, next to the solution
notebooks, the teacher-side source that `course build` turns into exercises/ (it reads only the
notebooks there; nothing under solutions/ is part of either package). A teacher's own set, made with
`course new --checks DIR`, keeps its values file wherever its solutions are: `--values FILE`.
"""

from __future__ import annotations

import ast
import json
import runpy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from course_lib.checks import seal
from course_lib.runner.notebook import write_atomic

WIDTH = 120  # the course's longest line (pyproject.toml's ruff line-length)


class SealError(ValueError):
    """The values file or the module cannot be sealed: says which entry or line, and why."""


@dataclass
class Report:
    module: Path
    answers: int  # entries of the table
    seals: int  # seals written: answers and mistakes
    changed: bool  # the module's table was (or, with --check, would be) rewritten


def read_values(path: Path) -> dict[str, tuple[int | None, Any, dict[str, Any]]]:
    """The `VALUES` table of a values file (a Python file the teacher wrote: it is run)."""
    if not path.is_file():
        raise SealError(f"no values file at {path}")
    try:
        values = runpy.run_path(str(path)).get("VALUES")
    except Exception as err:  # noqa: BLE001 - a broken values file is reported, not raised
        raise SealError(f"{path} could not be run: {type(err).__name__}: {err}") from None
    if not isinstance(values, dict) or not values:
        raise SealError(f"{path} defines no VALUES table: VALUES = {{name: (decimals, answer, {{mistake: value}})}}")
    for name, entry in values.items():
        if not (
            isinstance(name, str)
            and isinstance(entry, tuple)
            and len(entry) == 3
            and isinstance(entry[2], dict)
            and (entry[0] is None or type(entry[0]) is int)
        ):
            raise SealError(
                f"{path}: VALUES[{name!r}] should be (decimals, answer, {{mistake: value}}), "
                f"decimals an int or None; got {entry!r:.200}"
            )
    return values


def _seal_of(value: Any, name: str, decimals: int | None, what: str) -> str:
    try:
        return seal(value, name=name, decimals=decimals)
    except TypeError as err:
        raise SealError(f"{name}: {what}: {err}") from None


def sealed_table(values: dict[str, tuple[int | None, Any, dict[str, Any]]]) -> dict[str, tuple]:
    """Every value of `values` replaced by its seal; a mistake that cannot be told apart from the answer
    or from an earlier mistake (its value seals alike) is an error, as its hint could never be shown."""
    table = {}
    for name, (decimals, answer, mistakes) in values.items():
        answer_seal = _seal_of(answer, name, decimals, "the answer")
        seen = {answer_seal: "the answer"}
        mistake_seals = {}
        for description, value in mistakes.items():
            what = f"the mistake {description!r:.80}"
            mistake_seals[description] = s = _seal_of(value, name, decimals, what)
            if s in seen:
                precision = "exactly" if decimals is None else f"at {decimals} decimals"
                raise SealError(
                    f"{name}: {what} gives the same value as {seen[s]} ({precision}), so its hint could never be shown"
                )
            seen[s] = what
        table[name] = (decimals, answer_seal, mistake_seals)
    return table


def _literal(text: str, room: int) -> list[str]:
    """`text` as one or more double-quoted literals, each at most `room` characters, split after spaces."""
    pieces, rest = [], text
    while len(json.dumps(rest, ensure_ascii=False)) > room:
        cut = rest.rfind(" ", 0, room - 2)
        while cut > 0 and len(json.dumps(rest[: cut + 1], ensure_ascii=False)) > room:
            cut = rest.rfind(" ", 0, cut)
        if cut <= 0:  # one long word: leave it whole
            break
        pieces.append(rest[: cut + 1])
        rest = rest[cut + 1 :]
    return [json.dumps(p, ensure_ascii=False) for p in [*pieces, rest]]


def render(table: dict[str, tuple], target: str = "SEALS") -> str:
    """The source of `SEALS = Seals({...})` for `table`, lines within WIDTH characters."""
    lines = [f"{target} = Seals({{"]
    for name, (decimals, answer, mistakes) in table.items():
        head = f"    {json.dumps(name)}: ({decimals!r}, {json.dumps(answer)}, {{"
        if not mistakes:
            lines.append(head + "}),")
            continue
        lines.append(head)
        for description, s in mistakes.items():
            quoted = json.dumps(s)
            one_line = f"        {json.dumps(description, ensure_ascii=False)}: {quoted},"
            if len(one_line) <= WIDTH:
                lines.append(one_line)
                continue
            key = _literal(description, WIDTH - 9)  # 8 spaces before, a colon after
            lines += [f"        {k}" for k in key[:-1]] + [f"        {key[-1]}:", f"            {quoted},"]
        lines.append("    }),")
    lines.append("})")
    return "\n".join(lines) + "\n"


def _table_span(source: str, path: Path) -> tuple[int, int]:
    """The lines (first, last, 1-based) of the module's `SEALS = Seals({...})` statement."""
    try:
        tree = ast.parse(source, str(path))
    except SyntaxError as err:
        raise SealError(f"{path} is not valid Python: {err}") from None
    found = [
        node
        for node in tree.body
        if isinstance(node, ast.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0], ast.Name)
        and node.targets[0].id == "SEALS"
        and isinstance(node.value, ast.Call)
        and getattr(node.value.func, "id", None) == "Seals"
    ]
    if len(found) != 1:
        raise SealError(f"{path} should hold one table `SEALS = Seals({{...}})` at the top level, found {len(found)}")
    return found[0].lineno, found[0].end_lineno


def seal_module(module: Path, values_file: Path, check: bool = False) -> Report:
    """Rewrite `module`'s SEALS table from `values_file` (with `check`, only compare)."""
    if not module.is_file():
        raise SealError(f"no checks module at {module}")
    table = sealed_table(read_values(values_file))
    source = module.read_text(encoding="utf-8")
    first, last = _table_span(source, module)
    lines = source.splitlines(keepends=True)
    new = "".join(lines[: first - 1]) + render(table) + "".join(lines[last:])
    changed = new != source
    if changed and not check:
        write_atomic(module, new)
    n_seals = sum(1 + len(mistakes) for _, _, mistakes in table.values())
    return Report(module, len(table), n_seals, changed)
