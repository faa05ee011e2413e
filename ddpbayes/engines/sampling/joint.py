"""Mechanisms with a joint output law under the sampling engine (issue #42.4; DESIGN §2.3, §5.2).

Report-noisy-max, the exponential mechanism, sparse vector, RAPPOR and the truncated geometric
mechanism release an output y of a finite output space with law p(y | a) over the whole answer
vector a. As for Laplace noise (`estimate`), L(y | t, x_K) = mean over draws of p(y | a_s)
(Rao–Blackwellised: a summed draw contributes Σ_c P(c | draw) p(y | a_sc)), and the sup over y is
a maximum over the output space of the answers the two events' draws give (`output_space`: for
any weights the sup is attained there), so it is exact for the estimated laws. The witness is
chosen on the choosing runs and bounded on fresh runs with `estimate.bound` (the same
construction: first half of the bounding chains estimates, the larger of the two halves'
standard errors), the kernel of a draw being its exact p(y | a).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ddpbayes.engines.sampling.estimate import Z95, Draws, Peak, ratio_at
from ddpbayes.engines.sampling.mixture import same_at_every_draw
from ddpbayes.limits import check_states
from ddpbayes.mechanisms.base import Mechanism
from ddpbayes.numerics import logsumexp


@dataclass(frozen=True)
class JointDraws:
    """One event's answer vectors (`Draws`: q (chains, draws, K), or summed (chains, draws, C, K))
    read through a joint law: `log_kernels(y)` is each draw's log p(y | its answers)."""

    draws: Draws
    mechanism: Mechanism

    @property
    def chains(self) -> int:
        return self.draws.chains

    @property
    def groups(self) -> int:
        """Chains per independent run (`Draws.groups`: > 1 for SMC runs)."""
        return self.draws.groups

    def part(self, chains: slice) -> JointDraws:
        return JointDraws(self.draws.part(chains), self.mechanism)

    @cached_property
    def _answers(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct answer vectors (R, K) and each draw's (and configuration's) row in them."""
        q = self.draws.q
        if same_at_every_draw(q):  # the configurations' answers, once
            answers, row = np.unique(q[0, 0], axis=0, return_inverse=True)
            return answers, np.broadcast_to(np.ravel(row), q.shape[:-1])
        answers, row = np.unique(q.reshape(-1, q.shape[-1]), axis=0, return_inverse=True)
        return answers, np.ravel(row).reshape(q.shape[:-1])

    def log_kernels(self, y: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
        """log p(y | answers) of each draw (chains, draws), averaged over a summed draw's law (`b`
        is unused: the law carries its own scale)."""
        answers, row = self._answers
        table = self.mechanism.log_prob(np.asarray(y, dtype=float).reshape(1, -1), answers)[0]
        z = table[row]
        if self.draws.logw is None:
            return z
        with np.errstate(invalid="ignore"):
            return logsumexp(np.where(np.isfinite(self.draws.logw), z + self.draws.logw, -math.inf), axis=2)


def choose_joint(groups: list[list[Draws]], mechanism: Mechanism) -> tuple[Peak, tuple[float, float]]:
    """The witness (x_K, t, t', y) maximising the estimated log-ratio over every x_K group, ordered
    pair and output of the group's output space, and (plug-in, plug-in + 1.645 its standard error)."""
    best = Peak(0.0, {}, math.nan, math.nan, None)
    for group in groups:
        laws = [d.mixture() for d in group]
        answers = np.unique(np.concatenate([points for points, _ in laws]), axis=0)
        check_states(mechanism.output_count(answers) * len(answers), f"the {mechanism.kind} law over the draws' "
                     "answers", "cells")
        outputs = mechanism.output_space(answers)
        table = mechanism.log_prob(outputs, answers)  # (G, R)
        logl = np.array([_log_law(table, answers, points, logw) for points, logw in laws])  # (events, G)
        for a in range(len(group)):
            for c in range(len(group)):
                if a == c:
                    continue
                with np.errstate(invalid="ignore"):
                    r = logl[a] - logl[c]
                r[np.isnan(r)] = -math.inf  # an output neither event gives
                g = int(np.argmax(r))
                if r[g] > best.value or math.isnan(best.t):
                    best = Peak(float(r[g]), group[a].known, group[a].t, group[c].t, tuple(map(float, outputs[g])))
    if math.isnan(best.t):
        return best, (0.0, 0.0)
    if not math.isfinite(best.value):
        return best, (best.value, best.value)
    first, second = (_find(groups, best.known, t) for t in (best.t, best.t_prime))
    _, se = ratio_at(JointDraws(first, mechanism), JointDraws(second, mechanism), best.y, np.ones(1))
    return best, (max(best.value, 0.0), max(best.value, 0.0) + Z95 * se)


def _log_law(table: np.ndarray, answers: np.ndarray, points: np.ndarray, logw: np.ndarray) -> np.ndarray:
    """log L(y) = log Σ_r w_r p(y | a_r) at every output (G,), for one event's law (points, logw)."""
    rows = _rows(answers, points)
    with np.errstate(invalid="ignore"):
        return logsumexp(table[:, rows] + logw[None, :], axis=1)


def _rows(answers: np.ndarray, points: np.ndarray) -> np.ndarray:
    """The row of each point in the sorted distinct `answers` (every point is one of them)."""
    index = {tuple(a): r for r, a in enumerate(answers.tolist())}
    return np.array([index[tuple(p)] for p in points.tolist()], dtype=np.int64)


def _find(groups: list[list[Draws]], known: dict[int, float], t: float) -> Draws:
    return next(d for group in groups for d in group if d.known == known and d.t == t)
