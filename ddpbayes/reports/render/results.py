"""results.json (every number a report shows), the one-line finding, and the environment."""

from __future__ import annotations

import math
import platform
import shlex
from importlib import metadata
from pathlib import Path

from ddpbayes.encoding import jsonable
from ddpbayes.notions import notion
from ddpbayes.reports.views.collect import Collected

FORMAT = 1  # results.json layout version, under the key "ddpbayes_report"
PACKAGES = ("ddpbayes", "pymc", "pytensor", "arviz", "numpy", "scipy", "sympy", "matplotlib")


def results_json(c: Collected, command: str) -> dict:
    spec, model = c.spec, c.model
    return jsonable({
        "ddpbayes_report": FORMAT,
        "title": title(c),
        "finding": finding(c),
        "spec": spec.to_dict(),
        "model": {"file": spec.model_ref, "params": spec.params, **model.describe(),
                  "dependence_sets": c.dependence_sets},
        "audits": {notion: r.to_dict() for notion, r in c.results.items()},
        "lattice": None if c.lattice is None else c.lattice.to_dict(),
        "witness_curves": [curve.to_dict() for curve in c.curves],
        "witness_curve_notes": c.curve_notes,
        "sweep": c.sweep.to_dict(),
        "information": None if c.information is None else c.information.to_dict(),
        "closed_forms": [f.to_dict() for f in c.closed_forms],
        **({} if c.profile is None else {"profile": c.profile.to_dict()}),
        "reproducibility": reproducibility(spec.seed, command),
    })


def title(c: Collected) -> str:
    return c.spec.title or f"{Path(c.spec.model_ref).stem}: {c.spec.query} with {c.spec.kind} noise"


def finding(c: Collected) -> str:
    """One line with the numbers: each notion's leakage, the claim's fate, and what the lattice says."""
    r = c.results
    parts = [f"{n} {'>= ' if x.lower_bound else ''}{fmt(x.leakage)}"
             + (f" (K = {known_set(x, c.model.names)})" if notion(n).lattice else "")
             for n, x in r.items()]
    line = ", ".join(parts)
    if c.spec.claim is not None:
        failed = [n for n, x in r.items() if x.verdict == "fail"]
        unsure = [n for n, x in r.items() if x.verdict == "inconclusive"]
        line += f"; claim {fmt(c.spec.claim)}: " + (
            f"{_and(failed)} fail{'s' if len(failed) == 1 else ''}" if failed
            else "every notion passes" if not unsure else "none fails")
        if unsure:
            line += f", {_and(unsure)} inconclusive"
    pdp = next((x for n, x in r.items() if notion(n).lattice), None)
    idp = next((x for n, x in r.items() if notion(n).weakest), None)
    dp = next((x for n, x in r.items() if notion(n).model_free), None)
    if pdp is not None and idp is not None and pdp.leakage > idp.leakage * (1 + 1e-9) + 1e-12:
        line += (f"; a stronger adversary (K = {known_set(pdp, c.model.names)}) leaks more than the weakest "
                 f"({fmt(pdp.leakage)} > {fmt(idp.leakage)})")
    elif dp is not None:
        top = max(r.items(), key=lambda kv: kv[1].leakage)
        if not notion(top[0]).model_free and top[1].leakage > dp.leakage * (1 + 1e-9):
            line += f"; dependence takes {top[0]} to {top[1].leakage / dp.leakage:.3g}x the DP promise"
    return line + "."


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def known_set(r, names: list[str]) -> str:
    """The known set of a result's witness."""
    if r.witness is None:
        return "?"
    return set_text(r.witness.adversary.known, names, r.witness.adversary.target)


def set_text(members, names: list[str], owner: int | None = None) -> str:
    """A set of tuples by name; "all others" when it is every tuple but `owner`; index ranges
    when long (e.g. {x[0], x[2]–x[9]})."""
    members = sorted(members)
    if owner is not None and len(names) > 2 and members == [k for k in range(len(names)) if k != owner]:
        return "all others"
    if len(members) <= 4:
        return "{" + ", ".join(names[k] for k in members) + "}"
    runs: list[list[int]] = []
    for k in members:
        if runs and k == runs[-1][-1] + 1:
            runs[-1].append(k)
        else:
            runs.append([k])
    return "{" + ", ".join(names[r[0]] if len(r) == 1 else f"{names[r[0]]}–{names[r[-1]]}" for r in runs) + "}"


def reproducibility(seed: int, command: str) -> dict:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    versions["python"] = platform.python_version()
    return {"versions": versions, "platform": platform.platform(), "numerics": numerics(), "seed": seed,
            "command": command}


def numerics() -> dict:
    """What sets the last bits of the sampling engine's arithmetic, which MCMC amplifies into
    different draws: the loops NumPy dispatches float64 exp/log to (its AVX-512 `X86_V4` loops
    need not round as the `X86_V3`/baseline ones do) and how PyTensor compiles the model
    (compiler, -march taken from this CPU, linker, BLAS). Where these or the versions differ,
    the same seed is expected to give a different, equally valid estimate."""
    import pytensor
    from numpy.lib.introspect import opt_func_info
    from pytensor.link.c.cmodule import GCC_compiler

    cfg = pytensor.config
    march = [f for f in GCC_compiler.compile_args() if f.startswith("-march=")] if cfg.cxx else []
    return {
        "numpy_exp_log": {name: info["dd"]["current"]
                          for name, info in opt_func_info(func_name="^(exp|log)$", signature="float64").items()},
        "pytensor": {"cxx": cfg.cxx or "none (Python implementations)", "march": march[0] if march else None,
                     "linker": cfg.linker, "mode": str(cfg.mode), "floatX": cfg.floatX,
                     "blas__ldflags": cfg.blas__ldflags},
    }


def command_for(spec_path: Path, out: Path) -> str:
    """`ddpbayes report SPEC --out DIR` with paths relative to the working directory when inside it."""
    def rel(p: Path) -> str:
        p = p.resolve()
        try:
            return str(p.relative_to(Path.cwd().resolve()))
        except ValueError:
            return str(p)

    return f"ddpbayes report {shlex.quote(rel(spec_path))} --out {shlex.quote(rel(out))}"


def fmt(v: float | None, digits: int = 4) -> str:
    """A number as the report shows it: 4 significant digits, ∞ for unbounded, – for none."""
    if v is None:
        return "–"
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    text = f"{v:.{digits}g}"
    return "0" if text in ("-0", "0") else text.replace("-", "−")
