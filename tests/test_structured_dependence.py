"""The structured engine's dependence sets (DESIGN §2.1b, §3.1) against brute force: random discrete
Bayesian networks — chains with transitions that change every day and deterministic zeros, trees, HMMs
with latent regimes, a latent common cause, observed evidence on a collider — enumerated here with
numpy, N(i) = {j : P(X_j | X_i = t) differs between values t of positive probability by more than
1e-10}; and the tolerance's edge on long chains, where the law of X_j given X_i moves by exactly
(1 - p01 - p10)^|i - j|."""

from __future__ import annotations

import itertools
import zlib

import numpy as np
import pymc as pm
import pytest

import ddpbayes
from ddpbayes import DependenceModel
from ddpbayes.engines.structured import StructuredEngine
from ddpbayes.errors import InputError
from ddpbayes.mechanisms import Laplace
from ddpbayes.problem import Problem
from ddpbayes.queries import parse_query


class Net:
    """Nodes (name, size, parents, table P(node | parents) with axes (*parents, node)), the tuples among
    them, and observed binary children (parents, P(child = 1 | parents)) observed at 1."""

    def __init__(self):
        self.nodes: list[tuple[str, int, list[int], np.ndarray]] = []
        self.tuples: list[int] = []
        self.evidence: list[tuple[list[int], np.ndarray]] = []

    def add(self, rng, size: int, parents: list[int], tuple_: bool = True, zeros: float = 0.0) -> int:
        shape = [self.nodes[p][1] for p in parents] + [size]
        table = rng.uniform(0.05, 1.0, shape) * (rng.uniform(size=shape) >= zeros)
        table[..., rng.integers(size)] += 0.05  # every row keeps a positive entry
        self.nodes.append((f"v{len(self.nodes)}", size, parents, table / table.sum(axis=-1, keepdims=True)))
        if tuple_:
            self.tuples.append(len(self.nodes) - 1)
        return len(self.nodes) - 1

    def model(self) -> DependenceModel:
        with pm.Model() as m:
            rvs = []
            for name, size, parents, table in self.nodes:
                p = pm.math.constant(table)[tuple(rvs[q] for q in parents)] if parents else table
                rvs.append(pm.Categorical(name, p=p))
            for k, (parents, table) in enumerate(self.evidence):
                pm.Bernoulli(f"e{k}", p=pm.math.constant(table)[tuple(rvs[q] for q in parents)], observed=1)
        return DependenceModel(m, tuples=[self.nodes[k][0] for k in self.tuples])

    def possible(self) -> bool:
        """Whether the evidence has positive probability."""
        with np.errstate(invalid="ignore"):
            return bool(np.isfinite(self.tuple_joint()).all())

    def tuple_joint(self) -> np.ndarray:
        """P(tuples) by enumerating every node (latents summed out, evidence multiplied in)."""
        sizes = [size for _, size, _, _ in self.nodes]
        joint = np.zeros([sizes[k] for k in self.tuples])
        for x in itertools.product(*[range(s) for s in sizes]):
            p = np.prod([table[tuple(x[q] for q in parents) + (x[k],)]
                         for k, (_, _, parents, table) in enumerate(self.nodes)])
            p *= np.prod([table[tuple(x[q] for q in parents)] for parents, table in self.evidence])
            joint[tuple(x[k] for k in self.tuples)] += p
        return joint / joint.sum()


def brute_sets(joint: np.ndarray) -> list[frozenset[int]]:
    """N(i) from the pairwise tables of the enumerated joint."""
    n = joint.ndim
    out = []
    for i in range(n):
        found = set()
        for j in range(n):
            if j == i:
                continue
            pair = joint.sum(axis=tuple(k for k in range(n) if k not in (i, j)))
            pair = pair if i < j else pair.T  # rows: X_i
            rows = pair.sum(axis=1) > 0
            cond = pair[rows] / pair[rows].sum(axis=1, keepdims=True)
            if np.abs(cond - cond[0]).max() > 1e-10:
                found.add(j)
        out.append(frozenset(found))
    return out


def engine_sets(model: DependenceModel) -> list[frozenset[int]]:
    return StructuredEngine().dependence_sets(Problem(model, parse_query("count"), Laplace(1.0)))


def _chain(rng, n: int, zeros: float) -> Net:
    net = Net()
    prev = net.add(rng, int(rng.integers(2, 4)), [], zeros=zeros)
    for _ in range(1, n):
        prev = net.add(rng, int(rng.integers(2, 4)), [prev], zeros=zeros)
    return net


def _tree(rng, n: int, zeros: float) -> Net:
    net = Net()
    net.add(rng, 2, [])
    for k in range(1, n):
        net.add(rng, int(rng.integers(2, 4)), [int(rng.integers(k))], zeros=zeros)
    return net


def _hmm(rng, n: int, zeros: float) -> Net:
    net = Net()
    regime = None
    for _ in range(n):
        regime = net.add(rng, 2, [] if regime is None else [regime], tuple_=False, zeros=zeros)
        net.add(rng, int(rng.integers(2, 4)), [regime], zeros=zeros)
    return net


def _cause(rng, n: int, zeros: float) -> Net:
    net = Net()
    cause = net.add(rng, 3, [], tuple_=False)
    for _ in range(n):
        net.add(rng, 2, [cause], zeros=zeros)
    return net


def _collider(rng, n: int, zeros: float) -> Net:
    """Independent roots and a chain, with evidence on children of two roots and of the chain's ends."""
    net = Net()
    a, b = net.add(rng, 2, []), net.add(rng, 3, [])
    chain = _chain(rng, n - 2, zeros)
    offset = len(net.nodes)
    for name, size, parents, table in chain.nodes:
        net.nodes.append((f"v{len(net.nodes)}", size, [p + offset for p in parents], table))
        net.tuples.append(len(net.nodes) - 1)
    for parents in ([a, b], [offset, len(net.nodes) - 1]):
        shape = [net.nodes[p][1] for p in parents]
        net.evidence.append((parents, rng.uniform(0.0, 1.0, shape) * (rng.uniform(size=shape) >= zeros)))
    net.evidence[-1][1].flat[0] = 0.5  # some configuration of positive probability
    net.evidence[0][1].flat[0] = 0.5
    return net


def _hub(rng, n: int, zeros: float) -> Net:
    """The Bayesian adversary's model of a clustered fit (DESIGN §9.6) in small: a draw index J, parent of every
    cluster's effect and every record, each record also a child of its cluster's effect."""
    net = Net()
    hub = net.add(rng, 3, [], tuple_=False)
    effects = [net.add(rng, int(rng.integers(2, 4)), [hub], tuple_=False) for _ in range(2)]
    for k in range(n):
        net.add(rng, 2, [effects[k % 2], hub], zeros=zeros)
    return net


@pytest.mark.parametrize("build", [_chain, _tree, _hmm, _cause, _collider, _hub])
@pytest.mark.parametrize("zeros", [0.0, 0.3])
def test_random_models_match_brute_force(build, zeros):
    rng = np.random.default_rng(zlib.crc32(f"{build.__name__} {zeros}".encode()))  # hash() of a str varies by process
    for _ in range(2):
        net = build(rng, int(rng.integers(4, 6)), zeros)
        while not net.possible():  # evidence of probability zero: refused (test_an_impossible_model_is_one_line)
            net = build(rng, int(rng.integers(4, 6)), zeros)
        assert engine_sets(net.model()) == brute_sets(net.tuple_joint()), build.__name__


def test_an_impossible_model_is_one_line():
    """Evidence of probability zero (a collider whose observed child is possible only where its parents are not):
    the dependence sets are refused as bad input, as the audits are, not a reshape error."""
    net = Net()
    rng = np.random.default_rng(0)
    a, b = net.add(rng, 2, []), net.add(rng, 2, [])
    net.nodes[a][3][:] = [1.0, 0.0]
    net.evidence.append(([a, b], np.array([[0.0, 0.0], [0.5, 0.5]])))
    with pytest.raises(InputError, match="probability zero"):
        list(engine_sets(net.model()))


def test_sets_read_one_at_a_time_match_brute_force():
    """Each N(i) is computed when first read (`DependenceSets`): read in any order, one or all, the sets are
    the brute force's, and reading one target's computes that one alone."""
    rng = np.random.default_rng(41)
    for build in (_hub, _chain, _collider):
        net = build(rng, 5, 0.2)
        want = brute_sets(net.tuple_joint())
        one = engine_sets(net.model())
        assert one[3] == want[3] and "1 computed" in repr(one)
        sets = engine_sets(net.model())
        assert [sets[i] for i in (4, 0, 2, 1, 3)] == [want[i] for i in (4, 0, 2, 1, 3)]
        assert list(sets) == want and sets == want and sets[-1] == want[-1]


def test_ddp_of_one_target_reads_its_set_alone():
    """ddp of one target on the hub model: the adversary knows the tuples outside the target's brute-force N(i),
    its leakage is the audit of that adversary, and the JSON still lists every tuple's set."""
    net = _hub(np.random.default_rng(7), 5, 0.0)
    want = brute_sets(net.tuple_joint())
    r = ddpbayes.audit(net.model(), "count", "laplace", "ddp", scale=1.0, target=2, information=None,
                       engine="structured")
    outside = sorted(set(range(5)) - want[2] - {2})
    same = ddpbayes.audit(net.model(), "count", "laplace", "pdp", scale=1.0, target=2, known=outside,
                          information=None, engine="structured")
    assert sorted(r.witness.adversary.known) == outside and r.leakage == same.leakage
    assert r.to_dict()["dependence_sets"] == [sorted(s) for s in want]


def test_independence_for_particular_numbers():
    """p01 + p10 = 1: both transition rows equal, every pair independent though d-connected."""
    net = Net()
    rng = np.random.default_rng(0)
    prev = net.add(rng, 2, [])
    for _ in range(4):
        prev = net.add(rng, 2, [prev])
        net.nodes[-1][3][:] = [0.3, 0.7]
    assert engine_sets(net.model()) == brute_sets(net.tuple_joint()) == [frozenset()] * 5


@pytest.mark.parametrize("p01, p10", [(0.2, 0.2), (0.1, 0.4), (0.7, 0.6)])
def test_tolerance_edge_on_long_chains(models_dir, p01, p10):
    """A stationary binary chain: P(X_j = 1 | X_i = 1) - P(X_j = 1 | X_i = 0) = lam^d with lam = 1 - p01
    - p10 and d = |i - j| (both directions: a two-state stationary chain is reversible), so N(i) is
    the days with |lam|^d > 1e-10 (d <= 45, 33, 75 here: 0.6^45 = 1.03e-10, 0.5^33 = 1.16e-10,
    0.3^19 = 1.16e-10 and 0.3^20 = 3.5e-11)."""
    n = 130
    lam = abs(1.0 - p01 - p10)
    reach = max(d for d in range(1, n) if lam ** d > 1e-10)
    model = ddpbayes.load_model(models_dir / "markov_chain.py", {"n": n, "p01": p01, "p10": p10})
    want = [frozenset(j for j in range(n) if 0 < abs(i - j) <= reach) for i in range(n)]
    assert engine_sets(model) == want
