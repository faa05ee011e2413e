"""A chain's forward–backward with the partial sum (`structured.pathsum`, issue #44) against every configuration
enumerated here, and against a log-space forward recursion written here where the chain is too long to enumerate:
random paths (slots out of order, factors oriented either way, several factors on a pair, zeros, negative and
zero weights), and the 600-nat rule (a day whose spans pass it gives None: the junction tree answers)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.special import logsumexp

from ddpbayes.engines.structured import pathsum
from ddpbayes.engines.structured.graph import FactorGraph
from ddpbayes.engines.structured.pathsum import path_laws, path_of, path_table, path_within
from ddpbayes.engines.structured.potential import Potential


def _factor(scope: tuple[int, ...], table: np.ndarray) -> Potential:
    return Potential(scope, np.asarray(table, dtype=float)[..., None], 0)


def _random_path(rng, n: int, k: int, spread: float, zeros: float):
    """A random path over slots in shuffled order: its FactorGraph and the factors as (scope, log table)."""
    order = rng.permutation(n).tolist()
    sizes = [k] * n
    factors = []
    for a, b in itertools.pairwise(order):
        for _ in range(int(rng.integers(1, 3))):
            table = rng.normal(size=(k, k)) * spread
            table[rng.random((k, k)) < zeros] = -np.inf
            factors.append(((a, b), table) if rng.random() < 0.5 else ((b, a), table.T))
    for v in order:
        if rng.random() < 0.6 or n == 1:
            factors.append(((v,), rng.normal(size=k) * spread))
    factors.append(((), np.array(rng.normal())))
    graph = FactorGraph(sizes, [np.arange(k)] * n, [_factor(s, t) for s, t in factors])
    return graph, factors


def _brute(sizes: list[int], factors, contribution, v: int, kept: tuple[int, ...] = ()) -> tuple[np.ndarray, int]:
    """log Σ over every configuration of Π factors, by (x_v, x_kept..., Σ_{j≠v, j∉kept} c_j(x_j)), with the
    smallest sum's offset."""
    n = len(sizes)
    summed = [j for j in range(n) if j != v and j not in kept]
    low = sum(int(contribution[j].min()) for j in summed)
    high = sum(int(contribution[j].max()) for j in summed)
    terms: dict = {}
    for x in itertools.product(*[range(size) for size in sizes]):
        logp = sum(float(t[tuple(x[u] for u in s)]) for s, t in factors)
        s = sum(int(contribution[j][x[j]]) for j in summed)
        terms.setdefault((x[v], *(x[j] for j in kept), s - low), []).append(logp)
    out = np.full((sizes[v], *(sizes[j] for j in kept), high - low + 1), -np.inf)
    for at, values in terms.items():
        out[at] = logsumexp(values)
    return out, low


def _dense(table: np.ndarray, offset: int, low: int, length: int) -> np.ndarray:
    out = np.full((*table.shape[:-1], length), -np.inf)
    out[..., offset - low:offset - low + table.shape[-1]] = table
    return out


def _close(a: np.ndarray, b: np.ndarray, tol: float = 1e-12) -> bool:
    if not np.array_equal(np.isfinite(a), np.isfinite(b)):
        return False
    f = np.isfinite(a)
    return bool(np.all(np.abs(a[f] - b[f]) <= tol * np.maximum(1.0, np.abs(b[f]))))


@pytest.mark.parametrize("seed", range(12))
def test_random_paths_equal_enumeration(seed):
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 8)), int(rng.choice([2, 3]))
    graph, factors = _random_path(rng, n, k, spread=rng.choice([0.5, 3.0]), zeros=rng.choice([0.0, 0.2]))
    contribution = [rng.integers(-2, 4, size=k) for _ in range(n)]
    path = path_of(graph)
    assert path is not None
    targets = sorted(rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False).tolist())
    laws = path_laws(path, contribution, targets)
    assert laws is not None and [v for v, _ in laws] == targets
    for v, law in laws:
        want, low = _brute([k] * n, factors, contribution, v)
        assert law.scope == (v,)
        assert law.offset >= low and law.offset + law.length <= low + want.shape[1]
        assert _close(_dense(law.table, law.offset, low, want.shape[1]), want)


@pytest.mark.parametrize("seed", range(4))
def test_slots_of_different_sizes_equal_enumeration(seed):
    """Days with 1, 2 or 3 values (one table per day, not one stacked array), factors either way round."""
    rng = np.random.default_rng(200 + seed)
    n = int(rng.integers(2, 6))
    sizes = rng.integers(1, 4, size=n).tolist()
    factors = []
    for j in range(n - 1):
        table = rng.normal(size=(sizes[j], sizes[j + 1]))
        factors.append(((j, j + 1), table) if rng.random() < 0.5 else ((j + 1, j), table.T))
    factors += [((j,), rng.normal(size=sizes[j])) for j in range(n) if rng.random() < 0.7]
    graph = FactorGraph(sizes, [np.arange(s) for s in sizes], [_factor(s, t) for s, t in factors])
    contribution = [rng.integers(-1, 3, size=s) for s in sizes]
    laws = path_laws(path_of(graph), contribution, list(range(n)))
    assert laws is not None
    for v, law in laws:
        want, low = _brute(sizes, factors, contribution, v)
        assert _close(_dense(law.table, law.offset, low, want.shape[1]), want)


@pytest.mark.parametrize("seed", range(8))
def test_ends_kept_as_axes_equal_enumeration(seed):
    """A ddp adversary's boundary days: the path's ends kept as axes of the target's table (`path_table`, in the
    order asked), their contributions not added."""
    rng = np.random.default_rng(100 + seed)
    n, k = int(rng.integers(2, 8)), int(rng.choice([2, 3]))
    graph, factors = _random_path(rng, n, k, spread=rng.choice([0.5, 3.0]), zeros=rng.choice([0.0, 0.2]))
    contribution = [rng.integers(-2, 4, size=k) for _ in range(n)]
    path = path_of(graph)
    ends = [path.order[0], path.order[-1]]
    target = int(rng.choice([v for v in range(n) if v not in ends] or ends[1:]))
    kept = [v for v in ends if v != target and rng.random() < 0.8]
    rng.shuffle(kept)
    found = path_table(path, contribution, target, kept)
    assert found is not None
    table, offset = found
    want, low = _brute([k] * n, factors, contribution, target, tuple(kept))
    assert table.shape[:-1] == want.shape[:-1]
    assert _close(_dense(table, offset, low, want.shape[-1]), want)


def test_a_kept_slot_inside_the_path_is_not_taken():
    graph = FactorGraph([2] * 4, [np.arange(2)] * 4, [_factor((j, j + 1), np.zeros((2, 2))) for j in range(3)])
    assert path_table(path_of(graph), [np.arange(2)] * 4, 0, [2]) is None


def _log_forward(n: int, log_pair: np.ndarray, contribution: np.ndarray) -> np.ndarray:
    """log P(X_{n-1} = t, Σ_{j<n-1} c(X_j) = s) of a homogeneous chain with a flat start, in log space by the
    recursion over (state, sum), every sum written out."""
    k = len(log_pair)
    msg = np.full((k, 1), 0.0)
    for _ in range(n - 1):
        low, high = int(contribution.min()), int(contribution.max())
        nxt = np.full((k, msg.shape[1] + high - low), -np.inf)
        for x2 in range(k):
            for x in range(k):
                c = int(contribution[x]) - low
                nxt[x2, c:c + msg.shape[1]] = np.logaddexp(nxt[x2, c:c + msg.shape[1]], msg[x] + log_pair[x, x2])
        msg = nxt
    return msg


@pytest.mark.parametrize(("n", "cost", "answered"),
                         [(20, 25.0, True), (60, 25.0, True), (300, 1.5, True), (40, 80.0, True), (5, 700.0, False)])
def test_the_600_nat_rule(n, cost, answered):
    """Each day at 1 costs `cost` nats, so the sum's tail falls that much a day below the mode: 20 days of 25 nats
    stay within 600 nats and equal the log-space recursion; 60 (and 40 of 80, 3,200 nats) pass it and are held
    scaled column by column, still equal to it; 300 days of 1.5 nats need the span measured again along the way
    (its bound passes 600 first); a day whose own table spans 700 nats gives None (the junction tree answers)."""
    log_pair = np.array([[0.0, -cost], [0.0, -cost]])
    graph = FactorGraph([2] * n, [np.arange(2)] * n,
                        [_factor((j, j + 1), log_pair) for j in range(n - 1)])
    contribution = [np.array([0, 1])] * n
    laws = path_laws(path_of(graph), contribution, [n - 1])
    if not answered:
        assert laws is None
        return
    want = _log_forward(n, log_pair, contribution[0])
    (_, law), = laws
    assert law.offset == 0 and _close(_dense(law.table, law.offset, 0, want.shape[1]), want)


def test_not_a_path():
    star = FactorGraph([2] * 4, [np.arange(2)] * 4, [_factor((0, j), np.zeros((2, 2))) for j in (1, 2, 3)])
    cycle = FactorGraph([2] * 3, [np.arange(2)] * 3, [_factor((j, (j + 1) % 3), np.zeros((2, 2))) for j in range(3)])
    apart = FactorGraph([2] * 4, [np.arange(2)] * 4, [_factor(s, np.zeros((2, 2))) for s in ((0, 1), (2, 3))])
    triple = FactorGraph([2] * 3, [np.arange(2)] * 3, [_factor((0, 1, 2), np.zeros((2, 2, 2)))])
    assert all(path_of(g) is None for g in (star, cycle, apart, triple))


@pytest.mark.parametrize("seed", range(3))
def test_a_stretch_is_cut_from_the_whole_path(seed):
    """`path_within`: the factors of a stretch of a path (in the whole's order) give the same tables and days as
    `path_of` builds for the stretch alone, bit for bit (equal arrays), cut from the whole's path when `path_of`
    would walk the stretch the whole's way (from its lower slot); a stretch missing one of its factors, or with a
    factor of its own, is built on its own."""
    rng = np.random.default_rng(seed)
    n = 9
    graph, _ = _random_path(rng, n, 3, 2.0, 0.2)
    whole = path_of(graph)
    at = {v: k for k, v in enumerate(whole.order)}
    for a, b in itertools.combinations(range(n), 2):
        inside = [p for p in graph.factors if p.scope and all(a <= at[v] <= b for v in p.scope)]
        cut = path_within(graph, FactorGraph(graph.sizes, graph.values, inside))
        alone = path_of(FactorGraph(graph.sizes, graph.values, list(inside)))
        assert cut.order == alone.order and cut.constant == alone.constant == 0.0
        for mine, theirs in ((cut.unary, alone.unary), (cut.pair, alone.pair)):
            assert all(np.array_equal(x, y) for x, y in zip(mine, theirs, strict=True))
        for mine, theirs in ((cut.forward, alone.forward), (cut.backward, alone.backward)):
            assert all(np.array_equal(x.linear, y.linear) and x.top == y.top and x.span == y.span
                       for x, y in zip(mine, theirs, strict=True))
        assert (cut.forward[0] is whole.forward[a]) == (whole.order[a] < whole.order[b])  # cut, not rebuilt
        pairs = [p for p in inside if len(p.scope) == 2]
        own = [*inside, _factor((whole.order[a],), np.zeros(3))]
        for factors in ([*pairs[:-1], *[p for p in inside if len(p.scope) == 1]], own):
            built = path_within(graph, FactorGraph(graph.sizes, graph.values, factors))
            assert built is None or not built.forward or built.forward[0] is not whole.forward[a]


def test_both_messages_scaled_by_columns():
    """A middle day of 81 whose forward and backward messages both pass 600 nats (30 nats a day at 1, a
    transition that favours staying): their convolution against the two log-space recursions convolved here."""
    n, target = 81, 40
    log_pair = np.array([[-0.1, -2.0], [-1.5, -30.0]])
    graph = FactorGraph([2] * n, [np.arange(2)] * n, [_factor((j, j + 1), log_pair) for j in range(n - 1)])
    contribution = [np.array([0, 1])] * n
    (_, law), = path_laws(path_of(graph), contribution, [target])
    forward = _log_forward(target + 1, log_pair, contribution[0])
    backward = _log_forward(n - target, log_pair.T, contribution[0])
    want = np.full((2, forward.shape[1] + backward.shape[1] - 1), -np.inf)
    for t in range(2):
        for j in range(forward.shape[1]):
            at = slice(j, j + backward.shape[1])
            want[t, at] = np.logaddexp(want[t, at], forward[t, j] + backward[t])
    assert want[1, -1] - want.max() < -1200  # both tails far past the rule
    assert law.offset == 0 and _close(_dense(law.table, law.offset, 0, want.shape[1]), want, 1e-11)


@pytest.mark.parametrize("seed", range(2))
def test_wide_laws_and_their_laplace_sums_equal_log_space_recursions(seed):
    """Every target of a random 3-state chain whose days at 0 or 2 cost 12-18 nats (its laws span 600-1,400 nats:
    the messages held by columns, the two convolved in one np.convolve scaled apart, the Laplace sums by the
    recursions scaled to e^(700 - log m)), against a log-space forward-backward over each day's own table and the
    Laplace kernel summed term by term, both written here."""
    from ddpbayes.mechanisms import Laplace

    rng = np.random.default_rng(70 + seed)
    n, k, b = 70, 3, 1.5
    pairs = [-rng.uniform(0.0, 6.0, size=(k, k)) - np.array([12.0, 0.0, 12.0]) for _ in range(n - 1)]
    graph = FactorGraph([k] * n, [np.arange(k)] * n, [_factor((j, j + 1), t) for j, t in enumerate(pairs)])
    contribution = [np.arange(k)] * n
    laws = path_laws(path_of(graph), contribution, list(range(n)))
    forward = [np.zeros((k, 1))]  # log Σ over days before j of Π tables, by (x_j, their sum)
    for t in pairs:
        msg = forward[-1]
        nxt = np.full((k, msg.shape[1] + k - 1), -np.inf)
        for x, x2 in itertools.product(range(k), repeat=2):
            nxt[x2, x:x + msg.shape[1]] = np.logaddexp(nxt[x2, x:x + msg.shape[1]], msg[x] + t[x, x2])
        forward.append(nxt)
    backward = [np.zeros((k, 1))]  # log Σ over days after j, by (x_j, their sum)
    for t in pairs[::-1]:
        msg = backward[-1]
        nxt = np.full((k, msg.shape[1] + k - 1), -np.inf)
        for x, x2 in itertools.product(range(k), repeat=2):
            nxt[x, x2:x2 + msg.shape[1]] = np.logaddexp(nxt[x, x2:x2 + msg.shape[1]], msg[x2] + t[x, x2])
        backward.append(nxt)
    backward = backward[::-1]
    laplace, wide = Laplace(scale=b), 0
    for v, law in laws:
        f, g = forward[v], backward[v]
        want = np.full((k, f.shape[1] + g.shape[1] - 1), -np.inf)
        for j in range(f.shape[1]):
            want[:, j:j + g.shape[1]] = np.logaddexp(want[:, j:j + g.shape[1]], f[:, j:j + 1] + g)
        assert law.offset == 0 and _close(_dense(law.table, 0, 0, want.shape[1]), want, 1e-12)
        wide += want.max() - want[np.isfinite(want)].min() > 600
        logw = want - logsumexp(want, axis=1, keepdims=True)
        q = np.arange(want.shape[1], dtype=float)
        _, got = laplace.log_mixtures(logw, q, 1 << 20)
        kernel = np.concatenate([-np.abs(q[:, None] - q[None, :]), q[None, :] - q[-1], q[0] - q[None, :]]) / b
        assert _close(got, logsumexp(logw[:, None, :] + kernel[None], axis=2), 1e-12)
    assert wide > n // 2


@pytest.mark.parametrize("seed", range(3))
def test_forward_messages_in_blocks_equal_enumeration(seed, monkeypatch):
    """Every target's forward message over a tiny cell budget: kept block by block from checkpoints (one more
    forward pass), the same laws as enumeration."""
    monkeypatch.setattr(pathsum, "CELLS", 160)
    rng = np.random.default_rng(300 + seed)
    n, k = 7, 2
    graph, factors = _random_path(rng, n, k, spread=1.0, zeros=0.0)
    contribution = [np.array([0, 2]) if j % 2 else np.array([1, -1]) for j in range(n)]  # widths 1, 3, ..., 13
    path = path_of(graph)
    assert len(pathsum._blocks(path, contribution, list(range(n)))) == 3
    laws = path_laws(path, contribution, list(range(n)))
    assert laws is not None
    for v, law in laws:
        want, low = _brute([k] * n, factors, contribution, v)
        assert _close(_dense(law.table, law.offset, low, want.shape[1]), want)


def _components(sizes: list[int], scopes: list[tuple[int, ...]], known: set[int]) -> list[set[int]]:
    """The slots' connected components (known ones left out) by a breadth-first search written here."""
    seen, parts = set(known), []
    for v in range(len(sizes)):
        if v in seen:
            continue
        part, todo = {v}, [v]
        seen.add(v)
        while todo:
            u = todo.pop()
            for scope in scopes:
                if u in scope:
                    for w in scope:
                        if w not in seen:
                            seen.add(w)
                            part.add(w)
                            todo.append(w)
        parts.append(part)
    return parts


@pytest.mark.parametrize("seed", range(6))
def test_components_of_a_path_equal_a_search(seed):
    """`rows.components` on a graph whose path is known (runs between known slots along it) and by union–find
    (before the path is known) give the partition a breadth-first search gives, for random known sets; a slot
    in no factor is its own component."""
    from ddpbayes.engines.structured.rows import components

    rng = np.random.default_rng(300 + seed)
    n = int(rng.integers(2, 12))
    graph, factors = _random_path(rng, n, 2, 1.0, 0.0)
    spare = FactorGraph([*graph.sizes, 2], [*graph.values, np.arange(2)], graph.factors)  # slot n in no factor
    scopes = [s for s, _ in factors]
    for with_path in (False, True):
        for _ in range(8):
            known = frozenset(rng.choice(n + 1, size=int(rng.integers(0, n + 1)), replace=False).tolist())
            one = FactorGraph(spare.sizes, spare.values, spare.factors)
            if with_path:
                assert path_of(one) is not None and "path" in one.trees
            label = components(one, known)
            assert [v for v in range(n + 1) if label[v] == -1] == sorted(known)
            found = {}
            for v in range(n + 1):
                if label[v] >= 0:
                    found.setdefault(int(label[v]), set()).add(v)
            want = _components(spare.sizes, scopes, set(known))
            assert sorted(map(sorted, found.values())) == sorted(map(sorted, want))


@pytest.mark.parametrize("seed", range(4))
def test_stretches_of_equal_days_share_their_laws(seed):
    """A ddp adversary's table on every stretch of a chain whose days repeat (two transition tables, drawn at
    random per day): `path_table` on each stretch cut from the whole (`path_within`) equals the enumeration of
    that stretch's factors, also where its laws are read from the steps remembered for an earlier stretch
    (`pathsum._Steps`; fewer steps are taken than the stretches hold days)."""
    rng = np.random.default_rng(400 + seed)
    n, k, radius = 12, 2, int(rng.integers(1, 4))
    tables = [rng.normal(size=(k, k)) * 2.0 for _ in range(2)]
    tables[1][0, 1] = -np.inf
    unary = rng.normal(size=k)
    which = rng.integers(0, 2, size=n - 1) if seed % 2 else np.zeros(n - 1, dtype=int)
    factors = [((j, j + 1), tables[w]) for j, w in enumerate(which)] + [((0,), unary)]
    graph = FactorGraph([k] * n, [np.arange(k)] * n, [_factor(s, t) for s, t in factors])
    contribution = [np.array([0, 1 + (j % 2) * int(seed > 1)]) for j in range(n)]
    whole = path_of(graph)
    steps = 0
    for target in range(n):
        a, b = max(target - radius - 1, 0), min(target + radius + 1, n - 1)
        inside = [(s, t) for s, t in factors if all(a <= v <= b for v in s)]
        part = FactorGraph(graph.sizes, graph.values, [p for p in graph.factors if all(a <= v <= b for v in p.scope)])
        stretch = path_within(graph, part)
        assert stretch.steps is whole.steps
        kept = [v for v in (a, b) if v != target and v in (target - radius - 1, target + radius + 1)]
        table, offset = path_table(stretch, contribution, target, kept)
        local = list(range(a, b + 1))
        want, low = _brute([k] * len(local), [(tuple(v - a for v in s), t) for s, t in inside],
                           [contribution[v] for v in local], target - a, tuple(v - a for v in kept))
        assert _close(_dense(table, offset, low, want.shape[-1]), want)
        steps += 2 * (b - a)
    taken = sum(1 for key in whole.steps.memo if key[0] not in ("table", "start"))
    assert taken < steps


@pytest.mark.parametrize("seed", range(3))
def test_days_are_one_object_per_equal_table(seed):
    """`_days` gives each table of a stack its own day (top, span and linear table computed here), and one object
    per set of bit-equal tables (a -0.0 entry is not 0.0), as a dictionary of their bytes written here finds."""
    rng = np.random.default_rng(seed)
    kinds = rng.normal(size=(4, 3, 3))
    kinds[1, 0, 2] = -np.inf
    kinds[2] = 0.0
    kinds[3] = 0.0
    kinds[3, 1, 1] = -0.0
    stacked = kinds[rng.integers(0, 4, size=40)].transpose(0, 2, 1)
    days = pathsum._days(stacked)
    assert len(days) == len(stacked)
    seen: dict[bytes, int] = {}
    for k, (table, day) in enumerate(zip(stacked, days)):
        top = float(table.max())
        low = float(table[np.isfinite(table)].min())
        assert day.top == top and day.span == top - low
        assert np.array_equal(day.linear, np.exp(table - top))
        first = seen.setdefault(table.tobytes(), k)
        assert days[first] is day
    assert len({id(d) for d in days}) == len(seen)
    assert len(pathsum._days(stacked[:1])) == 1 and pathsum._days(stacked[:0]) == []


@pytest.mark.parametrize("seed", range(3))
def test_messages_rescaled_every_few_days_equal_a_log_space_recursion(seed):
    """`pathsum._run` divides a message by its maximum only before its drift bound (log k up, the day's floor
    down) passes DRIFT: on 120 random days that lose up to 30 nats each, some with an all-zero column (a floor of
    inf: rescaled at every such day), contributions that differ by day (negative ones too), the final message
    equals a log-space forward recursion written here (within 1e-12), its tail far past the 600-nat rule (held by
    columns on the way)."""
    rng = np.random.default_rng(90 + seed)
    n, k = 120, 3
    logs = -rng.uniform(0.0, 30.0, size=(n, k, k))  # (out, in)
    dead = rng.random(n) < 0.2
    logs[dead, :, rng.integers(k, size=int(dead.sum()))] = -np.inf
    days = pathsum._days(logs)
    floors = np.array([d.floor for d in days])
    assert np.isinf(floors).sum() == dead.sum() and floors[np.isfinite(floors)].sum() > 10 * pathsum.DRIFT
    sums = [np.sort(rng.choice(np.arange(-2, 4), size=k, replace=False)) for _ in range(n)]
    got = pathsum._run(days, sums, pathsum._started(k, False))
    want, low = np.zeros((k, 1)), 0  # log Σ over the days so far, by (value now, their sum - low)
    for log_g, c in zip(logs, sums):
        nxt = np.full((k, want.shape[1] + int(c.max() - c.min())), -np.inf)
        for x, x2 in itertools.product(range(k), repeat=2):
            at = int(c[x] - c.min())
            nxt[x2, at:at + want.shape[1]] = np.logaddexp(nxt[x2, at:at + want.shape[1]], want[x] + log_g[x2, x])
        want, low = nxt, low + int(c.min())
    with np.errstate(divide="ignore"):
        table = np.log(got.table[0]) + got.scale + (0.0 if got.columns is None else got.columns)
    assert got.offset == low and want.max() - want[np.isfinite(want)].min() > 600
    assert _close(table, want, 1e-12)
