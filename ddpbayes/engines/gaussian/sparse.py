"""leak(i, K) from a sparse joint precision, without the dense covariance (DESIGN §2.2).

With P the joint precision of every scalar element of the model (tuples and latents,
`Network.precision`) and S the elements the adversary does not know, Cov(X_S | X_K) = (P_SS)^{-1}:
conditioning deletes rows and columns of the precision. Its column for target i, z = (P_SS)^{-1} e_i,
is one solve, and the coefficients of DESIGN §2.2 are c(i, K) = A_S z / z_i (A the query's matrix,
zero on latents).

The elements split into the connected components of P's graph, and elements of different
components are independent (P, hence its inverse, is block diagonal in them). So:

- z is zero outside i's component: only the block of P that holds it is factorised and solved.
  A component of more than `DENSE_BLOCK` elements is a block of its own; the small ones share
  one (block diagonal: factorising it factorises each, and its columns stay zero outside their
  component). A block is factorised once, by SuperLU in symmetric mode with a minimum-degree
  ordering, or inverted when it has at most `DENSE_BLOCK` elements;
- a known tuple outside i's component changes nothing: K enters only through K ∩ comp(i), and
  every adversary with K ∩ comp(i) empty (idp, and ddp: see `dependence_sets`) uses the same
  factorisation, kept on the model; a K that cuts comp(i) gets a factorisation of what is left
  of comp(i);
- N(i), the tuples dependent on X_i, is the other tuples of i's component. Outside it Sigma_ij = 0
  exactly. Inside it Sigma_ij can vanish only by cancellation: when P restricted to the
  component is an M-matrix (a CAR with alpha >= 0 and W >= 0, Normal DAGs with non-negative
  coefficients...), its inverse is entrywise positive, so N(i) is exactly {j : Sigma_ij != 0};
  the dense path's numerical rule (relative 1e-12) can drop tiny positive entries. With
  K = the tuples outside comp(i), Cov(X_comp | X_K) = Sigma_comp: ddp = idp, target by target.

Rounding: as on the dense path, a coefficient below 1e-12 of its Cauchy–Schwarz scale
sum_j |A_cj| sqrt(C_jj / C_ii) (j over i's component) is set to 0; the diagonal C_jj takes one
solve per element of the block, once. A block whose condition number (estimated in the 1-norm
for factorised blocks) exceeds 1e12 is refused, as the dense path refuses such a covariance.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy import sparse
from scipy.sparse.csgraph import connected_components
from scipy.sparse.linalg import LinearOperator, onenormest, splu
from threadpoolctl import threadpool_limits

from ddpbayes.engines.gaussian.graph import Network, network
from ddpbayes.engines.gaussian.lattice import snap
from ddpbayes.errors import InputError
from ddpbayes.model import DependenceModel
from ddpbayes.problem import Adversary

DENSE_BLOCK = 64  # blocks with at most this many elements are inverted densely
BATCH = 256  # right-hand sides solved at once
MAX_CONDITION = 1e12  # as `check_positive_definite` for the dense path


class _Block:
    """(P_SS)^{-1} for one set S of joint elements: its columns on demand, and its diagonal
    (computed once, by solves for every column)."""

    def __init__(self, precision: sparse.csc_matrix):
        self.size = precision.shape[0]
        self._diagonal: np.ndarray | None = None
        if self.size <= DENSE_BLOCK:
            dense = precision.toarray()
            self._inverse, self._lu = np.linalg.inv(dense), None
            condition = np.linalg.cond(dense)
        else:
            self._inverse = None
            self._lu = splu(precision, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                            options={"SymmetricMode": True})
            solve = LinearOperator(precision.shape, matvec=self._lu.solve, rmatvec=self._lu.solve, dtype=float)
            condition = abs(precision).sum(axis=0).max() * onenormest(solve)
        if not condition <= MAX_CONDITION:
            raise InputError(f"the model's joint precision is numerically singular on {self.size} connected "
                             f"elements (condition number {condition:.3g})")

    def columns(self, positions: np.ndarray) -> np.ndarray:
        """The columns of the inverse at `positions`: (size, len(positions))."""
        if self._inverse is not None:
            return self._inverse[:, positions]
        rhs = np.zeros((self.size, len(positions)))
        rhs[positions, np.arange(len(positions))] = 1.0
        return self._lu.solve(rhs)

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """(P_SS)^{-1} rhs for rhs (size, k)."""
        return self._inverse @ rhs if self._inverse is not None else self._lu.solve(rhs)

    def diagonal(self) -> np.ndarray:
        """The inverse's diagonal (size,), solved for once."""
        if self._diagonal is None:
            self._diagonal = np.concatenate([self.columns(cols)[cols, np.arange(len(cols))]
                                             for cols in _batches(np.arange(self.size))])
        return self._diagonal


class SparseLaw:
    """The joint precision split into connected components. A component of more than
    `DENSE_BLOCK` elements is its own block; the small ones share one (block diagonal, so
    factorising it factorises each). Each block is factorised when first needed and kept."""

    def __init__(self, net: Network):
        self.precision = net.precision()
        self.tuple_rows = net.tuple_rows
        count, self.labels = connected_components(self.precision, directed=False)
        members = [rows for _, rows in _groups(self.labels)]  # every label 0..count-1 is present
        self._component_tuples = [frozenset() for _ in range(count)]
        for label, group in _groups(self.labels[self.tuple_rows]):
            self._component_tuples[label] = frozenset(group.tolist())
        small = [rows for rows in members if len(rows) <= DENSE_BLOCK]
        self._block_rows = [rows for rows in members if len(rows) > DENSE_BLOCK]
        if small:
            self._block_rows.append(np.sort(np.concatenate(small)))
        self._block_of = np.empty(count, dtype=int)
        for k, rows in enumerate(self._block_rows):
            self._block_of[np.unique(self.labels[rows])] = k
        self._blocks: dict[int, _Block] = {}
        self.kept: dict = {}  # what other modules keep per query (`sparse_noise`: its T terms)

    def dependence_sets(self) -> list[frozenset[int]]:
        """N(i): the other tuples of i's connected component."""
        comp = self._component_tuples
        return [comp[label] - {i} for i, label in enumerate(self.labels[self.tuple_rows])]

    def coefficients(self, a: np.ndarray, adversaries: Sequence[Adversary]) -> np.ndarray:
        """c(i, K) (len(adversaries), m) for the query matrix `a` (m, n)."""
        return self.slopes(a, adversaries)[0]

    @threadpool_limits.wrap(limits=1, user_api="blas")
    def slopes(self, a: np.ndarray, adversaries: Sequence[Adversary]) -> tuple[np.ndarray, np.ndarray]:
        """c(i, K) (len(adversaries), m) for the query matrix `a` (m, n), and Var(X_i | X_K) = z_i
        (len(adversaries),). One BLAS thread: the products are small (m rows, `BATCH` columns),
        and threads cost more than they save (measured: 5 to 100 times slower on two busy cores)."""
        a_joint = self.joint_query(a)
        out, var = np.empty((len(adversaries), len(a))), np.empty(len(adversaries))
        groups: dict[tuple[int, int, frozenset[int]], list[int]] = {}  # (block, label if K cuts it, K ∩ comp)
        for k, adv in enumerate(adversaries):
            label = int(self.labels[self.tuple_rows[adv.target]])
            known = adv.known & self._component_tuples[label]
            groups.setdefault((int(self._block_of[label]), label if known else -1, known), []).append(k)
        for (shared, label, known), which in groups.items():
            if not known:
                rows, block = self._block_rows[shared], self._block(shared)
            else:  # K cuts the target's component: Cov(X_S | X_K) = (P_SS)^{-1} on what is left of it
                rows, block = self.cut(label, known)
            targets = np.searchsorted(rows, self.tuple_rows[[adversaries[k].target for k in which]])
            out[which], var[which] = _block_coefficients(block, a_joint[:, rows], targets, self.labels[rows])
        return out, var

    def joint_query(self, a: np.ndarray) -> np.ndarray:
        """The query matrix on every joint element (m, elements): zero on latents."""
        a_joint = np.zeros((len(a), self.precision.shape[0]))
        a_joint[:, self.tuple_rows] = a
        return a_joint

    def component_tuples(self, label: int) -> frozenset[int]:
        return self._component_tuples[label]

    def cut(self, label: int, known: frozenset[int]) -> tuple[np.ndarray, _Block]:
        """The joint rows of component `label` left when the tuples `known` (in it) are known, and
        (P_SS)^{-1} on them (a fresh factorisation)."""
        rows = np.setdiff1d(np.flatnonzero(self.labels == label), self.tuple_rows[sorted(known)])
        return rows, _Block(self.precision[rows][:, rows].tocsc())

    def shared(self, label: int) -> tuple[np.ndarray, _Block]:
        """The rows of the block holding component `label`, and its kept factorisation."""
        k = int(self._block_of[label])
        return self._block_rows[k], self._block(k)

    def _block(self, k: int) -> _Block:
        if k not in self._blocks:
            rows = self._block_rows[k]
            self._blocks[k] = _Block(self.precision[rows][:, rows].tocsc())
        return self._blocks[k]


def sparse_law(model: DependenceModel) -> SparseLaw:
    """The model's `SparseLaw`, kept on the model."""
    return model.memo("gaussian", "sparse law", lambda: SparseLaw(network(model)))


def _block_coefficients(block: _Block, a: np.ndarray, targets: np.ndarray,
                        labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """c = a z / z_i for every target position i of the block, z its column of the inverse, with
    values below 1e-12 of their Cauchy–Schwarz scale (over i's component) set to 0, and z_i;
    `a` (m, size) is the query on the block's elements, `labels` their components."""
    diag = block.diagonal()
    raw = np.concatenate([(a @ block.columns(cols)).T for cols in _batches(targets)])
    _, local = np.unique(labels, return_inverse=True)
    bound = np.zeros((local.max() + 1, len(a)))
    np.add.at(bound, local, (np.abs(a) * np.sqrt(diag)).T)
    scale = bound[local[targets]] / np.sqrt(diag[targets])[:, None]
    return snap(raw / diag[targets][:, None], scale), diag[targets]


def _batches(positions: np.ndarray) -> list[np.ndarray]:
    """`positions` in consecutive runs of at most `BATCH`."""
    return np.array_split(positions, max(1, -(-len(positions) // BATCH)))


def _groups(labels: np.ndarray):
    """(label, indices with that label) for every label present."""
    order = np.argsort(labels, kind="stable")
    present, starts = np.unique(labels[order], return_index=True)
    return zip(present.tolist(), np.split(order, starts[1:]))
