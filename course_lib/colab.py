"""Running the course on Google Colab.

Every lesson, solution and exercise notebook starts with the same code cell. On Colab it installs
`course_lib` from the course's git repository before anything imports it; everywhere else it does
nothing. It installs with ``--no-deps``: Colab already has PyTorch, NumPy, matplotlib, ipywidgets,
tqdm and the `tokenizers` library, and letting pip resolve the course's own pins there would replace
Colab's PyTorch build (or its Jupyter packages) with other versions.

The repository address is written into the cell once, by whoever publishes the course:
``course colab --repository https://github.com/OWNER/REPO`` (it rewrites the cell in notebooks/ and
solutions/; `course build` carries it into exercises/). With no address written in, the cell asks
for it on Colab.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

CELL_ID = "colab-setup"
TAG = "colab-setup"
_ADDRESS = re.compile(r'^    COURSE_REPOSITORY = "(.*)"', re.M)


def cell_source(repository: str = "") -> str:
    """The first code cell of every notebook, with `repository` as the address to install from."""
    if '"' in repository or "\n" in repository:
        raise ValueError(f"a repository address has no quotes or line breaks, got {repository!r}")
    return (
        "# On Google Colab, this cell installs the course's helper library, course_lib, first\n"
        "# (Colab keeps its own PyTorch). On your own machine (`make lab`) it does nothing.\n"
        "import sys\n"
        "\n"
        'if "google.colab" in sys.modules:\n'
        "    # the course's git address (`course colab --repository URL` fills it in)\n"
        f'    COURSE_REPOSITORY = "{repository}"\n'
        "    if not COURSE_REPOSITORY:\n"
        '        COURSE_REPOSITORY = input("Git address of the course (its Clone URL): ").strip()\n'
        '    %pip install --quiet --no-deps "course-lib @ git+{COURSE_REPOSITORY}"'
    )


def repository_of(source: str) -> str | None:
    """The address written into a setup cell's source, or None if the text is not a setup cell."""
    match = _ADDRESS.search(source)
    return match.group(1) if match and source == cell_source(match.group(1)) else None


def _cell(repository: str, solution_notebook: bool) -> dict:
    cell = {
        "cell_type": "code",
        "execution_count": None,
        "id": CELL_ID,
        "metadata": {"tags": [TAG]},
        "outputs": [],
        "source": cell_source(repository).splitlines(keepends=True),
    }
    if solution_notebook:  # nbgrader wants every cell of a source notebook described
        cell["metadata"]["nbgrader"] = {
            "grade": False,
            "grade_id": "colab_setup",
            "locked": True,
            "schema_version": 3,
            "solution": False,
        }
    return cell


def set_setup_cell(path: Path, repository: str | None = None) -> bool:
    """Put the setup cell first among `path`'s code cells (after the title), keeping the address it
    already has unless `repository` is given. Returns True if the file changed."""
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    cells = nb["cells"]
    current = [i for i, c in enumerate(cells) if c.get("id") == CELL_ID or TAG in c.get("metadata", {}).get("tags", [])]
    old = "".join(cells[current[0]]["source"]) if current else ""
    address = repository if repository is not None else (repository_of(old) or "")
    for i in reversed(current):
        del cells[i]
    first_code = next((i for i, c in enumerate(cells) if c["cell_type"] == "code"), len(cells))
    cells.insert(first_code, _cell(address, solution_notebook=path.parent.name == "solutions"))
    new = json.dumps(nb, indent=1, ensure_ascii=False) + "\n"
    if new != text:
        path.write_text(new, encoding="utf-8")
        return True
    return False


def notebooks(repo: Path) -> list[Path]:
    """The notebooks that carry the setup cell themselves (exercises/ get it from `course build`)."""
    return sorted((repo / "notebooks").glob("*.ipynb")) + sorted((repo / "solutions").glob("*.ipynb"))
