"""The mixture of Laplace kernels Σ_s w_s e^{-|y - q_s|/b}, in log space: the one implementation
every engine and integral evaluates it with (004 Lemma 1; DESIGN §2.1)."""

from __future__ import annotations

import numpy as np


def laplace_sums(logw: np.ndarray, q: np.ndarray, b: float) -> tuple[np.ndarray, ...]:
    """For increasing levels q (m,) and log-weights logw (T, m), in log space: left[:, k] =
    log Σ_{s ≤ k} w_s e^{-(q_k - q_s)/b}, right[:, k] = log Σ_{s > k} w_s e^{-(q_s - q_k)/b} (-inf at
    k = m - 1), plus = log Σ_s w_s e^{(q_s - q_max)/b} and minus = log Σ_s w_s e^{(q_min - q_s)/b}.
    Running log-sums, O(T·m), absolute error about 1e-16 · (max|log w| + (q_max - q_min)/b)."""
    up, down = (q - q[-1]) / b, (q[0] - q) / b  # both <= 0
    left = np.logaddexp.accumulate(logw + up, axis=1) - up
    after = np.logaddexp.accumulate((logw + down)[:, ::-1], axis=1)[:, ::-1]
    right = np.concatenate([after[:, 1:], np.full((len(logw), 1), -np.inf)], axis=1) - down
    return left, right, np.logaddexp.reduce(logw + up, axis=1), np.logaddexp.reduce(logw + down, axis=1)
