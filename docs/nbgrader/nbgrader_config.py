"""nbgrader configuration for grading this course's exercise sets with nbgrader (tested with 0.9.6).

Copy this file into an empty folder outside the course repository (the nbgrader "course directory",
e.g. ~/grading) and run every nbgrader command from that folder, with the course's virtual
environment activated (`source .venv/bin/activate`): nbgrader starts the `alembic` program by name
when it creates its gradebook, and only activation puts .venv/bin on PATH. docs/nbgrader/README.md
walks through a whole round trip; tests/test_nbgrader_route.py runs it.

The course directory that these settings describe:

    ~/grading/
      nbgrader_config.py                      this file
      gradebook.db                            nbgrader's gradebook (SQLite), created on first use
      source/<assignment>/NN_name.ipynb       a copy of solutions/NN_name.ipynb (hidden tests: keep private)
      release/<assignment>/NN_name.ipynb      the student version (nbgrader generate_assignment)
      submitted/<student>/<assignment>/NN_name.ipynb    what each student handed in
      autograded/<student>/<assignment>/NN_name.ipynb   executed, with the hidden tests put back
      feedback/<student>/<assignment>/NN_name.html      what each student gets back
"""

import os

c = get_config()  # noqa: F821 (nbgrader defines get_config when it reads this file)

# Keep progress bars (tqdm writes them to stderr) out of the kernels that nbgrader starts: nbgrader
# gives a test cell 0 points if it wrote anything at all to stderr, even when its checks passed.
os.environ.setdefault("TQDM_DISABLE", "1")

# --- Where things are --------------------------------------------------------------------------
# The folder that holds this file, as an absolute path, whichever folder nbgrader is started from.
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
# Names the class in the gradebook (and in the exchange, if you use one): any short name.
c.CourseDirectory.course_id = "one-hot-to-transformer"
# nbgrader's default layout, written out so that it is visible here (see the tree above).
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"

# --- Running the submissions (nbgrader autograde) ----------------------------------------------
# Seconds per cell, the same as `course grade`'s default (`--timeout 60`). A cell that runs longer
# (an endless loop, say) is interrupted and counts as an error (a test cell then scores 0); the rest
# of the notebook still runs. Raise it if an exercise of yours needs longer.
c.Execute.timeout = 60
# Seconds to wait for a kernel to start: generous, for a machine busy grading a whole class.
c.Execute.startup_timeout = 120

# --- Feedback (nbgrader generate_feedback) -------------------------------------------------------
# By default nbgrader renders the autograded notebook as it is, and that notebook holds the hidden
# tests (autograde puts them back to run them): every student would read them, your private ones
# included. ClearHiddenTests removes the code between ### BEGIN HIDDEN TESTS and ### END HIDDEN
# TESTS (what the checks printed stays: a student sees which hidden check failed and its hint).
# The other two are nbgrader's defaults: GetGrades puts the scores into the page, the CSS its style.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbgrader.preprocessors.ClearHiddenTests",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
]

# --- Handing out and collecting through JupyterHub (optional, not exercised by the tests) ------
# With nbgrader's exchange (`nbgrader release_assignment`, students' `fetch_assignment` and
# `submit`, then `nbgrader collect`), name the exchange folder that every user can reach:
# c.Exchange.root = "/srv/nbgrader/exchange"
