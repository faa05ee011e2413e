"""`ddpbayes models`: the shipped example models and report specs, one line each (DESIGN §4,
"Shipped files"), read without importing them (no PyMC)."""

from __future__ import annotations

import ast
import re
import tomllib
from itertools import takewhile
from pathlib import Path

from ddpbayes import shipped
from ddpbayes.papers import cite

# a sentence ends at . ! or ? before a capital, an opening parenthesis or the end ("Thm. 1", "et al. 2016" go on)
_SENTENCE = re.compile(r"(.+?[.!?])(?=\s+[A-Z(]|$)")


def register(sub) -> None:
    p = sub.add_parser("models", help="list the shipped example models and report specs, one line each",
                       description="The example models `ddpbayes audit NAME ...` loads by name (or as models/NAME.py) "
                       "from any directory, and the report specs `ddpbayes report NAME --out DIR` builds: each with "
                       "the first sentence of its docstring, or the spec's title.")
    p.set_defaults(run=run)


def run(args) -> int:
    models = {name: model_summary(shipped.ROOT / "models" / f"{name}.py") for name in shipped.names(shipped.MODELS)}
    specs = {name: spec_summary(shipped.ROOT / "reports" / "specs" / f"{name}.toml")
             for name in shipped.names(shipped.SPECS)}
    print(_listing("models (ddpbayes audit NAME ..., or models/NAME.py)", models))
    print()
    print(_listing("report specs (ddpbayes report NAME --out DIR, or reports/specs/NAME.toml)", specs))
    return 0


def _listing(heading: str, rows: dict[str, str]) -> str:
    width = max(map(len, rows), default=0)
    return "\n".join([heading, *(f"  {name.ljust(width)}  {text}" for name, text in rows.items())])


def model_summary(path: Path) -> str:
    """The first sentence of the model file's docstring (read, not imported), papers by name."""
    return cite(first_sentence(ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""))


def spec_summary(path: Path) -> str:
    """The spec's `title`, else the first sentence of its leading comment without a closing aside
    in parentheses (the attack's spec: its command)."""
    text = path.read_text(encoding="utf-8")
    title = tomllib.loads(text).get("title")
    if isinstance(title, str):
        return cite(" ".join(title.split()))
    comment = " ".join(line.lstrip("#").strip() for line in takewhile(lambda line: line.startswith("#"),
                                                                      text.splitlines()))
    return cite(re.sub(r"\s*\([^()]*\)\.$", ".", first_sentence(comment)))


def first_sentence(text: str) -> str:
    """The first sentence of `text`'s first paragraph, on one line."""
    paragraph = " ".join(text.strip().split("\n\n")[0].split())
    found = _SENTENCE.match(paragraph)
    return found.group(1) if found else paragraph
