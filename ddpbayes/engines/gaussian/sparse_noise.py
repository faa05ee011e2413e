"""Gaussian noise on the sparse path: M = Cov(Y | X_K) from the joint precision (DESIGN §3.5).

The `noise` module needs, per adversary, c(i, K), d = Var(X_i | X_K) (both as for Laplace noise,
`SparseLaw.slopes`) and M = Cov(A X | X_K) + diag(σ²). Unlike c, M involves every component of
the precision's graph, not only the target's: the components are independent, so

    Cov(A X | X_K) = sum over components κ of T_κ(K ∩ κ),   T_κ(J) = A_{κ-J} (P_{κ-J,κ-J})^{-1} A_{κ-J}^T,

with κ - J the joint elements of κ (latents included) left when the tuples J are known and A
zero on latents. T_κ(J) is m solves at most: only the rows R_κ of A that touch κ - J are
nonzero, so it is kept as (R_κ, |R_κ| x |R_κ| block). T_κ(all of κ's tuples) = 0; T_κ(∅) uses the
factorisation kept on the model; a J that cuts κ factorises what is left. M depends on K
only, not on the target: adversaries are grouped by K, and each group solves one M restricted
to the rows some T touches (c vanishes on the others, where M is diag(σ²)): idp (K = ∅) is
one M for every target, ddp (K = the tuples outside comp(i)) one per component, of its rows.
When K touches more components than it leaves untouched, the untouched ones are summed as
the sum over all components minus the touched ones' T_κ(∅). The terms are kept on the model's
`SparseLaw` for the last query (an audit asks in chunks of adversaries; calibration many times).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
from threadpoolctl import threadpool_limits

from ddpbayes.engines.gaussian.noise import loss_scale
from ddpbayes.engines.gaussian.sparse import SparseLaw
from ddpbayes.problem import Adversary

Term = tuple[np.ndarray, np.ndarray]  # (rows R of A, T on R x R)


@threadpool_limits.wrap(limits=1, user_api="blas")
def gaussian_scores(law: SparseLaw, a: np.ndarray, noise: np.ndarray,
                    adversaries: Sequence[Adversary]) -> tuple[np.ndarray, np.ndarray]:
    """c(i, K) (N, m) and c^T W^{-1} c (N,) for the query `a` (m, n) with noise variances `noise` (m,)."""
    coefs, var = law.slopes(a, adversaries)
    terms = _terms(law, a)
    groups: dict[frozenset[int], list[int]] = {}
    for k, adv in enumerate(adversaries):
        groups.setdefault(adv.known, []).append(k)
    scores = np.empty(len(adversaries))
    for known, which in groups.items():
        rows, cov_q = terms.query_covariance(known)
        outside = np.ones(len(a), dtype=bool)
        outside[rows] = False
        if np.any(coefs[np.ix_(which, outside)]):  # c lives on the rows of i's component: never true
            raise RuntimeError("internal: a coefficient outside the rows the known set's terms touch")
        if not len(rows):  # the query reads no unknown tuple: c = 0
            scores[which] = 0.0
            continue
        cov_y = cov_q + np.diag(noise[rows])
        scores[which] = loss_scale(cov_y[None], coefs[which][:, rows][None], var[which][None], noise.min())[0]
    return coefs, scores


def _terms(law: SparseLaw, a: np.ndarray) -> _Terms:
    """The query's `_Terms`, kept on the law for the last query (audits call in chunks of adversaries)."""
    key = (a.shape, hashlib.sha1(np.ascontiguousarray(a)).hexdigest())
    if law.kept.get("noise terms", (None,))[0] != key:
        law.kept["noise terms"] = (key, _Terms(law, law.joint_query(a)))
    return law.kept["noise terms"][1]


class _Terms:
    """T_κ(J) for one query, each computed once (`query_covariance` sums them for a K)."""

    def __init__(self, law: SparseLaw, a_joint: np.ndarray):
        self.law, self.a = law, a_joint
        self.labels = np.unique(law.labels[law.tuple_rows])  # components holding tuples
        self._empty: dict[int, Term] = {}
        self._cut: dict[tuple[int, frozenset[int]], Term] = {}
        self._total: Term | None = None

    def query_covariance(self, known: frozenset[int]) -> Term:
        """Cov(A X | X_K) on the rows it touches: (rows, matrix)."""
        law = self.law
        touched, counts = np.unique(law.labels[law.tuple_rows[sorted(known)]], return_counts=True)
        partial = [int(lab) for lab, k in zip(touched, counts) if k < len(law.component_tuples(int(lab)))]
        plus = [self._cut_term(lab, known & law.component_tuples(lab)) for lab in partial]
        if len(self.labels) - len(touched) <= len(touched):
            return _assemble(plus + [self.empty(int(lab)) for lab in np.setdiff1d(self.labels, touched)], [])
        return _assemble([self.total(), *plus], [self.empty(int(lab)) for lab in touched])

    def empty(self, label: int) -> Term:
        """T_κ(∅), from the block factorisation kept on the model."""
        if label not in self._empty:
            rows, block = self.law.shared(label)
            pos = np.flatnonzero(self.law.labels[rows] == label)
            a = self.a[:, rows[pos]]
            r = np.flatnonzero(np.any(a != 0, axis=1))
            rhs = np.zeros((len(rows), len(r)))
            rhs[pos] = a[r].T
            self._empty[label] = (r, _symmetric(a[r] @ block.solve(rhs)[pos]))
        return self._empty[label]

    def total(self) -> Term:
        """The sum of T_κ(∅) over every component: Cov(A X)."""
        if self._total is None:
            self._total = _assemble([self.empty(int(lab)) for lab in self.labels], [])
        return self._total

    def _cut_term(self, label: int, known: frozenset[int]) -> Term:
        """T_κ(J) for J cutting κ: a fresh factorisation of what is left of κ."""
        key = (label, known)
        if key not in self._cut:
            rows, block = self.law.cut(label, known)
            a = self.a[:, rows]
            r = np.flatnonzero(np.any(a != 0, axis=1))
            self._cut[key] = (r, _symmetric(a[r] @ block.solve(a[r].T)))
        return self._cut[key]


def _assemble(plus: list[Term], minus: list[Term]) -> Term:
    """Σ plus − Σ minus on the union of their rows."""
    rows = np.unique(np.concatenate([r for r, _ in plus + minus] or [np.zeros(0, dtype=int)]))
    out = np.zeros((len(rows), len(rows)))
    for terms, sign in ((plus, 1.0), (minus, -1.0)):
        for r, t in terms:
            at = np.searchsorted(rows, r)
            out[np.ix_(at, at)] += sign * t
    return rows, out


def _symmetric(t: np.ndarray) -> np.ndarray:
    return (t + t.T) / 2
