"""Sphinx configuration of the ddpbayes documentation site (built with warnings as errors by .ci/run).

Sphinx, because the libraries our users learn from (PyMC, ArviZ, NumPy, SciPy) document themselves
with it: numpydoc reads and checks the numpy-style docstrings, myst-nb renders Markdown pages and
executes the tutorial notebooks (through nbclient) at every build, and sphinx-argparse writes the
CLI reference from the argument parser itself.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import ddpbayes
from ddpbayes.papers import cite

sys.path.insert(0, str(Path(__file__).parent / "_ext"))

project = "ddpbayes"
author = "the ddpbayes developers"
copyright = "2026, the ddpbayes developers"
release = version = ddpbayes.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax 3 copied into the site: formulas render without a network
    "numpydoc",
    "cli_reference",
]

source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "jupyter_execute", "**.ipynb_checkpoints"]
nitpicky = False
# Docstrings write names in single backticks (`audit`, `--format json`): code, as on GitHub, not italics; and
# "--flag" stays two hyphens.
default_role = "literal"
smartquotes = False

# Markdown (MyST)
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 4

# Notebooks: executed at every build (nbclient); an error in a cell fails the build.
# DDPBAYES_DOCS_EXECUTE=off skips them while writing pages locally; CI never sets it.
nb_execution_mode = os.environ.get("DDPBAYES_DOCS_EXECUTE", "force")
nb_execution_raise_on_error = True
nb_execution_timeout = 600
nb_execution_show_tb = True

# API reference: numpydoc sections, checked (a failed check is a warning, hence an error under -W).
autodoc_typehints = "none"
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_validation_checks = {"GL08", "PR01", "PR02", "RT01"}
numpydoc_validation_exclude = {r"\.__\w+__$", r"\._\w+$"}

html_theme = "pydata_sphinx_theme"
html_title = "ddpbayes"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_show_sourcelink = False
templates_path = ["_templates"]
html_sidebars = {"index": ["site-nav.html"]}  # the front page lists the whole site
html_static_path = ["_static"]
html_css_files = ["custom.css"]


def _name_the_papers(app, what, name, obj, options, lines: list[str]) -> None:
    """Docstrings cite papers by seed number (DESIGN, top); the API pages name them, as reports do."""
    lines[:] = cite("\n".join(lines)).split("\n")


# Where this build runs: a notebook's output names files there (a model's repr: "from /home/.../models/household.py"),
# which mean nothing to a reader; pages show them from "/…/" on, as Getting started writes them.
_BUILD_PATHS = sorted({str(Path(__file__).resolve().parent.parent),
                       str(Path(ddpbayes.__file__).resolve().parent.parent)}, key=len, reverse=True)


def _hide_build_paths(app, pagename, templatename, context, doctree) -> None:
    """The page's body with the checkout's (and the installed package's) folder written "/…"."""
    if "body" in context:
        for path in _BUILD_PATHS:
            context["body"] = context["body"].replace(path + "/", "/…/")


def setup(app) -> None:
    app.connect("autodoc-process-docstring", _name_the_papers)
    app.connect("html-page-context", _hide_build_paths)
