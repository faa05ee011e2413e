"""Structured exact engine: integer linear queries on factor graphs of small treewidth (issue 13).

For a linear query with integer weights on integer-valued tuples released with Laplace or
two-sided geometric noise, L(y | t, x_K) = Σ_s P(q = s | X_i = t, x_K) p_M(y | s), and the sup
over y is a maximum over the breakpoints s and the limits y -> ±inf (DESIGN §2.1; 004 Lemma 1).
So each adversary needs only log P(q = s, X_i = t, X_K = x_K) for every s and t, which variable
elimination with a partial-sum axis gives without enumerating the joint: the cost grows with
the model's treewidth and the query's range, not with the number of states.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import numpy as np

from ddpbayes.engines.base import AdversaryLeakage, Declined, Engine, Mixtures, NoMixtures, Witness
from ddpbayes.engines.hockey import MixtureProfile, learns_nothing, mixture_profiles
from ddpbayes.numerics import logsumexp
from ddpbayes.engines.structured.continual import continual_leakage, continual_reason
from ddpbayes.engines.structured.dependence import dependence_sets
from ddpbayes.engines.structured.eliminate import KEPT, target_table
from ddpbayes.engines.structured.exchangeable import Orbits, many
from ddpbayes.engines.structured.free import fold_free_parts
from ddpbayes.engines.structured.joint import joint_leakage, joint_reason
from ddpbayes.engines.structured.joint_runs import pdp_over_runs
from ddpbayes.engines.structured.graph import (
    QUADRATURE_START,
    FactorGraph,
    calibrate,
    centre,
    factor_graph,
    model_reason,
    quadrature_reason,
)
from ddpbayes.engines.structured.memo import BoundedMemo, array_key
from ddpbayes.engines.structured.pathsum import path_laws, path_of, path_table, path_within
from ddpbayes.engines.structured.potential import Potential
from ddpbayes.engines.structured.rows import components, incidence, row_matrix, row_problems, widened
from ddpbayes.engines.structured.scope import (
    clique_reason,
    linear_reason,
    query_span,
    quick_work_reason,
    seconds_per_pass,
    seconds_per_target,
    width_reason,
)
from ddpbayes.engines.terms import elements
from ddpbayes.errors import InputError
from ddpbayes.mechanisms import Mechanism
from ddpbayes.model.supports import wider_than_declared
from ddpbayes.problem import Adversary, DependenceSets, Problem
from ddpbayes.queries import ComposedQuery, Identity, LinearRows


class StructuredEngine(Engine):
    name = "structured"

    def supports(self, problem: Problem) -> str | None:
        reason = model_reason(problem.model)
        if reason:
            return reason
        if isinstance(problem.query, ComposedQuery):
            return "it releases one query (scalar, or identity on a chain), not a composition of several releases"
        if not isinstance(problem.query, Identity):
            reason = linear_reason(problem)
            if reason:
                return reason
            reason = quick_work_reason(problem)
            if reason:
                return reason
        try:
            graph = factor_graph(problem.model, problem.settings.max_states)
        except InputError as e:
            return str(e)
        reason = quadrature_reason(graph)
        if reason:
            return reason
        if isinstance(problem.query, Identity):
            return joint_reason(problem, graph) if problem.mechanism.joint else continual_reason(problem, graph)
        return width_reason(graph, query_span(problem), problem.settings.max_states)

    def leakage(self, problem: Problem) -> list[AdversaryLeakage]:
        """Exact on finite models; with continuous latents, the quadrature value whose leakage
        moves by less than SETTLED when the nodes double (raised until it does; Declined when it
        has not by QUADRATURE_MAX nodes, or when a finer rule would not fit). A several-row release is solved one
        row at a time: each target's coupled row (`rows`)."""
        self._check(problem)
        graph = factor_graph(problem.model, problem.settings.max_states)
        if isinstance(problem.query, Identity) and problem.mechanism.joint:  # a joint law over every day
            found, rule = joint_leakage(problem, graph)
            _settled(problem)[("joint", *_key(problem))] = rule
            return found
        if isinstance(problem.query, Identity):
            return continual_leakage(problem, graph)
        if not isinstance(problem.query, LinearRows):
            return _settled_leakage(problem, graph)
        found: dict[Adversary, AdversaryLeakage] = {}
        settled, rows = [], len(row_matrix(problem))
        for row, one in row_problems(problem, graph):
            for leak in _settled_leakage(one, graph):
                y = widened(leak.witness.y, row, rows)
                found[leak.adversary] = replace(leak, witness=replace(leak.witness, y=y))
            settled.append(_settled(one).get(_key(one)))
        if graph.rules:
            _settled(problem)[_key(problem)] = max(settled)
        return [found[adv] for adv in problem.adversaries]

    def pdp_worst(self, problem: Problem, targets) -> list[AdversaryLeakage] | None:
        """A joint law over a chain's days (`joint.py`): each target's worst run adversary, the runs far from it
        pruned by a certified bound (`joint_runs`, DESIGN §2.1b): pdp over every known set, exact. Other problems:
        None (the lattice is listed)."""
        if not (isinstance(problem.query, Identity) and problem.mechanism.joint):
            return None
        self._check(problem)
        graph = factor_graph(problem.model, problem.settings.max_states)
        found, search, solver = pdp_over_runs(problem, graph, list(targets))
        _settled(problem)[("joint", *_key(problem))] = solver.quad
        _settled(problem)[("joint runs", *_key(problem))] = search
        return found

    def plausible_leakages(self, problem: Problem, fixed, draws, targets: list[int]) -> np.ndarray | None:
        """idp (or pdp knowing records of the one target's cluster) of every draw of a clustered fit at once by
        per-cluster factors (`structured.clusters`), on the rules this engine settles on: each draw's value is this
        engine's on that draw's model."""
        from ddpbayes.engines.structured.clusters import plausible_leakages  # it reads this module's helpers

        return plausible_leakages(problem, fixed, draws, targets)

    def integrated_leakages(self, problem: Problem, fixed, draws,
                            targets: list[int]) -> tuple[list[AdversaryLeakage], str] | None:
        """idp under the mixture of a clustered fit's draws by per-cluster factors (`structured.clusters`):
        S × clusters one-dimensional tables, the draw index never in a clique."""
        from ddpbayes.engines.structured.clusters import integrated_leakages

        found = integrated_leakages(problem, fixed, draws, targets)
        if found is None:
            return None
        leaks, nodes, change = found
        return leaks, (f"quadrature value: each cluster's effect under each draw integrated out with {nodes} "
                       f"Gauss–Hermite nodes (per-cluster factors, the draws mixed); the leakage moved by "
                       f"{change:.2g} from {nodes // 2} nodes (settled below {SETTLED:g})")

    def notes(self, problem: Problem) -> list[str]:
        graph = self._graph(problem)
        notes = []
        if graph.rules:
            nodes, change = _settled(problem).get(_key(problem), (len(graph.values[min(graph.rules)]), math.nan))
            rules = ", ".join(_rules_by_variable(problem, graph))
            notes.append(f"quadrature value: continuous latents integrated out with {nodes} nodes ({rules}); the "
                         f"leakage moved by {change:.2g} from {nodes // 2} nodes (settled below {SETTLED:g})")
        if (rule := _settled(problem).get(("joint", *_key(problem)))) is not None:
            notes.append(f"the {problem.mechanism.kind} law over every day by a forward pass along the chain: its "
                         f"integral by Gauss–Legendre with {'/'.join(map(str, rule.per_piece))} nodes per piece (the "
                         f"tails exact), each log-probability within {rule.bound:.2g} (Bernstein-ellipse bound)")
        if (search := _settled(problem).pop(("joint runs", *_key(problem)), None)) is not None:  # its audit's only
            notes.append(f"pdp over every known set: on a chain the worst adversaries know every day outside one run "
                         f"around the target (DESIGN §2.1b); {search.solved:,} of the {search.runs:,} runs solved, "
                         f"the others pruned by a certified bound (the chain's projective diameters: DESIGN §2.1b), "
                         f"at most {search.deepest} days from the target")
        scalars = sum(slot.index is None for slot in problem.model.slots)
        if scalars >= MANY_SCALARS and path_of(graph) is not None:
            notes.append(f"the chain's {scalars:,} days are {scalars:,} scalar variables, which PyMC builds one by one "
                         "(about 1 ms each): write it as one vector variable, DiscreteMarkovChain(\"x\", P=P, "
                         "init_dist=pm.Categorical.dist(p=p0), shape=(n,)) from pymc_extras, as models/vector_chain.py "
                         "does (DESIGN §2.1b)")
        if _declared_narrower(problem) and not graph.rules:
            mass = math.exp(calibrate(graph, _zeros(graph), {}, problem.settings.max_states).log_total())
            if mass < 1 - 1e-9:
                notes.append(f"the enumerated domains cover {mass:.6g} of the prior mass: leakage is for the model "
                             "conditioned on them")
        return notes

    def dependence_sets(self, problem: Problem) -> DependenceSets:
        """N(i) = {j : P(X_j | X_i = t) changes with t} (tolerance 1e-10, as the exact engine): the tuples
        d-connected to X_i (`separation`), checked numerically on P(X_j | X_i) carried along the junction tree
        of one calibration (`structured.dependence`; a chain's by one batched walk for every tuple), each computed
        when first read."""
        return dependence_sets(self._graph(problem), problem.model.n, problem.settings.max_states)

    def mixtures(self, problem: Problem, adversary: Adversary, shift_invariant: bool) -> Mixtures:
        """One calibration per configuration of the known tuples bearing on the target, on the
        settled quadrature rule when there are continuous latents (`structured.mixtures`)."""
        from ddpbayes.engines.structured.mixtures import structured_mixtures  # it reads this module's helpers

        self._check(problem)
        if isinstance(problem.query, Identity):
            raise NoMixtures("the continual release (identity on a chain) has vector outputs: not integrated")
        if isinstance(problem.query, LinearRows):
            raise NoMixtures("a several-row release has vector outputs: not integrated")
        graph = self._graph(problem)
        return structured_mixtures(problem, graph, adversary, _contributions(problem, graph),
                                   _relevant(graph, adversary.known, problem.mechanism), _mixture)

    def seconds_per_adversary(self, problem: Problem) -> float | None:
        """One elimination pass per known set (`scope.seconds_per_pass`); continual release: unknown."""
        if isinstance(problem.query, Identity):
            return None
        return seconds_per_pass(self._graph(problem), query_span(problem))

    def seconds(self, problem: Problem, adversaries: int, known_sets: int) -> float | None:
        """One elimination pass per known set (`scope.seconds_per_pass`) and each target's law and sup from it
        (`scope.seconds_per_target`): idp of 10,000 days is one pass, not 10,000."""
        if isinstance(problem.query, Identity):
            return None
        span = query_span(problem)
        return known_sets * seconds_per_pass(self._graph(problem), span) + adversaries * seconds_per_target(span)

    @staticmethod
    def _graph(problem: Problem) -> FactorGraph:
        """The factor graph, on the settled quadrature rule when there is one."""
        nodes = _settled(problem).get(_key(problem), (None,))[0]
        return factor_graph(problem.model, problem.settings.max_states, nodes)

    def _check(self, problem: Problem) -> None:
        reason = self.supports(problem)
        if reason:
            raise InputError(f"the structured engine cannot solve this problem: {reason}")


MANY_SCALARS = 5000  # tuples written as scalar variables from which a chain's notes advise the vector form
QUADRATURE_MAX = 1024  # nodes per continuous latent at most
SETTLED = 1e-10  # a quadrature leakage is reported once doubling the nodes moves it by less


def _settled_leakage(problem: Problem, graph: FactorGraph) -> list[AdversaryLeakage]:
    """The leakage on `graph`; with continuous latents, on rules of doubling node counts until it moves by less
    than SETTLED (each finer graph's widest table checked against --max-states before it is built)."""
    limit = problem.settings.max_states
    if not graph.rules:
        return _leakage_on(problem, graph)
    nodes, previous = QUADRATURE_START, _leakage_on(problem, graph)
    while nodes < QUADRATURE_MAX:
        nodes *= 2
        finer = factor_graph(problem.model, limit, nodes)
        reason = clique_reason(finer, query_span(problem), limit)
        if reason:
            raise Declined(f"the quadrature over the continuous latents had not settled at {nodes // 2} nodes, "
                             f"and at {nodes}: {reason}")
        found = _leakage_on(problem, finer)
        change = max(_moved(a.value, b.value) for a, b in zip(found, previous))
        if change < SETTLED:
            _settled(problem)[_key(problem)] = (nodes, change)
            return found
        previous = found
    raise Declined(f"the quadrature over the continuous latents did not settle: the leakage moved by {change:.3g} "
                     f"between {nodes // 2} and {nodes} nodes (use the sampling engine)")


def _leakage_on(problem: Problem, graph: FactorGraph) -> list[AdversaryLeakage]:
    limit = problem.settings.max_states
    contribution = _contributions(problem, graph)
    padded = _Padded.of(graph, contribution)
    found: dict[Adversary, AdversaryLeakage] = {}
    if "on zeros" not in graph.trees:  # cached with the graph's trees
        graph.trees["on zeros"] = frozenset(v for p in graph.factors if not np.isfinite(p.table).all() for v in p.scope)
    on_zeros, sups = graph.trees["on zeros"], _sups()
    for known, adversaries in _by_known_set(problem.adversaries).items():
        found.update(_leakage_for_known_set(known, adversaries, graph, padded, problem.mechanism, limit, on_zeros,
                                            sups))
    return [found[adv] for adv in problem.adversaries]


def _moved(a: float, b: float) -> float:
    return 0.0 if a == b else abs(a - b)


def _settled(problem: Problem) -> dict:
    """The node count at which each problem's quadrature settled, and by how much it moved."""
    return problem.model.memo("structured", "quadrature", dict)


def _key(problem: Problem) -> tuple:
    return problem.query, repr(problem.mechanism), problem.settings.max_states


def _declared_narrower(problem: Problem) -> bool:
    """Does a declared tuple domain leave out values of the tuple's support (only then can the
    enumerated domains miss prior mass)?"""
    model = problem.model
    return model.memo("structured", "declared narrower",
                      lambda: bool(wider_than_declared([slot.rv for slot in model.slots], model.domains)))


def _rules_by_variable(problem: Problem, graph: FactorGraph) -> list[str]:
    """Each continuous latent variable and its rule: "'u' by Gauss–Hermite (...)", a vector's elements, each its
    own slot of nodes, named once ("'u' (65 elements, one rule each) by ...")."""
    owner = [rv for rv in problem.model.latent_rvs for _ in range(elements(rv))]
    rules: dict = {}
    for v, r in graph.rules.items():
        rules.setdefault(owner[v - problem.model.n], set()).add(r.name)
    return [f"'{rv.name}'" + (f" ({elements(rv)} elements, one rule each)" if elements(rv) > 1 else "")
            + f" by {' / '.join(sorted(names))}" for rv, names in rules.items()]


def _zeros(graph: FactorGraph) -> list[np.ndarray]:
    """No contribution to the partial sum: plain marginals."""
    return [np.zeros(s, dtype=np.int64) for s in graph.sizes]


def _contributions(problem: Problem, graph: FactorGraph) -> list[np.ndarray]:
    """Tuple k's term of the query (`Query.contributions`: w_k · value, w_k · 1[value = L]) for every value of
    every slot (0 for latents), as integers (one call over the padded values of the tuples: 2,000 of them cost one
    NumPy call, not 2,000)."""
    n = problem.model.n
    table = np.rint(problem.query.contributions(_value_table(graph)[:n])).astype(np.int64)
    return [row[:size] for row, size in zip(table, graph.sizes[:n])] + _shared_zeros(graph)[n:]


def _value_table(graph: FactorGraph) -> np.ndarray:
    """Every slot's values in one array (slots, widest domain), padded with 0; cached with the graph's trees."""
    if "value table" not in graph.trees:
        table = np.zeros((graph.slots, max(graph.sizes)))
        for k, v in enumerate(graph.values):
            table[k, :len(v)] = v
        graph.trees["value table"] = table
    return graph.trees["value table"]


def _shared_zeros(graph: FactorGraph) -> list[np.ndarray]:
    """A read-only zero contribution per slot, one array per domain size, shared; cached with the graph's trees."""
    if "zeros" not in graph.trees:
        by_size = {s: np.zeros(s, dtype=np.int64) for s in set(graph.sizes)}
        for z in by_size.values():
            z.flags.writeable = False
        graph.trees["zeros"] = [by_size[s] for s in graph.sizes]
    return graph.trees["zeros"]


@dataclass(frozen=True)
class _Padded:
    """The contributions per slot (`rows`) and padded into one table (slots, widest domain) with the slots'
    values beside them, the zero contributions shared: what every known set reads, built once per graph."""

    rows: list[np.ndarray]
    table: np.ndarray
    values: np.ndarray
    zeros: list[np.ndarray]
    moves: np.ndarray  # (slots,): does the slot move the partial sum

    @classmethod
    def of(cls, graph: FactorGraph, rows: list[np.ndarray]) -> _Padded:
        values = _value_table(graph)
        table = np.zeros(values.shape, dtype=np.int64)
        for k, r in enumerate(rows):
            table[k, :len(r)] = r
        return cls(rows, table, values, _shared_zeros(graph), table.any(axis=1))

    def shift(self, codes: dict[int, int], clamped: dict[int, int]) -> int:
        """Σ contribution[k][c] over `codes` not in `clamped`."""
        keys, values = _arrays(codes)
        free = ~np.isin(keys, np.fromiter(clamped, dtype=np.int64, count=len(clamped)))
        return int(self.table[keys[free], values[free]].sum())

    def known_values(self, codes: dict[int, int]) -> dict[int, float]:
        """x_K as the witness holds it: slot -> value, in slot order."""
        keys, values = _arrays(codes)
        order = np.argsort(keys)
        return dict(zip(keys[order].tolist(), self.values[keys[order], values[order]].tolist()))


def _arrays(codes: dict[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """A slot -> code mapping as two integer arrays."""
    return (np.fromiter(codes.keys(), dtype=np.int64, count=len(codes)),
            np.fromiter(codes.values(), dtype=np.int64, count=len(codes)))


def _by_known_set(adversaries) -> dict[frozenset[int], list[Adversary]]:
    groups: dict[frozenset[int], list[Adversary]] = {}
    for adv in adversaries:
        groups.setdefault(adv.known, []).append(adv)
    return groups


def _leakage_for_known_set(known: frozenset[int], adversaries: list[Adversary], graph: FactorGraph,
                           padded: _Padded, mechanism: Mechanism, limit: int, on_zeros: frozenset[int],
                           sups: BoundedMemo | None) -> dict[Adversary, AdversaryLeakage]:
    """For each adversary knowing `known`: max over x_K with P(x_K) > 0 (in mixed-radix order;
    ties: the first) of the sup for x_K. Only the known tuples that share a factor with an
    unknown slot (R) can change the law of the unknown ones given x_K (global Markov property
    of the factor graph); the others only shift the query by a constant, which leaves the sup
    unchanged. So x_R is enumerated, up to permutations of exchangeable tuples (`Orbits`: a
    village's known children by how many are positive), the rest of K is summed out without
    moving the partial sum, and the witness completes x_K with values of positive probability.
    One calibration per x_R serves every target; the parts free of the known tuples are summed once
    (`free.fold_free_parts`); `sups`: the sups already taken in this audit."""
    contribution, whole = padded.rows, graph
    targets = {adv.target for adv in adversaries}
    graph, on_zeros = _concerned(graph, known, targets, padded.moves, on_zeros)
    graph = fold_free_parts(graph, known, targets, contribution, limit)  # their sums convolved once, not per x_R
    relevant = _relevant(graph, known, mechanism)
    local, apart = _local(graph, known, relevant, on_zeros)
    order = sorted(relevant)
    count = math.prod(graph.sizes[k] for k in order)
    orbits = Orbits(local.factors, graph.sizes, None if mechanism.shift_invariant else contribution, order)
    if (distinct := orbits.count()) > limit:
        raise InputError(f"the adversaries knowing {len(known)} tuples have {len(order)} that bear on the others, with "
                         f"{many(distinct)} value combinations up to exchangeable tuples, over the limit of "
                         f"{limit:,} (raise --max-states, or choose a known set that cuts the model into smaller pieces)")
    moving = [padded.zeros[k] if k in known and k not in relevant else c for k, c in enumerate(contribution)]
    best: dict[Adversary, tuple] = {}
    profiles: dict[Adversary, tuple] = {}
    by_target: dict[int, list[Adversary]] = {}
    for adv in adversaries:
        by_target.setdefault(adv.target, []).append(adv)
    single = adversaries[0].target if len(by_target) == 1 else None
    sups = sups if single is not None else None  # a set with several targets (idp's): none repeats another's
    path = path_within(whole, local)  # a chain: forward–backward (`pathsum`), its days cut from the whole chain's
    on_path = path_laws(path, moving, list(by_target)) if path is not None and not order else None
    as_axes = on_path is None and single is not None and count <= KEPT
    if as_axes:  # one elimination pass, x_R riding along as axes (on a chain, its ends' values as batches)
        found = path_table(path, moving, single, order) if path is not None else None
        table, offset = found if found is not None else target_table(local, moving, single, order, limit)
    # Otherwise one calibration per x_R, its tree rooted at the single target (the upward pass alone), or for
    # several at the tree's centroid, which halves a chain's upward messages.
    if on_path is None:
        root = single if single is not None else centre(local, frozenset(order) | frozenset(apart))
    for codes in (itertools.product(*[range(graph.sizes[k]) for k in order]) if as_axes else orbits):
        clamped = dict(zip(order, codes))
        shift = sum(int(contribution[k][c]) for k, c in clamped.items())
        if on_path is not None:
            laws = on_path
        elif as_axes:
            laws = [(single, Potential((single,), table[(slice(None), *codes)], offset))]
        else:
            laws = calibrate(local, moving, {**clamped, **apart}, limit, root).marginals(by_target)
        mixtures: list[tuple[Adversary, tuple[np.ndarray, np.ndarray]]] = []
        cells = 0
        for target, pot in laws:
            weights = _mixture(pot, contribution[target], shift)
            if weights is not None:  # else P(x_R) = 0
                mixtures += [(adv, weights) for adv in by_target[target]]
                cells += weights[0].size
            if cells >= _BATCH_CELLS:
                _add_sups(mixtures, mechanism, limit, clamped, best, profiles, sups)
                mixtures, cells = [], 0
        _add_sups(mixtures, mechanism, limit, clamped, best, profiles, sups)
    out = {}
    for adv in adversaries:
        if adv not in best and adv not in profiles:
            raise InputError(f"every configuration of the known tuples of {adv} has probability zero")
        if mechanism.profile:
            out[adv] = _profile_leakage(adv, profiles[adv], local, known, apart, mechanism, limit)
            continue
        value, t, t_prime, y, clamped = best[adv]
        codes = {**apart, **_complete(local, known - set(apart), clamped, limit)}
        if not mechanism.joint:  # the sup-attaining noisy answer, shifted by the known tuples summed out
            y = (y[0] + padded.shift(codes, clamped),)
        values = graph.values[adv.target]
        witness = Witness(adv, padded.known_values(codes), float(values[t]), float(values[t_prime]), y)
        out[adv] = AdversaryLeakage(adv, max(value, 0.0), witness)
    return out


_BATCH_CELLS = 1 << 20  # mixture weights held at once before their sups are taken (8 MiB)
SUP_CELLS = 1 << 20  # log-weights of the mixtures whose sups one audit keeps (`_sups`, 8 MiB)


def _add_sups(mixtures: list[tuple[Adversary, tuple[np.ndarray, np.ndarray]]], mechanism: Mechanism, limit: int,
              clamped: dict[int, int], best: dict[Adversary, tuple], profiles: dict[Adversary, tuple],
              sups: BoundedMemo | None = None) -> None:
    """Merge one configuration's sups (or, for (ε, δ) noise, profiles) of these mixtures into each adversary's."""
    if not mixtures:
        return
    if mechanism.profile:  # (ε, δ) noise: the targets' pairs at once (engines.hockey; DESIGN §3.5)
        for (adv, weights), found in zip(mixtures, _profiles_together(mixtures, mechanism)):
            _add_profile(profiles, adv, found, clamped, weights[0])
        return
    for (adv, _), found in zip(mixtures, mixture_sups([w for _, w in mixtures], mechanism, limit, sups)):
        if adv not in best or found[0] > best[adv][0]:
            best[adv] = (*found, clamped)


def _profiles_together(mixtures: list[tuple[Adversary, tuple[np.ndarray, np.ndarray]]],
                       mechanism: Mechanism) -> list[MixtureProfile | None]:
    """Each target's profile for one configuration, their mixtures put on the union of their levels
    (-inf weight elsewhere) so that the mechanism evaluates them in one batch."""
    levels = np.unique(np.concatenate([lv for _, (_, lv) in mixtures]))
    logw = np.full((len(mixtures), max(lw.shape[0] for _, (lw, _) in mixtures), len(levels)), -np.inf)
    for a, (_, (lw, lv)) in enumerate(mixtures):
        logw[a, :lw.shape[0]][:, np.searchsorted(levels, lv)] = lw
    return mixture_profiles(logw, levels, mechanism, np.arange(len(mixtures)), len(mixtures))


def _add_profile(profiles: dict, adv: Adversary, found: MixtureProfile | None, clamped: dict[int, int],
                 logw: np.ndarray) -> None:
    """Merge one configuration's profile into the adversary's (pointwise; the witness is the
    configuration worst at the user's δ, the first on ties)."""
    if adv not in profiles:
        profiles[adv] = (found, clamped, logw)
        return
    before, where, first = profiles[adv]
    if found is None:
        return
    worse = before is None or found.value > before.value
    profiles[adv] = (found if before is None else before.merge(found), clamped if worse else where,
                     logw if worse else first)


def _profile_leakage(adv: Adversary, entry: tuple, graph: FactorGraph, known: frozenset[int], apart: dict[int, int],
                     mechanism: Mechanism, limit: int) -> AdversaryLeakage:
    """The adversary's profile result, its witness x_K completed as for the Laplace sup (y: none)."""
    found, clamped, logw = entry
    if found is not None:
        t, t_prime = found.t, found.t_prime
    else:
        possible = np.flatnonzero(np.isfinite(logsumexp(logw, axis=1)))
        t, t_prime = int(possible[0]), int(possible[-1])
    codes = {**apart, **_complete(graph, known - set(apart), clamped, limit)}
    values = graph.values[adv.target]
    known_values = {k: float(graph.values[k][c]) for k, c in sorted(codes.items())}
    witness = Witness(adv, known_values, float(values[t]), float(values[t_prime]), None)
    return learns_nothing(adv, witness, mechanism) if found is None else found.leakage(adv, witness, mechanism)


def _relevant(graph: FactorGraph, known: frozenset[int], mechanism: Mechanism) -> set[int]:
    """The known slots that share a factor with a slot that is not known; every known slot unless the noise is
    shift-invariant (a known tuple that only shifts the query moves a truncated geometric's or RAPPOR's law)."""
    if not mechanism.shift_invariant:
        return set(known)
    where = incidence(graph)
    mask = where.mask(known)
    return set(np.flatnonzero(where.sharing(where.touching(~mask)) & mask).tolist())


def _concerned(graph: FactorGraph, known: frozenset[int], targets: set[int], moves: np.ndarray,
               on_zeros: frozenset[int]) -> tuple[FactorGraph, frozenset[int]]:
    """The graph without the components of the unknown slots (given the known ones) that hold no target and no
    tuple the query reads, when their factors sum to a positive number for every x_K (`_positive`). Given x_K
    such a component is independent of the rest (global Markov property), and that positive number multiplies
    L(y | t, x_K) for every t alike: it cancels from the log-ratio (65 villages, one audited: the other 64 are
    not computed), and the slots on a zero of the factors left."""
    label = components(graph, known)
    if not ((label >= 0) & ~moves).any():  # every unknown slot is read by the query: nothing idle
        return graph, on_zeros
    wanted = {label[v] for v in targets} | set(label[moves & (label >= 0)].tolist())
    idle: dict[int, list[int]] = {}
    for v in range(graph.slots):
        if label[v] >= 0 and label[v] not in wanted:
            idle.setdefault(int(label[v]), []).append(v)
    dropped = {v for slots in idle.values() if _positive(graph, slots, on_zeros) for v in slots}
    if not dropped:
        return graph, on_zeros
    factors = [p for p in graph.factors if not dropped.intersection(p.scope)]
    left = frozenset(v for p in factors if not np.isfinite(p.table).all() for v in p.scope) if on_zeros else on_zeros
    return replace(graph, factors=factors, trees={}), left


def _positive(graph: FactorGraph, slots: list[int], on_zeros: frozenset[int]) -> bool:
    """Whether the factors on a component's unknown `slots` sum to a positive number whatever the known
    slots' values: when none of them has a zero, or, for a component of one unknown slot (a cluster's effect
    given its known records), when one value of that slot leaves every factor on it positive for every value
    of the others (that value's term of the sum is then positive). A quadrature node far in a tail can round
    a record's probability to an exact 0 (1 - p for p = 1 - 1e-17); the other nodes keep the sum positive."""
    if not on_zeros.intersection(slots):
        return True
    if len(slots) > 1:
        return False
    v = slots[0]
    ok = np.ones(graph.sizes[v], dtype=bool)
    for p in graph.factors:
        if v in p.scope:
            axis = p.scope.index(v)
            ok &= np.isfinite(np.moveaxis(p.table, axis, 0)).reshape(graph.sizes[v], -1).all(axis=1)
    return bool(ok.any())


def _local(graph: FactorGraph, known: frozenset[int], relevant: set[int],
           on_zeros: frozenset[int]) -> tuple[FactorGraph, dict[int, int]]:
    """The factors that bear on the unknown slots given x_R, and the known slots they leave out (with their
    first value), when every factor on those slots is positive: then their sum is positive for every x_R and
    a constant in t and s, which the sup does not see, and any of their values completes the witness
    (the known tuples beyond the boundary days of a chain's ddp adversary are never enumerated). Otherwise
    the whole graph (a zero there can make an x_R impossible) and none."""
    apart = known - relevant
    if not apart or apart & on_zeros:
        return graph, {}
    where = incidence(graph)
    factors = [graph.factors[j] for j in np.flatnonzero(~where.touching(where.mask(apart))).tolist()]
    return replace(graph, factors=factors, trees={}), dict.fromkeys(sorted(apart), 0)


def _complete(graph: FactorGraph, known: frozenset[int], clamped: dict[int, int], limit: int) -> dict[int, int]:
    """x_K: the enumerated values `clamped` and, for the other known slots, values of positive
    probability with them. A known slot in no factor of `graph` (its factors went with a part `_concerned`
    dropped, whose sum is positive for every value of the known slots) takes its first value."""
    if len(clamped) == len(known):
        return dict(clamped)
    chosen = calibrate(graph, _zeros(graph), clamped, limit).completion()
    if chosen is None:  # cannot happen: P(x_R) > 0
        raise InputError("no values of the known tuples have positive probability with the witness's")
    return {**clamped, **{k: chosen.get(k, 0) for k in known if k not in clamped}}


def _mixture(pot: Potential, target: np.ndarray, shift: int) -> tuple[np.ndarray, np.ndarray] | None:
    """log P(q = s, X_i = t, x_K) as (values of t, levels s of positive probability) and the levels."""
    low, high = int(target.min()), int(target.max())
    width = pot.length + high - low
    logw = np.full((len(target), width), -np.inf)
    for t, c in enumerate(target):
        logw[t, int(c) - low:int(c) - low + pot.length] = pot.table[t]
    alive = np.any(logw > -np.inf, axis=0)
    if alive.all():  # the usual case: every level possible, nothing to copy
        return logw, np.arange(pot.offset + low + shift, pot.offset + low + shift + width, dtype=float)
    alive = np.flatnonzero(alive)
    if alive.size == 0:
        return None
    return np.ascontiguousarray(logw[:, alive]), (pot.offset + low + shift + alive).astype(float)


def mixture_sups(mixtures: list[tuple[np.ndarray, np.ndarray]], mechanism: Mechanism,
          limit: int, sups: BoundedMemo | None = None) -> list[tuple[float, int, int, tuple[float, ...]]]:
    """`_sup` of each (log-weights, levels), the mixtures on equal levels with as many possible values of t
    evaluated together: one `log_mixtures` call for many targets (rows kept under `limit` cells per call); with
    `sups`, a mixture equal byte for byte to one already taken is read from it."""
    out: list = [None] * len(mixtures)
    keys = [(array_key(logw), array_key(levels)) if sups is not None else None for logw, levels in mixtures]
    groups: dict[tuple, list[tuple[int, np.ndarray, np.ndarray]]] = {}
    for k, (logw, levels) in enumerate(mixtures):
        out[k] = sups.get(keys[k]) if sups is not None else None
        if out[k] is not None:
            continue
        log_pt = logsumexp(logw, axis=1)
        possible = np.flatnonzero(log_pt > -np.inf)
        if possible.size < 2 or mechanism.joint:
            out[k] = _sup(logw, levels, mechanism, limit)
        else:
            groups.setdefault((levels.tobytes(), possible.size), []).append((k, possible, log_pt[possible]))
    for (_, size), members in groups.items():
        levels = mixtures[members[0][0]][1]
        per_call = max(1, limit // (mechanism.mixture_cells(len(levels)) * size))
        for start in range(0, len(members), per_call):
            chunk = members[start:start + per_call]
            rows = np.concatenate([mixtures[k][0][possible] for k, possible, _ in chunk])
            grid, log_l = mechanism.log_mixtures(rows, levels, limit)
            log_l = log_l.reshape(len(chunk), size, -1) - np.stack([lp for _, _, lp in chunk])[:, :, None]
            for (k, _, _), found in zip(chunk, _widest(log_l, grid, [possible for _, possible, _ in chunk])):
                out[k] = found
    if sups is not None:
        for key, found in zip(keys, out):
            sups.put(key, found)
    return out


def _sups() -> BoundedMemo:
    """The sups taken in one audit, by their mixtures (log-weights and levels, `array_key`): the known sets of a
    chain's ddp adversaries away from its ends have equal laws (equal days), whose sup is then taken once. It holds
    mixtures of at most SUP_CELLS log-weights in all."""
    return BoundedMemo(SUP_CELLS, lambda key, sup: math.prod(key[0][1]))


def _widest(log_l: np.ndarray, grid: np.ndarray,
            possible: list[np.ndarray]) -> list[tuple[float, int, int, tuple[float, ...]]]:
    """For each target's log L(y | t) - log P(t) (targets, possible t, y) on the mechanism's `grid`: the largest
    log-ratio over pairs of its possible values of t (indices `possible`), its t, t' and y (first on ties)."""
    with np.errstate(invalid="ignore"):
        ratio = log_l.max(axis=1) - log_l.min(axis=1)  # (targets, y)
    ratio[np.isnan(ratio)] = -np.inf  # an output no possible t gives (a joint law's zeros)
    out = []
    for c, g in enumerate(ratio.argmax(axis=1)):
        column = log_l[c, :, g]
        y = tuple(float(v) for v in np.atleast_1d(grid[g]))
        out.append((float(ratio[c, g]), int(possible[c][column.argmax()]), int(possible[c][column.argmin()]), y))
    return out


def _sup(logw: np.ndarray, levels: np.ndarray, mechanism: Mechanism,
         limit: int) -> tuple[float, int, int, tuple[float, ...]]:
    """max over t, t' with P(t, x_K) > 0 and y on the mechanism's grid of log L(y|t) - log L(y|t')
    (DESIGN §2.1): the value, t, t' (indices) and y; 0 when one value of t is possible."""
    log_pt = logsumexp(logw, axis=1)
    possible = np.flatnonzero(log_pt > -np.inf)
    if possible.size < 2:
        y = mechanism.output_space(levels[:1, None])[0] if mechanism.joint else levels[:1]
        return 0.0, int(possible[0]), int(possible[0]), tuple(float(v) for v in y)
    grid, log_l = mechanism.log_mixtures(logw[possible], levels, limit)
    return _widest((log_l - log_pt[possible][:, None])[None], grid, [possible])[0]
