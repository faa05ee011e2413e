"""The mixture of Laplace kernels Σ_s w_s e^{-|y - q_s|/b} in log space, the home of its evaluations
(004 Lemma 1; DESIGN §2.1): at the levels and both tails (`laplace_sums`; summed, `laplace_mixtures`:
`Laplace.log_mixtures`),
at any y for equal weights (`log_mixture`: the sampling engine's draws, DESIGN §2.3) or for given
weights (`weighted_log_mixture`: witness curves). The information integrals' level-to-level
recursion is `information._near_sums`. Each sums in its own order (offsets from the extreme level;
absolute q/b; every term directly; gaps level to level), so one computed by another's algorithm
moves the reports' numbers in their last digits (measured for issue #26): they stay apart."""

from __future__ import annotations

import math

import numpy as np
from scipy.signal import lfilter
from scipy.special import logsumexp


def laplace_sums(logw: np.ndarray, q: np.ndarray, b: float) -> tuple[np.ndarray, ...]:
    """For increasing levels q (m,) and log-weights logw (T, m), in log space: left[:, k] =
    log Σ_{s ≤ k} w_s e^{-(q_k - q_s)/b}, right[:, k] = log Σ_{s > k} w_s e^{-(q_s - q_k)/b} (-inf at
    k = m - 1), plus = log Σ_s w_s e^{(q_s - q_max)/b} and minus = log Σ_s w_s e^{(q_min - q_s)/b}.
    Running log-sums, O(T·m), absolute error about 1e-16 · (max|log w| + (q_max - q_min)/b); on equally
    spaced levels whose weights lie within a safe range, the same sums by recursions in linear space
    (`_recursive_sums`, relative error about 1e-16 · m).

    Parameters
    ----------
    logw : numpy.ndarray
        Log-weights (T, m).
    q : numpy.ndarray
        The levels (m,), increasing.
    b : float
        The Laplace scale.

    Returns
    -------
    left, right : numpy.ndarray
        The log-sums (T, m) up to and after each level.
    plus, minus : numpy.ndarray
        The log-sums (T,) of the +inf and -inf tails.
    """
    return _laplace_sums(logw, q, b, _recursive_rows(logw, q, b))


def laplace_mixtures(logw: np.ndarray, q: np.ndarray, b: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """log Σ_s w_s e^{-|q_k - q_s|/b} at every level k (T, m), and `laplace_sums`' plus and minus (T,)
    (`Laplace.log_mixtures`): the left and right sums added, with logaddexp, or, on rows whose weights span more
    than _RANGE nats (`_recursive_rows`' exponent above 0: a 5,000-day chain's laws), in linear space before the
    one log (`_wide_mixtures`)."""
    shift = _recursive_rows(logw, q, b)
    wide = shift > 0  # NaN (a row the recursions may not take) is not
    if not wide.any():
        left, right, plus, minus = _laplace_sums(logw, q, b, shift)
        return np.logaddexp(left, right), plus, minus
    out, plus, minus = np.empty_like(logw), np.empty(len(logw)), np.empty(len(logw))
    out[wide], plus[wide], minus[wide] = _wide_mixtures(logw[wide], q, b, shift[wide])
    if not wide.all():
        rest = ~wide
        left, right, plus[rest], minus[rest] = _laplace_sums(logw[rest], q, b, shift[rest])
        out[rest] = np.logaddexp(left, right)
    return out, plus, minus


def _laplace_sums(logw: np.ndarray, q: np.ndarray, b: float, shift: np.ndarray) -> tuple[np.ndarray, ...]:
    """`laplace_sums` given `_recursive_rows`' exponents."""
    up, down = (q - q[-1]) / b, (q[0] - q) / b  # both <= 0
    fast = ~np.isnan(shift)
    if fast.all():
        left, right = _recursive_sums(logw, q, b, shift)
    else:
        left, right = np.empty_like(logw), np.empty_like(logw)
        if fast.any():
            left[fast], right[fast] = _recursive_sums(logw[fast], q, b, shift[fast])
        slow = ~fast
        rows = logw[slow]
        left[slow] = np.logaddexp.accumulate(rows + up, axis=1) - up
        after = np.logaddexp.accumulate((rows + down)[:, ::-1], axis=1)[:, ::-1]
        right[slow] = np.concatenate([after[:, 1:], np.full((len(after), 1), -np.inf)], axis=1) - down
    # plus is the left sum at the last level, minus the first level's weight and the right sum there
    return left, right, left[:, -1].copy(), np.logaddexp(logw[:, 0], right[:, 0])


_RANGE = 600.0  # nats below a row's largest weight that the linear recursions accept at scale 1
_DECAY = 100.0  # the most nats the recursions may decay by across levels of weight zero, at scale 1
_EXP = 700.0  # nats: the largest exponent, either way, of a widely scaled row's weights and sums


def _recursive_rows(logw: np.ndarray, q: np.ndarray, b: float) -> np.ndarray:
    """For each row, the exponent its largest weight takes in `_recursive_sums`, NaN for a row that they may not
    take (each row decided alone, so a row's sums do not depend on the rows beside it). Equally spaced levels,
    and either every positive weight within _RANGE nats of its row's largest and at most _DECAY nats of decay
    from any level to the nearest positive weight on either side (exponent 0: every sum with a term is at least
    e^{-RANGE - DECAY} > 1e-304 of the scale), or, past _RANGE, the row's span (largest to smallest positive
    weight) and that decay adding up to at most 2 _EXP - log m (exponent _EXP - log m: every sum of its m terms
    is at most e^_EXP, and every sum with a term at least e^-_EXP, 1e-304), when also one level's decay
    gap/b is at most _DECAY: a wide row's neighbour terms may dominate a level's own, so r = e^{-gap/b} must be
    a normal double (past about 708 nats it is subnormal, past 745 zero, and the neighbour's term would be
    lost). Nothing underflows, and all terms are positive, so nothing cancels."""
    rows = np.full(len(logw), np.nan)
    if len(q) < 2:
        return rows
    gap = q[1] - q[0]
    if not 0 < gap or np.any(np.diff(q) != gap):
        return rows
    top = logw.max(axis=1, keepdims=True)
    finite = logw > -np.inf
    with np.errstate(invalid="ignore"):
        narrow = ~np.any(finite & (logw < top - _RANGE), axis=1)
    decay = _farthest(finite) * gap / b
    rows[narrow & np.isfinite(top[:, 0]) & (decay <= _DECAY)] = 0.0
    if narrow.all():
        return rows
    scale = _EXP - math.log(logw.shape[1])
    with np.errstate(invalid="ignore"):
        span = top[:, 0] - np.where(finite, logw, np.inf).min(axis=1)
        wide = ~narrow & np.isfinite(top[:, 0]) & (span + decay <= scale + _EXP) & (gap / b <= _DECAY)
    rows[wide] = scale
    return rows


def _farthest(finite: np.ndarray) -> np.ndarray:
    """For each row of the mask `finite`, the most levels from any level to the nearest positive weight at or
    before it (for the left sums, once there is one) or after it (for the right sums, while there is one):
    the longer of the runs of zeros at the ends when there are none inside."""
    m = finite.shape[1]
    first = np.argmax(finite, axis=1)
    last = m - 1 - np.argmax(finite[:, ::-1], axis=1)
    if np.array_equal(finite.sum(axis=1), last - first + 1):
        return np.maximum(first, m - 1 - last)
    at = np.arange(m)
    before = np.maximum.accumulate(np.where(finite, at, -1), axis=1)
    after = np.minimum.accumulate(np.where(finite, at, m)[:, ::-1], axis=1)[:, ::-1][:, 1:]
    left = np.where(before >= 0, at - before, 0).max(axis=1)
    right = np.where(after < m, after - at[:-1], 0).max(axis=1, initial=0)
    return np.maximum(left, right)


def _recursive_sums(logw: np.ndarray, q: np.ndarray, b: float, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`laplace_sums`'s left and right by the first-order recursions A_k = r A_{k-1} + w_k in linear space
    (r = e^{-gap/b}, one scipy.signal.lfilter per side), each row's largest weight scaled to e^shift, on rows that
    `_recursive_rows` accepts (and its `shift`s)."""
    top = logw.max(axis=1, keepdims=True)
    shift = shift[:, None]
    x = np.exp(logw - top + shift)
    low = top - shift
    r = math.exp(-(q[1] - q[0]) / b)
    with np.errstate(divide="ignore"):
        left = np.log(lfilter([1.0], [1.0, -r], x, axis=1)) + low
        after = lfilter([1.0], [1.0, -r], x[:, ::-1], axis=1)[:, ::-1]  # Σ_{s >= k} w_s r^{s - k}
        scaled = r * after[:, 1:]  # the right sums' r, in log space where the product leaves the normal doubles
        near = np.where(scaled >= np.finfo(float).tiny, np.log(scaled), np.log(after[:, 1:]) - (q[1] - q[0]) / b)
        right = np.concatenate([near, np.full((len(x), 1), -np.inf)], axis=1) + low
    return left, right


def _wide_mixtures(logw: np.ndarray, q: np.ndarray, b: float,
                   shift: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`laplace_mixtures` on rows that `_recursive_rows` scales by `shift`: the recursions' left sums and r times
    the right ones' (all positive and, by its rule, within e^±_EXP) added in linear space, one log."""
    top = logw.max(axis=1, keepdims=True)
    low = top - shift[:, None]
    x = np.exp(logw - low)
    r = math.exp(-(q[1] - q[0]) / b)
    sums = lfilter([1.0], [1.0, -r], x, axis=1)  # Σ_{s <= k} w_s r^{k - s}
    after = lfilter([1.0], [1.0, -r], x[:, ::-1], axis=1)[:, ::-1]  # Σ_{s >= k} w_s r^{s - k}
    sums[:, :-1] += r * after[:, 1:]
    with np.errstate(divide="ignore"):
        out = np.log(sums) + low
        return out, out[:, -1].copy(), np.log(after[:, 0]) + low[:, 0]


def log_mixture(q: np.ndarray, y: np.ndarray, b: float) -> np.ndarray:
    """log mean_s k(y, q_s) for every y, where k(y, q) = exp(-|y - q|/b) for finite y,
    exp((q - y0)/b) at y = +inf and exp((y0 - q)/b) at y = -inf (y0 = 0: the factor that
    depends on y alone cancels in every ratio of two mixtures at the same y)."""
    q = np.sort(np.asarray(q, dtype=float).ravel())
    y = np.asarray(y, dtype=float)
    out = np.empty(y.shape)
    up, down = np.isposinf(y), np.isneginf(y)
    out[up] = logsumexp(q / b) - math.log(q.size)
    out[down] = logsumexp(-q / b) - math.log(q.size)
    fin = ~(up | down)
    yf = y[fin]
    # left: sum_{q <= y} e^{(q - y)/b};  right: sum_{q > y} e^{(y - q)/b}
    cum_left = np.concatenate([[-np.inf], np.logaddexp.accumulate(q / b)])
    cum_right = np.concatenate([np.logaddexp.accumulate((-q / b)[::-1])[::-1], [-np.inf]])
    idx = np.searchsorted(q, yf, side="right")
    with np.errstate(invalid="ignore"):
        left = cum_left[idx] - yf / b
        right = cum_right[idx] + yf / b
    out[fin] = np.logaddexp(left, right) - math.log(q.size)
    return out


def weighted_log_mixture(logw: np.ndarray, q: np.ndarray, y: np.ndarray, b: float) -> np.ndarray:
    """log sum_r w_r exp(-|y - q_r| / b) for every y (the common 1/(2b) cancels in ratios)."""
    values, inverse = np.unique(q, return_inverse=True)
    merged = np.full(values.size, -np.inf)
    np.logaddexp.at(merged, inverse, logw)
    return logsumexp(merged[None, :] - np.abs(y[:, None] - values[None, :]) / b, axis=1)
