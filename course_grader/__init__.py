"""Exercises and autograding: `course build`, `course check` and `course grade`.

- `notebook`: the nbgrader cell format, reading, regions, deterministic writing;
- `build`: solutions/ -> exercises/;
- `kernel` + `sandbox`: a fresh, limited kernel that runs a learner's cells, in a bubblewrap sandbox;
- `wire` + `remote`: plain data between that kernel and the checks, and the checks' stand-ins for
  the learner's functions, classes and modules;
- `runner`: a notebook's cells, the learner's in the kernel and the tests in the checker;
- `check`: a learner's self-check of their own notebook (visible tests only);
- `grade`: a teacher's batch grading of submissions against the solution notebooks.
"""
