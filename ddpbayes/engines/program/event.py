"""The distinguishing-event search of the black-box audit (issue #28 item 2): given outputs drawn
under two hypotheses a and b, an output event E whose probability ratio P_a(E) / P_b(E) (or the
reverse: `direction`) is large AND well estimated, so that a fresh sample certifies it.

Two families, chosen on the first batch of the search sample:

- discrete outputs (at most MAX_DISTINCT distinct rows in the first batch, and outputs that
  repeat: at most REPEATS of its rows distinct): the histogram. The distinct outputs are
  sorted by their empirical ratio and the best prefix is taken: the events of the likelihood-ratio
  test. Rows are compared through a 64-bit hash of their bytes (a collision among the few
  thousand rows of a histogram has probability below 1e-12);
- continuous or high-cardinality outputs: DP-Sniper's idea (Bichsel et al. 2021, IEEE S&P): a
  logistic regression p(a | y) (L2-regularised, L-BFGS, written here with numpy and scipy) trained
  on the first batch, on the output coordinates standardised plus an indicator for each value that
  repeats often in a coordinate (sentinels such as -1000 / -2000, a coordinate's discrete values),
  and the event {score >= tau} (or <= tau the other way), tau chosen over the score quantiles of
  the rest of the search sample.

Every candidate is scored by `conservative_log_ratio`: the Clopper–Pearson bound of the log ratio
as if on the search sample — or, with `n_target`, the bound it would get on a check sample of that
size from the search sample's pessimistic (95 %) proportions — which penalises rare events (the
role of DP-Sniper's c). The score only chooses; the certificate is computed on fresh draws
(`certify`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import minimize

from ddpbayes.engines.program import bounds

MAX_DISTINCT = 2000  # at most this many distinct rows in the first batch: a histogram
REPEATS = 0.2  # ... and at most this share of its rows (outputs repeat: not a continuous law on few draws)
TRAIN_ROWS = 100_000  # rows per side the classifier is trained on (the first batch)
FLAG_SHARE = 0.01  # a value taking at least this share of a coordinate gets its own indicator feature
MAX_FLAGS = 8  # indicators per coordinate at most (the most frequent values)
CANDIDATES = 4000  # thresholds tried: the score quantiles
BOTH_DISTINCT = 40  # discrete outputs with more distinct rows than this: the classifier too
SEARCH_ALPHA = 0.05  # with n_target: the pessimistic proportions the projection starts from

Draw = Callable[[int, np.random.Generator], np.ndarray]


# ---------------------------------------------------------------------------------------------- events

class Event(ABC):
    """A set of outputs: `contains(outputs (n, d)) -> (n,) bool`, `describe()` for people."""

    @abstractmethod
    def contains(self, outputs: np.ndarray) -> np.ndarray: ...

    @abstractmethod
    def describe(self) -> str: ...


_MIX = np.uint64(0x9E3779B97F4A7C15)
_PRIME = np.uint64(0x100000001B3)


def row_keys(outputs: np.ndarray) -> np.ndarray:
    """A 64-bit hash of each row's float64 bytes (-0.0 read as 0.0): (n,) uint64."""
    x = np.ascontiguousarray(np.asarray(outputs, dtype=np.float64).reshape(len(outputs), -1)) + 0.0
    bits = x.view(np.uint64)
    h = np.full(len(x), np.uint64(0xCBF29CE484222325))
    for j in range(bits.shape[1]):
        h = (h ^ bits[:, j]) * _PRIME
        h ^= h >> np.uint64(29)
        h *= _MIX
    return h ^ (h >> np.uint64(32))


def _fmt_value(v: float) -> str:
    return str(int(v)) if float(v).is_integer() and abs(v) < 1e15 else f"{v:.6g}"


def _fmt_row(row: np.ndarray) -> str:
    return _fmt_value(row[0]) if len(row) == 1 else "(" + ", ".join(_fmt_value(v) for v in row) + ")"


@dataclass
class RowSet(Event):
    """Outputs equal to one of `rows` (m, d)."""

    rows: np.ndarray
    keys: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        self.rows = np.asarray(self.rows, dtype=float)
        self.keys = np.sort(row_keys(self.rows))

    def contains(self, outputs: np.ndarray) -> np.ndarray:
        return np.isin(row_keys(outputs), self.keys)

    def describe(self) -> str:
        shown = ", ".join(_fmt_row(r) for r in self.rows[:6])
        if len(self.rows) == 1:
            return f"output == {shown}"
        more = f", ... ({len(self.rows)} outputs)" if len(self.rows) > 6 else ""
        return f"output in {{{shown}{more}}}"


@dataclass
class Features:
    """Output coordinates standardised (the values that have indicators replaced by the mean of
    the others first), then one 0/1 indicator per (coordinate, frequent value)."""

    mean: np.ndarray  # (d,)
    scale: np.ndarray  # (d,); 0 drops the coordinate (constant once its flagged values are out)
    flags: list[tuple[int, float]]

    @classmethod
    def fit(cls, x: np.ndarray) -> Features:
        n, d = x.shape
        flags, mean, scale = [], np.zeros(d), np.zeros(d)
        for j in range(d):
            values, counts = np.unique(x[:, j], return_counts=True)
            order = np.argsort(-counts, kind="stable")[:MAX_FLAGS]
            frequent = [float(values[i]) for i in order if counts[i] >= FLAG_SHARE * n]
            if len(values) <= MAX_FLAGS:  # a discrete coordinate: an indicator per value
                frequent = [float(v) for v in values]
            flags += [(j, v) for v in frequent]
            rest = x[~np.isin(x[:, j], frequent), j]
            rest = rest[np.isfinite(rest)]
            if len(rest) > 1 and np.std(rest) > 0:
                mean[j], scale[j] = np.mean(rest), np.std(rest)
        return cls(mean, scale, flags)

    @property
    def size(self) -> int:
        return int(np.count_nonzero(self.scale)) + len(self.flags)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        keep = np.flatnonzero(self.scale)
        out = np.empty((len(x), self.size))
        cont = x[:, keep].copy()
        for j, v in self.flags:
            if self.scale[j]:
                col = int(np.searchsorted(keep, j))
                cont[x[:, j] == v, col] = self.mean[j]
        cont = (cont - self.mean[keep]) / self.scale[keep]
        out[:, :len(keep)] = np.clip(np.nan_to_num(cont, nan=0.0), -1e6, 1e6)
        for i, (j, v) in enumerate(self.flags):
            out[:, len(keep) + i] = x[:, j] == v
        return out

    def names(self) -> list[str]:
        return [f"z(y[{j}])" for j in np.flatnonzero(self.scale)] + [f"[y[{j}] == {_fmt_value(v)}]"
                                                                    for j, v in self.flags]


@dataclass
class Threshold(Event):
    """{score >= tau} (`above`) or {score <= tau}, score = w · features(y) + bias."""

    features: Features
    weights: np.ndarray
    bias: float
    tau: float
    above: bool

    def score(self, outputs: np.ndarray) -> np.ndarray:
        return self.features(np.asarray(outputs, dtype=float)) @ self.weights + self.bias

    def contains(self, outputs: np.ndarray) -> np.ndarray:
        s = self.score(outputs)
        return s >= self.tau if self.above else s <= self.tau

    def describe(self) -> str:
        names = self.features.names()
        top = np.argsort(-np.abs(self.weights))[:4]
        terms = " ".join(f"{'+' if self.weights[i] >= 0 else '-'} {abs(self.weights[i]):.3g}·{names[i]}" for i in top)
        more = f" + ... ({len(names)} features)" if len(names) > 4 else ""
        return (f"logistic score {'>=' if self.above else '<='} {self.tau:.4g}, score = {self.bias:.3g} "
                f"{terms}{more}")


# ---------------------------------------------------------------------------------------------- scoring

def conservative_log_ratio(k_num, n_num, k_den, n_den, alpha: float, n_target: int | None = None):
    """log of (Clopper–Pearson lower bound of the numerator's probability) / (upper bound of the
    denominator's), each at level 1 - alpha: the certificate's value had these counts come from
    the check sample. With `n_target`: the search proportions are first made pessimistic (the
    SEARCH_ALPHA bounds, no multiplicity correction: the score only chooses, the certificate's
    validity comes from the fresh check sample alone) and the bound is the one a check sample of
    n_target draws per side would give at those proportions. -inf where the lower bound is 0."""
    k_num, k_den = np.asarray(k_num, dtype=float), np.asarray(k_den, dtype=float)
    if n_target is not None:
        p_num = bounds.lower(k_num, n_num, SEARCH_ALPHA)
        p_den = bounds.upper(k_den, n_den, SEARCH_ALPHA)
        k_num, k_den, n_num, n_den = p_num * n_target, p_den * n_target, n_target, n_target
    lo, hi = bounds.lower(k_num, n_num, alpha), bounds.upper(k_den, n_den, alpha)
    with np.errstate(divide="ignore"):
        return np.log(lo) - np.log(hi)


@dataclass
class Found:
    """The best event of a search: `direction` "a" when it bounds P_a(E) / P_b(E), "b" the reverse;
    `score` its conservative_log_ratio; the search counts k_a, k_b out of n_a, n_b draws."""

    event: Event
    direction: str
    score: float
    k_a: int
    k_b: int
    n_a: int
    n_b: int


# ---------------------------------------------------------------------------------------------- histogram

def histogram_counts(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(keys, counts, rows) of the distinct rows of one batch: what `_Histogram.merge` adds."""
    keys = row_keys(x)
    uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    return uniq, np.bincount(inv.ravel(), minlength=len(uniq)), x[first]


class _Histogram:
    """Counts of each distinct row under a and b, accumulated batch by batch."""

    def __init__(self):
        self.keys = np.zeros(0, dtype=np.uint64)
        self.rows = np.zeros((0, 0))
        self.counts = np.zeros((0, 2), dtype=np.int64)
        self.n = [0, 0]

    def reduce(self, x: np.ndarray):
        return histogram_counts(x)

    def add(self, x: np.ndarray, side: int) -> None:
        self.merge(histogram_counts(x), side, len(x))

    def merge(self, reduced, side: int, n: int) -> None:
        uniq, c, rows = reduced
        if not len(self.keys):
            self.rows = np.zeros((0, rows.shape[1]))
        allkeys = np.concatenate([self.keys, uniq])
        merged, idx, inv2 = np.unique(allkeys, return_index=True, return_inverse=True)
        counts = np.zeros((len(merged), 2), dtype=np.int64)
        np.add.at(counts, inv2[:len(self.keys)], self.counts)
        counts[inv2[len(self.keys):], side] += c
        allrows = np.concatenate([self.rows, rows])
        self.keys, self.rows, self.counts = merged, allrows[idx], counts
        self.n[side] += n

    def best(self, alpha: float, n_target: int | None) -> Found | None:
        """The outputs sorted by a shrunk log ratio (the ratio of the counts each plus one half,
        then pulled towards 0 by one standard error, so that a rare output's noisy ratio does not
        jump the queue), the best prefix by the projected score."""
        best = None
        for direction, (num, den) in (("a", (0, 1)), ("b", (1, 0))):
            cn, cd = self.counts[:, num], self.counts[:, den]
            pn, pd = (cn + 0.5) / (self.n[num] + 1.0), (cd + 0.5) / (self.n[den] + 1.0)
            shrunk = np.log(pn / pd) - np.sqrt(1.0 / (cn + 0.5) + 1.0 / (cd + 0.5))
            order = np.lexsort((-cn, -shrunk))
            order = order[cn[order] > 0]
            if not len(order):
                continue
            kn, kd = np.cumsum(cn[order]), np.cumsum(cd[order])
            s = conservative_log_ratio(kn, self.n[num], kd, self.n[den], alpha, n_target)
            i = int(np.argmax(s))
            if best is None or s[i] > best.score:
                ka, kb = (kn[i], kd[i]) if direction == "a" else (kd[i], kn[i])
                best = Found(RowSet(self.rows[order[:i + 1]]), direction, float(s[i]), int(ka), int(kb),
                             self.n[0], self.n[1])
        return best


# ---------------------------------------------------------------------------------------------- classifier

def logistic_fit(x: np.ndarray, y: np.ndarray, l2: float = 1e-3) -> tuple[np.ndarray, float]:
    """L2-regularised logistic regression of the 0/1 labels y on x (n, p), by L-BFGS: (weights, bias)
    minimising mean log-loss + l2/2 |w|^2 (the bias not penalised)."""
    n, p = x.shape
    t = 2.0 * y - 1.0

    def loss(theta):
        w, b = theta[:p], theta[p]
        z = t * (x @ w + b)
        val = np.mean(np.logaddexp(0.0, -z)) + 0.5 * l2 * w @ w
        g = -t * np.exp(-np.logaddexp(0.0, z)) / n  # d/ds of the loss per row
        return val, np.concatenate([x.T @ g + l2 * w, [g.sum()]])

    res = minimize(loss, np.zeros(p + 1), jac=True, method="L-BFGS-B", options={"maxiter": 300})
    return res.x[:p], float(res.x[p])


@dataclass
class Scorer:
    """The trained logistic score: picklable (a worker scores its own batches)."""

    features: Features
    weights: np.ndarray
    bias: float

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return self.features(x) @ self.weights + self.bias


class _Classifier:
    """The logistic score trained on the first batch; scores of the later batches kept per side."""

    def __init__(self, a: np.ndarray, b: np.ndarray):
        x = np.concatenate([a, b])
        features = Features.fit(x)
        f = features(x)
        y = np.concatenate([np.ones(len(a)), np.zeros(len(b))])
        weights, bias = logistic_fit(f, y, l2=1e-3 / max(1.0, len(x) / 2e5))
        self.scorer = Scorer(features, weights, bias)
        self.features, self.weights, self.bias = features, weights, bias
        self.scores: list[list[np.ndarray]] = [[], []]

    def reduce(self, x: np.ndarray):
        return self.scorer(x)

    def add(self, x: np.ndarray, side: int) -> None:
        self.scores[side].append(self.scorer(x))

    def merge(self, reduced, side: int, n: int) -> None:
        self.scores[side].append(reduced)

    def best(self, alpha: float, n_target: int | None) -> Found | None:
        sa, sb = (np.sort(np.concatenate(s)) if s else np.zeros(0) for s in self.scores)
        if not len(sa) or not len(sb):
            return None
        both = np.concatenate([sa, sb])
        cand = np.unique(both)
        if len(cand) > CANDIDATES:
            cand = np.unique(np.quantile(both, quantile_grid(len(both))))
        ge_a = len(sa) - np.searchsorted(sa, cand, "left")
        ge_b = len(sb) - np.searchsorted(sb, cand, "left")
        le_a = np.searchsorted(sa, cand, "right")
        le_b = np.searchsorted(sb, cand, "right")
        best = None
        for direction, above, kn, kd, nn, nd in (("a", True, ge_a, ge_b, len(sa), len(sb)),
                                                 ("b", False, le_b, le_a, len(sb), len(sa)),
                                                 ("b", True, ge_b, ge_a, len(sb), len(sa)),
                                                 ("a", False, le_a, le_b, len(sa), len(sb))):
            s = conservative_log_ratio(kn, nn, kd, nd, alpha, n_target)
            i = int(np.argmax(s))
            if best is None or s[i] > best.score:
                ka, kb = (kn[i], kd[i]) if direction == "a" else (kd[i], kn[i])
                best = Found(Threshold(self.features, self.weights, self.bias, float(cand[i]), above), direction,
                             float(s[i]), int(ka), int(kb), len(sa), len(sb))
        return best


def quantile_grid(n: int) -> np.ndarray:
    """The probabilities of the candidate thresholds: even in the middle, geometric towards both
    tails (down to 1/n), CANDIDATES at most."""
    tail = np.geomspace(1.0 / max(n, 2), 0.05, CANDIDATES // 4)
    return np.unique(np.concatenate([tail, np.linspace(0, 1, CANDIDATES // 2), 1 - tail]))


# ---------------------------------------------------------------------------------------------- search

def batch_rows(d: int, limit: int = 1_000_000) -> int:
    """Rows per batch so that a batch holds at most about `limit` floats (d per row)."""
    return max(1_000, limit // max(d, 1))


class Search:
    """The event search fed batch by batch: the first batch of each side decides the families
    (and trains the classifier, whose batch then does not count for the threshold); `best()`
    returns the best event found so far. Discrete outputs get the histogram; when they have more
    than BOTH_DISTINCT distinct rows (many outputs, each rare: the histogram's ratios are noisy)
    the classifier too, and the better search score wins. `reduce(batch)` is the picklable part
    a worker computes, `merge` adds it (in batch order: the same result for any number of
    workers)."""

    def __init__(self, first_a: np.ndarray, first_b: np.ndarray):
        rows = np.unique(row_keys(np.concatenate([first_a, first_b])))
        self.families: list = []
        if len(rows) <= min(MAX_DISTINCT, REPEATS * (len(first_a) + len(first_b))):
            hist = _Histogram()
            hist.add(first_a, 0)
            hist.add(first_b, 1)
            self.families.append(hist)
        if not self.families or len(rows) > BOTH_DISTINCT:
            self.families.append(_Classifier(first_a, first_b))

    @property
    def family(self):
        return self.families[0]

    @property
    def discrete(self) -> bool:
        return isinstance(self.families[0], _Histogram)

    @property
    def reducer(self) -> Reducer:
        return Reducer([f.scorer if isinstance(f, _Classifier) else None for f in self.families])

    def add(self, x: np.ndarray, side: int) -> None:
        self.merge(self.reducer(x), side, len(x))

    def merge(self, reduced, side: int, n: int) -> None:
        for f, r in zip(self.families, reduced):
            f.merge(r, side, n)

    def best(self, alpha: float, n_target: int | None = None) -> Found | None:
        found = [f.best(alpha, n_target) for f in self.families]
        found = [f for f in found if f is not None]
        return max(found, key=lambda f: f.score) if found else None


@dataclass
class Reducer:
    """What a worker computes of a batch for the search: per family, the histogram counts (None)
    or the classifier's scores."""

    scorers: list

    def __call__(self, x: np.ndarray) -> list:
        return [histogram_counts(x) if s is None else s(x) for s in self.scorers]


def find_event(a: np.ndarray, b: np.ndarray, *, alpha: float = 0.05, n_target: int | None = None) -> Found | None:
    """The best event distinguishing the outputs `a` (n, d) from `b` (m, d) held in memory: the
    first TRAIN_ROWS rows of each (at most half) decide the family and train the classifier."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    first = min(TRAIN_ROWS, len(a) // 2, len(b) // 2)
    search = Search(a[:first], b[:first])
    for lo in range(first, max(len(a), len(b)), batch_rows(a.shape[1])):
        hi = lo + batch_rows(a.shape[1])
        if lo < len(a):
            search.add(a[lo:hi], 0)
        if lo < len(b):
            search.add(b[lo:hi], 1)
    return search.best(alpha, n_target)
