"""Seed 004's information measures (Thm 2 Eq. 26, Thm 3 Eq. 28, Prop. 4 Eq. 30) against references
written here: scipy.integrate.quad over y of the mixtures enumerated state by state, direct sums
for integer and finite outputs, a dense grid for the supremum, and closed forms."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from chains import chain_model, random_chain
from scipy import integrate

import ddpbayes
from ddpbayes.errors import InputError
from ddpbayes.model.loading import load_model

# ----------------------------------------------------------------------------- references


def states(joint):
    xs = np.array(list(itertools.product(*[range(s) for s in joint.shape])), dtype=float)
    return xs, joint.reshape(-1)


def laplace_density(y, q, b):
    return np.exp(-np.abs(y - q) / b) / (2 * b)


def mi_quad(t, q, p, b):
    """I(T; q + Lap(b)) for states with target values t, query values q and probabilities p: quad over y."""
    values = np.unique(t)
    pt_ = np.array([p[t == v].sum() for v in values])

    def integrand(y):
        g = np.array([np.sum(p[t == v] * laplace_density(y, q[t == v], b)) for v in values])
        f = g.sum()
        keep = g > 0
        return float(np.sum(g[keep] * np.log(g[keep] / (pt_[keep] * f))))

    points = np.unique(q)
    lo, hi = points[0] - 80 * b, points[-1] + 80 * b
    edges = np.concatenate([[lo], points, [hi]])
    return sum(integrate.quad(integrand, a, c, epsabs=1e-13, epsrel=1e-12, limit=400)[0] for a, c in itertools.pairwise(edges))


def kl_dense(t, q, p, b):
    """max over a dense grid of y (and far out, where the ratios are constant) of Σ_t p_t log(p_t f / g_t)."""
    values = np.unique(t)
    pt_ = np.array([p[t == v].sum() for v in values])
    y = np.concatenate([np.linspace(q.min() - 2 * b, q.max() + 2 * b, 400001), [q.min() - 30 * b, q.max() + 30 * b]])
    g = np.array([np.sum(p[t == v][:, None] * laplace_density(y[None, :], q[t == v][:, None], b), axis=0) for v in values])
    return float(np.max(np.sum(pt_[:, None] * np.log(pt_[:, None] * g.sum(axis=0) / g), axis=0)))


def cmi_by_groups(xs, p, q, i, per_group):
    """Σ_{x_(i)} P(x_(i)) per_group(t, q, p | x_(i))."""
    others = np.delete(xs, i, axis=1)
    total = 0.0
    for key in np.unique(others, axis=0):
        rows = np.all(others == key, axis=1) & (p > 0)
        pg = p[rows].sum()
        if pg > 0:
            total += pg * per_group(xs[rows, i], q[rows], p[rows] / pg)
    return total


def measures(model, query, mechanism, target=0, unit="nats", **kw):
    r = ddpbayes.audit(model, query, mechanism, "idp", targets=[target], information=unit, **kw)
    assert r.information is not None, r.information_reason
    return r, r.information


# ----------------------------------------------------------------------------- Laplace


@pytest.mark.parametrize("seed,sizes,weights", [(1, (2, 3, 2), (1.0, 2.0, 1.0)), (2, (3, 2, 2), (0.5, 1.7, -1.0)),
                                                (3, (2, 2, 2), (1.0, 1.0, 1.0))])
def test_random_chain_laplace_against_quad(seed, sizes, weights):
    rng = np.random.default_rng(seed)
    tables, joint = random_chain(rng, sizes)
    model = chain_model(tables)
    b = float(rng.uniform(0.4, 2.0))
    xs, p = states(joint)
    q = xs @ np.asarray(weights)
    query = "linear:" + ",".join(repr(w) for w in weights)
    for i in range(len(sizes)):
        _, info = measures(model, query, "laplace", target=i, scale=b)
        assert info["mutual_information"] == pytest.approx(mi_quad(xs[:, i], q, p, b), abs=1e-9)
        assert info["conditional_mutual_information"] == pytest.approx(
            cmi_by_groups(xs, p, q, i, lambda t, qq, pp: mi_quad(t, qq, pp, b)), abs=1e-9)
        assert info["kl_max"] == pytest.approx(kl_dense(xs[:, i], q, p, b), abs=1e-8)
        assert info["kl_max"] >= kl_dense(xs[:, i], q, p, b) - 1e-12  # the dense grid can only fall short


def test_laplace_kl_max_of_random_mixtures_against_a_dense_grid():
    """sup_y D on random laws of (X_i, q): 2-4 target values, 2-10 levels with gaps from 0.05 b to
    200 b, some weights zero, against `kl_dense` (which can only fall short of the sup); Brent's
    refinements and the brackets skipped by their bound both occur here (53 of 246 brackets refined)."""
    rng = np.random.default_rng(29)
    from ddpbayes.mechanisms.laplace.information import laplace_information

    for _ in range(20):
        values, m = int(rng.integers(2, 5)), int(rng.integers(2, 11))
        b = float(rng.choice([0.3, 1.0, 2.5]))
        q = np.cumsum(np.concatenate([[0.0], rng.choice([0.05, 0.5, 1.0, 3.0, 45.0, 200.0], m - 1)])) * b
        w = rng.dirichlet(np.ones(values * m) * 0.7).reshape(values, m)
        w[rng.random(w.shape) < 0.2] = 0.0
        w[:, 0] += (w.sum(axis=1) == 0) * 0.1  # every target value possible
        w /= w.sum()
        t, qs, p = np.repeat(np.arange(values), m).astype(float), np.tile(q, values), w.reshape(-1)
        keep = p > 0
        with np.errstate(divide="ignore"):
            _, kl, _ = laplace_information(q, np.log(w), b)
        expected = kl_dense(t[keep], qs[keep], p[keep], b)
        assert kl >= expected - 1e-12
        assert kl == pytest.approx(expected, abs=1e-7)


def test_contagious_pair_against_quad(contagious):
    """X_0 = X_1 ~ Bernoulli(0.1); the sum is 0 or 2. Knowing X_1 fixes X_0: CMI = 0."""
    model = contagious(2)
    b = 1.0
    t, q, p = np.array([0.0, 1.0]), np.array([0.0, 2.0]), np.array([0.9, 0.1])
    _, info = measures(model, "sum", "laplace", scale=b)
    assert info["mutual_information"] == pytest.approx(mi_quad(t, q, p, b), abs=1e-10)
    assert info["kl_max"] == pytest.approx(kl_dense(t, q, p, b), abs=1e-8)
    assert info["conditional_mutual_information"] == 0.0
    assert info["bounds"] == {"idp": pytest.approx(2.0), "dp": pytest.approx(1.0)}
    assert all(info["holds"].values())


def test_independent_cmi_is_single_tuple_channel():
    """Independent Bernoulli(p) tuples: I(X_i; Y | X_(i)) = I(X_i; X_i + Lap(b)) and I(X_i; Y) the
    same channel with the others' binomial sum as extra noise."""
    n, pp, b = 3, 0.3, 0.8
    model = load_model("models/independent.py", {"n": n, "p": pp})
    _, info = measures(model, "sum", "laplace", scale=b)
    channel = mi_quad(np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([1 - pp, pp]), b)
    assert info["conditional_mutual_information"] == pytest.approx(channel, abs=1e-10)
    xs = np.array(list(itertools.product([0.0, 1.0], repeat=n)))
    p = np.prod(np.where(xs == 1, pp, 1 - pp), axis=1)
    assert info["mutual_information"] == pytest.approx(mi_quad(xs[:, 0], xs.sum(axis=1), p, b), abs=1e-10)
    assert info["mutual_information"] < info["conditional_mutual_information"]


def test_prop4_as_stated_fails_for_xor():
    """A counterexample to Prop. 4 with its stated premise (ε-IDP): independent fair bits and the
    query x0 xor x1 = |x0 - x1|. Alone, q is a fair bit whatever x0 is, so L(y | t) is the same for
    t = 0, 1 and idp = 0; given x1, q moves with x0, so I(X_0; Y | X_(0)) = I(T; T + Lap(b)) for a
    fair bit T > 0 = idp. The proof's step needs the classic DP level 1/b, which holds."""
    b = 1.0
    model = load_model("models/independent.py", {"n": 2, "p": 0.5})
    result, info = measures(model, "expr:abs(x0-x1)", "laplace", scale=b)
    channel = mi_quad(np.array([0.0, 1.0]), np.array([0.0, 1.0]), np.array([0.5, 0.5]), b)
    assert result.leakage == pytest.approx(0.0, abs=1e-12)
    assert {result.witness.t, result.witness.t_prime} == {0.0, 1.0}  # a zero leakage still compares two values
    assert info["mutual_information"] == pytest.approx(0.0, abs=1e-12)
    assert info["conditional_mutual_information"] == pytest.approx(channel, abs=1e-10)
    assert channel > 0.08
    assert info["holds"]["conditional_mutual_information_le_idp"] is False
    assert info["holds"]["conditional_mutual_information_le_dp"] is True


def test_bits_are_nats_over_ln2(contagious):
    _, nats = measures(contagious(2), "sum", "laplace", scale=0.5)
    _, bits = measures(contagious(2), "sum", "laplace", scale=0.5, unit="bits")
    assert bits["unit"] == "bits"
    for key in ("kl_max", "mutual_information", "conditional_mutual_information"):
        assert bits[key] == pytest.approx(nats[key] / math.log(2), rel=1e-12)
    assert bits["bounds"]["idp"] == pytest.approx(nats["bounds"]["idp"] / math.log(2), rel=1e-12)


def test_far_apart_levels_integrate_exactly():
    """Query levels 60 scales apart: the pieces' subdivision must still resolve both ends."""
    tables = [np.array([0.3, 0.7]), np.array([[0.8, 0.2], [0.25, 0.75]])]
    model = chain_model(tables)
    b = 0.05
    xs, p = states(tables[0][:, None] * tables[1])
    q = xs @ np.array([3.0, 1.0])
    _, info = measures(model, "linear:3,1", "laplace", scale=b)
    assert info["mutual_information"] == pytest.approx(mi_quad(xs[:, 0], q, p, b), abs=1e-9)


# ----------------------------------------------------------------------------- geometric, randomized response


def mi_geometric(t, q, p, b, pad=300):
    alpha = math.exp(-1 / b)
    values = np.unique(t)
    pt_ = np.array([p[t == v].sum() for v in values])
    y = np.arange(q.min() - pad, q.max() + pad + 1)
    k = (1 - alpha) / (1 + alpha) * alpha ** np.abs(y[None, :] - q[:, None])
    g = np.array([np.sum(p[t == v][:, None] * k[t == v], axis=0) for v in values])
    f = g.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(g > 0, g * np.log(g / (pt_[:, None] * f)), 0.0)
    kl = np.sum(pt_[:, None] * np.log(pt_[:, None] * f / g), axis=0)[pad:-pad]
    return float(terms.sum()), float(kl.max())


def test_geometric_against_direct_sums():
    rng = np.random.default_rng(7)
    tables, joint = random_chain(rng, (2, 3, 2))
    model = chain_model(tables)
    xs, p = states(joint)
    q = xs @ np.array([1.0, 2.0, 1.0])
    b = 1.3
    for i in range(3):
        _, info = measures(model, "linear:1,2,1", "geometric", target=i, scale=b)
        mi, kl = mi_geometric(xs[:, i], q, p, b)
        assert info["mutual_information"] == pytest.approx(mi, abs=1e-11)
        assert info["kl_max"] == pytest.approx(kl, abs=1e-11)
        cmi = cmi_by_groups(xs, p, q, i, lambda t, qq, pp: mi_geometric(t, qq, pp, b)[0])
        assert info["conditional_mutual_information"] == pytest.approx(cmi, abs=1e-11)


def binary_entropy(x):
    return -sum(v * math.log(v) for v in (x, 1 - x) if v > 0)


def test_randomized_response_independent_closed_form():
    """Independent Bernoulli(p) bits, each kept with k = e^ε/(1+e^ε): every measure is the binary
    channel's: I = H(p k + (1-p)(1-k)) - H(k)."""
    pp, eps = 0.3, 0.9
    k = 1 / (1 + math.exp(-eps))
    model = load_model("models/independent.py", {"n": 3, "p": pp})
    _, info = measures(model, "identity", "randomized_response", epsilon=eps)
    closed = binary_entropy(pp * k + (1 - pp) * (1 - k)) - binary_entropy(k)
    assert info["mutual_information"] == pytest.approx(closed, abs=1e-14)
    assert info["conditional_mutual_information"] == pytest.approx(closed, abs=1e-14)
    py1 = pp * k + (1 - pp) * (1 - k)  # D(X ‖ X | Y = y) at y = 0 and 1, from Bayes' rule
    post = {1: pp * k / py1, 0: pp * (1 - k) / (1 - py1)}
    kl = max(pp * math.log(pp / post[y]) + (1 - pp) * math.log((1 - pp) / (1 - post[y])) for y in (0, 1))
    assert info["kl_max"] == pytest.approx(kl, abs=1e-14)


def test_randomized_response_random_model_against_enumeration():
    rng = np.random.default_rng(11)
    tables, joint = random_chain(rng, (2, 2, 2))
    model = chain_model(tables)
    xs, p = states(joint)
    eps = 0.7
    k = 1 / (1 + math.exp(-eps))
    ys = np.array(list(itertools.product([0.0, 1.0], repeat=3)))
    channel = np.prod(np.where(ys[:, None, :] == xs[None, :, :], k, 1 - k), axis=2)  # P(y | x) (Y, S)

    def mi(t, rows, pp):
        values = np.unique(t)
        g = np.array([channel[:, rows][:, t == v] @ pp[t == v] for v in values])
        pt_ = g.sum(axis=1)
        return float(np.sum(g * np.log(g / (pt_[:, None] * g.sum(axis=0))))), \
            float(np.max(np.sum(pt_[:, None] * np.log(pt_[:, None] * g.sum(axis=0) / g), axis=0)))

    everything = np.arange(len(p))
    for i in range(3):
        _, info = measures(model, "identity", "randomized_response", target=i, epsilon=eps)
        mi_all, kl = mi(xs[:, i], everything, p)
        assert info["mutual_information"] == pytest.approx(mi_all, abs=1e-13)
        assert info["kl_max"] == pytest.approx(kl, abs=1e-13)
        cmi = 0.0
        others = np.delete(xs, i, axis=1)
        for key in np.unique(others, axis=0):
            rows = np.flatnonzero(np.all(others == key, axis=1))
            cmi += p[rows].sum() * mi(xs[rows, i], rows, p[rows] / p[rows].sum())[0]
        assert info["conditional_mutual_information"] == pytest.approx(cmi, abs=1e-13)


# ----------------------------------------------------------------------------- audit integration


def test_json_keys_and_text(contagious):
    r, _ = measures(contagious(2), "sum", "laplace", scale=1.0)
    out = json.loads(r.to_json())["information"]
    for key in ("kl_max", "mutual_information", "conditional_mutual_information", "unit", "target", "bounds",
                "holds", "per_target", "method", "notes"):
        assert key in out
    from ddpbayes.cli.text import audit_text
    assert "I(X_i; Y | X_(i))" in audit_text(r)


def test_not_asked_not_computed(contagious):
    r = ddpbayes.audit(contagious(2), "sum", "laplace", "idp", scale=1.0, information=None)
    assert "information" not in r.to_dict()


def test_unavailable_says_why(contagious):
    """The dp audit runs no engine; the sampling engine has no exact mixture weights for a model it samples (the
    audit's reason on that model, through the CLI: test_sampling.py::test_verdicts_and_cli_reproducibility)."""
    r = ddpbayes.audit(contagious(2), "sum", "laplace", "dp", scale=1.0, information="nats")
    assert r.information is None and "no engine" in r.information_reason
    from ddpbayes.engines import engine_named
    from ddpbayes.engines.base import NoMixtures
    from ddpbayes.problem import Adversary, Problem
    from ddpbayes.queries import parse_query

    # a model the sampling engine samples (a continuous rate; issue #27): no exact mixture weights
    model = load_model("models/beta_bernoulli.py", {"n": 3})
    problem = Problem(model, parse_query("count").bind(model), ddpbayes.mechanisms.Laplace(1.0))
    with pytest.raises(NoMixtures, match="sampling engine .* not estimated"):
        engine_named("sampling").mixtures(problem, Adversary(0), True)


def test_summed_discrete_model_has_the_exact_measures(contagious):
    """Every variable discrete: the sampling engine sums the model exactly (issue #27) and its
    mixtures are the exact engine's, so the measures are those of `engine="exact"` (checked
    against quadrature above), digit for digit."""
    kw = dict(scale=1.0, information="nats")
    summed = ddpbayes.audit(contagious(2), "sum", "laplace", "idp", engine="sampling", **kw)
    exact = ddpbayes.audit(contagious(2), "sum", "laplace", "idp", engine="exact", **kw)
    assert summed.engine == "sampling" and "summed" in summed.diagnostics
    assert summed.information is not None and summed.information == exact.information


def test_bad_unit_is_one_line(contagious):
    with pytest.raises(InputError, match="information unit"):
        ddpbayes.audit(contagious(2), "sum", "laplace", "idp", scale=1.0, information="hartleys")


@pytest.mark.parametrize("mechanism", ["laplace", "geometric"])
def test_structured_equals_exact_on_a_chain(mechanism):
    model = load_model("models/markov_chain.py", {"n": 5, "p01": 0.3, "p10": 0.15})
    for target in (0, 2):
        _, exact = measures(model, "count", mechanism, target=target, scale=0.7, engine="exact")
        r, structured = measures(model, "count", mechanism, target=target, scale=0.7, engine="structured")
        assert r.engine == "structured"
        for key in ("kl_max", "mutual_information", "conditional_mutual_information"):
            assert structured[key] == pytest.approx(exact[key], abs=1e-12)
        assert structured["bounds"]["idp"] == pytest.approx(exact["bounds"]["idp"], rel=1e-12)


def test_report_view_follows_the_sweep(contagious):
    from ddpbayes.reports.render.information import information_section
    from ddpbayes.reports.views.information import information_view
    from ddpbayes.reports.views.sweep import sweep

    model = contagious(2)

    def run(notion, **kw):
        return ddpbayes.audit(model, "sum", "laplace", notion, **{"scale": 1.0, **kw})

    results = {"idp": run("idp")}
    swept = sweep(run, results, (0.5, 2.0), {}, lambda _: None)
    view = information_view(run, results, swept, lambda _: None)
    t, q, p = np.array([0.0, 1.0]), np.array([0.0, 2.0]), np.array([0.9, 0.1])
    assert view.values == [0.5, 2.0]
    assert view.idp == pytest.approx([4.0, 1.0])  # idp of the pair: 2/b
    assert view.measures["mutual_information"] == pytest.approx([mi_quad(t, q, p, b) for b in (0.5, 2.0)], abs=1e-10)
    section = information_section(view, model.names)
    assert section.title.startswith("Information measures")


def test_cli_flag(capsys, models_dir):
    from ddpbayes.cli.main import main

    args = ["audit", str(models_dir / "contagious_family.py"), "--query", "sum", "--mechanism", "laplace",
            "--scale", "1", "--notion", "idp", "--format", "json"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["information"]["unit"] == "nats"  # the CLI's default
    assert main([*args, "--information", "none"]) == 0
    assert "information" not in json.loads(capsys.readouterr().out)
    assert main([*args, "--information", "bits"]) == 0
    info = json.loads(capsys.readouterr().out)["information"]
    assert info["unit"] == "bits" and info["bounds"]["idp"] == pytest.approx(2 / math.log(2))
