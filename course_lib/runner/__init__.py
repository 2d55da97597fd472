"""Run an exercise notebook's cells in a fresh kernel, within limits: what `course check` needs.

- `notebook`: the nbgrader cell format: reading, regions, deterministic writing;
- `assignment`: one model of an exercise set (`Assignment`) and one of a notebook handed in (`Submission`);
- `feedback`: how a run becomes a status and points (`score`, shared with the grader), and every word
  a learner is told about it;
- `kernel`: the learner's kernel process (`python -m course_lib.runner.kernel`): runs cells and,
  on request, calls what they defined;
- `wire`: plain data between that kernel and its caller, without pickle;
- `process`: start the kernel as a child process and talk to it within time, output and memory limits;
- `zygote`: a kernel that has imported torch once and forks a fresh, isolated one per submission (the
  grader starts it inside its sandbox, one per batch slot);
- `steps`: a notebook's cells in order, restarting the kernel when a cell ends it;
- `check`: `course check`, a learner's self-check of their own notebook (visible tests only);
- `text`: learner text made inert (valid UTF-8, no control or bidirectional characters) to be shown.

The grader (a second package, `course_grader`) builds on these: it starts the same kernel in a
bubblewrap sandbox and runs the teacher's tests in its own process. Nothing here imports it.
"""
