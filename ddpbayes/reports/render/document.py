"""A small document model rendered twice: self-contained HTML and Markdown.

Blocks: `Para` (text; `code` spans in backticks), `Table` (cells are text, or (text, css
class) to colour a verdict), `Figure` (PNG bytes: a data URI in HTML, a file under figures/
in Markdown), `Code` (preformatted) and `Notes` (a bullet list). The HTML carries its CSS
inline and references nothing outside itself, so it opens offline and can be mailed. Both
renderers name the papers where text taken from elsewhere cites a seed number (`papers.cite`).
"""

from __future__ import annotations

import base64
import html
import re
from dataclasses import dataclass, field, replace

from ddpbayes.papers import cite

Cell = str | tuple[str, str]


@dataclass(frozen=True)
class Para:
    text: str


@dataclass(frozen=True)
class Table:
    header: list[str]
    rows: list[list[Cell]]
    caption: str | None = None


@dataclass(frozen=True)
class Figure:
    name: str  # file name under figures/
    png: bytes
    caption: str
    alt: str


@dataclass(frozen=True)
class Code:
    text: str


@dataclass(frozen=True)
class Notes:
    items: list[str]


Block = Para | Table | Figure | Code | Notes


@dataclass
class Section:
    title: str
    anchor: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class Document:
    title: str
    lead: list[str]
    sections: list[Section]

    @property
    def figures(self) -> list[Figure]:
        return [b for s in self.sections for b in s.blocks if isinstance(b, Figure)]


CSS = """
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       color: #1d232a; margin: 0; background: #f6f7f9; }
main { max-width: 1040px; margin: 0 auto; padding: 24px 32px 48px; background: #fff; }
h1 { font-size: 1.7em; margin: 0.2em 0 0.3em; }
h2 { font-size: 1.25em; margin-top: 1.8em; padding-bottom: 0.2em; border-bottom: 1px solid #dde1e6; }
p.lead { color: #3d4752; margin: 0.3em 0; }
nav { font-size: 0.9em; margin: 0.8em 0 0; color: #56606b; }
nav a { color: #2456a6; text-decoration: none; margin-right: 0.9em; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.92em; }
th, td { border: 1px solid #dde1e6; padding: 4px 10px; text-align: left; vertical-align: top; }
th { background: #eef1f5; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.pass { background: #e3f4e6; color: #17642a; font-weight: 600; }
td.fail { background: #fbe3e1; color: #a3231a; font-weight: 600; }
td.inconclusive { background: #fdf1d8; color: #8a5a00; font-weight: 600; }
p.caption { color: #56606b; font-size: 0.88em; margin: -0.4em 0 1em; max-width: 760px; }
figure { margin: 1em 0; }
figure img { max-width: 100%; height: auto; }
figcaption { color: #56606b; font-size: 0.9em; }
code, pre { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 0.9em; }
code { background: #f0f2f5; padding: 1px 4px; border-radius: 3px; }
pre { background: #f0f2f5; padding: 10px 12px; white-space: pre-wrap; overflow-wrap: anywhere; border-radius: 4px; }
ul.notes { color: #3d4752; font-size: 0.93em; }
"""


def cited(doc: Document) -> Document:
    """`doc` with the papers named in every text a reader sees (not in `Code`: commands)."""
    def cell(c: Cell) -> Cell:
        return cite(c) if isinstance(c, str) else (cite(c[0]), c[1])

    def block(b: Block) -> Block:
        if isinstance(b, Para):
            return Para(cite(b.text))
        if isinstance(b, Notes):
            return Notes([cite(i) for i in b.items])
        if isinstance(b, Figure):
            return replace(b, caption=cite(b.caption), alt=cite(b.alt))
        if isinstance(b, Table):
            return Table([cite(h) for h in b.header], [[cell(c) for c in row] for row in b.rows],
                         None if b.caption is None else cite(b.caption))
        return b

    return Document(cite(doc.title), [cite(p) for p in doc.lead],
                    [Section(cite(s.title), s.anchor, [block(b) for b in s.blocks]) for s in doc.sections])


def render_html(doc: Document) -> str:
    doc = cited(doc)
    nav = " ".join(f'<a href="#{s.anchor}">{_esc(s.title)}</a>' for s in doc.sections)
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_esc(doc.title)}</title>",
        f"<style>{CSS}</style></head><body><main>",
        f"<h1>{_esc(doc.title)}</h1>",
        *[f'<p class="lead">{_inline(p)}</p>' for p in doc.lead],
        f"<nav>{nav}</nav>",
    ]
    for s in doc.sections:
        parts.append(f'<section id="{s.anchor}"><h2>{_esc(s.title)}</h2>')
        parts += [_html_block(b) for b in s.blocks]
        parts.append("</section>")
    parts.append("</main></body></html>")
    return "\n".join(parts) + "\n"


def render_markdown(doc: Document) -> str:
    doc = cited(doc)
    parts = [f"# {doc.title}", "", *[f"{p}\n" for p in doc.lead]]
    for s in doc.sections:
        parts += [f"## {s.title}", ""]
        parts += [_md_block(b) + "\n" for b in s.blocks]
    return "\n".join(parts).rstrip() + "\n"


def _html_block(b: Block) -> str:
    if isinstance(b, Para):
        return f"<p>{_inline(b.text)}</p>"
    if isinstance(b, Code):
        return f"<pre>{_esc(b.text)}</pre>"
    if isinstance(b, Notes):
        return '<ul class="notes">' + "".join(f"<li>{_inline(i)}</li>" for i in b.items) + "</ul>"
    if isinstance(b, Figure):
        data = base64.b64encode(b.png).decode("ascii")
        return (f'<figure><img src="data:image/png;base64,{data}" alt="{_esc(b.alt)}">'
                f"<figcaption>{_inline(b.caption)}</figcaption></figure>")
    head = "".join(f"<th>{_esc(h)}</th>" for h in b.header)
    rows = "".join("<tr>" + "".join(_html_cell(c) for c in row) + "</tr>" for row in b.rows)
    caption = f'<p class="caption">{_inline(b.caption)}</p>' if b.caption else ""
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{caption}"


def _html_cell(c: Cell) -> str:
    text, cls = (c, None) if isinstance(c, str) else c
    if cls is None and _NUMBER.fullmatch(text):
        cls = "num"
    return f'<td class="{cls}">{_inline(text)}</td>' if cls else f"<td>{_inline(text)}</td>"


def _md_block(b: Block) -> str:
    if isinstance(b, Para):
        return b.text
    if isinstance(b, Code):
        return f"```\n{b.text}\n```"
    if isinstance(b, Notes):
        return "\n".join(f"- {i}" for i in b.items)
    if isinstance(b, Figure):
        return f"![{b.alt}](figures/{b.name})\n\n*{b.caption}*"
    lines = ["| " + " | ".join(_md_cell(h) for h in b.header) + " |", "|" + " --- |" * len(b.header)]
    lines += ["| " + " | ".join(_md_cell(c if isinstance(c, str) else c[0]) for c in row) + " |" for row in b.rows]
    if b.caption:
        lines += ["", f"*{b.caption}*"]
    return "\n".join(lines)


_NUMBER = re.compile(r"[−+-]?(\d+(\.\d+)?(e[−+-]?\d+)?|∞)")


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _inline(text: str) -> str:
    """Escape, then turn `code` spans into <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", _esc(text))
