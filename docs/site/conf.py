"""Sphinx configuration of the course's website. Build it with `make site` (docs/site/build.py stages
the sources and runs Sphinx with this configuration); it is not meant to be run on its own."""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # course_site.py

if "COURSE_SITE_WORK" not in os.environ:
    raise RuntimeError("build the site with `make site` (python docs/site/build.py), which stages its sources")
WORK = Path(os.environ["COURSE_SITE_WORK"])
REPOSITORY = os.environ.get("COURSE_SITE_REPOSITORY", "")

project = "From One-Hot to Transformer"
author = "the course's authors"
copyright = "the course's authors, MIT licence"

extensions = ["myst_nb", "sphinx_copybutton", "course_site"]
root_doc = "index"
exclude_patterns = ["_course_pages.json"]

# Markdown and notebooks. Heading anchors are GitHub's (the guides link to "#before-the-term"); a
# notebook's headings also get JupyterLab's ids (course_site.py). Maths: $...$, $$...$$, and
# amsmath environments written without dollars.
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 4
myst_dmath_double_inline = True
# Text as the notebooks show it in JupyterLab: no typographic quotes (a heading's id, which lessons
# link to, keeps its straight apostrophe: "course's", not "course’s").
smartquotes = False

# Notebooks are shown with their stored outputs: nothing is executed to build the site.
nb_execution_mode = "off"
nb_merge_streams = True
nb_output_stderr = "show"
nb_ipywidgets_js = {}  # build.py turns widgets into static HTML; no widget manager from the network

# MathJax from the build's own copy (build.py copies it from the django-static-mathjax package):
# the site works offline and loads nothing from another host.
html_static_path = ["_static", str(WORK / "mathjax-static")]
mathjax_path = "mathjax/tex-chtml-full.js"
mathjax3_config = {"options": {"enableMenu": False}}

html_theme = "sphinx_book_theme"
html_title = project
templates_path = ["_templates"]  # layout.html: the home page's title without the course's name twice
html_css_files = ["course.css"]
html_js_files = ["course.js"]  # the course map as cards on a phone; search snippets that show the match
html_search_scorer = str(HERE / "search_scorer.js")  # lessons before exercise pages and guides

# A copy button on code: a lesson's code cells and the guides' commands, not the outputs.
copybutton_selector = "div:not(.output) > div.highlight > pre"
html_favicon = "_static/favicon.svg"
html_context = {"default_mode": "auto"}  # light or dark as the reader's system says
html_extra_path = [os.environ["COURSE_SITE_EXTRA"]]  # the notebooks as they are, for download
html_copy_source = False
html_show_sourcelink = False
html_theme_options = {
    "repository_url": REPOSITORY if REPOSITORY.startswith("https://") else "",
    "repository_branch": os.environ.get("COURSE_SITE_BRANCH", "main"),
    "use_repository_button": REPOSITORY.startswith("https://"),
    "use_download_button": False,  # the pages' own link downloads the notebook as it is in the repository
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
    "show_toc_level": 2,
    "show_navbar_depth": 1,
    "navigation_with_keys": False,
}
