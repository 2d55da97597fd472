"""The teacher's tools for "From One-Hot to Transformer": build, grade in a sandbox, gradebook, LMS files.

A second package, released with `course_lib` (the learner's library), installed by teachers
(`make install`, or `pip install -e ./course_grader`). It imports `course_lib`; `course_lib` never
imports it. Its commands join the one `course` command through the entry point group
`course_lib.commands` (see `cli`).

- `build`: solutions/ -> exercises/ (`course build`); `new`: a new exercise set from `templates/`;
- `sandbox`: the learner's kernel (`course_lib.runner`) started inside bubblewrap;
- `remote`: the checks' stand-ins for the learner's functions, classes and modules in that kernel;
- `runner`: a notebook's cells split in two, the learner's in the kernel, the teacher's tests here;
- `grade`: a teacher's batch grading of submissions against the solution notebooks;
- `gradebook`, `export`, `roster`, `lms`, `report`: the record of a class and what is made from it.

The contract with the checks is one hook, `course_lib.checks.core.set_answer_source`: while the
teacher's tests run here, `checks.answer(name)` reads the learner's values from the sandboxed
kernel. What a learner is told is `course_lib.feedback`'s, shared with `course check`.
"""

__version__ = "0.1.0"  # released together with course_lib: the same version
