"""PyMC's Slice step run for every chain of a run at once, on the batched summed log-density
(issue #42.3, DESIGN §2.3).

The univariate slice sampler with stepping out and shrinkage (Neal 2003, §4), one coordinate at
a time, its width tuned during tuning as PyMC's `Slice` tunes it (the running mean of the final
intervals' widths, per chain). Where PyMC calls a compiled log-density per point (~6 calls per
step and chain, ~170,000 in the 3-state chain's audit, and a compilation of its own), here each
stage of the procedure is one call of `Conditioned.logp_batch` for every chain still in it:
both ends of the intervals stepped out together, then the shrinkage proposals. The steps read
only the log-density (each chain's state in Python floats, NumPy only to build each call's
points: small-array NumPy operations cost more than the arithmetic); the kept draws' tuples and
summed laws are evaluated once after the run, in a few large calls (the same values, bit for bit).

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

STEPS_AHEAD = 2  # positions per interval end and call when stepping out (nearly every end stops within two)
PROPOSALS_AHEAD = 4  # shrinkage proposals evaluated per call (the later ones in case the earlier are rejected)


class BatchedSlice:
    """Slice sampling of a summed conditioned model's free (continuous) variables, all chains in
    lockstep."""

    def __init__(self, cond: Conditioned, width: float):
        self.cond = cond
        self.width = width
        self.values = cond.model.value_vars
        self.shapes = [tuple(int(d) for d in v.type.shape) for v in self.values]
        self.dtypes = [v.dtype for v in self.values]
        self.cuts = np.cumsum([math.prod(s) for s in self.shapes])[:-1]

    def run(self, starts: list[dict], rngs: list[np.random.Generator], tune: int, draws: int
            ) -> tuple[np.ndarray, np.ndarray]:
        """Each chain's tuples (chains, draws, n) and summed law (chains, draws, C) after `tune`
        tuning steps (the width adapted only while tuning, as PyMC's `tune` flag does). The steps
        evaluate the log-density alone; the draws' tuples and laws are evaluated once at the end."""
        q = [np.concatenate([np.ravel(np.asarray(p[v.name], dtype=float)) for v in self.values]).tolist()
             for p in starts]
        kept = np.empty((len(q), draws, len(q[0])))
        with rejected_parameters():
            lp = self._logp(np.asarray(q))
            w = [[self.width] * len(q[0]) for _ in q]
            for step in range(tune + draws):
                tuned = step if step < tune else None
                for i in range(len(q[0])):
                    self._update(q, lp, w, i, rngs, tuned)
                if tuned is None:
                    kept[:, step - tune] = q
            return self._laws(kept)

    def _update(self, q: list[list[float]], lp: list[float], w: list[list[float]], i: int, rngs,
                tuned: int | None) -> None:
        """One slice step of coordinate i for every chain, in place (PyMC's `Slice.astep`)."""
        y, left, right, width = [], [], [], []
        for c, rng in enumerate(rngs):
            y.append(lp[c] - rng.standard_exponential())
            wi = w[c][i]
            left.append(q[c][i] - rng.random() * wi)  # uniform(): the same draw
            right.append(left[c] + wi)
            width.append(wi)
        self._step_out(q, y, left, right, width, i)
        origin = [row[i] for row in q]
        pending = list(range(len(q)))
        while pending:
            draws = [rngs[c].random(PROPOSALS_AHEAD).tolist() for c in pending]
            proposals, brackets = self._proposals(pending, origin, left, right, draws)
            lp_at = self._logp(self._points(q, pending, PROPOSALS_AHEAD, proposals, i))
            rejected = []
            for row, c in enumerate(pending):
                # PyMC's comparison `y > logp` rejects (a NaN log-density is accepted, as there)
                at = row * PROPOSALS_AHEAD
                k = next((j for j in range(PROPOSALS_AHEAD) if not y[c] > lp_at[at + j]), None)
                if k is None:  # all rejected: the bracket shrunk by each, the draws used
                    left[c], right[c] = brackets[row][-1]
                    rejected.append(c)
                    continue
                if k < PROPOSALS_AHEAD - 1:  # PyMC draws only k + 1 (the first accepted): the others are given back
                    rngs[c].bit_generator.advance(k + 1 - PROPOSALS_AHEAD)
                left[c], right[c] = brackets[row][k]
                q[c][i], lp[c] = proposals[at + k], lp_at[at + k]
            pending = rejected
        if tuned is not None:
            for c, row in enumerate(w):
                row[i] = row[i] * (tuned / (tuned + 1)) + (right[c] - left[c]) / (tuned + 1)

    @staticmethod
    def _proposals(pending: list[int], origin: list[float], left: list[float], right: list[float],
                   draws: list[list[float]]) -> tuple[list[float], list[list[tuple[float, float]]]]:
        """PROPOSALS_AHEAD shrinkage proposals per chain (flat, chain by chain), each drawn from the
        bracket the ones before would leave if all were rejected (the bracket shrinks to a rejected
        proposal on its side of the current value, whatever its density), and per chain the bracket
        each was drawn from, then the one left after all. `draws`: each pending chain's uniforms on
        [0, 1); a + (b - a) u is numpy's `uniform(a, b)` from the same draw, bit for bit (one call
        for the four: `uniform(a, b)` costs ~3x `random()` in argument handling)."""
        proposals, brackets = [], []
        for c, u in zip(pending, draws):
            a, b, at = left[c], right[c], origin[c]
            drawn_from = []
            for uj in u:
                drawn_from.append((a, b))
                p = a + (b - a) * uj
                proposals.append(p)
                if p > at:
                    b = p
                elif p < at:
                    a = p
            drawn_from.append((a, b))
            brackets.append(drawn_from)
        return proposals, brackets

    def _step_out(self, q: list[list[float]], y: list[float], left: list[float], right: list[float],
                  w: list[float], i: int) -> None:
        """Both ends of every chain's interval moved out by w, in place, while the density there is
        at least the chain's level y: STEPS_AHEAD positions of every end in one call (an end stops
        at the first one outside, as stepping out one at a time does)."""
        ends = [(c, left, -w[c]) for c in range(len(q))] + [(c, right, w[c]) for c in range(len(q))]
        while ends:
            ahead = []
            for c, side, by in ends:  # PyMC's repeated `ql[i] -= wi`, rounding included
                position = side[c]
                for _ in range(STEPS_AHEAD):
                    ahead.append(position)
                    position = position + by
            lp_at = self._logp(self._points(q, [c for c, _, _ in ends], STEPS_AHEAD, ahead, i))
            still = []
            for row, (c, side, by) in enumerate(ends):
                at = row * STEPS_AHEAD
                out = next((j for j in range(STEPS_AHEAD) if not y[c] <= lp_at[at + j]), None)
                if out is None:
                    side[c] = ahead[at + STEPS_AHEAD - 1] + by
                    still.append((c, side, by))
                else:
                    side[c] = ahead[at + out]
            ends = still

    @staticmethod
    def _points(q: list[list[float]], chains: list[int], each: int, positions: list[float], i: int) -> np.ndarray:
        """Points (S, d): `each` consecutive points per chain of `chains`, at the chain's state with
        coordinate i at `positions` (one coordinate: the positions alone)."""
        if len(q[0]) == 1:
            return np.array(positions)[:, None]
        at = np.repeat(np.asarray([q[c] for c in chains]), each, axis=0)
        at[:, i] = positions
        return at

    def _laws(self, kept: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The tuples (chains, draws, n) and summed laws (chains, draws, C) at the kept draws, in
        calls of at most `Conditioned.batch_points` points (as `Conditioned.evaluate`)."""
        flat = kept.reshape(-1, kept.shape[-1])
        size = self.cond.batch_points
        parts = [self._evaluate(flat[start:start + size]) for start in range(0, len(flat), size)]
        x, logw = (np.concatenate([p[k] for p in parts]) for k in (1, 2))
        return x.reshape(*kept.shape[:2], -1), logw.reshape(*kept.shape[:2], -1)

    def _logp(self, q: np.ndarray) -> list[float]:
        return self.cond.logp_batch(self._values(q))

    def _evaluate(self, q: np.ndarray) -> list[np.ndarray]:
        return self.cond.evaluate_batch(self._values(q))

    def _values(self, q: np.ndarray) -> list[np.ndarray]:
        """Points (S, d) as the value variables' arrays (S, *shape) of their dtypes."""
        parts = np.split(q, self.cuts, axis=1) if len(self.values) > 1 else [q]
        return [p.reshape(len(q), *s).astype(t, copy=False) for p, s, t in zip(parts, self.shapes, self.dtypes)]
