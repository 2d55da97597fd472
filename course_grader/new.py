"""`course new NN_name --title "Title"`: start a new exercise set from a template.

It writes two files, and never overwrites either:

- `solutions/NN_name.ipynb`: the set's single source, in the course's nbgrader format: the intro
  (its total written from the metadata), the self-study cell, the setup cell, and three small but
  real exercises of different kinds, each a prompt, an answer cell and a test cell:
  1. implement a function, checked against a reference with a mistake table (`check_function`);
  2. a value worked out by hand, checked against its seal (`check_sealed`), never a literal;
  3. a prediction in several parts, each part checked and reported (`check_all`), earning its
     points part by part;
- `course_lib/checks/lessonNN.py` (or `--checks DIR/lessonNN.py`): the references, the seals and
  the mistake tables behind those test cells, commented for the teacher who writes the next one.

How the notebook finds its checks. In the course's own folder the setup cell imports
`from course_lib.checks import lessonNN`, like every lesson. A teacher's private folder (`--checks
DIR`, e.g. to keep the hidden tests' helpers out of a public fork) is not a package the course
knows: the setup cell puts DIR, as an absolute path, on `sys.path` and imports `lessonNN`. That
works where the tests run: in `course check` (the learner's kernel), in `course grade` (the tests
run in the grader's own process, which runs the setup cell too; the sandboxed kernel that runs the
answers cannot see DIR and does not need it) and in nbgrader (which runs a copy of the notebook in
another folder, hence the absolute path).
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

from course_lib import checks
from course_lib.checks import seal
from course_lib.runner.notebook import validate_solution_notebook, write_atomic

from .build import relabel

NAME = re.compile(r"^(?P<nn>\d{2})_[a-z0-9]+(?:_[a-z0-9]+)*$")
COURSE_CHECKS = Path(checks.__file__).resolve().parent  # where `from course_lib.checks import ...` looks


class NewSetError(ValueError):
    """`course new` cannot write the set: says why and what to do."""


def _meta(grade_id: str, *, grade: bool = False, solution: bool = False, locked: bool = False, points: float | None = None) -> dict:
    nbg = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3, "solution": solution}
    if points is not None:
        nbg["points"] = points
    return {"nbgrader": nbg}


def _lines(text: str) -> list[str]:
    """A source as notebooks store it: a list of lines, each but the last ending in a newline."""
    parts = text.strip("\n").split("\n")
    return [p + "\n" for p in parts[:-1]] + [parts[-1]]


def _markdown(cid: str, text: str, meta: dict) -> dict:
    return {"cell_type": "markdown", "id": cid, "metadata": meta, "source": _lines(text)}


def _code(cid: str, text: str, meta: dict) -> dict:
    return {"cell_type": "code", "execution_count": None, "id": cid, "metadata": meta, "outputs": [], "source": _lines(text)}


def _setup_import(module: str, checks_dir: Path) -> str:
    if checks_dir.resolve() == COURSE_CHECKS:
        return f"from course_lib.checks import {module}"
    return (f"# This set's checks live in a folder of the teacher's own, not in course_lib: put it on the\n"
            f"# import path (absolute, so nbgrader's copy of the notebook finds it too), then import them.\n"
            f"# Last in the cell: the grader's sandbox, where the answers run, cannot see the folder and needs\n"
            f"# nothing from it; the tests run in the grader's own process, which can.\n"
            f"CHECKS_DIR = {str(checks_dir.resolve())!r}\n"
            f"if CHECKS_DIR not in sys.path:\n"
            f"    sys.path.insert(0, CHECKS_DIR)\n"
            f"import {module}")


def solution_notebook(name: str, title: str, module: str, checks_dir: Path) -> dict:
    nn = NAME.match(name)["nn"]
    intro = f"""# Exercises {nn}: {title}

These exercises ({title}) practise a softmax written by hand, one of its values worked out on paper,
and the shapes of the products that attention is made of. (A template: say here what your set practises.)

**How to work:** write your answer in each cell marked `# YOUR CODE HERE` (delete the
`raise NotImplementedError()` line), run it, then run the test cell below it. A test cell prints
`✔ ... passed`, or says what looks wrong and often which mistake it looks like. To check the
whole notebook at once, run `course check exercises/{name}.ipynb` in a terminal.

**What is graded:** only the code in the answer cells (those marked `# YOUR CODE HERE`). A cell
you add yourself is run neither by `course check` nor by your teacher's grader, so keep any helper
function inside the answer cell that uses it. An exercise in several parts earns its points part
by part. `course check` runs the visible tests only: a teacher's grading adds hidden tests, which
may lower its total, so make your functions work for any valid input, not only the examples.

Difficulty: ★☆☆ quick, ★★☆ needs some thought, ★★★ a real puzzle. **Total: 0 points.**"""
    setup = f"""import math
import sys

import torch

from course_lib import checks
from course_lib.device import seed_everything

seed_everything(0)

{_setup_import(module, checks_dir)}"""
    cells = [
        _markdown("intro", intro, _meta("intro", locked=True)),
        # Left out of a class release (`course build --class`): the only cell that names solutions/.
        _markdown("self-study", f"**Studying on your own?** The worked answers are in `solutions/{name}.ipynb`: "
                  "try first, look after.", {**_meta("self_study", locked=True), "tags": ["self-study"]}),
        _code("setup", setup, _meta("setup", locked=True)),
        # --- Exercise 1: implement a function, checked against a reference with a mistake table ---
        _markdown("ex1_prompt", """## Exercise 1: Softmax by hand (★☆☆, 0 points)

*Practises:* turning scores into probabilities.

Write `softmax(scores)`: it takes a list of numbers and returns their softmax, a list (or a 1-D
tensor) of the same length whose entries are `exp(s_i) / sum_j exp(s_j)`. Use `math.exp` or
torch operations, not `torch.softmax`: the point is to build it.""", _meta("ex1_prompt", locked=True)),
        _code("ex1_answer", """def softmax(scores):
    \"\"\"The softmax of a list of numbers, as a list of the same length.\"\"\"
    ### BEGIN SOLUTION
    # Subtracting the largest score changes nothing mathematically and keeps exp() from overflowing.
    top = max(scores)
    exps = [math.exp(s - top) for s in scores]
    total = sum(exps)
    return [e / total for e in exps]
    ### END SOLUTION""", _meta("ex1_answer", solution=True)),
        _code("ex1_test", f"""{module}.check_softmax(checks.answer("softmax"))
### BEGIN HIDDEN TESTS
# Hidden tests may keep literals: learners never see them. Large scores: a softmax without the
# max subtraction overflows to nan here.
{module}.check_softmax(checks.answer("softmax"), cases=[([1000.0, 1001.0],), ([-3.0],)])
### END HIDDEN TESTS""", _meta("ex1_test", grade=True, locked=True, points=3)),
        # --- Exercise 2: a value worked out by hand, checked against its seal ---
        _markdown("ex2_prompt", """## Exercise 2: One probability on paper (★☆☆, 0 points)

*Practises:* reading a softmax without a computer.

Three words score `[1, 2, 3]` against a query. Work out by hand (Python as a calculator is fine:
`math.exp`) the softmax probability of the third word, to three decimal places, and store it in
`p_third`.""", _meta("ex2_prompt", locked=True)),
        _code("ex2_answer", """### BEGIN SOLUTION
p_third = math.exp(3) / (math.exp(1) + math.exp(2) + math.exp(3))  # about 0.665
### END SOLUTION""", _meta("ex2_answer", solution=True)),
        _code("ex2_test", f"""{module}.check_p_third(checks.answer("p_third"))
### BEGIN HIDDEN TESTS
checks.check_close("p_third (computed with torch.softmax)", checks.answer("p_third"),
                   torch.softmax(torch.tensor([1.0, 2.0, 3.0]), dim=0)[2].item(), atol=1e-3)
### END HIDDEN TESTS""", _meta("ex2_test", grade=True, locked=True, points=2)),
        # --- Exercise 3: a prediction in several parts, each part checked (points part by part) ---
        _markdown("ex3_prompt", """## Exercise 3: Predict the shapes (★★☆, 0 points)

*Practises:* following shapes through the products attention is made of.

`x` is a batch of sequences, shaped `(B, T, C) = (4, 10, 16)`, and `W` a weight matrix shaped
`(16, 32)`. Predict, without running them, the shapes of

- `xw_shape`: `x @ W`;
- `scores_shape`: `x @ x.transpose(-2, -1)`;
- `pooled_shape`: `x.mean(dim=1)`.

Write each as a tuple of ints, e.g. `(2, 3)`.""", _meta("ex3_prompt", locked=True)),
        _code("ex3_answer", """### BEGIN SOLUTION
xw_shape = (4, 10, 32)  # the last dimension goes from C = 16 to W's 32 columns
scores_shape = (4, 10, 10)  # one score for every pair of positions
pooled_shape = (4, 16)  # the mean over the T positions leaves one vector per sequence
### END SOLUTION""", _meta("ex3_answer", solution=True)),
        _code("ex3_test", f"""{module}.check_shapes(checks.answer("xw_shape"), checks.answer("scores_shape"), checks.answer("pooled_shape"))
### BEGIN HIDDEN TESTS
_x, _w = torch.zeros(4, 10, 16), torch.zeros(16, 32)
checks.check_equal("xw_shape (measured)", tuple(checks.answer("xw_shape")), tuple((_x @ _w).shape))
checks.check_equal("scores_shape (measured)", tuple(checks.answer("scores_shape")), tuple((_x @ _x.transpose(-2, -1)).shape))
checks.check_equal("pooled_shape (measured)", tuple(checks.answer("pooled_shape")), tuple(_x.mean(dim=1).shape))
# THE NEXT EXERCISE goes below this test cell: copy the three cells of an exercise above (prompt,
# answer, test), give them new cell ids and grade_ids ("ex4_prompt", "ex4_answer", "ex4_test"),
# set the test cell's points in its nbgrader metadata, and write its check in {module}.py.
# Leave the "(★☆☆, N points)" label and the intro's total to `course build`: it writes them from
# the metadata, and `course build --check` says when the notebook's own labels disagree.
### END HIDDEN TESTS""", _meta("ex3_test", grade=True, locked=True, points=3)),
    ]
    nb = {"cells": cells,
          "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
                       "language_info": {"name": "python"}},
          "nbformat": 4, "nbformat_minor": 5}
    relabel(nb)  # the headings' points and the intro's total, from the metadata
    for cell in nb["cells"]:
        cell["source"] = _lines("".join(cell["source"]))
    return nb


def checks_module(name: str, title: str, module: str) -> str:
    p_third = math.exp(3) / (math.exp(1) + math.exp(2) + math.exp(3))
    s = {  # the seals of the answer and of the values the mistakes give (see core.seal)
        "p_third": seal(p_third, name="p_third", decimals=3),
        "ratio": seal(3 / 6, name="p_third", decimals=3),
        "unnormalised": seal(math.exp(3), name="p_third", decimals=3),
        "first": seal(math.exp(1) / (math.exp(1) + math.exp(2) + math.exp(3)), name="p_third", decimals=3),
        "xw": seal((4, 10, 32), name="xw_shape", decimals=None),
        "xw_same": seal((4, 10, 16), name="xw_shape", decimals=None),
        "scores": seal((4, 10, 10), name="scores_shape", decimals=None),
        "scores_cc": seal((4, 16, 16), name="scores_shape", decimals=None),
        "pooled": seal((4, 16), name="pooled_shape", decimals=None),
        "pooled_c": seal((4, 10), name="pooled_shape", decimals=None),
        "pooled_keep": seal((4, 1, 16), name="pooled_shape", decimals=None),
    }
    return f'''"""Checks for the lesson {NAME.match(name)["nn"]} exercises ({title}): reference functions, mistake tables
and one check per exercise, called by the test cells of solutions/{name}.ipynb.

How to write a check (the pattern of every course_lib/checks/lessonNN.py):
- one function per exercise, named after what it checks, taking the learner's values as plain data
  (numbers, lists, tensors) or the learner's function, which it only ever calls (through
  `call`/`check_function`, so a crash becomes a message, never a traceback);
- a reference: the right function, or, for an answer worked out by hand, the seal of the right value
  (`seal(value, name=..., decimals=...)`, computed once and pasted here), never the value itself,
  so that reading this file does not give the answer away;
- a mistake table: description -> what that mistake gives (a function, or a seal). The description
  finishes the sentence "it looks like you ...", so write it as the learner's likely slip;
- a default hint for every other wrong answer; `check_all` for several parts, so that every wrong
  part is reported and a partly right answer earns its points part by part.
Test them in tests/test_checks_{NAME.match(name)["nn"]}.py: the reference passes, each mistake gets its hint.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch

from course_lib.checks.core import check_all, check_function, check_sealed


# --- Exercise 1: softmax -----------------------------------------------------------------------------


def _softmax(scores: Sequence[float]) -> torch.Tensor:
    return torch.softmax(torch.tensor(scores, dtype=torch.float64), dim=0)


# A mistake: a description (finishing "it looks like you ...") -> a function that makes that mistake.
SOFTMAX_MISTAKES: dict[str, Callable] = {{
    "divided each score by the sum of the scores, without exponentiating them first":
        lambda scores: torch.tensor(scores, dtype=torch.float64) / sum(scores),
    "returned the exponentials without dividing by their sum":
        lambda scores: torch.exp(torch.tensor(scores, dtype=torch.float64)),
}}


def check_softmax(fn: Callable, cases: Sequence[tuple] = (([1.0, 2.0, 3.0],), ([0.0, 0.0],), ([-1.0, 5.0, 2.0, 0.5],)),
                  name: str = "softmax") -> None:
    """Exercise 1: the learner's `softmax(scores)` against torch.softmax, on each case."""
    check_function(name, fn, cases, _softmax, atol=1e-6, mistakes=SOFTMAX_MISTAKES,
                   hint="exponentiate every score, then divide each exponential by their sum.")


# --- Exercise 2: one probability by hand -----------------------------------------------------------------
# Seals, not values: seal(value, name="p_third", decimals=3) for the answer and for each mistake.
P_THIRD = {s["p_third"]!r}
P_THIRD_MISTAKES = {{
    "divided the score by the sum of the scores (3 / 6), without exponentiating": {s["ratio"]!r},
    "stopped at exp(3), without dividing by the sum of the exponentials": {s["unnormalised"]!r},
    "worked out the probability of the first word instead of the third": {s["first"]!r},
}}


def check_p_third(value: Any) -> None:
    """Exercise 2: softmax([1, 2, 3])[2] worked out by hand."""
    check_sealed("p_third", value, P_THIRD, decimals=3, mistakes=P_THIRD_MISTAKES,
                 hint="p = exp(3) / (exp(1) + exp(2) + exp(3)).")


# --- Exercise 3: three shapes, each part checked -----------------------------------------------------------
SHAPES = {{  # name -> (seal of the right shape, {{mistake: seal of the shape it gives}})
    "xw_shape": ({s["xw"]!r}, {{"kept C = 16 as the last dimension; x @ W has W's 32 columns": {s["xw_same"]!r}}}),
    "scores_shape": ({s["scores"]!r}, {{"multiplied over the positions instead of the features (x.transpose(-2, -1) @ x)":
                                         {s["scores_cc"]!r}}}),
    "pooled_shape": ({s["pooled"]!r}, {{"averaged over the features (dim=-1) instead of the positions (dim=1)": {s["pooled_c"]!r},
                                       "kept the averaged dimension (keepdim=True is not the default)": {s["pooled_keep"]!r}}}),
}}


def check_shapes(xw_shape: Any, scores_shape: Any, pooled_shape: Any) -> None:
    """Exercise 3: every part checked and every wrong part reported; each right part earns its share."""
    given = {{"xw_shape": xw_shape, "scores_shape": scores_shape, "pooled_shape": pooled_shape}}
    check_all(*(lambda n=n: check_sealed(n, given[n], SHAPES[n][0], kind="shape", mistakes=SHAPES[n][1],
                                         hint="write out (B, T, C) for x and follow each dimension through the product.")
                for n in SHAPES))


# THE NEXT EXERCISE: its check goes here, with its reference (or seals) and its mistake table.
'''


def new_set(name: str, title: str, solutions: Path, checks_dir: Path) -> list[Path]:
    """Write the new set's solution notebook and checks module; the paths written."""
    match = NAME.match(name)
    if not match:
        raise NewSetError(f"the name must look like NN_name (two digits, then lowercase words joined by _), e.g. "
                          f"12_my_topic; got {name!r}")
    if not title.strip():
        raise NewSetError("--title must not be empty")
    module = f"lesson{match['nn']}"
    notebook, checks_file = solutions / f"{name}.ipynb", checks_dir / f"{module}.py"
    taken = [p for p in (notebook, checks_file) if p.exists()]
    taken += [p for p in solutions.glob(f"{match['nn']}_*.ipynb") if p != notebook]
    if taken:
        raise NewSetError("nothing was written: " + ", ".join(map(str, taken)) + " already exist(s); "
                          "choose another number, or move the existing files away first.")
    nb = solution_notebook(name, title.strip(), module, checks_dir)
    problems = validate_solution_notebook(nb, notebook.name)
    assert not problems, problems  # the template itself is broken: a bug here, not the teacher's
    write_atomic(checks_file, checks_module(name, title.strip(), module))
    write_atomic(notebook, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    return [notebook, checks_file]
