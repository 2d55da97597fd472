"""The teacher's tools for "From One-Hot to Transformer": build, grade in a sandbox, gradebook, LMS files.

A second package, released with `course_lib` (the learner's library), installed by teachers
(`make install`, or `pip install -e ./course_grader`). It imports `course_lib`; `course_lib` never
imports it. Its commands join the one `course` command through the entry point group
`course_lib.commands` (see `cli`).

- `build`: solutions/ -> exercises/ (`course build`); `new`: a new exercise set from `templates/`;
- grading a class, one step a module (`batch` runs them in order, `course grade`):
    `lms` (`course unpack`: an LMS's zip into a submissions folder)
    -> `discover` (which notebook is whose work on which assignment, and its time)
    -> `grade` (one submission: run in the sandbox, scored) in `worker`'s checking processes, with
       `sandbox` and `budgets` (bubblewrap, cgroups, seccomp), `runner` (the learner's cells in the
       kernel, the teacher's tests here) and `remote` (the checks' stand-ins for the learner's objects)
    -> `record` (each result into the gradebook as it finishes) -> `changes` (what a run changed)
    -> `export`, `feedback_file`, `report` (grades.csv, the LMS files, each student's feedback, the class report);
- `gradebook`, `roster`, `marking` (`course mark`): the record of a class and the marking of written answers.

The contract with the checks is one hook, `course_lib.checks.core.set_answer_source`: while the
teacher's tests run here, `checks.answer(name)` reads the learner's values from the sandboxed
kernel. What a learner is told is `course_lib.runner.feedback`'s, shared with `course check`.
"""

__version__ = "0.1.0"  # released together with course_lib: the same version
