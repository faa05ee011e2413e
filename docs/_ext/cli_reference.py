"""`ddpbayes-cli` directive: the command-line reference, written from the argument parser itself.

Each command (and sub-command) becomes a section: its description, its usage as argparse prints it,
and a list of its arguments (flags, value, default, help). Help texts are set as plain text, never
parsed as reStructuredText, so `|x|` or `**params` in a help string print as written.
"""

from __future__ import annotations

import argparse
import os

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective


def _commands(parser: argparse.ArgumentParser, prog: str) -> list[tuple[str, argparse.ArgumentParser]]:
    """`(prog, parser)` for the parser and every sub-command below it, depth first."""
    found = [(prog, parser)]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found += _commands(sub, f"{prog} {name}")
    return found


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        return "{" + ",".join(map(str, action.choices)) + "}"
    return action.metavar or (action.dest.upper() if action.option_strings else action.dest)


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.required or action.default in (None, argparse.SUPPRESS, [], ""):
        return ""
    return str(action.default)


def _usage(parser: argparse.ArgumentParser) -> str:
    """The usage line as argparse prints it on a 72-column terminal (whatever terminal builds the site)."""
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "72"
    try:
        return parser.format_usage().strip()
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    return parser._get_formatter()._expand_help(action)


def _arguments(parser: argparse.ArgumentParser) -> nodes.definition_list | None:
    """One term per argument (its flags, value and default), its help text as the definition."""
    actions = [a for a in parser._actions
               if a.help != argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    if not actions:
        return None
    listing = nodes.definition_list(classes=["cli-arguments"])
    for action in actions:
        term = nodes.term()
        term += nodes.literal(text=" ".join(filter(None, [", ".join(action.option_strings) or action.dest,
                                                           _value(action) if action.option_strings else ""])))
        if action.required and action.option_strings:
            term += nodes.Text(" (required)")
        if _default(action):
            term += nodes.Text(" — default ")
            term += nodes.literal(text=_default(action))
        item = nodes.definition_list_item()
        item += term
        definition = nodes.definition()
        definition += nodes.paragraph(text=_help(parser, action))
        item += definition
        listing += item
    return listing


class CliReference(SphinxDirective):
    """``.. ddpbayes-cli::`` — every command of `ddpbayes.cli.main.build_parser()`."""

    def run(self) -> list[nodes.Node]:
        from ddpbayes.cli.main import build_parser

        sections = []
        for prog, parser in _commands(build_parser(), "ddpbayes"):
            section = nodes.section(ids=[nodes.make_id(prog)])
            section += nodes.title(text=prog)
            if parser.description:
                section += nodes.paragraph(text=parser.description)
            section += nodes.literal_block(text=_usage(parser), language="none")
            arguments = _arguments(parser)
            if arguments is not None:
                section += arguments
            if parser.epilog:
                section += nodes.paragraph(text=parser.epilog)
            sections.append(section)
        return sections


def setup(app: Sphinx) -> dict:
    app.add_directive("ddpbayes-cli", CliReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
