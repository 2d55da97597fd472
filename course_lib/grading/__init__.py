"""Exercises and autograding: `course build`, `course check` and `course grade`.

- `notebook`: the nbgrader cell format, reading, regions, deterministic writing;
- `build`: solutions/ -> exercises/;
- `kernel` + `sandbox`: a fresh, limited kernel that runs cells one at a time;
- `check`: a learner's self-check of their own notebook (visible tests only);
- `grade`: a teacher's batch grading of submissions against the solution notebooks.
"""
