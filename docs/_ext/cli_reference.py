"""`ddpbayes-cli` directive: the command-line reference, written from the argument parser itself.

Each command (and sub-command) becomes a section: its description, its usage as argparse prints it,
and a table of its arguments (flags, value, default, help). Help texts are set as plain text, never
parsed as reStructuredText, so `|x|` or `**params` in a help string print as written.
"""

from __future__ import annotations

import argparse

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
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS) or action.required:
        return ""
    return str(action.default)


def _help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    if not action.help:
        return ""
    return parser._get_formatter()._expand_help(action)


def _row(cells: list[nodes.Node]) -> nodes.row:
    row = nodes.row()
    for cell in cells:
        entry = nodes.entry()
        entry += cell
        row += entry
    return row


def _table(parser: argparse.ArgumentParser) -> nodes.table | None:
    actions = [a for a in parser._actions
               if a.help != argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))]
    if not actions:
        return None
    table = nodes.table(classes=["cli-arguments"])
    group = nodes.tgroup(cols=4)
    table += group
    for width in (22, 16, 10, 52):
        group += nodes.colspec(colwidth=width)
    head = nodes.thead()
    head += _row([nodes.paragraph(text=t) for t in ("argument", "value", "default", "meaning")])
    group += head
    body = nodes.tbody()
    for action in actions:
        flags = ", ".join(action.option_strings) or action.dest
        required = " (required)" if action.required and action.option_strings else ""
        body += _row([nodes.paragraph("", "", nodes.literal(text=flags), nodes.Text(required)),
                      nodes.paragraph("", "", nodes.literal(text=_value(action))) if _value(action) else nodes.paragraph(),
                      nodes.paragraph("", "", nodes.literal(text=_default(action))) if _default(action) else nodes.paragraph(),
                      nodes.paragraph(text=_help(parser, action))])
    group += body
    return table


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
            section += nodes.literal_block(text=parser.format_usage().strip(), language="none")
            table = _table(parser)
            if table is not None:
                section += table
            if parser.epilog:
                section += nodes.paragraph(text=parser.epilog)
            sections.append(section)
        return sections


def setup(app: Sphinx) -> dict:
    app.add_directive("ddpbayes-cli", CliReference)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
