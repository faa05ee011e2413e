"""Sensitivities of `expr:` queries on continuous domains (DESIGN §1.1, `queries/interval.py`).

Interval arithmetic must be sound: every value numpy computes at a point of a box lies in the
interval `evaluate_box` gives (checked on random expressions and boxes, with nans masked by
comparisons), every sampled change ||q(t, x_{-k}) - q(t', x_{-k})||_1 is at most the upper bound,
and the bounds bracket hand-derived sensitivities (d_i d_j: 1; d_i - d_j: 1 on [0, 1]^2).
"""

from __future__ import annotations

import ast
import itertools
from pathlib import Path

import numpy as np
import pymc as pm
import pytest

import ddpbayes
from ddpbayes import DependenceModel, InputError, Interval
from ddpbayes.queries.expression import evaluate, parse_expression
from ddpbayes.queries.general import with_sensitivity
from ddpbayes.queries.inclusion import evaluate_box
from ddpbayes.queries import parse_query

EXAMPLE1 = Path(__file__).resolve().parents[1] / "models" / "ddp_example1.py"


def finite_pair() -> DependenceModel:
    with pm.Model() as m:
        pm.Bernoulli("x0", p=0.5)
        pm.Bernoulli("x1", p=0.5)
    return DependenceModel(m, tuples=["x0", "x1"])


def test_sensitivity_on_continuous_domains_is_bounded_given_or_refused():
    model = ddpbayes.load_model(EXAMPLE1)
    q = parse_query("expr:d_i*d_j").bind(model)  # sup |t - t'| d_j = 1, attained on the grid: exact
    assert [q.sensitivity_range(k, model.domains) for k in range(2)] == [(1.0, 1.0), (1.0, 1.0)]
    diff = parse_query("expr:d_i - d_j").bind(model)  # true 1; the bound is sound, a cell wider
    lower, upper = diff.sensitivity_range(0, model.domains)
    assert lower == 1.0 and 1.0 <= upper <= 1.01
    with pytest.raises(InputError, match=r"no finite bound .* give --sensitivity S \(an audit may instead"):
        parse_query("expr:log(d_i)").bind(model).global_sensitivity(model.domains)
    with pytest.raises(InputError, match=r"no finite bound"):
        ddpbayes.audit(model, "expr:d_j/d_i", "laplace", "ddp", epsilon=1.0)
    assert with_sensitivity(q, 2.0).global_sensitivity(model.domains) == 2.0
    with pytest.raises(InputError, match="applies to expr: and fn:"):
        with_sensitivity(parse_query("sum"), 1.0)
    finite = finite_pair()
    with pytest.raises(InputError, match="drop --sensitivity"):
        ddpbayes.audit(finite, with_sensitivity(parse_query("expr:x0*x1"), 2.0), "laplace", "idp", scale=1.0)


def test_dp_with_a_bounded_sensitivity_is_a_sure_range():
    """d_i - d_j on [0, 1]^2: the sensitivity is 1 (by hand); the bound brackets it, so dp's
    leakage at scale 1 lies in [1, upper]: a claim above upper passes, below 1 fails, between
    is inconclusive — never a wrong verdict."""
    model = ddpbayes.load_model(EXAMPLE1)
    r = ddpbayes.audit(model, "expr:d_i - d_j", "laplace", "dp", scale=1.0, claim=1.5)
    assert r.verdict == "pass" and r.ci[0] == 1.0 and 1.0 < r.ci[1] <= 1.01
    assert any("bounded, not computed" in n for n in r.notes)
    assert ddpbayes.audit(model, "expr:d_i - d_j", "laplace", "dp", scale=1.0, claim=0.99).verdict == "fail"
    assert ddpbayes.audit(model, "expr:d_i - d_j", "laplace", "dp", scale=1.0, claim=1.001).verdict == "inconclusive"
    exact = ddpbayes.audit(model, "expr:d_i*d_j", "laplace", "dp", epsilon=1.0)  # bound attained: exact
    assert exact.ci is None and exact.leakage == pytest.approx(1.0) and exact.problem.mechanism.scale == 1.0


# ----------------------------------------------------------------------------- interval arithmetic is sound

LEAVES = ["a", "b", "0.5", "2", "-1", "3"]
UNARY = ["abs", "exp", "log", "sqrt", "floor", "ceil", "sign", "sin", "cos", "tanh", "-", "not "]
BINARY = ["+", "-", "*", "/", "//", "%", "<", "<=", ">", ">=", "==", "!=", " and ", " or "]


def random_expression(rng: np.random.Generator, depth: int) -> str:
    """A random expression over scalars a, b from the whitelisted grammar."""
    if depth == 0 or rng.uniform() < 0.2:
        return str(rng.choice(LEAVES))
    kind = rng.integers(0, 6)
    sub = [random_expression(rng, depth - 1) for _ in range(3)]
    if kind == 0:
        return f"{rng.choice(UNARY)}({sub[0]})"
    if kind in (1, 2):
        return f"({sub[0]}){rng.choice(BINARY)}({sub[1]})"
    if kind == 3:
        return f"({sub[0]})**{rng.choice(['2', '3', '0.5', '-1', '-2', '1.5'])}"
    if kind == 4:
        return f"{rng.choice(['minimum', 'maximum', 'max', 'min'])}({sub[0]}, {sub[1]})"
    return rng.choice([f"where({sub[0]}, {sub[1]}, {sub[2]})", f"clip({sub[0]}, {sub[1]}, {sub[2]})",
                       f"({sub[1]}) if ({sub[0]}) else ({sub[2]})"])


def test_interval_inclusion_on_random_expressions():
    """For random expressions and boxes, every finite value at a point of the box (corners and
    random points, numpy evaluating the expression) lies in the interval `evaluate_box` gives —
    also where an intermediate nan (sqrt(-1), exp(700)*0) is masked by a comparison."""
    rng = np.random.default_rng(7)
    checked = 0
    for _ in range(400):
        tree = parse_expression(random_expression(rng, 3))
        ends = np.sort(rng.choice([-2.0, -1.0, -0.5, 0.0, 1e-3, 0.3, 1.0, 2.5, 4.0, 700.0], size=(2, 2)), axis=1)
        box = {name: (np.array([[ends[j, 0]]]), np.array([[ends[j, 1]]])) for j, name in enumerate("ab")}
        lo, hi = (np.asarray(v, dtype=float).ravel()[0] for v in evaluate_box(tree, box))
        if np.isnan(lo) or np.isnan(hi):  # unknown (possibly a nan): claims nothing
            continue
        pts = np.vstack([np.array(list(itertools.product(*ends))), rng.uniform(ends[:, 0], ends[:, 1], size=(300, 2))])
        v = np.broadcast_to(evaluate(tree, {"a": pts[:, :1], "b": pts[:, 1:]}), (len(pts), 1)).ravel()
        v = v[np.isfinite(v)]
        assert np.all((v >= lo) & (v <= hi)), (ast.unparse(tree), ends, lo, hi, v.min() if v.size else None)
        checked += v.size
    assert checked > 10_000


@pytest.mark.parametrize("seed", range(4))
def test_sensitivity_bounds_bracket_sampled_changes(seed):
    """lower <= any sampled ||q(t, x_{-k}) - q(t', x_{-k})||_1 is not required, but every sampled
    change must be <= upper, and lower (real grid points) <= upper."""
    rng = np.random.default_rng(seed)
    with pm.Model() as m:
        pm.Uniform("a", -1, 2)
        pm.Uniform("b", 0, 1)
    model = DependenceModel(m, tuples=["a", "b"], domains={"a": Interval(-1, 2), "b": Interval(0, 1)})
    for _ in range(25):
        text = random_expression(rng, 3)
        q = parse_query(f"expr:{text}; a*b").bind(model)
        for k in range(2):
            try:
                lower, upper = q.sensitivity_range(k, model.domains)
            except InputError:
                continue  # no finite bound, or values not finite on the domain
            x = np.column_stack([rng.uniform(-1, 2, 2000), rng.uniform(0, 1, 2000)])
            y = x.copy()
            y[:, k] = rng.uniform(*((-1, 2) if k == 0 else (0, 1)), 2000)
            try:
                change = np.abs(q.values(x) - q.values(y)).sum(axis=1).max()
            except InputError:
                continue
            assert lower <= upper and change <= upper * (1 + 1e-12), (text, k, change, upper)
