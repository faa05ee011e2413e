"""The continual release against Cao et al.'s TPL recursion (ICDE 2017) as benchmarks/limit_refs/tpl.py
writes it (plain Python, no ddpbayes: independent math; issue #29): on symmetric chains started from
their stationary law, idp of every day is TPL_t (DESIGN §2.1c), for randomized response with eps and
Laplace or geometric noise of scale 1/eps on 0/1 values (kernel ratios e^{±eps} on both)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import ddpbayes
from ddpbayes.engines.structured.continual import continual_leakage
from ddpbayes.engines.structured.graph import FactorGraph, factor_graph
from ddpbayes.engines.structured.potential import Potential
from ddpbayes.mechanisms import Geometric, Laplace, RandomizedResponse
from ddpbayes.problem import Adversary, Problem
from ddpbayes.queries import parse_query

_SPEC = importlib.util.spec_from_file_location(
    "tpl", Path(__file__).resolve().parent.parent / "benchmarks" / "limit_refs" / "tpl.py")
tpl = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(tpl)


def _idp(model, graph: FactorGraph, mechanism, n: int) -> list[float]:
    problem = Problem(model, parse_query("identity"), mechanism, tuple(Adversary(i) for i in range(n)))
    return [r.value for r in continual_leakage(problem, graph)]


@pytest.mark.parametrize("n", [2, 3, 9, 40])
@pytest.mark.parametrize("stay", [0.8, 0.55, 0.3])
def test_markov_chain_model_equals_tpl(models_dir, n, stay):
    """models/markov_chain.py (a PyMC chain) with p01 = p10 = 1 - stay: every day's idp is TPL."""
    model = ddpbayes.load_model(models_dir / "markov_chain.py", {"n": n, "p_stay": stay})
    graph = factor_graph(model, 10**7)
    for eps in (0.3, 1.0, 2.5):
        want = tpl.tpl_reference(1 - stay, 1 - stay, eps, n)
        for mechanism in (RandomizedResponse(eps), Laplace(1 / eps), Geometric(1 / eps)):
            assert _idp(model, graph, mechanism, n) == pytest.approx(want, abs=1e-10, rel=1e-12)


def _chain_graph(n: int, p01: float, p10: float) -> FactorGraph:
    """The stationary chain as a factor graph built from numpy tables (no PyMC: long chains fast)."""
    trans = np.log([[1 - p01, p01], [p10, 1 - p10]])
    init = np.log([p10 / (p01 + p10), p01 / (p01 + p10)])
    factors = [Potential((0,), init.reshape(2, 1), 0)]
    factors += [Potential((k - 1, k), trans[..., None], 0) for k in range(1, n)]
    return FactorGraph([2] * n, [np.array([0.0, 1.0])] * n, factors)


def _stand_in(n: int):
    import pymc as pm

    with pm.Model() as m:
        pm.Bernoulli("x", 0.5, shape=n)
    return ddpbayes.DependenceModel(m, tuples="x")


@pytest.mark.parametrize("n, stay, eps", [(1000, 0.8, 1.0), (1000, 0.95, 0.1), (250, 0.6, 3.0), (1000, 0.999, 1.0)])
def test_long_symmetric_chains_equal_tpl(n, stay, eps):
    """T up to 1000, every day: the recursions agree day by day, near the fixed point and at the ends."""
    got = _idp(_stand_in(n), _chain_graph(n, 1 - stay, 1 - stay), RandomizedResponse(eps), n)
    assert got == pytest.approx(tpl.tpl_reference(1 - stay, 1 - stay, eps, n), abs=1e-9, rel=1e-12)


def test_deterministic_chain_equals_tpl():
    """p01 = p10 = 0: every day equals day 0, so TPL_t = T eps for every t (no overflow in either)."""
    n, eps = 300, 2.0
    want = tpl.tpl_reference(1e-300, 1e-300, eps, n)  # the stationary law of p01 = p10 -> 0 is uniform
    assert want == pytest.approx([n * eps] * n, rel=1e-12)
    factors = [Potential((0,), np.log([[0.5], [0.5]]), 0)]
    with np.errstate(divide="ignore"):
        same = np.log(np.eye(2))[..., None]
    factors += [Potential((k - 1, k), same, 0) for k in range(1, n)]
    graph = FactorGraph([2] * n, [np.array([0.0, 1.0])] * n, factors)
    assert _idp(_stand_in(n), graph, RandomizedResponse(eps), n) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("p01, p10", [(0.1, 0.4), (0.3, 0.05), (0.7, 0.6), (0.95, 0.5)])
def test_asymmetric_chains_are_bounded_by_tpl(p01, p10):
    """Asymmetric stationary chains: Cao's L^B takes the worse of the two ends of the interval of
    likelihood ratios on each side separately ([e^-BPL, e^BPL]), the exact idp the same end on both
    sides (DESIGN §2.1c), so TPL bounds it from above. With positive correlation (p01 + p10 < 1)
    each day's Möbius map is increasing and the same end stays the worse one: equal here; with
    negative correlation the ends swap every day and the bound is strict."""
    n, eps = 60, 0.8
    got = np.array(_idp(_stand_in(n), _chain_graph(n, p01, p10), RandomizedResponse(eps), n))
    want = tpl.tpl_reference(p01, p10, eps, n)
    assert np.all(got <= want + 1e-12)
    if p01 + p10 < 1:
        assert got == pytest.approx(want, abs=1e-12)
    else:
        assert np.min(want - got) > 1e-3
