"""The model as a factor graph, and the elimination order and tree of its free slots (issue 13).

The factors are the model's per-term log-tables (`engines.terms`: one term per variable,
tabulated over its (value, parents) slots in float64, tuples first then latents). For a set of
clamped slots the others are eliminated in a greedy min-fill order on the interaction graph,
which gives the junction tree `junction.Calibration` passes messages on.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ddpbayes.engines.direct import chain_of
from ddpbayes.engines.exact.joint import continuous_tuple_reason
from ddpbayes.engines.structured.junction import Calibration, Tree, elimination_tree
from ddpbayes.engines.structured.potential import Potential
from ddpbayes.engines.structured.quadrature import Rule, rule
from ddpbayes.engines.structured.separation import Directed
from ddpbayes.engines.terms import model_slots, structure, tabulate
from ddpbayes.errors import InputError
from ddpbayes.model import DependenceModel, Finite
from ddpbayes.model.chains import length
from ddpbayes.model.supports import is_discrete, random_bounds, support


@dataclass(frozen=True)
class FactorGraph:
    """The model's factors over its slots (tuples 0..n-1, then latent elements); continuous
    latents are quadrature nodes with their weights as unary factors (`rules`, by slot)."""

    sizes: list[int]
    values: list[np.ndarray]
    factors: Sequence[Potential]  # a list, or a recognised chain's `_ChainFactors`
    rules: dict[int, Rule] = field(default_factory=dict)
    directed_of: Callable[[], Directed] | None = None  # builds the parent -> own edges, for d-separation
    trees: dict = field(default_factory=dict)  # elimination trees per clamped set; the continual chain's tables

    @property
    def slots(self) -> int:
        return len(self.sizes)

    @property
    def directed(self) -> Directed | None:
        """The model's directed graph over the slots, built when first read (only dependence sets read it; cached
        by `directed_of`, which the graph's cut copies share)."""
        return None if self.directed_of is None else self.directed_of()


def factor_graph(model: DependenceModel, limit: int, nodes: int | None = None) -> FactorGraph:
    """The factors of `model`, continuous latents on `nodes`-point rules, each table checked
    against `limit` before it is built (cached)."""
    return model.memo("structured", ("factor_graph", limit, nodes), lambda: _build(model, limit, nodes))


def model_reason(model: DependenceModel) -> str | None:
    """Why the structured engine cannot read `model`: continuous tuples, latents that are
    neither finite nor continuous scalars or vectors of static length, or continuous latents whose
    support moves with other variables (how many continuous latents one clique may hold is
    `clique_reason`'s). Cached on the model: `supports` asks on every audit."""
    return model.memo("structured", "model reason", lambda: _model_reason(model))


def _model_reason(model: DependenceModel) -> str | None:
    reason = continuous_tuple_reason(model)
    if reason:
        return reason
    for rv in model.latent_rvs:
        if rv.ndim > 1 or (rv.ndim == 1 and length(rv) is None):
            return f"latent variable '{rv.name}' must be a scalar or a vector of static length"
        if is_discrete(rv):
            if not isinstance(support(rv), Finite):
                return f"latent variable '{rv.name}' has unbounded discrete support"
        elif random_bounds(rv):
            return (f"latent variable '{rv.name}' has a support whose bounds depend on other variables: quadrature "
                    "places its nodes in a fixed interval")
    return None


def quadrature_reason(graph: FactorGraph) -> str | None:
    """Why the continuous latents cannot be integrated clique by clique: an elimination clique
    holding more than MAX_CONTINUOUS of them (its integral would be a tensor-product rule of that
    dimension). Latents in different cliques are integrated one clique at a time: 65 village
    effects, each read by its own village's records, are 65 one-dimensional rules."""
    if not graph.rules:
        return None
    plain = tree(graph, frozenset())
    clique = max(((v, *plain.separator[v]) for v in plain.order),
                 key=lambda c: sum(u in graph.rules for u in c))
    dims = sum(u in graph.rules for u in clique)
    if dims > MAX_CONTINUOUS:
        return (f"an elimination clique holds {dims} continuous latent dimensions together; quadrature integrates at "
                f"most {MAX_CONTINUOUS} in one clique (latents read by disjoint groups of records are integrated one "
                "clique at a time)")
    return None


MAX_CONTINUOUS = 3  # continuous latent dimensions in one elimination clique (a tensor-product rule, m^d nodes)


def _build(model: DependenceModel, limit: int, nodes: int | None) -> FactorGraph:
    reason = model_reason(model)
    if reason:
        raise InputError(f"the structured engine cannot read this model: {reason}")
    found = _scalar_chain(model, limit)
    if found is not None:
        return found
    rule_of: dict = {}

    def values(rv) -> np.ndarray:
        if is_discrete(rv):
            return support(rv).values
        rule_of[rv] = rule(rv, nodes or QUADRATURE_START)
        return rule_of[rv].nodes

    slots = model_slots(model, values)
    rules = {k: rule_of[s.rv] for k, s in enumerate(slots) if s.rv in rule_of}
    sizes = [len(s.values) for s in slots]
    factors = [Potential(tuple(ids), table.reshape(*[sizes[k] for k in ids], 1), 0)
               for ids, table in tabulate(model, slots, limit)]
    factors += [Potential((v,), r.log_weights[:, None], 0) for v, r in rules.items()]
    return FactorGraph(sizes, [s.values for s in slots], factors, rules,
                       functools.cache(lambda: Directed(len(slots), structure(model, slots))))


def _scalar_chain(model: DependenceModel, limit: int) -> FactorGraph | None:
    """The graph of a recognised chain (`direct.chain_of`: scalar tuples whose terms are read off the model's
    constants, no latents, no observed variables or potentials, the tuples in the model's order, one domain): the
    factors `tabulate` would give, x_0's table then each day's over (x_k, x_{k-1}), as views of one stacked array,
    with the chain's stacked unary and pairwise tables kept for its path (`pathsum.path_of`), without a term graph,
    a directed graph or a walk per variable; None for any other model (issue #44)."""
    found = chain_of(model, limit)
    if found is None:
        return None
    values = np.asarray(model.domains[0].values)
    k = len(values)  # k² within the limit (`chain_of`)
    tables = found.tables(values)
    if tables is None:
        return None
    head, steps = tables
    n = model.n
    unary = np.zeros((n, k))
    unary[0] += head
    pair = np.zeros((n - 1, k, k)) + steps.transpose(0, 2, 1)
    directed = functools.cache(lambda: Directed(n, [([0], []), *(([j + 1], [j]) for j in range(n - 1))]))
    broken = np.flatnonzero(~np.isfinite(steps).all(axis=(1, 2)))  # days with a zero: the engine's "on zeros"
    on_zeros = frozenset([0] * (not np.isfinite(head).all()) + [v for j in broken.tolist() for v in (j + 1, j)])
    trees = {"stacked path": (unary, pair), "on zeros": on_zeros, "value table": np.tile(values, (n, 1))}
    return FactorGraph([k] * n, [values] * n, _ChainFactors(head, steps), {}, directed, trees)


class _ChainFactors(Sequence):
    """A recognised chain's factors, made when first read (a continual release reads the stacked tables only):
    x_0's table, then each day's over (x_k, x_{k-1}), a view of the stack."""

    def __init__(self, head: np.ndarray, steps: np.ndarray):
        self._head, self._steps = head, steps

    @functools.cached_property
    def _made(self) -> list[Potential]:
        tables = self._steps[..., None]
        return [Potential((0,), self._head[:, None], 0), *(Potential((j + 1, j), tables[j], 0)
                                                          for j in range(len(tables)))]

    def __getitem__(self, k):
        return self._made[k]

    def __iter__(self):
        return iter(self._made)

    def __len__(self) -> int:
        return len(self._steps) + 1


QUADRATURE_START = 16  # nodes per continuous latent in the first rule; the engine doubles them until the leakage settles


def tree(graph: FactorGraph, clamped: frozenset[int], root: int | None = None) -> Tree:
    """The elimination tree of the slots not in `clamped`, rooted at `root` when given (eliminated last, so
    its law needs the upward pass alone: variable elimination for one query) unless that widens a clique;
    cached."""
    key = (clamped, root)
    if key not in graph.trees:
        scopes = [tuple(v for v in p.scope if v not in clamped) for p in graph.factors]
        present = sorted({v for p in graph.factors for v in p.scope})  # a graph cut to a part leaves slots out
        free = [v for v in present if v not in clamped and v != root]
        order, separators = elimination_order(scopes, free)
        if root is not None:
            order, separators = [*order, root], {**separators, root: ()}
        graph.trees[key] = elimination_tree(order, separators)
        if root is not None and _width(graph.trees[key]) > _width(tree(graph, clamped)):
            graph.trees[key] = tree(graph, clamped)
    return graph.trees[key]


def centre(graph: FactorGraph, clamped: frozenset[int]) -> int:
    """The centroid of the elimination tree of the slots not in `clamped`: the slot whose removal leaves no part
    with more than half the slots. Rooted there, the upward messages of a chain span half its days."""
    plain = tree(graph, clamped)
    size = {v: 1 for v in plain.order}
    for v in plain.order:  # children before parents
        if plain.parent[v] is not None:
            size[plain.parent[v]] += size[v]
    total = len(plain.order)
    return min(plain.order, key=lambda v: (max([total - size[v], *(size[c] for c in plain.children[v])]), v))


def _width(t: Tree) -> int:
    return max((len(sep) for sep in t.separator.values()), default=0)


def calibrate(graph: FactorGraph, contribution: list[np.ndarray], clamped: Mapping[int, int],
              limit: int, root: int | None = None) -> Calibration:
    """The factors with `clamped` slots fixed, ready to give each free slot's law with the partial sum (the
    elimination tree rooted at `root` when given: the cheapest for that slot's law alone)."""
    return Calibration(tree(graph, frozenset(clamped), root), graph.factors, graph.sizes, contribution, clamped,
                       limit)


def elimination_order(scopes: list[tuple[int, ...]], drop: list[int]) -> tuple[list[int], dict[int, tuple[int, ...]]]:
    """`_min_fill_order`, shared by every graph of the same structure in the process: the order reads the
    scopes alone, not the tables, so the node counts of a quadrature and the posterior draws of a fit
    (the same model with other parameters) reuse it."""
    order, separators = _min_fill_order(tuple(scopes), tuple(drop))
    return list(order), dict(separators)


@functools.lru_cache(maxsize=32)
def _min_fill_order(scopes: tuple[tuple[int, ...], ...],
                    drop: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[tuple[int, tuple[int, ...]], ...]]:
    """A greedy min-fill order of the slots `drop` (ties: fewest neighbours, then lowest slot), and
    each slot's neighbours when it is eliminated (slots of the scopes not in `drop` are never eliminated). Fill is counted only for slots of at most
    `_FILL_DEGREE` neighbours (eliminating a busier slot makes a table too large to build anyway);
    the others rank by degree after them. A heap with lazy deletion keeps it O(n log n) on
    graphs of bounded degree; when an elimination adds no edge only its neighbours' keys change."""
    nbrs: dict[int, set[int]] = {v: set() for scope in scopes for v in scope} | {v: set() for v in drop}
    for scope in scopes:
        for v in scope:
            nbrs[v].update(u for u in scope if u != v)
    heap = [(_key(v, nbrs), v) for v in drop]
    heapq.heapify(heap)
    current = {v: key for key, v in heap}
    order, separators = [], {}
    while heap:
        key, v = heapq.heappop(heap)
        if v not in current or current[v] != key:
            continue
        del current[v]
        near = nbrs.pop(v)
        filled = any(b not in nbrs[a] for a in near for b in near if a != b)  # does it add an edge?
        for u in near:
            nbrs[u] |= near - {u}
            nbrs[u].discard(v)
        order.append(v)
        separators[v] = tuple(sorted(near))
        for u in near | ({w for x in near for w in nbrs[x]} if filled else set()):
            if u in current and (new := _key(u, nbrs)) != current[u]:
                current[u] = new
                heapq.heappush(heap, (new, u))
    return tuple(order), tuple(separators.items())


_FILL_DEGREE = 64


def _key(v: int, nbrs: dict[int, set[int]]) -> tuple[int, int, int]:
    degree = len(nbrs[v])
    return (_fill(v, nbrs), degree, v) if degree <= _FILL_DEGREE else (1 << 62, degree, v)


def _fill(v: int, nbrs: dict[int, set[int]]) -> int:
    """Edges that eliminating v would add between its neighbours."""
    near = list(nbrs[v])
    return sum(1 for a in range(len(near)) for b in near[a + 1:] if b not in nbrs[near[a]])
