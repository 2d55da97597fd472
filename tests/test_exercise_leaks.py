"""A visible test cell never shows the answer to an exercise worked out by hand.

For every exercise set in solutions/ (those written later included), the hand-worked answers are
the names that an answer cell's solution region assigns (`cos_ab = 4 / 9`, `shape_X = (11, 12)`),
evaluated by running the notebook's setup, given and answer cells. The visible part of each test
cell (what exercises/ shows, hidden tests removed) is then read expression by expression (literals,
arithmetic such as `128 ** 0.25`, look-ups such as `T[2]` after the cell's own assignments) and
every value is compared with the answers: a test cell that spells out an answer, or computes it in
plain sight, fails this test and is named.

Values too common to prove anything (a 0, a 1, a shape like (5, 4), a short word) count as a leak
only next to the answer itself, in the same call as `checks.answer("that_name")`; other scalars
count in their own exercise's test cell, and in other test cells only when they are distinctive
(0.4444, 22400), not when they happen to equal another input (a probability of 0.3).

Each solution notebook is analysed in a subprocess (`python tests/test_exercise_leaks.py NOTEBOOK`),
so that its code cannot change this process.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.slow  # the solutions' cells are run in a kernel

REPO = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((REPO / "solutions").glob("*.ipynb"))
NOT_EVALUATED = {"print", "exec", "eval", "open", "input", "display", "breakpoint", "__import__", "exit", "quit"}


# --- reading the notebook -------------------------------------------------------------------------------


def _meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {}) or {}


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def _is_test(cell: dict) -> bool:
    return bool(_meta(cell).get("grade")) and cell.get("cell_type") == "code"


def _is_answer(cell: dict) -> bool:
    return bool(_meta(cell).get("solution")) and cell.get("cell_type") == "code"


def _runnable(text: str) -> str:
    """A cell's code without IPython magics and shell lines, which plain Python cannot run."""
    return "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in text.splitlines())


def _visible(text: str) -> str:
    """What the built exercise shows of a test cell: everything before the hidden tests."""
    return text.split("### BEGIN HIDDEN TESTS")[0]


def _solution_names(text: str) -> list[str]:
    """Names assigned by top-level statements inside the cell's ### BEGIN/END SOLUTION regions."""
    lines = text.splitlines()
    regions, start = [], None
    for number, line in enumerate(lines, 1):
        if line.strip() == "### BEGIN SOLUTION":
            start = number
        elif line.strip() == "### END SOLUTION" and start is not None:
            regions.append((start, number))
            start = None
    try:
        tree = ast.parse(_runnable(text))
    except SyntaxError:
        return []
    names: list[str] = []
    for stmt in tree.body:
        if not any(a < stmt.lineno and (stmt.end_lineno or stmt.lineno) < b for a, b in regions):
            continue
        targets = (
            stmt.targets
            if isinstance(stmt, ast.Assign)
            else [stmt.target]
            if isinstance(stmt, (ast.AnnAssign, ast.AugAssign))
            else []
        )
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) and node.id not in names:
                    names.append(node.id)
    return names


# --- comparing values --------------------------------------------------------------------------------------


def _numbers(value: Any) -> np.ndarray | None:
    """`value` as a float array when it is a number or a regular array of numbers, else None."""
    if isinstance(value, (bool, str, bytes, dict)) or value is None:
        return None
    try:
        import torch

        if isinstance(value, torch.Tensor):
            value = (
                value.detach().cpu().to(torch.float64).numpy()
                if value.is_floating_point() or not value.is_complex()
                else None
            )
    except ImportError:  # pragma: no cover - torch is a dependency of the course
        pass
    if value is None:
        return None
    if isinstance(value, (list, tuple)) and any(isinstance(v, (bool, str)) for v in value):
        return None
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        return None
    return array if array.size and np.isfinite(array).all() else None


def _same(value: Any, answer: Any) -> bool:
    if isinstance(answer, dict):
        return (
            isinstance(value, dict)
            and set(map(str, value)) == set(map(str, answer))
            and all(_same(value[k], answer[k]) for k in value)
        )
    if isinstance(answer, str):
        return isinstance(value, str) and value.strip().lower() == answer.strip().lower()
    a, v = _numbers(answer), _numbers(value)
    if a is None or v is None or a.size != v.size or np.squeeze(a).shape != np.squeeze(v).shape:
        return False
    return bool(np.allclose(np.squeeze(v), np.squeeze(a), rtol=1e-6, atol=1e-9))


def _rounded_literal(node: ast.AST, value: Any, answer: Any) -> bool:
    """A float literal that is the answer rounded (0.444 for 4/9): at least two decimals and two
    significant digits, so that tolerances such as 0.05 or 1e-6 never count."""
    if (
        not (isinstance(node, ast.Constant) and isinstance(value, float))
        or _numbers(answer) is None
        or _numbers(answer).size != 1
    ):
        return False
    text = repr(value)
    if "e" in text or "." not in text:
        return False
    decimals = len(text.split(".")[1])
    significant = len(text.replace("-", "").replace(".", "").lstrip("0"))
    target = float(_numbers(answer).ravel()[0])
    return decimals >= 2 and significant >= 2 and round(target, decimals) == value != target


def _simple(x: float) -> bool:
    return float(x).is_integer() and abs(x) <= 16 or float(4 * x).is_integer() and abs(x) <= 4


def _common(answer: Any) -> bool:
    """Values so common in code that seeing one proves nothing: small whole numbers and quarters, pairs
    of them (a shape like (5, 4)), booleans, short words."""
    if answer is None or isinstance(answer, bool):
        return True
    if isinstance(answer, str):
        return len(answer.strip()) <= 3
    a = _numbers(answer)
    return a is not None and a.size <= 2 and all(_simple(x) for x in a.ravel())


def _distinctive(answer: Any) -> bool:
    """A value unlikely to turn up by chance in another exercise's test: an array, a number of three or
    more significant digits, or a whole number of at least 100."""
    if isinstance(answer, (str, dict)):
        return not _common(answer)
    a = _numbers(answer)
    if a is None:
        return False
    if a.size > 1:
        return not _common(answer)
    x = float(a.ravel()[0])
    if x.is_integer():
        return abs(x) >= 100
    return len(f"{x:.10g}".replace("-", "").replace(".", "").lstrip("0")) >= 3


# --- the visible test cells ---------------------------------------------------------------------------------


def _answer_names_in(node: ast.AST) -> set[str]:
    """The names asked for with `answer("name")` anywhere inside `node`."""
    found = set()
    for sub in ast.walk(node):
        if (
            isinstance(sub, ast.Call)
            and sub.args
            and isinstance(sub.args[0], ast.Constant)
            and isinstance(sub.args[0].value, str)
        ):
            func = sub.func
            if (isinstance(func, ast.Attribute) and func.attr == "answer") or (
                isinstance(func, ast.Name) and func.id == "answer"
            ):
                found.add(sub.args[0].value)
    return found


def _expressions(tree: ast.AST) -> list[tuple[ast.expr, set[str]]]:
    """Every expression in `tree` with the answer names of the calls it sits in."""
    out: list[tuple[ast.expr, set[str]]] = []

    def visit(node: ast.AST, near: set[str]) -> None:
        if isinstance(node, ast.Call):
            near = near | _answer_names_in(node)
        if isinstance(node, ast.expr):
            out.append((node, near))
        for child in ast.iter_child_nodes(node):
            visit(child, near)

    visit(tree, set())
    return out


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _evaluable(node: ast.expr, forbidden: set[str]) -> bool:
    if isinstance(
        node, (ast.Name, ast.Attribute, ast.Lambda, ast.Starred, ast.Slice, ast.JoinedStr, ast.FormattedValue)
    ):
        return False
    if _names(node) & forbidden:
        return False
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        func = call.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        root = func
        while isinstance(root, ast.Attribute):
            root = root.value
        if name in NOT_EVALUATED or (
            isinstance(root, ast.Name) and root.id in {"plt", "os", "sys", "subprocess", "shutil"}
        ):
            return False
    return True


def find_leaks(nb: dict, label: str) -> list[str]:
    """Run the notebook's non-test cells, then name every visible test expression equal to a hand-worked answer."""
    cells = nb["cells"]
    namespace: dict[str, Any] = {"__name__": "__main__"}
    answers: dict[str, tuple[Any, int]] = {}  # name -> (value, index of its answer cell)
    last = max((i for i, c in enumerate(cells) if _is_answer(c) and _solution_names(_source(c))), default=-1)
    sink = io.StringIO()
    for i, cell in enumerate(cells[: last + 1]):
        if cell.get("cell_type") != "code" or _is_test(cell):
            continue
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            try:
                exec(compile(_runnable(_source(cell)), f"<{label} cell {i}>", "exec"), namespace)
            except BaseException:  # noqa: BLE001 - a cell that fails leaves its names undefined; the others still count
                pass
        if _is_answer(cell):
            for name in _solution_names(_source(cell)):
                value = namespace.get(name)
                if value is not None and not callable(value) and not isinstance(value, type(math)):
                    answers[name] = (value, i)
    if not answers:
        return []
    modules = {k for k, v in namespace.items() if isinstance(v, type(math))}
    answer_names = {n for c in cells if _is_answer(c) for n in _solution_names(_source(c))}
    forbidden = (
        answer_names
        | {m for m in modules if getattr(namespace[m], "__name__", "").startswith("course_lib.checks")}
        | {"checks"}
    )
    own_test = {}  # answer cell index -> the index of the first test cell after it
    for i in sorted({i for _, i in answers.values()}):
        own_test[i] = next((j for j in range(i + 1, len(cells)) if _is_test(cells[j])), None)

    leaks: list[str] = []
    for j, cell in enumerate(cells):
        if not _is_test(cell):
            continue
        text = _runnable(_visible(_source(cell)))
        try:
            tree = ast.parse(text)
        except SyntaxError as err:
            leaks.append(f"{label} {_meta(cell).get('grade_id')}: the visible test cannot be parsed ({err.msg})")
            continue
        local = dict(namespace)
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            for stmt in tree.body:  # the cell's own set-up (T = np.array(...)) so that T[2] can be evaluated
                if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.FunctionDef, ast.Import, ast.ImportFrom)) and not (
                    _names(stmt) & forbidden
                ):
                    try:
                        exec(compile(ast.Module([stmt], []), f"<{label} test {j}>", "exec"), local)
                    except BaseException:  # noqa: BLE001
                        pass
            for node, near in _expressions(tree):
                if not _evaluable(node, forbidden):
                    continue
                try:
                    value = eval(compile(ast.Expression(node), f"<{label} test {j}>", "eval"), local)  # noqa: S307
                except BaseException:  # noqa: BLE001 - not computable here: it shows no value either
                    continue
                for name, (answer, i) in answers.items():
                    if _common(answer):
                        counts = name in near
                    else:
                        counts = own_test.get(i) == j or _distinctive(answer)
                    if counts and (_same(value, answer) or _rounded_literal(node, value, answer)):
                        shown = ast.get_source_segment(text, node) or ast.unparse(node)
                        leaks.append(
                            f"{label} {_meta(cell).get('grade_id')}: the visible test shows `{shown}`, "
                            f"the answer to `{name}`"
                        )
    return sorted(set(leaks))


# --- the tests ----------------------------------------------------------------------------------------------


def _missing_data(nb: dict) -> list[str]:
    needs = nb.get("metadata", {}).get("course", {}).get("data", [])
    folder = Path(os.environ.get("COURSE_DATA_DIR", ""))
    return [name for name in needs if not (folder / name).is_file()]


@pytest.mark.parametrize("path", SOLUTIONS, ids=[p.stem for p in SOLUTIONS])
def test_no_visible_test_cell_shows_a_hand_worked_answer(path):
    nb = json.loads(path.read_text())
    missing = _missing_data(nb)
    if missing:
        pytest.skip(f"{path.name} needs {', '.join(missing)}, which is not in COURSE_DATA_DIR")
    env = {**os.environ, "MPLBACKEND": "Agg"}
    run = subprocess.run(
        [sys.executable, __file__, str(path)], cwd=path.parent, env=env, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, f"the leak check of {path.name} crashed:\n{run.stderr[-3000:]}"
    leaks = json.loads(run.stdout.strip().splitlines()[-1])
    assert not leaks, "move these answers into the lesson's check module as seals (see checks.seal):\n" + "\n".join(
        leaks
    )


def _cell(kind: str, text: str, gid: str, **nbgrader) -> dict:
    cell = {
        "cell_type": kind,
        "id": gid.replace("_", "-"),
        "metadata": {
            "nbgrader": {
                "schema_version": 3,
                "grade_id": gid,
                "grade": False,
                "solution": False,
                "locked": False,
                **nbgrader,
            }
        },
        "source": text,
    }
    if kind == "code":
        cell.update(outputs=[], execution_count=None)
    return cell


def _exercise_set(exercises: list[tuple[str, str]]) -> dict:
    """A solution notebook: a setup cell, then (answer, test) pairs."""
    cells = [_cell("code", "import math\nimport numpy as np\n\nfrom course_lib import checks\n", "setup", locked=True)]
    for k, (answer, test) in enumerate(exercises, 1):
        cells.append(_cell("code", f"### BEGIN SOLUTION\n{answer}\n### END SOLUTION\n", f"ex{k}_answer", solution=True))
        cells.append(_cell("code", test, f"ex{k}_test", grade=True, locked=True, points=1))
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


# The leaks a review found, one exercise each: the answer, and a visible test that shows it.
LEAKY = [
    ("cos_ab", "cos_ab = 4 / (3 * 3)", 'checks.check_close("cos_ab", checks.answer("cos_ab"), 4 / 9)', "4 / 9"),
    (
        "shape_one_hot",
        "shape_one_hot = (4, 7, 50)",
        'checks.check_shape("s", checks.answer("shape_one_hot"), (4, 7, 50))',
        "(4, 7, 50)",
    ),
    (
        "multiply_adds",
        "multiply_adds = 4 * 7 * 50 * 16",
        'checks.check_count("n", checks.answer("multiply_adds"), 22400)',
        "22400",
    ),
    (
        "ppl_by_hand",
        "ppl_by_hand = math.exp(-sum(math.log(p) for p in [0.5, 0.25, 0.5, 0.125]) / 4)",
        'checks.check_close("p", checks.answer("ppl_by_hand"), 128 ** 0.25)',
        "128 ** 0.25",
    ),
    (
        "ppl_uniform",
        "ppl_uniform = 600.0",
        'expected = 600.0\nchecks.check_close("u", checks.answer("ppl_uniform"), expected)',
        "600.0",
    ),
    (
        "fraction_invented",
        "fraction_invented = 0.6 * 0.4 + 0.4 * 0.6",
        'checks.check_close("f", checks.answer("fraction_invented"), 0.48)',
        "0.48",
    ),
    (
        "share_program",
        "share_program = 5.0 / (4.0 + 5.0)",
        'checks.check_close("s", checks.answer("share_program"), 5 / 9, atol=5e-3)',
        "5 / 9",
    ),
    (
        "after_green",
        "after_green = [0.5, 0.2, 0.0, 0.3]",
        "T = np.array([[0.0, 0.5, 0.25, 0.25], [0.1, 0.0, 0.6, 0.3], [0.5, 0.2, 0.0, 0.3], [1.0, 0.0, 0.0, 0.0]])\n"
        'checks.check_close("after_green", checks.answer("after_green"), T[2])',
        "T[2]",
    ),
    (
        "p_down_second",
        "p_down_second = 0.0",
        'checks.check_close("p", checks.answer("p_down_second"), 0.0, mistakes={"x": 0.4})',
        "0.0",
    ),
    (
        "dot_ab",
        "dot_ab = 4.0 / 9",
        'checks.check_close("d", checks.answer("dot_ab"), 0.5, mistakes={"rounded": 0.444})',
        "0.444",
    ),
]


def test_the_leaks_of_issue_9_are_each_named():
    leaky = _exercise_set(
        [
            (answer, test + "\n### BEGIN HIDDEN TESTS\nassert True\n### END HIDDEN TESTS\n")
            for _, answer, test, _ in LEAKY
        ]
    )
    leaks = find_leaks(leaky, "leaky")
    for k, (name, _, _, shown) in enumerate(LEAKY, 1):
        assert any(f"ex{k}_test: the visible test shows `{shown}`, the answer to `{name}`" in leak for leak in leaks), (
            name,
            leaks,
        )


def test_sealed_checks_hidden_literals_and_coincidences_are_not_leaks():
    clean = _exercise_set(
        [
            # the answer sealed in a check module: nothing to see in the cell
            (
                "cos_ab = 4 / 9",
                'SEALS = checks.Seals({"cos_ab": (6, checks.seal(0.1, name="cos_ab", decimals=6), {})})\n'
                'SEALS.check("cos_ab", checks.answer("cos_ab"), "number")',
            ),
            # hidden tests may keep literals
            (
                "multiply_adds = 4 * 7 * 50 * 16",
                'checks.check_count("n", checks.answer("multiply_adds"), 1)\n'
                "### BEGIN HIDDEN TESTS\nchecks.check_count('n', "
                "checks.answer('multiply_adds'), 22400)\n### END HIDDEN TESTS\n",
            ),
            # a function exercise whose inputs happen to hold the other answers' common values
            (
                "p_down_second = 0.0\nn_layers = 1",
                "_ = checks.check_close('f', 0.5, 0.5, atol=1e-6)\ncases = [(0, 3), (1, 7)]",
            ),
            # a probability of 0.3 in another exercise's inputs is a coincidence, not the answer of exercise 5
            ("p_off_first = 0.3", "pass"),
            ("x = 1", 'dist = {"a": 0.3, "b": 0.7}\nchecks.check_close("x", checks.answer("x"), 2)'),
        ]
    )
    assert find_leaks(clean, "clean") == []


def test_answers_come_from_solution_regions_only():
    text = (
        "given = 22400\n### BEGIN SOLUTION\nshape_X = (11, 12)\nmask = "
        "np.zeros(3)\nmask[0] = 1.0\ndef f():\n    y = 3\n### END SOLUTION\n"
    )
    assert _solution_names(text) == ["shape_X", "mask"]
    assert (
        _solution_names("def f(x):\n    ### BEGIN SOLUTION\n    y = 2 * x\n    return y\n    ### END SOLUTION\n") == []
    )


if __name__ == "__main__":  # one notebook, analysed in a process of its own: prints the leaks as JSON
    target = Path(sys.argv[1])
    print(json.dumps(find_leaks(json.loads(target.read_text()), target.stem)))
