"""Closed forms of the Gaussian witnesses (DESIGN §2.2) with sympy, for the report.

For every distinct adversary A(i, K) that a Gaussian notion reports as its witness,
`derive_gaussian` gives leak(i, K) with the target's width and the Laplace scale b left as
symbols: from the model's own covariance (checked against the engine's number once width and
b are put in), and from the spec's `derive_cov` when given (e.g. with a correlation symbol).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy

from ddpbayes.auditing import AuditResult
from ddpbayes.engines import engine_named
from ddpbayes.problem import Problem
from ddpbayes.symbolic import derive_gaussian
from ddpbayes.symbolic.gaussian import WIDTH, B

GENERAL = (r"\mathrm{leak}(i, K) = \frac{\mathrm{width}}{b}\,"
           r"\left|w_i + \sum_{j \in U} w_j \frac{C_{ji}}{C_{ii}}\right|,"
           r"\quad C = \mathrm{Cov}(X_{\{i\} \cup U} \mid X_K)")
MAX_DENOMINATOR = 1000  # exact fractions with larger denominators are shown with 5 significant digits


@dataclass(frozen=True)
class ClosedForm:
    notions: list[str]
    target: int
    known: list[int]
    source: str  # "model covariance" or the spec's derive_cov
    expression: str
    latex: str
    value: float | None  # with width and b put in, when no other symbol is left
    engine_value: float

    def to_dict(self) -> dict:
        return {k: getattr(self, k) for k in
                ("notions", "target", "known", "source", "expression", "latex", "value", "engine_value")}


def closed_forms(problem: Problem, results: dict[str, AuditResult], derive_cov: str | None) -> list[ClosedForm]:
    """One closed form per distinct witness adversary of an engine that reads the model as jointly
    Gaussian (`Engine.covariance`), and per covariance source."""
    adversaries: dict[tuple[int, tuple[int, ...]], list[str]] = {}
    covariance = None
    if problem.mechanism.profile:  # these are Laplace closed forms; Gaussian noise: derive_gaussian_gdp (§3.5)
        return []
    for notion, r in results.items():
        engine = engine_named(r.engine)
        cov = None if engine is None or r.witness is None else engine.covariance(problem)
        if cov is not None:
            covariance = cov
            adv = r.witness.adversary
            adversaries.setdefault((adv.target, tuple(sorted(adv.known))), []).append(notion)
    if not adversaries:
        return []
    model, scale = problem.model, problem.mechanism.scale
    weights = [sympy.nsimplify(float(w)) for w in problem.query.weights(model.n)]
    sources = [("model covariance", covariance.tolist())]
    if derive_cov:
        sources.append((f"derive_cov = {derive_cov}", derive_cov))
    out = []
    for (target, known), notions in adversaries.items():
        engine_value = results[notions[0]].leakage  # the witness is the notion's worst adversary
        width = model.domains[target].width
        for source, cov in sources:
            d = derive_gaussian(cov, target=target, known=list(known), weights=weights)
            expr = d.expression
            shown = sympy.N(expr, 5) if any(r.q > MAX_DENOMINATOR for r in expr.atoms(sympy.Rational)) else expr
            value = expr.subs({WIDTH: width, B: scale})
            out.append(ClosedForm(
                notions, target, list(known), source, sympy.sstr(shown),
                sympy.latex(shown, symbol_names={WIDTH: r"\mathrm{width}"}),
                None if value.free_symbols else float(value), engine_value))
    return out
