"""A report's files (DESIGN §4): index.html (self-contained), report.md, figures/*.png and
results.json, for every kind of report (audit, composition, attack)."""

from __future__ import annotations

import json
from pathlib import Path

from ddpbayes.reports.render.document import Document, render_html, render_markdown


def write_pages(folder: Path, doc: Document, results: dict) -> None:
    """Write `doc` and its `results` into `folder` (a fresh directory: `atomic.write_directory`'s)."""
    (folder / "figures").mkdir()
    for fig in doc.figures:
        (folder / "figures" / fig.name).write_bytes(fig.png)
    (folder / "index.html").write_text(render_html(doc), encoding="utf-8")
    (folder / "report.md").write_text(render_markdown(doc), encoding="utf-8")
    (folder / "results.json").write_text(json.dumps(results, indent=1, ensure_ascii=False, allow_nan=False) + "\n",
                                         encoding="utf-8")
