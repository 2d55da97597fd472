"""The course's additions to Sphinx, for the pages made from notebooks (see build.py):

- JupyterLab's heading ids: a lesson links to its own sections as `[section 8](#8.-A-KV-cache)`,
  the id JupyterLab gives the heading "8. A KV cache" (its text with spaces turned into hyphens).
  Each heading of a notebook page gets that id too, and MyST resolves such links to it (a link to a
  heading that does not exist stays a build error);
- under each lesson's and exercise set's title: "Open in Colab", "Download the notebook" (the
  notebook as it is in the repository) and a link to its exercise set or lesson.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from docutils import nodes
from sphinx import addnodes
from sphinx.transforms import SphinxTransform

NOTEBOOK_FOLDERS = ("notebooks/", "exercises/")


def heading_text(node: nodes.Node) -> str:
    """A heading's text as JupyterLab reads it: code and emphasis marks dropped, a link's text kept,
    maths as written ($...$)."""
    if isinstance(node, nodes.math):
        return f"${node.astext()}$"
    if isinstance(node, nodes.Text):
        return str(node)
    return "".join(heading_text(child) for child in node.children)


def jupyterlab_id(title: str) -> str:
    """The id JupyterLab gives a heading (tests/test_notebook_layout.py checks links with the same rule)."""
    return title.strip().replace(" ", "-")


class JupyterLabHeadingIds(SphinxTransform):
    """Give every heading of a notebook page JupyterLab's id as well, before MyST resolves `#id` links
    (its ResolveAnchorIds transform runs at 879)."""

    default_priority = 750

    def apply(self, **kwargs) -> None:
        if not self.env.docname.startswith(NOTEBOOK_FOLDERS):
            return
        slugs = getattr(self.document, "myst_slugs", None)
        if slugs is None:
            slugs = self.document.myst_slugs = {}
        for section in self.document.findall(nodes.section):
            title = section.next_node(nodes.title)
            if title is None or not section["ids"]:
                continue
            anchor = jupyterlab_id(heading_text(title))
            if not anchor or anchor in self.document.ids or anchor in slugs:
                continue
            section["ids"].append(anchor)
            self.document.ids[anchor] = section
            slugs[anchor] = (section.line, section["ids"][0], title.astext())
        # Links from other pages (`06_attention.ipynb#3.-Why-divide`) look the ids up here.
        self.env.metadata[self.env.docname]["myst_slugs"] = slugs


class NotebookLinks(SphinxTransform):
    """ "Open in Colab · Download the notebook · its exercise set (or lesson)" under the page's title."""

    default_priority = 760

    def apply(self, **kwargs) -> None:
        pages = getattr(self.app, "course_pages", {})
        docname = self.env.docname
        if docname not in pages:
            return
        page = pages[docname]
        section = self.document.next_node(nodes.section)
        if section is None:
            return
        depth = docname.count("/")
        colab = page["colab"] or "../" * depth + page["colab_help"]
        title = "Open this notebook in Google Colab" if page["colab"] else "How to open this notebook in Colab"
        bar = nodes.paragraph(classes=["course-links"])
        bar += nodes.raw(
            "", f'<a class="course-colab" href="{html.escape(colab)}" title="{title}">Open in Colab</a>', format="html"
        )
        bar += nodes.Text(" ")
        bar += nodes.raw(
            "",
            f'<a class="course-download" href="{html.escape(page["download"])}" download '
            f'title="The notebook as it is in the repository, outputs included">'
            f"Download the notebook</a>",
            format="html",
        )
        if page.get("partner"):
            bar += nodes.Text(" ")
            xref = addnodes.pending_xref(
                "",
                refdomain="std",
                reftype="doc",
                reftarget="/" + page["partner"],
                refexplicit=True,
                refdoc=docname,
                classes=["course-partner"],
            )
            xref += nodes.inline("", page["partner_label"])
            bar += xref
        title_node = section.next_node(nodes.title)
        section.insert(section.index(title_node) + 1 if title_node is not None else 0, bar)


def load_pages(app) -> None:
    path = Path(app.srcdir) / "_course_pages.json"
    app.course_pages = json.loads(path.read_text()) if path.is_file() else {}


def setup(app):
    app.connect("builder-inited", load_pages)
    app.add_transform(JupyterLabHeadingIds)
    app.add_transform(NotebookLinks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
