"""A student's feedback file, `feedback/<student>/<assignment>.md`: one gradebook row, as Markdown.

The grader's own rendering of its `gradebook.Row` (scores, late penalty, adjustments, marks of written
answers, regrades, notes, every test), in the words of `course_lib.runner.feedback`, whose `md_text` and
`md_block` quote everything that may come from a learner so that it can never close a code block, start a
heading, or add HTML or links.
"""

from __future__ import annotations

from course_lib.runner.feedback import MANUAL_STATUS, MARKED, md_block, md_text, num


def feedback_markdown(r) -> str:
    """One learner's feedback on one assignment, as Markdown, from a gradebook row (the grader's
    `gradebook.Row`: student, name, assignment, status, scores, late penalty, adjustments, notes, tests).
    Headings hold only the teacher's words (the assignment, the exercises' titles); everything that
    may come from a learner is quoted with `md_text` or `md_block`."""
    who = f"{r.name} ({r.student})" if r.name else r.student
    lines = [f"# Feedback on {r.assignment}", "", f"For {md_text(who)}", ""]
    to_mark = getattr(r, "to_mark", 0)
    if r.status != "graded":
        lines += [f"**Score: {num(r.final)} / {num(r.max_score)}** ({r.status})", ""]
    else:
        lines += [
            f"**Score: {num(r.final)} / {num(r.max_score)}**"
            + (f" (so far: {to_mark} written answer(s) still to be marked)" if to_mark else ""),
            "",
        ]
        extension = getattr(r, "extension", "")  # "Extension to 2026-12-05 23:59 +01:00 (on time)"
        if r.late_penalty or r.adjustments or extension:
            lines += [f"- Exercises: {num(r.score)} / {num(r.max_score)}"]
            if extension:
                lines += [f"- {extension}"]
            if r.late_penalty:
                when = getattr(r, "late_text", "") or f"at {r.submitted_at}"
                lines += [f"- Late penalty: -{num(r.late_penalty)} (submitted {when})"]
            for a in r.adjustments:
                lines += [f"- {'+' if a.points >= 0 else ''}{num(a.points)}: {a.reason}"]
            lines += [""]
    if getattr(r, "lms_late", False):
        lines += ["Your LMS marked this submission late.", ""]
    for g in getattr(r, "regrades", []):
        why = f" ({g['reason']})" if g.get("reason") else ""
        change = (
            f"your score for the exercises went from {num(g['old'])} to {num(g['new'])}"
            if g["old"] != g["new"]
            else "your score did not change"
        )
        lines += [f"Regraded on {g['at'][:10]}{why}: {change}.", ""]
    if r.attempts > 1:
        lines += [
            f"This is your attempt {r.attempt} (the latest of {r.attempts} submissions); it is the one that counts.",
            "",
        ]
    if r.notes:
        lines += ["## Notes", ""] + [f"- {md_text(n)}" for n in dict.fromkeys(r.notes)] + [""]
    if r.tests:
        lines += ["| Exercise | Points | Result |", "|---|---|---|"]
        for t in r.tests:
            label = md_text(t.get("exercise") or t.get("grade_id") or "").replace("|", "/")
            pts = "–" if t["status"] == MANUAL_STATUS else num(t["points"])
            lines.append(f"| {label} | {pts} / {num(t['max_points'])} | {md_text(t['status'])} |")
    # A row that was not graded (unreadable, not submitted) has one reason, said once above.
    details = [
        t
        for t in r.tests
        if t["status"] not in ("passed", "not submitted", MANUAL_STATUS, MARKED)
        and t.get("message")
        and r.status == "graded"
    ]
    marked = [t for t in r.tests if t["status"] == MARKED and t.get("message")]
    if marked:
        lines += ["", "## Your written answers", ""]
        for t in marked:
            title = md_text(t.get("exercise") or t["grade_id"])
            lines += [f"### {title} ({num(t['points'])} / {num(t['max_points'])})", ""]
            lines += [f"> {md_text(line)}" if line.strip() else ">" for line in str(t["message"]).strip().splitlines()]
            lines += [""]
    if details:
        lines += ["", "## What to look at", ""]
        for t in details:
            heading = f"### {md_text(t.get('exercise') or t['grade_id'])} ({md_text(t['status'])})"
            lines += [heading, "", *md_block(str(t["message"]).strip()), ""]
    return "\n".join(lines).rstrip() + "\n"
