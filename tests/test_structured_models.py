"""The structured engine's shipped models, models/hmm_regimes.py and models/family_tree.py, against
references written here: their joints enumerated in plain numpy (every configuration of records
and hidden regimes, the regimes summed out), the leakage from the definition by
tests/bruteforce.py, a forward recursion over (regime, partial count) for an HMM too long to
enumerate, and the exact engine (DESIGN §2.1, §2.1b), to 1e-12.

How the models' docstring values were derived (the same functions): `_hmm_joint` and
`_tree_joint` enumerate the joint with `np.einsum` without optimisation (one loop over every
configuration of every label, the latent labels summed); `bruteforce.leak_bruteforce` takes,
for each x_K of positive probability and each t, the mixture of Laplace densities of the count
given X_i = t and x_K, and maximises the log-ratio over a y grid holding every breakpoint
y = 0..n, points between them and points beyond both extremes (where the ratio equals its
y -> +-inf limit); ddp's known sets come from `_dependence_sets` on the numpy joint. The pdp
lattices quoted in the docstrings were searched the same way, every known set in turn.
"""

from __future__ import annotations

import numpy as np
import pymc as pm
import pytest
from bruteforce import leak_bruteforce
from pytensor.graph.basic import Constant
from pytensor.graph.traversal import ancestors
from bruteforce import logsumexp  # scipy's, without its per-call overhead

import ddpbayes
from ddpbayes import DependenceModel
from ddpbayes.engines.exact import ExactEngine
from ddpbayes.engines.structured import StructuredEngine
from ddpbayes.errors import InputError
from ddpbayes.mechanisms import Geometric, Laplace
from ddpbayes.problem import Adversary, Problem
from ddpbayes.queries import parse_query
from ddpbayes.settings import RunSettings

STRUCTURED, EXACT = StructuredEngine(), ExactEngine()
BINARY = np.array([0.0, 1.0])

# Tuple order and parents (indices) of family_tree.py's trees, written from its docstring.
TREES = {
    (3, 2): ["g0_0", "g0_1", "g1_0", "g1_0_spouse", "g1_1", "g1_1_spouse", "g2_0", "g2_1", "g2_2", "g2_3"],
    (4, 1): ["g0_0", "g0_1", "g1_0", "g1_0_spouse", "g2_0", "g2_0_spouse", "g3_0"],
}
PARENTS = {
    (3, 2): [None, None, (0, 1), None, (0, 1), None, (2, 3), (2, 3), (4, 5), (4, 5)],
    (4, 1): [None, None, (0, 1), None, (2, 3), None, (4, 5)],
}
HMM_IDP = [1.53276, 1.76789, 1.86862, 1.86862, 1.76789, 1.53276]  # hmm_regimes.py, defaults
TREE_IDP = [1.61747, 1.61747, 2.08005, 1.43451, 2.08005, 1.43451, 1.70530, 1.70530, 1.70530, 1.70530]
TREE_DDP = [1.77528, 1.77528, 2.15002, 1.52548, 2.15002, 1.52548, 1.70613, 1.70613, 1.70613, 1.70613]


# --------------------------------------------------------------------------- numpy references


def _joint(factors: list[tuple[np.ndarray, list[int]]], n: int) -> np.ndarray:
    """P(x_0..x_{n-1}): the product of the tables, each over its labels, summed over every label
    from n on (the latents); einsum without optimisation loops over every configuration."""
    operands = [a for table, labels in factors for a in (table, labels)]
    return np.einsum(*operands, list(range(n)))


def _hmm_joint(initial, transition, emission, n: int) -> np.ndarray:
    """P(x) = Σ_r initial[r_0] Π_d transition[r_{d-1}, r_d] Π_d emission[r_d, x_d]; record d is
    label d, regime d label n + d."""
    factors = [(np.asarray(initial, dtype=float), [n])]
    factors += [(np.asarray(transition, dtype=float), [n + d - 1, n + d]) for d in range(1, n)]
    factors += [(np.asarray(emission, dtype=float), [n + d, d]) for d in range(n)]
    return _joint(factors, n)


def _tree_joint(parents: list, p_founder: float, p_child: tuple[float, float, float]) -> np.ndarray:
    """P(x) = Π_founders p_founder^x (1 - p_founder)^(1-x) Π_children P(x_c | its two parents),
    with P(x_c = 1 | a, b) = p_child[a + b]."""
    founder = np.array([1.0 - p_founder, p_founder])
    one = np.array([[p_child[0], p_child[1]], [p_child[1], p_child[2]]])  # [a, b]
    child = np.stack([1.0 - one, one], axis=-1)  # [a, b, x]
    factors = [(founder, [k]) if par is None else (child, [*par, k]) for k, par in enumerate(parents)]
    return _joint(factors, len(parents))


def _dependence_sets(joint: np.ndarray) -> list[set[int]]:
    """N(i) = {j : P(X_j | X_i = t) changes with t beyond 1e-10}, from each pair's marginal."""
    n = joint.ndim
    sets = [set() for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if i != j:
                pair = np.moveaxis(joint, (i, j), (0, 1)).sum(axis=tuple(range(2, n)))
                marg = pair.sum(axis=1)
                cond = pair[marg > 0] / marg[marg > 0, None]
                if np.abs(cond - cond[0]).max() > 1e-10:
                    sets[i].add(j)
    return sets


def _known_sets(joint: np.ndarray, notion: str, known: list[int] | None) -> list[tuple[int, ...] | None]:
    """Each target's known set under `notion` (None: not a target, it is known)."""
    n = joint.ndim
    if notion == "idp":
        return [()] * n
    if notion == "ddp":
        deps = _dependence_sets(joint)
        return [tuple(sorted(set(range(n)) - deps[i] - {i})) for i in range(n)]
    return [None if i in known else tuple(known) for i in range(n)]


def _count_bruteforce(joint: np.ndarray, notion: str, known: list[int] | None = None) -> list[float | None]:
    """Every target's leakage for the count with Laplace(1) on binary tuples, from the definition."""
    n = joint.ndim
    return [None if k is None else leak_bruteforce(joint, [BINARY] * n, [1] * n, 1.0, i, k, dense=201)
            for i, k in enumerate(_known_sets(joint, notion, known))]


def _count_audit(model: DependenceModel, notion: str, engine: str, known: list[int] | None = None):
    """The audit of the count with Laplace noise at epsilon 1 (b = 1) by `engine` (the leakage
    only: no information measures)."""
    return ddpbayes.audit(model, "count", "laplace", notion, epsilon=1, engine=engine, known=known, information=None)


def _assert_close(got: list[float | None], want: list[float | None], tol: float) -> None:
    assert [g is None for g in got] == [w is None for w in want]
    assert [g for g in got if g is not None] == pytest.approx([w for w in want if w is not None], abs=tol)


def _check_notions(model: DependenceModel, joint: np.ndarray, pdp_known: list[list[int]]) -> None:
    """idp, ddp and pdp with each known set: structured = numpy brute force = exact, to 1e-12."""
    for notion, known in [("idp", None), ("ddp", None), *[("pdp", k) for k in pdp_known]]:
        got = _count_audit(model, notion, "structured", known)
        assert got.engine == "structured"
        _assert_close(got.per_target, _count_bruteforce(joint, notion, known), 1e-12)
        _assert_close(got.per_target, _count_audit(model, notion, "exact", known).per_target, 1e-12)
        if notion == "ddp":
            assert [set(s) for s in got.dependence_sets] == _dependence_sets(joint)


# --------------------------------------------------------------------------- hmm_regimes.py


def _hmm(models_dir, **params) -> DependenceModel:
    """hmm_regimes.build(**params), loaded as the command line loads it."""
    return ddpbayes.load_model(models_dir / "hmm_regimes.py", params)


def test_hmm_default_against_bruteforce_and_exact(models_dir):
    """Defaults: 2 regimes staying with probability 0.8, uniform start, P(at home) = 0.2 / 0.9."""
    model = _hmm(models_dir)
    joint = _hmm_joint([0.5, 0.5], [[0.8, 0.2], [0.2, 0.8]], [[0.8, 0.2], [0.1, 0.9]], 6)
    assert _count_audit(model, "idp", "structured").per_target == pytest.approx(HMM_IDP, abs=5e-6)
    assert _count_audit(model, "pdp", "structured", [5]).per_target[0] == pytest.approx(1.55848, abs=5e-6)
    assert _count_audit(model, "pdp", "structured", [1, 3]).per_target[2] == pytest.approx(1.30153, abs=5e-6)
    _check_notions(model, joint, [[5], [1, 3], [0, 2, 4], [0, 1, 3, 4, 5]])


def test_hmm_pdp_lattice_matches_exact(models_dir):
    """Every known set of every day (6 x 32 adversaries): the maximum is idp of a middle day. Without the
    information measures (not read here; a third of the time)."""
    model = _hmm(models_dir)
    kw = dict(epsilon=1, lattice=True, information=None)
    got = ddpbayes.audit(model, "count", "laplace", "pdp", engine="structured", **kw)
    want = ddpbayes.audit(model, "count", "laplace", "pdp", engine="exact", **kw)
    assert [a.adversary for a in got.lattice] == [a.adversary for a in want.lattice]
    assert [a.value for a in got.lattice] == pytest.approx([a.value for a in want.lattice], abs=1e-12)
    assert got.leakage == pytest.approx(1.86862, abs=5e-6) and got.witness.adversary == Adversary(2)


def test_hmm_three_regimes_with_zeros_against_bruteforce_and_exact(models_dir):
    params = {"n": 5, "k": 3, "initial": [0.6, 0.4, 0.0], "transition": [[0.7, 0.3, 0.0], [0.0, 0.6, 0.4], [0.5, 0.0, 0.5]],
              "emission": [[0.9, 0.1], [0.5, 0.5], [0.0, 1.0]]}
    joint = _hmm_joint(params["initial"], params["transition"], params["emission"], 5)
    _check_notions(_hmm(models_dir, **params), joint, [[1], [0, 4], [1, 2, 3]])


def test_hmm_docstring_special_cases(models_dir):
    """emission = identity is markov_chain.py (its docstring's values for n = 5); equal emission
    rows, or independent regimes, make the days independent: every notion gives 1/b."""
    seen = _count_audit(_hmm(models_dir, n=5, emission=[[1.0, 0.0], [0.0, 1.0]]), "idp", "structured")
    chain = _count_audit(ddpbayes.load_model(models_dir / "markov_chain.py", {"n": 5}), "idp", "exact")
    assert seen.per_target == pytest.approx(chain.per_target, abs=1e-12)
    assert seen.per_target == pytest.approx([1.96426, 2.49980, 2.66253, 2.49980, 1.96426], abs=5e-6)
    blind = _hmm(models_dir, n=5, emission=[[0.3, 0.7], [0.3, 0.7]])
    iid_regimes = _hmm(models_dir, n=5, transition=[[0.3, 0.7], [0.3, 0.7]], initial=[0.3, 0.7])
    for model in (blind, iid_regimes):
        for notion, known in (("idp", None), ("ddp", None), ("pdp", [1, 3])):
            assert _count_audit(model, notion, "structured", known).leakage == pytest.approx(1.0, abs=1e-12)


def test_hmm_default_tables_for_more_regimes(models_dir):
    """k = 4: stay with probability 0.8, P(at home) = 0.2, 0.4333, 0.6667, 0.9; sum and count."""
    model = _hmm(models_dir, n=4, k=4)
    advs = [Adversary(i, frozenset(k)) for i in range(4) for k in ((), {(i + 1) % 4}, {(i + 1) % 4, (i + 2) % 4})]
    _engines_agree(model, "count", Laplace(1.0), advs)
    _engines_agree(model, "linear:2,-1,0,3", Geometric(0.8), advs)


@pytest.mark.parametrize("params, message", [
    ({"n": 0}, "n must be at least 1"),
    ({"k": 1}, "k must be at least 2"),
    ({"transition": [[0.5, 0.5]]}, "transition must be a 2 x 2 table"),
    ({"initial": [0.2, 0.7]}, "initial must hold probability vectors"),
    ({"emission": [[0.5, 0.5, 0.0]]}, r"emission must be a 2 x m \(m >= 2\) table"),
    ({"emission": [[1.5, -0.5], [0.0, 1.0]]}, "emission must hold probability vectors"),
])
def test_hmm_parameters_are_validated(models_dir, params, message):
    with pytest.raises(InputError, match=message):
        _hmm(models_dir, **params)


# --------------------------------------------------------------------------- family_tree.py


def _tree(models_dir, **params) -> DependenceModel:
    """family_tree.build(**params), loaded as the command line loads it."""
    return ddpbayes.load_model(models_dir / "family_tree.py", params)


def test_tree_shape(models_dir):
    """The docstring's numbering, and its member counts for larger trees."""
    for (generations, children), names in TREES.items():
        assert _tree(models_dir, generations=generations, children=children).names == names
    assert _tree(models_dir, generations=5, children=3).n == 161
    assert _tree(models_dir, generations=7, children=2).n == 190


def test_tree_default_against_bruteforce_and_exact(models_dir):
    model = _tree(models_dir)
    joint = _tree_joint(PARENTS[(3, 2)], 0.25, (0.25, 0.5, 0.75))
    assert _count_audit(model, "idp", "structured").per_target == pytest.approx(TREE_IDP, abs=5e-6)
    assert _count_audit(model, "ddp", "structured").per_target == pytest.approx(TREE_DDP, abs=5e-6)
    _check_notions(model, joint, [[3, 5], [0], [2, 6, 9], [0, 1, 2, 3, 5, 6, 7, 8, 9]])


@pytest.mark.slow
def test_tree_pdp_lattice_matches_exact(models_dir):
    """Every known set of every member (10 x 512 adversaries, ~4 min): the maximum is the ddp
    adversary of a parent, K = both spouses."""
    model = _tree(models_dir)
    got = ddpbayes.audit(model, "count", "laplace", "pdp", epsilon=1, engine="structured", lattice=True)
    want = ddpbayes.audit(model, "count", "laplace", "pdp", epsilon=1, engine="exact", lattice=True)
    assert [a.adversary for a in got.lattice] == [a.adversary for a in want.lattice]
    assert [a.value for a in got.lattice] == pytest.approx([a.value for a in want.lattice], abs=1e-12)
    assert got.leakage == pytest.approx(2.15002, abs=5e-6)
    assert got.witness.adversary == Adversary(2, frozenset({3, 5}))


def test_tree_with_certain_inheritance_against_bruteforce_and_exact(models_dir):
    """p_child = (0, 0.5, 1): two carriers always pass the trait on, two non-carriers never;
    many configurations are impossible."""
    model = _tree(models_dir, generations=4, children=1, p_founder=0.4, p_child=(0.0, 0.5, 1.0))
    joint = _tree_joint(PARENTS[(4, 1)], 0.4, (0.0, 0.5, 1.0))
    _check_notions(model, joint, [[6], [2, 3], [1, 5]])


def test_tree_without_inheritance_is_independent(models_dir):
    """p_child = (p, p, p): independent members, every notion gives 1/b. ddp knows every other
    member (2^9 configurations of x_K): one target only."""
    model = _tree(models_dir, p_child=(0.3, 0.3, 0.3))
    for notion, known, targets in (("idp", None, None), ("ddp", None, [2]), ("pdp", [2, 6], None)):
        got = ddpbayes.audit(model, "count", "laplace", notion, epsilon=1, engine="structured", known=known,
                             targets=targets)
        assert got.leakage == pytest.approx(1.0, abs=1e-12)


def test_float32_constants_of_the_tree_are_evaluated_in_float64(models_dir):
    """The tree's switch constants are Python floats exact in float32, so PyTensor holds them as
    float32 (checked here, so this test keeps testing that); evaluated in float32 the leakage
    moves in the eighth digit. idp via the structured engine = the float64 enumeration to 1e-12."""
    for params in ({}, {"generations": 4, "children": 1, "p_founder": 0.5, "p_child": (0.125, 0.5, 0.9375)}):
        model = _tree(models_dir, **params)
        shape = (params.get("generations", 3), params.get("children", 2))
        constants = [v for v in ancestors(model.model.free_RVs) if isinstance(v, Constant)]
        assert any(getattr(c, "dtype", None) == "float32" for c in constants)
        joint = _tree_joint(PARENTS[shape], params.get("p_founder", 0.25), params.get("p_child", (0.25, 0.5, 0.75)))
        got = _count_audit(model, "idp", "structured").per_target
        _assert_close(got, _count_bruteforce(joint, "idp"), 1e-12)


@pytest.mark.parametrize("params, message", [
    ({"generations": 0}, "generations must be at least 1"),
    ({"children": 0}, "children must be at least 1"),
    ({"p_child": (0.5, 0.5)}, "p_child must give"),
    ({"p_founder": 1.5}, "p_founder must be a probability"),
    ({"p_child": (0.1, -0.2, 0.9)}, r"p_child\[1\] must be a probability"),
])
def test_tree_parameters_are_validated(models_dir, params, message):
    with pytest.raises(InputError, match=message):
        _tree(models_dir, **params)


# --------------------------------------------------------------------------- random HMMs and multi-parent trees


def _random_law(rng: np.random.Generator, rows: int, size: int) -> np.ndarray:
    """`rows` random probability vectors of `size` entries, about a quarter of the entries exactly 0."""
    law = rng.dirichlet(np.ones(size), size=rows) * (rng.random((rows, size)) > 0.25)
    law[law.sum(axis=1) == 0, 0] = 1.0
    return law / law.sum(axis=1, keepdims=True)


def _engines_agree(model: DependenceModel, query: str, mechanism, adversaries: list[Adversary]) -> None:
    """Structured = exact, adversary by adversary, to 1e-12."""
    problem = Problem(model, parse_query(query), mechanism, tuple(adversaries), RunSettings())
    assert STRUCTURED.supports(problem) is None
    got, want = STRUCTURED.leakage(problem), EXACT.leakage(problem)
    assert [g.adversary for g in got] == adversaries
    for g, w in zip(got, want):
        assert g.value == pytest.approx(w.value, rel=1e-12, abs=1e-12), g.adversary


def _random_adversaries(rng: np.random.Generator, n: int) -> list[Adversary]:
    """Every target with no knowledge, and with one and two random other tuples known."""
    out = []
    for i in range(n):
        others = [j for j in range(n) if j != i]
        out += [Adversary(i)] + [Adversary(i, frozenset(rng.choice(others, size=s, replace=False).tolist()))
                                 for s in (1, 2)]
    return out


def _random_query(rng: np.random.Generator, n: int) -> str:
    if rng.random() < 0.3:
        return "sum"
    return "linear:" + ",".join(str(w) for w in rng.integers(-2, 4, size=n))


@pytest.mark.parametrize("seed", range(6))
def test_random_hmms_match_exact(models_dir, seed):
    """2-3 regimes, 2-3 record values, zeros in every table; linear queries with integer weights
    or the sum, Laplace or geometric noise."""
    rng = np.random.default_rng(1000 + seed)
    n, k, m = int(rng.integers(3, 6)), int(rng.integers(2, 4)), int(rng.integers(2, 4))
    params = {"n": n, "k": k, "initial": _random_law(rng, 1, k)[0].tolist(),
              "transition": _random_law(rng, k, k).tolist(), "emission": _random_law(rng, k, m).tolist()}
    model = _hmm(models_dir, **params)
    b = float(rng.uniform(0.5, 2.0))
    mechanism = Laplace(b) if seed % 2 else Geometric(b)
    _engines_agree(model, _random_query(rng, n), mechanism, _random_adversaries(rng, n))


def _random_pedigree(seed: int) -> tuple[DependenceModel, np.random.Generator]:
    """Nodes in order, each with no parent, one or two earlier parents (a random pedigree: its
    moral graph can have loops), 2-3 values and random tables with zeros; a third of the nodes
    are latent, the others tuples. Also the generator, to draw the rest of the example."""
    rng = np.random.default_rng(2000 + seed)
    nodes = int(rng.integers(5, 8))
    sizes = rng.integers(2, 4, size=nodes)
    with pm.Model() as m:
        rvs = []
        for v in range(nodes):
            count = min(v, int(rng.choice(3, p=[0.2, 0.3, 0.5])))
            parents = sorted(rng.choice(v, size=count, replace=False).tolist()) if count else []
            law = _random_law(rng, int(np.prod([sizes[p] for p in parents], dtype=int)), int(sizes[v]))
            table = pm.math.constant(law.reshape(*[sizes[p] for p in parents], sizes[v]))
            rvs.append(pm.Categorical(f"v{v}", p=table[tuple(rvs[p] for p in parents)] if parents else law[0]))
    latent = set(rng.choice(nodes, size=nodes // 3, replace=False).tolist())
    tuples = [f"v{v}" for v in range(nodes) if v not in latent]
    return DependenceModel(m, tuples=tuples), rng


@pytest.mark.parametrize("seed", range(6))
def test_random_multi_parent_trees_match_exact(seed):
    model, rng = _random_pedigree(seed)
    b = float(rng.uniform(0.5, 2.0))
    mechanism = Geometric(b) if seed % 2 else Laplace(b)
    _engines_agree(model, _random_query(rng, model.n), mechanism, _random_adversaries(rng, model.n))


# --------------------------------------------------------------------------- an HMM too long to enumerate


def _hmm_count_log_law(initial, transition, emission, n: int, target: int) -> np.ndarray:
    """log P(X_target = t, count = s) as a (2, n + 1) array for binary records, by a forward
    recursion over (regime, partial count) in log space, X_target clamped to t."""
    with np.errstate(divide="ignore"):
        log_init, log_trans, log_emit = (np.log(np.asarray(a, dtype=float)) for a in (initial, transition, emission))
    out = np.full((2, n + 1), -np.inf)
    for t in (0, 1):
        alpha = np.full((len(log_init), n + 1), -np.inf)  # log P(current regime = r, count so far = s)
        alpha[:, 0] = log_init
        for day in range(n):
            if day:
                alpha = logsumexp(alpha[:, None, :] + log_trans[:, :, None], axis=0)
            seen = np.full_like(alpha, -np.inf)
            for x in ((t,) if day == target else (0, 1)):
                seen[:, x:] = np.logaddexp(seen[:, x:], alpha[:, :n + 1 - x] + log_emit[:, x, None])
            alpha = seen
        out[t] = logsumexp(alpha, axis=0)
    return out


def _idp_from_log_law(log_law: np.ndarray, b: float) -> float:
    """max over y in {0..n} and y -> ±inf of |log L(y|1) - log L(y|0)| for Laplace(b), where
    L(y|t) ∝ Σ_s P(count = s | X_i = t) e^{-|y - s|/b} (at the tails, e^{±s/b} after the common
    factor e^{∓y/b} cancels)."""
    s = np.arange(log_law.shape[1])
    log_w = log_law - logsumexp(log_law, axis=1, keepdims=True)
    kernel = np.concatenate([-np.abs(s[:, None] - s[None, :]) / b, [s / b], [-s / b]])  # (y, s)
    log_l = logsumexp(log_w[:, None, :] + kernel[None], axis=2)
    return float(np.abs(log_l[1] - log_l[0]).max())


LONG_HMM = {"initial": [0.5, 0.3, 0.2], "transition": [[0.9, 0.08, 0.02], [0.1, 0.85, 0.05], [0.3, 0.0, 0.7]],
            "emission": [[0.85, 0.15], [0.4, 0.6], [0.05, 0.95]]}


def test_forward_recursion_against_enumeration():
    """The reference itself: at n = 6 the recursion's law is the enumerated joint's, to 1e-13."""
    n = 6
    joint = _hmm_joint(LONG_HMM["initial"], LONG_HMM["transition"], LONG_HMM["emission"], n)
    for i in range(n):
        law = np.zeros((2, n + 1))
        for x in np.ndindex(*joint.shape):
            law[x[i], sum(x)] += joint[x]
        with np.errstate(divide="ignore"):
            assert np.allclose(_hmm_count_log_law(**LONG_HMM, n=n, target=i), np.log(law), rtol=0, atol=1e-13)


def test_long_hmm_against_forward_recursion(models_dir):
    """200 days, 3 regimes with asymmetric transitions: 2^200 · 3^200 configurations of days and regimes."""
    n, targets = 200, [0, 117]
    model = _hmm(models_dir, n=n, k=3, **LONG_HMM)
    got = ddpbayes.audit(model, "count", "laplace", "idp", epsilon=1, engine="structured", targets=targets)
    for i in targets:
        want = _idp_from_log_law(_hmm_count_log_law(**LONG_HMM, n=n, target=i), 1.0)
        assert got.per_target[i] == pytest.approx(want, abs=1e-10), i
