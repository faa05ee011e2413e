"""`ddpbayes report SPEC.toml --out DIR`: a verification report from an audit spec."""

from __future__ import annotations

from ddpbayes.cli.args import add_workers, execution


def register(sub) -> None:
    p = sub.add_parser(
        "report",
        help="write a verification report (HTML, Markdown, JSON, figures) from a TOML audit spec",
        description="Audit the spec's model under each of its notions and write DIR/index.html (self-contained), "
        "DIR/report.md, DIR/results.json and DIR/figures/*.png. DIR is replaced atomically.",
    )
    p.add_argument("spec", help="TOML spec file, or a shipped spec's name (`ddpbayes models` lists them); its keys mirror "
                   "`ddpbayes audit`'s flags (the documentation's Reports guide lists them)")
    p.add_argument("--out", required=True, help="output directory (created, or replaced if it holds a report)")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    add_workers(p)
    p.set_defaults(run=run)


def run(args) -> int:
    from ddpbayes.reports import build_report  # PyMC and matplotlib: off the --help path

    data = build_report(args.spec, args.out, progress=not args.quiet, where=execution(args))
    print(f"{args.out}/index.html  {data['finding']}")
    return 0
