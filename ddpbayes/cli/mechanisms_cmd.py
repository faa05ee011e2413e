"""`ddpbayes mechanisms`: the built-in mechanisms, their settings (`--mechanism-param`) and how each is audited."""

from __future__ import annotations

import json


def register(sub) -> None:
    p = sub.add_parser("mechanisms", help="list the built-in mechanisms and their settings",
                       description="Each built-in mechanism: its kind (and aliases), what it releases, and the settings "
                       "--mechanism-param NAME=VALUE takes. A program (--mechanism program:FILE:NAME) is any Python "
                       "function mechanism(answers, rng) -> output, audited as a black box.")
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="text (default): a paragraph per mechanism; json: a list of records")
    p.set_defaults(run=run)


def run(args) -> int:
    from ddpbayes.encoding import jsonable
    from ddpbayes.mechanisms import REGISTRY  # scipy: off the --help path

    rows = []
    for kind, cls in REGISTRY.items():
        doc = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        rows.append({"kind": kind, "aliases": list(cls.aliases), "law": "joint" if cls.joint else "per coordinate",
                     "summary": " ".join(doc.split()),
                     "parameters": {name: {"type": typ.__name__, "default": default, "help": text}
                                    for name, (typ, default, text) in cls.parameters.items()}})
    if args.format == "json":
        print(json.dumps(jsonable(rows), indent=2, default=str))  # numbers as everywhere (encoding.py)
        return 0
    for row in rows:
        aliases = f" (also {', '.join(row['aliases'])})" if row["aliases"] else ""
        print(f"{row['kind']}{aliases}: {row['summary']}")
        for name, p in row["parameters"].items():
            default = "" if p["default"] is None else f" (default {p['default']})"
            print(f"    --mechanism-param {name}=...  {p['help']}{default}")
    print("program:FILE:NAME: a Python function mechanism(answers, rng) -> output, run as a black box; the program "
          "engine certifies a lower bound on its leakage")
    return 0
