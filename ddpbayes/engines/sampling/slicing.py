"""PyMC's Slice step run for every chain of a run at once, on the batched summed log-density
(issue #42.3, DESIGN §2.3).

The univariate slice sampler with stepping out and shrinkage (Neal 2003, §4), one coordinate at
a time, its width tuned during tuning as PyMC's `Slice` tunes it (the running mean of the final
intervals' widths, per chain). Where PyMC calls a compiled log-density per point (~6 calls per
step and chain, ~170,000 in the 3-state chain's audit, and a compilation of its own), here each
stage of the procedure is one call of `Conditioned.evaluate_batch` for every chain still in it:
both ends of the intervals stepped out together, then the shrinkage proposals. The calls also
return the tuples and the summed law at the accepted points, so the draws are not evaluated again.

Each chain draws from its own generator in PyMC's order (the slice level's exponential, the
interval's offset, then each shrinkage proposal), so a chain's draws are those of PyMC's Slice
from the same start and generator (up to the last bits of the log-density: PyMC compiles it
separately), and do not depend on which other chains share the calls (each point is evaluated
alone: `batched.checks_per_point`).
"""

from __future__ import annotations

import math

import numpy as np

from ddpbayes.model.condition import Conditioned
from ddpbayes.model.contract import rejected_parameters

STEPS_AHEAD = 3  # interval ends evaluated per call when stepping out
PROPOSALS_AHEAD = 4  # shrinkage proposals evaluated per call (the later ones in case the earlier are rejected)


class BatchedSlice:
    """Slice sampling of a summed conditioned model's free (continuous) variables, all chains in
    lockstep."""

    def __init__(self, cond: Conditioned, width: float):
        self.cond = cond
        self.width = width
        self.values = cond.model.value_vars
        self.shapes = [tuple(int(d) for d in v.type.shape) for v in self.values]
        self.cuts = np.cumsum([math.prod(s) for s in self.shapes])[:-1]

    def run(self, starts: list[dict], rngs: list[np.random.Generator], tune: int, draws: int
            ) -> tuple[np.ndarray, np.ndarray]:
        """Each chain's tuples (chains, draws, n) and summed law (chains, draws, C) after `tune`
        tuning steps (the width adapted only while tuning, as PyMC's `tune` flag does)."""
        q = np.stack([np.concatenate([np.ravel(np.asarray(p[v.name], dtype=float)) for v in self.values])
                      for p in starts])
        lp, x, logw = (np.array(a) for a in self._evaluate(q))  # writable copies, updated per chain
        w = np.full(q.shape, self.width)
        xs, ws = [], []
        for step in range(tune + draws):
            tuning = step < tune
            for i in range(q.shape[1]):
                self._update(q, lp, x, logw, w, i, rngs, step if tuning else None)
            if not tuning:
                xs.append(x.copy())
                ws.append(logw.copy())
        return np.stack(xs, axis=1), np.stack(ws, axis=1)

    def _update(self, q, lp, x, logw, w, i: int, rngs, tuned: int | None) -> None:
        """One slice step of coordinate i for every chain, in place (PyMC's `Slice.astep`)."""
        chains = len(q)
        y = lp - np.array([rng.standard_exponential() for rng in rngs])
        left = q[:, i] - np.array([rng.uniform() for rng in rngs]) * w[:, i]
        right = left + w[:, i]
        left, right = np.split(self._step_out(q, y, np.concatenate([left, right]), w[:, i], i), 2)
        origin = q[:, i].copy()
        pending = np.arange(chains)
        while pending.size:
            states = [rngs[c].bit_generator.state for c in pending]
            proposals, brackets = self._proposals(pending, origin, left, right, rngs)
            at = np.repeat(q[pending], PROPOSALS_AHEAD, axis=0)
            at[:, i] = proposals.ravel()
            lp_at, x_at, logw_at = self._evaluate(at)
            # PyMC's comparison `y > logp` rejects (a NaN log-density is accepted, as there)
            took = ~(y[pending, None] > lp_at.reshape(pending.size, PROPOSALS_AHEAD))
            for row, c in enumerate(pending):
                if not took[row].any():  # all rejected: the bracket shrunk by each, the draws used
                    left[c], right[c] = brackets[row, -1]
                    continue
                k = int(np.argmax(took[row]))  # the first accepted, as proposing one at a time
                rngs[c].bit_generator.state = states[row]  # replay only the k + 1 draws PyMC makes
                for a, b in brackets[row, :k + 1]:
                    rngs[c].uniform(a, b)
                left[c], right[c] = brackets[row, k]
                at_k = row * PROPOSALS_AHEAD + k
                q[c, i], lp[c], x[c], logw[c] = proposals[row, k], lp_at[at_k], x_at[at_k], logw_at[at_k]
            pending = pending[~took.any(axis=1)]
        if tuned is not None:
            w[:, i] = w[:, i] * (tuned / (tuned + 1)) + (right - left) / (tuned + 1)

    @staticmethod
    def _proposals(pending, origin, left, right, rngs) -> tuple[np.ndarray, np.ndarray]:
        """PROPOSALS_AHEAD shrinkage proposals per chain, each drawn from the bracket the ones before
        would leave if all were rejected (the bracket shrinks to a rejected proposal on its side of
        the current value, whatever its density), and the bracket each was drawn from."""
        proposals = np.empty((pending.size, PROPOSALS_AHEAD))
        brackets = np.empty((pending.size, PROPOSALS_AHEAD + 1, 2))
        for row, c in enumerate(pending):
            a, b = left[c], right[c]
            for k in range(PROPOSALS_AHEAD):
                brackets[row, k] = a, b
                p = proposals[row, k] = rngs[c].uniform(a, b)
                if p > origin[c]:
                    b = p
                elif p < origin[c]:
                    a = p
            brackets[row, -1] = a, b
        return proposals, brackets

    def _step_out(self, q, y, ends: np.ndarray, w: np.ndarray, i: int) -> np.ndarray:
        """Both ends of every chain's interval (left ends, then right ends) moved out by w while the
        density there is at least the chain's level y: STEPS_AHEAD positions of every end in one call
        (an end stops at the first one outside, as stepping out one at a time does)."""
        chains = len(q)
        active = np.arange(2 * chains)
        by = np.concatenate([-w, w])
        while active.size:
            ahead = np.empty((active.size, STEPS_AHEAD))
            ahead[:, 0] = ends[active]
            for k in range(1, STEPS_AHEAD):  # PyMC's repeated `ql[i] -= wi`, rounding included
                ahead[:, k] = ahead[:, k - 1] + by[active]
            at = np.repeat(q[active % chains], STEPS_AHEAD, axis=0)
            at[:, i] = ahead.ravel()
            inside = y[active % chains, None] <= self._evaluate(at)[0].reshape(active.size, STEPS_AHEAD)
            moved = np.where(inside.all(axis=1), STEPS_AHEAD, np.argmin(inside, axis=1))
            ends[active] = np.where(moved == STEPS_AHEAD, ahead[:, -1] + by[active],
                                    ahead[np.arange(active.size), np.minimum(moved, STEPS_AHEAD - 1)])
            active = active[moved == STEPS_AHEAD]
        return ends

    def _evaluate(self, q: np.ndarray) -> list[np.ndarray]:
        parts = np.split(q, self.cuts, axis=1)
        values = [p.reshape(len(q), *s).astype(v.dtype, copy=False) for p, s, v in zip(parts, self.shapes, self.values)]
        with rejected_parameters():
            return self.cond.evaluate_batch(values)
