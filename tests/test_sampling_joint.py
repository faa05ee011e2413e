"""Joint-law mechanisms under continuous latents in the sampling engine (issue #42.4).

Expected values come from math written here: the records' law by Beta–binomial closed forms, the
mechanism's law by hand (report-noisy-max over two answers through the difference of two Laplace
variables, checked against scipy's quad; Ghosh et al.'s truncated geometric), and the leakage as a
maximum over the finite output space.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pymc as pm
import pytest
from scipy.integrate import quad
from scipy.special import betaln, comb

from ddpbayes import DependenceModel, audit, load_model

MODELS = Path(__file__).resolve().parent.parent / "models"
GROUPS = ((2.0, 3.0), (3.0, 2.0))  # each group of three siblings shares a rate ~ Beta(a, b)


def _two_groups() -> DependenceModel:
    """Two groups of three Bernoulli siblings, group g's rate ~ Beta(GROUPS[g])."""
    with pm.Model() as m:
        for g, (a, b) in enumerate(GROUPS):
            rate = pm.Beta(f"rate{g}", a, b)
            for k in range(3):
                pm.Bernoulli(f"x{3 * g + k}", rate)
    return DependenceModel(m, tuples=[f"x{k}" for k in range(6)])


def _count_law(size: int, a: float, b: float, fixed: int | None = None) -> np.ndarray:
    """P(count of `size` siblings = c), rate ~ Beta(a, b); with `fixed` the first sibling's value:
    fixed + BetaBinomial(size - 1, a + fixed, b + 1 - fixed)."""
    law = np.zeros(size + 1)
    if fixed is None:
        m = np.arange(size + 1)
        law[:] = comb(size, m) * np.exp(betaln(a + m, b + size - m) - betaln(a, b))
        return law
    m = np.arange(size)
    law[fixed:fixed + size] = comb(size - 1, m) * np.exp(betaln(a + fixed + m, b + 1 - fixed + size - 1 - m)
                                                         - betaln(a + fixed, b + 1 - fixed))
    return law


def _first_wins(d: float, b: float) -> float:
    """P(Z1 - Z0 < d) for Z0, Z1 iid Laplace(b): the difference has density (1 + |z|/b) e^{-|z|/b} / (4b)."""
    tail = 0.5 * math.exp(-abs(d) / b) * (1 + abs(d) / (2 * b))
    return 1 - tail if d >= 0 else tail


def test_difference_of_two_laplace_by_quadrature():
    for d, b in ((0.0, 1.0), (1.3, 0.7), (-2.0, 1.5)):
        dens = lambda z: (1 + abs(z) / b) * math.exp(-abs(z) / b) / (4 * b)  # noqa: E731
        below = quad(dens, -np.inf, min(d, 0.0))[0] + quad(dens, min(d, 0.0), max(d, 0.0))[0] * (d > 0)
        assert _first_wins(d, b) == pytest.approx(below, abs=1e-10)


@pytest.mark.slow
def test_report_noisy_max_over_two_counts_of_beta_siblings():
    """Report-noisy-max (Laplace(b) on each count) over the two groups' counts, idp of x0: the index
    law given x0 = t is Σ_{c0, c1} P(c0 | t) P(c1) P(argmax = i | c0, c1); the leakage the larger
    |log ratio| over the two indices. The sampling engine (both rates sampled, the five other
    siblings summed: 32 configurations) within 0.05 and its interval around it."""
    b = 0.8
    c1 = _count_law(3, *GROUPS[1])
    laws = []
    for t in (0, 1):
        c0 = _count_law(3, *GROUPS[0], fixed=t)
        win = sum(c0[u] * c1[v] * _first_wins(u - v, b) for u in range(4) for v in range(4))
        laws.append(np.array([win, 1 - win]))
    truth = float(np.max(np.abs(np.log(laws[1]) - np.log(laws[0]))))
    res = audit(_two_groups(), "linear:1,1,1,0,0,0;0,0,0,1,1,1", "report_noisy_max", "idp", scale=b, targets=[0],
                engine="sampling", seed=1, workers=1, information=None)
    assert "summed 32" in "".join(res.diagnostics["samplers"]) and res.diagnostics["ok"]
    assert abs(res.leakage - truth) <= 0.05 and res.ci[0] <= truth <= res.ci[1], (res.leakage, res.ci, truth)


@pytest.mark.slow
def test_truncated_geometric_on_beta_siblings():
    """Ghosh et al.'s truncated geometric (α = e^{-1/b}) releasing the count of five Beta(2, 5)
    siblings, idp of x0: P(y | c) = α^|y-c| (1 - α)/(1 + α) inside 0..5, α^c/(1 + α) at 0 and
    α^{5-c}/(1 + α) at 5; the leakage the largest |log ratio| over y in 0..5."""
    n, b = 5, 1.0
    alpha = math.exp(-1 / b)
    y, c = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    law = alpha ** np.abs(y - c) * (1 - alpha) / (1 + alpha)
    law[0] = alpha ** np.arange(n + 1) / (1 + alpha)
    law[n] = alpha ** (n - np.arange(n + 1)) / (1 + alpha)
    assert np.allclose(law.sum(axis=0), 1.0)
    out = [law @ _count_law(n, 2.0, 5.0, fixed=t) for t in (0, 1)]
    truth = float(np.max(np.abs(np.log(out[1]) - np.log(out[0]))))
    model = load_model(MODELS / "beta_bernoulli.py", {"n": n, "a": 2.0, "b": 5.0})
    res = audit(model, "count", "truncated_geometric", "idp", scale=b, targets=[0], engine="sampling", seed=2,
                workers=1, information=None, mechanism_params={"n": str(n)})
    assert res.diagnostics["ok"]
    assert abs(res.leakage - truth) <= 0.05 and res.ci[0] <= truth <= res.ci[1], (res.leakage, res.ci, truth)
