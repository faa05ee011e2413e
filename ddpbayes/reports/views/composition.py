"""What a composition report computes (DESIGN §3.1b): the releases composed and audited jointly.

Every audit goes through `ddpbayes.audit` with the composed query and mechanism, so the report
shows what `ddpbayes audit --release ...` prints: for every notion the joint leakage against
Σ ε_t (Thm 3) and, for disjoint releases, max ε_t (Thm 4), per target, and across a sweep of
the noise (every release's scale times the factor; randomized response's ε divided by it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ddpbayes.auditing import AuditResult, audit
from ddpbayes.composition import compose
from ddpbayes.mechanisms import lookup
from ddpbayes.model import DependenceModel
from ddpbayes.reports.input.composition_spec import CompositionSpec


def scaled_release(spec: str, factor: float) -> str:
    """The release `spec` with `factor` times its noise: a scale b (or eps=E) for Laplace and
    geometric noise becomes factor·b (E / factor), randomized response's ε becomes ε / factor."""
    if factor == 1.0:
        return spec
    query, kind, param = spec.rsplit(":", 2)
    by_epsilon = param.strip().lower().startswith("eps=")
    cls = lookup(kind.strip().lower())
    rr = cls is not None and cls.flips_bits
    try:
        value = float(param.strip()[4:] if by_epsilon else param)
    except ValueError:
        return spec  # compose reports the bad PARAM
    value = value / factor if (by_epsilon or rr) else value * factor
    return f"{query}:{kind}:{'eps=' if by_epsilon else ''}{value!r}"


@dataclass
class Composed:
    """What a composition report shows: the audits at the spec's noise, and the sweep."""

    spec: CompositionSpec
    model: DependenceModel
    results: dict[str, AuditResult]
    sweep: dict[str, list[dict]]  # notion -> per factor: joint, sequential and parallel bounds


def collect_composition(spec: CompositionSpec, model: DependenceModel, say: Callable[[str], None]) -> Composed:
    def run(notion: str, factor: float) -> AuditResult:
        query, mechanism = compose([scaled_release(r, factor) for r in spec.releases], model)
        return audit(model, query, mechanism, notion, claim=spec.claim if factor == 1.0 else None,
                     targets=None if spec.target is None else list(spec.target), information=None,
                     settings=spec.settings())

    results = {}
    for k, notion in enumerate(spec.notions):
        say(f"audit {k + 1}/{len(spec.notions)}: {notion}")
        results[notion] = run(notion, 1.0)
    sweep: dict[str, list[dict]] = {n: [] for n in spec.notions}
    for k, factor in enumerate(spec.sweep):
        say(f"sweep {k + 1}/{len(spec.sweep)}: noise x {factor:g}")
        for notion in spec.notions:
            c = results[notion].composition if factor == 1.0 else run(notion, factor).composition
            sweep[notion].append({"factor": factor, **{key: c[key] for key in (
                "joint", "sequential_bound", "parallel_bound", "sequential_respected", "parallel_respected")}})
    return Composed(spec, model, results, sweep)
