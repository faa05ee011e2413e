"""Property tests: random small joint laws, exact engine vs. an independent numpy brute force.

Each example draws a chain x0 ~ Cat(p0), x1 ~ Cat(P1[x0]), x2 ~ Cat(P2[x0, x1]) (some
probabilities exactly 0, so that some (t, x_K) are impossible), builds the same law twice —
as a PyMC model for ddpbayes and as a numpy table p0[a] P1[a, c] P2[a, c, d] for the
reference — and compares leak(i, K) for every adversary. The reference maximises over a y grid
(dense, every breakpoint, points beyond the extremes where the log-ratio equals its limit), so
the exact supremum must be >= the grid maximum and, since the grid contains every point where
the sup can be attained, within 1e-6 of it.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
import pymc as pm
import pytensor.tensor as pt
import pytest
from bruteforce import (
    binary_outputs,
    coordinate_grid,
    integer_grid,
    laplace_log_kernel,
    leak_grid,
    rr_log_kernel,
    scalar_grid,
    states,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddpbayes
from ddpbayes import DependenceModel

# PROPERTY_SCALE=10 python -m pytest tests/test_property.py runs ten times as many examples.
SCALE = float(os.environ.get("PROPERTY_SCALE", "1"))


def _settings(examples: int):
    return settings(max_examples=max(1, round(examples * SCALE)), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


SETTINGS = _settings(15)

prob = st.one_of(st.just(0.0), st.floats(0.05, 1.0))


def _normalise(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float)
    flat = a.reshape(-1, a.shape[-1])
    for row in flat:
        if row.sum() == 0:
            row[0] = 1.0
    return (flat / flat.sum(axis=1, keepdims=True)).reshape(a.shape)


@st.composite
def chains(draw, sizes=None):
    """Domain sizes and conditional tables of a chain of 2 or 3 categorical tuples."""
    if sizes is None:
        n = draw(st.integers(2, 3))
        sizes = [draw(st.integers(2, 3)) for _ in range(n)]
    n = len(sizes)
    tables = []
    for k in range(n):
        shape = tuple(sizes[: k + 1])
        flat = draw(st.lists(prob, min_size=int(np.prod(shape)), max_size=int(np.prod(shape))))
        tables.append(_normalise(np.reshape(flat, shape)))
    return sizes, tables


def chain_joint(tables) -> np.ndarray:
    """P(x0, ..., x_{n-1}) = p0[x0] P1[x0, x1] P2[x0, x1, x2] as a numpy array."""
    joint = tables[0]
    for t in tables[1:]:
        joint = joint[..., None] * t
    return joint


def chain_model(tables) -> DependenceModel:
    with pm.Model() as m:
        xs = [pm.Categorical("x0", p=tables[0])]
        for k, t in enumerate(tables[1:], start=1):
            p = pt.as_tensor_variable(t)[tuple(xs)]
            xs.append(pm.Categorical(f"x{k}", p=p))
    return DependenceModel(m, tuples=[f"x{k}" for k in range(len(tables))])


def all_adversaries(n):
    for i in range(n):
        others = [j for j in range(n) if j != i]
        for size in range(n):
            for known in itertools.combinations(others, size):
                yield i, known


def _compare(r, X, p, q, kernel, grid):
    seen = set()
    for node in r.lattice:
        i, known = node.adversary.target, tuple(sorted(node.adversary.known))
        seen.add((i, known))
        expected = leak_grid(X, p, q, kernel, grid, i, known)[0]
        assert node.value >= expected - 1e-9, (i, known, node.value, expected)
        assert node.value == pytest.approx(expected, abs=1e-6), (i, known)
    assert seen == set(all_adversaries(X.shape[1]))


@SETTINGS
@given(
    chain=chains(),
    weights=st.lists(st.floats(-3, 3).map(lambda v: round(v, 2)), min_size=3, max_size=3),
    b=st.floats(0.2, 3.0),
    geometric=st.booleans(),
    data=st.data(),
)
def test_linear_laplace_or_geometric_lattice(chain, weights, b, geometric, data):
    sizes, tables = chain
    n = len(sizes)
    w = np.array(weights[:n])
    if geometric:
        w = np.round(w)  # the geometric mechanism needs integer weights
    query = "linear:" + ",".join(repr(float(v)) for v in w)
    model = chain_model(tables)
    joint = chain_joint(tables)
    X, p = states(joint, [np.arange(s) for s in sizes])
    q = X @ w
    if geometric:  # integer outputs: every integer from below min q to above max q
        grid = integer_grid(q)
    else:
        grid = scalar_grid(q, b)
    kernel = laplace_log_kernel(b)
    mech = "geometric" if geometric else "laplace"

    r = ddpbayes.audit(model, query, mech, "pdp", scale=b, lattice=True)
    _compare(r, X, p, q, kernel, grid)

    # one random adversary through the `known=` path
    i, known = data.draw(st.sampled_from(list(all_adversaries(n))))
    one = ddpbayes.audit(model, query, mech, "pdp", scale=b, targets=[i], known=list(known))
    expected = leak_grid(X, p, q, kernel, grid, i, known)[0]
    assert one.leakage >= expected - 1e-9
    assert one.leakage == pytest.approx(expected, abs=1e-6)
    assert one.per_target[i] == pytest.approx(expected, abs=1e-6)
    assert all(v is None for j, v in enumerate(one.per_target) if j != i)


HIST_EDGES = ["0,1,2,3", "0,1.5,3", "0.5,2.5", "-1,0.5,1.5"]


@_settings(5)
@given(chain=chains(sizes=[3, 3, 3]), edges=st.sampled_from(HIST_EDGES), b=st.floats(0.3, 2.0))
def test_histogram_vector_output(chain, edges, b):
    """Histogram (a vector output, Laplace on every bin): brute force over a coordinate-wise
    product grid (breakpoints, three interior points per gap, one point beyond each extreme)."""
    sizes, tables = chain
    e = np.array([float(v) for v in edges.split(",")])
    model = chain_model(tables)
    X, p = states(chain_joint(tables), [np.arange(3)] * 3)
    # bin of each value by numpy's convention: [e_j, e_{j+1}), the last bin closed; outside: none
    q = np.stack([((X >= lo) & ((X < hi) | ((hi == e[-1]) & (X == hi)))).sum(axis=1)
                  for lo, hi in zip(e[:-1], e[1:])], axis=1).astype(float)
    grid = coordinate_grid(q)
    r = ddpbayes.audit(model, "histogram:" + edges, "laplace", "pdp", scale=b, lattice=True)
    _compare(r, X, p, q, laplace_log_kernel(b), grid)


@_settings(5)
@given(chain=chains(sizes=[2, 2, 2]), eps=st.floats(0.1, 3.0))
def test_randomized_response_lattice(chain, eps):
    """Randomized response on binary tuples: every output in {0,1}^3 enumerated."""
    _, tables = chain
    model = chain_model(tables)
    X, p = states(chain_joint(tables), [np.arange(2)] * 3)
    r = ddpbayes.audit(model, "identity", "randomized_response", "pdp", epsilon=eps, lattice=True)
    _compare(r, X, p, X, rr_log_kernel(eps), binary_outputs(3))
