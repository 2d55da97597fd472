"""How long a learner needs for each lesson and exercise set: `python -m bench.study_time`.

An estimate from what the notebooks hold, not a measurement with learners (none has been made).
Reading and doing a lesson: its prose at 120 words a minute (technical text with formulas, read
to be understood, goes at about half the speed of ordinary prose), its code at 8 lines a minute
(read, run and compared with what the lesson says to expect), a minute per figure, and the time
the notebook takes to run. An exercise set: 3 minutes for its introduction, then per exercise by
its difficulty label, ★☆☆ 5 minutes, ★★☆ 12, ★★★ 25, and 10 for a written answer. Each total is
rounded to 5 minutes (an exercise set) or 15 minutes (a lesson). The README's course map quotes
these figures; run this again after a lesson changes much.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROSE_WPM = 120
CODE_LINES_PER_MIN = 8
FIGURE_MIN = 1.0
INTRO_MIN = 3.0
EXERCISE_MIN = {1: 5.0, 2: 12.0, 3: 25.0}  # by the number of ★ in "(★★☆, N points)"
WRITTEN_MIN = 10.0
EXERCISE_HEADING = re.compile(r"^#+\s*Exercise\s+[^:\s]+\s*:.*\((?P<stars>[★☆]+),", re.M)


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _words(markdown: str) -> int:
    text = re.sub(r"```.*?```", " ", markdown, flags=re.S)  # a code block in prose is read as code
    text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$", " formula ", text, flags=re.S)
    text = re.sub(r"\]\([^)]*\)", "]", text)  # a link's address is not read
    return len(re.findall(r"[\w'’-]+", text))


def lesson_minutes(path: Path, run_s: float = 30.0) -> float:
    """Reading and doing one lesson (`run_s`: how long its cells take to run)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    words = code = figures = 0
    for cell in nb["cells"]:
        text = _source(cell)
        if cell["cell_type"] == "markdown":
            words += _words(text)
            code += sum(len(block.splitlines()) for block in re.findall(r"```.*?```", text, flags=re.S))
        elif cell["cell_type"] == "code" and "colab-setup" not in cell.get("metadata", {}).get("tags", []):
            code += sum(1 for line in text.splitlines() if line.strip())
            figures += sum("image/png" in out.get("data", {}) for out in cell.get("outputs", []))
    return words / PROSE_WPM + code / CODE_LINES_PER_MIN + figures * FIGURE_MIN + run_s / 60


def exercise_minutes(path: Path) -> float:
    """Doing one exercise set (a solution or an exercise notebook: their prompts are the same)."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    minutes = INTRO_MIN
    for cell in nb["cells"]:
        if cell["cell_type"] == "markdown":
            minutes += sum(EXERCISE_MIN[m["stars"].count("★")] for m in EXERCISE_HEADING.finditer(_source(cell)))
        nbg = cell.get("metadata", {}).get("nbgrader", {})
        if nbg.get("grade") and nbg.get("solution"):  # a written answer, marked by a person
            minutes += WRITTEN_MIN
    return minutes


def rounded(minutes: float, step: int) -> int:
    return max(step, int(step * round(minutes / step)))


def shown(minutes: int) -> str:
    """45 -> "45 min", 90 -> "1 h 30 min", 120 -> "2 h"."""
    hours, rest = divmod(minutes, 60)
    return " ".join(p for p in (f"{hours} h" if hours else "", f"{rest} min" if rest else "") if p)


def main() -> None:
    print("| lesson | reading and doing | its exercise set |\n|---|---|---|")
    for lesson in sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        solution = REPO / "solutions" / lesson.name
        sets = shown(rounded(exercise_minutes(solution), 5)) if solution.is_file() else "—"
        print(f"| {lesson.stem} | {shown(rounded(lesson_minutes(lesson), 15))} | {sets} |")


if __name__ == "__main__":
    main()
