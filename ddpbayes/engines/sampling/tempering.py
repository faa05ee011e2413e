"""Sequential Monte Carlo across modes, vectorised over the particles (DESIGN §2.3, issue #42).

When a run's NUTS chains disagree (`runs.disagreement`: chains in different modes, e.g. a Gowalla
user's friends in different cities), the event is drawn again by SMC (Del Moral, Doucet & Jasra
2006; the stages of PyMC's `sample_smc`, after Ching & Chen 2007): particles start from a proper
reference q and move through π_β ∝ q^(1-β) π^β, β from 0 to 1, each stage choosing the next β so
that the importance weights e^{(β' - β)(log π - log q)} keep half the particles' effective sample
size, resampling (systematic) and mutating by Metropolis–Hastings steps invariant for π_β. Every
particle sees every mode at small β, and the mode weights are set by the reweighting, not by where
a chain started. π is the conditioned model's density (`ddp_joint`, with the summed discrete
variables inside it as a log-sum-exp); q is a Normal per unconstrained coordinate with the mean
and twice the spread of the prior draws (`Conditioned.prior_draws`): the prior, made proper and
Gaussian, since the conditioned model's free variables are Flat.

The log-density is compiled once per conditioned model as a function of a (particles, dim) matrix
(`vectorize_graph` of the single-point graph, its batched indexing rewritten by
`batched.unblock_indexing`), and the stages run in numpy over all particles at once (PyMC's
kernels call a compiled function once per particle). A mutation step is a cycle of two kernels,
each invariant for π_β: an independent proposal from a kernel density around the stage's particles
and the settled prior draws (a centre chosen uniformly among the particles or, as often, among the
settled draws, plus a Gaussian with the particles' covariance times s², s uniform over `KDE_SCALES`;
fixed during the stage, so Metropolis–Hastings with its density
ratio is invariant: it proposes in every mode the particles or the prior draws hold, and the
acceptance moves the modes' weights towards π_β's) and a random walk with the particles' covariance
scaled by a factor drawn per particle and step from `LADDER` (a mixture of invariant kernels,
chosen independently of the state: moves inside a narrow mode the Gaussian misses). Cycles repeat,
at least `MIN_STEPS` (`FINAL_STEPS` at β = 1, whose particles are the run's draws), until the
particles' correlation with their values at the stage's start, less what their own number adds to it
(`_forgotten`: r² - 1/n), is below `DECORRELATED` on 90% of the coordinates, at most `MAX_STEPS` per
stage (where no proposal crosses between modes the particles stay correlated with their start, and a
stage runs all `MAX_STEPS`). PyMC's rule, until
the correlation stops falling by 0.01, stopped at the minimum 4 cycles with the
resampled copies still in their ancestors' cities: a Gowalla ego network's events with the target at
the box's edge mixed worst (benchmarks/README, DESIGN §2.3). PyMC's IMH proposes from one Gaussian fitted
to the particles: on a Gowalla ego network it lands between cities, and a run kept the cities its
first stages found (R-hat across 8 runs of 200 particles 1.01–1.07 for users of 2 and 4 friends;
0.999–1.006 with the prior draws among the centres; the particles' own density alone, 1.05–1.25).

The prior draws are settled under the event before they are centres (`_settled`: SETTLE_STEPS
random-walk Metropolis steps at π from each, once per call of `run`, seeded by its seed): drawn from
the prior, they carry the coordinates the event constrains at their prior values. At a Gowalla edge
event (the target at the box's west wall, X_0 = 0; user 332) 93% of them scored under the particles'
5th percentile of log π, so the proposal was in effect the particles' own density, which proposes
where a run already is: its acceptance at β = 1 fell to 0.04–0.16, each run's share of a friend's
city stayed at its own level (0.035 to 0.305 over 8 runs) for 100 cycles, and R-hat across runs did
not fall with the particles. Half the proposal's centres are chosen among the settled draws whatever
the particles' number (`PRIOR_SHARE`; uniformly over all centres, their share fell from 56% at 200
particles to 24% at 800, and the proposal became the particles' own again: user 824, four friends,
X_0 = 0, 8 runs of 800, R-hat 1.0227 at that share, 1.0053 and 1.0066 at a half, seeds 1 and 2).
Any fixed centres keep the kernel exact (it is Metropolis–Hastings with
the true proposal density, and the centres are fixed before the stage's moves), so the settled
draws change how fast a run mixes, not what it targets.

A model's declared blocks (`DependenceModel.blocks`: a Gowalla member's two coordinates) add a third
kernel to each cycle, Metropolis-within-Gibbs with an independent block proposal (`_block_proposal`):
each particle's block b drawn uniformly, x'_b from the b-marginal q_b of the stage's independent
proposal, the other coordinates held, accepted with π_β(x') q_b(x_b) / (π_β(x) q_b(x'_b)): independent
MH on π_β(x_b | x_-b), so invariant for π_β (DESIGN §2.3). The full proposal moves every friend at once,
each friend's city accepted only with the others'; user 824 (four friends) at X_0 = 0, 8 runs of 200:
R-hat over the query's outputs 1.0115 without blocks, 1.0033-1.0059 with (seeds 1-3).

A run is `runs` independent SMC runs of `draws` particles; the particles of one run share
ancestors (resampling), so the engine's standard errors come from the spread between runs
(`estimate.ratio_at`), not from the particles' own spread. A run's final particles are put in a
seeded random order: resampling leaves them sorted by their first ancestor, an order that is no
time, and split R-hat's halves and ESS's autocorrelations would read it as one (the excess spread
between runs, which is what they should see, stays in their between-run terms).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np
import pytensor
import pytensor.tensor as pt
from pytensor.graph.replace import vectorize_graph
from scipy.linalg import solve_triangular

from ddpbayes.fastexp import FAST, exp_parts, scratch, smallest
from ddpbayes.model.batched import checks_per_point, unblock_indexing
from ddpbayes.model.condition import TUPLES, WEIGHTS, Conditioned
from ddpbayes.parallel.forked import forked_map

GROUP = 4  # independent SMC runs per chain of the run they replace (standard errors between runs)
SPREAD = 2.0  # the reference's standard deviation, in prior standard deviations
MAX_STAGES = 200  # a run that has not reached β = 1 by then is reported as such (never silently cut)
THRESHOLD = 0.5  # each stage keeps this share of the particles' effective sample size (PyMC's default)
DECORRELATED = 0.1  # a stage's cycles stop once its correlation with its start is below this (90% of coordinates)
MAX_STEPS = 50  # Metropolis–Hastings cycles per stage at most
MIN_STEPS = 4  # and at least
FINAL_STEPS = 16  # and at least this at β = 1, whose particles are the run's draws
LADDER = 2.38 * 4.0 ** -np.arange(5)  # random-walk scales (over √dim) in the particles' standard deviations
KDE_SCALES = 4.0 ** -np.arange(1, 4)  # the independent proposal's kernel widths in the particles' SDs (`_kde_sums`)
# each narrower kernel is the previous one to the power (s_k-1 / s_k)^2 = 2^SQUARINGS: that many squarings (`_kde_sums`)
SQUARINGS = round(math.log2((KDE_SCALES[0] / KDE_SCALES[1]) ** 2))
assert np.allclose((KDE_SCALES[:-1] / KDE_SCALES[1:]) ** 2, 2.0 ** SQUARINGS), "KDE_SCALES: a ratio 2^(k/2) apart"
SETTLE_STEPS = 120  # random-walk steps at π that move the prior draws under the event before they are centres
PRIOR_SHARE = 0.5  # the independent proposal's centres: this share on the settled prior draws, whatever the particles
SETTLE_PIECES = 4  # the prior draws in this many pieces, each its own generator (forked; the same for any processes)
BATCH = 512  # particles per call of the compiled log-density (bounds its intermediates' memory)


class TemperingFailed(Exception):
    """SMC could not start: no particle of the reference has a finite density under the event."""


@dataclass(frozen=True)
class Tempered:
    """The particles of `runs` independent SMC runs: values (runs, draws) per free variable, the
    tuples (runs, draws, n) and summed laws (runs, draws, C) or None at them, and each run's
    stages, final β and last stage's acceptance rate."""

    particles: dict[str, np.ndarray]
    tuples: np.ndarray
    weights: np.ndarray | None
    stages: list[int]
    betas: list[float]
    acceptance: list[float]


class Tempering:
    """The conditioned model's log-density and outputs compiled over a batch of particles once,
    and SMC run in numpy for its current pins."""

    def __init__(self, cond: Conditioned, blocks: Sequence[Sequence[tuple[str, int | None]]] = ()):
        """`blocks`: groups of tuples (variable name, element or None) the block kernel moves together
        (`DependenceModel.blocks`); their free columns here (`_block_columns`)."""
        self.cond = cond
        model = cond.model
        self.names = [f.name for f in cond.free]
        values = [model.rvs_to_values[model[n]] for n in self.names]
        self.shapes = [tuple(int(d) for d in v.type.shape) for v in values]
        self.sizes = [math.prod(s) for s in self.shapes]
        self.blocks = _block_columns(cond, self.shapes, blocks)
        batched = {v: pt.tensor(dtype=v.dtype, shape=(None, *v.type.shape), name=f"{v.name}_particles")
                   for v in values}
        joint, *outputs = model.replace_rvs_by_values(
            [model["ddp_joint"], model[TUPLES]] + ([model[WEIGHTS]] if cond.summed else []))
        # each particle's parameter checks alone (`checks_per_point`): one invalid particle must not be -inf for all
        batch = unblock_indexing([vectorize_graph(g, batched) for g in checks_per_point([joint, *outputs])])
        inputs = list(batched.values())
        self._logp = pytensor.function(inputs, batch[0], on_unused_input="ignore")
        self._outputs = pytensor.function(inputs, batch[1:], on_unused_input="ignore")

    @property
    def dim(self) -> int:
        return sum(self.sizes)

    def split(self, x: np.ndarray) -> list[np.ndarray]:
        """The free variables' values (particles, *shape) in a (particles, dim) matrix."""
        cuts = np.cumsum(self.sizes)[:-1]
        return [part.reshape(len(x), *shape) for part, shape in zip(np.split(x, cuts, axis=1), self.shapes)]

    def logp(self, x: np.ndarray) -> np.ndarray:
        """log π at each row of x (particles, dim), up to the model's constant; -inf outside the
        support (PyTensor's NaN of a parameter check included)."""
        out = np.concatenate([_per_particle(self._logp(*self.split(x[a:a + BATCH])), len(x[a:a + BATCH]), 0)
                              for a in range(0, len(x), BATCH)]) if len(x) else np.empty(0)
        return np.where(np.isnan(out), -np.inf, out)

    def outputs(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """The tuples (particles, n) and, when summed, each particle's law of the configurations
        (particles, C) at the rows of x."""
        parts = [[_per_particle(v, len(x[a:a + BATCH]), 1) for v in self._outputs(*self.split(x[a:a + BATCH]))]
                 for a in range(0, len(x), BATCH)]
        tuples = np.concatenate([p[0] for p in parts])
        weights = np.concatenate([p[1] for p in parts]) if self.cond.summed else None
        return tuples, weights

    def run(self, runs: int, draws: int, seed: int, candidates: list[dict], processes: int = 1) -> Tempered:
        """`runs` independent SMC runs of `draws` particles for the event currently pinned, seeded (each
        run its own generator, spawned from `seed`); the reference from `candidates` (prior draws of the
        free variables). The runs go to `processes` forked processes (`parallel.forked_map`): the same
        particles for any number."""
        loc, scale = self._reference(candidates)
        self._centres = self._settled(seed, processes)
        done = forked_map(lambda rng: self._temper(loc, scale, draws, rng), np.random.default_rng(seed).spawn(runs),
                          processes)
        finals, stages, betas, acceptance = (list(column) for column in zip(*done))
        x = np.concatenate(finals)
        tuples, weights = self.outputs(x)
        particles = {n: v.reshape(runs, draws, *v.shape[1:]) for n, v in zip(self.names, self.split(x))}
        return Tempered(particles, tuples.reshape(runs, draws, -1),
                        None if weights is None else weights.reshape(runs, draws, -1), stages, betas, acceptance)

    def _temper(self, loc: np.ndarray, scale: np.ndarray, draws: int, rng: np.random.Generator
                ) -> tuple[np.ndarray, int, float, float]:
        """One SMC run: the final particles (draws, dim), its stages, final β and the last stage's
        acceptance rate."""
        x = loc + scale * rng.standard_normal((draws, self.dim))
        logq = _normal_logpdf(x, loc, scale)
        with np.errstate(invalid="ignore", over="ignore"):
            ll = self.logp(x) - logq  # the "likelihood" tempered in: log π - log q
        if not np.isfinite(ll).any():
            raise TemperingFailed("no particle drawn from the reference is feasible under the event")
        beta, stage, rate = 0.0, 0, math.nan
        while beta < 1 and stage < MAX_STAGES:
            beta_next, weights = next_beta(ll, beta, THRESHOLD)
            keep = systematic(weights, rng)
            x, logq, ll = x[keep], logq[keep], ll[keep]
            beta = beta_next
            x, logq, ll, rate = self._mutate(x, logq, ll, beta, rng)
            stage += 1
        return x[rng.permutation(len(x))], stage, beta, rate  # order by ancestor is no time (module docstring)

    def _mutate(self, x: np.ndarray, logq: np.ndarray, ll: np.ndarray, beta: float, rng: np.random.Generator
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """Metropolis–Hastings cycles invariant for π_β (module docstring) until the particles have
        forgotten the stage's start (module docstring), each cycle the independent proposal, the random
        walk and, when the model declares blocks, a block proposal; returns them and their acceptance rate."""
        n, dim = x.shape
        cov = np.atleast_2d(np.cov(x, rowvar=False, ddof=0)) + 1e-6 * np.eye(dim)
        if not np.isfinite(cov).all():
            raise TemperingFailed("the particles' covariance is not finite")
        start, accepted, tried = x.copy(), 0, 0
        around = np.vstack([start, self._centres])  # the independent proposal's centres: particles, settled prior draws
        m = len(self._centres)  # the centres' probabilities: PRIOR_SHARE on the settled draws (module docstring)
        share = (np.concatenate([np.full(n, (1 - PRIOR_SHARE) / n), np.full(m, PRIOR_SHARE / m)]) if m
                 else np.full(n, 1 / n))
        full = _BlockKernel.of(around, share, cov, np.arange(dim))  # the independent proposal over every column
        density = full.logpdf(x)  # the proposal's log density at the particles, kept current
        blocks = [_BlockKernel.of(around, share, cov, columns) for columns in self.blocks]
        for steps in range(1, MAX_STEPS + 1):
            proposal = full.draw(n, rng)
            at_proposal = full.logpdf(proposal)
            x, logq, ll, hits = self._metropolis(x, logq, ll, beta, proposal, density - at_proposal, rng)
            density = np.where(hits, at_proposal, density)
            accepted, tried = accepted + hits.sum(), tried + n
            x, logq, ll, hits = self._metropolis(x, logq, ll, beta, _ladder_step(x, full.chol, rng), np.zeros(n),
                                                 rng)
            accepted, tried = accepted + hits.sum(), tried + n
            if blocks:
                proposal, correction = _block_proposal(x, blocks, rng)
                x, logq, ll, moved = self._metropolis(x, logq, ll, beta, proposal, correction, rng)
                hits |= moved
                accepted, tried = accepted + moved.sum(), tried + n
            density[hits] = full.logpdf(x[hits])
            if steps >= (FINAL_STEPS if beta == 1 else MIN_STEPS) and _forgotten(start, x):
                break
        return x, logq, ll, float(accepted / tried)

    def _metropolis(self, x, logq, ll, beta: float, proposal, correction, rng: np.random.Generator):
        """One Metropolis–Hastings step of every particle towards `proposal` (log proposal ratio
        `correction`): the new particles, log q, log π - log q, and which moved."""
        logq_new = _normal_logpdf(proposal, self._loc, self._scale)
        with np.errstate(invalid="ignore", over="ignore"):
            ll_new = self.logp(proposal) - logq_new
            gain = (logq_new + beta * ll_new) - (logq + beta * ll) + correction
        accept = _accepted(gain, rng)
        return (np.where(accept[:, None], proposal, x), np.where(accept, logq_new, logq), np.where(accept, ll_new, ll),
                accept)

    def _settled(self, seed: int, processes: int) -> np.ndarray:
        """The prior draws moved under the event (module docstring): SETTLE_STEPS random-walk
        Metropolis steps at π (β = 1) from each, the prior draws' covariance scaled as `LADDER` per
        draw and step; in SETTLE_PIECES pieces, each with its own generator from `seed` (stream
        [seed, 1]: not the runs'), so the same centres for any number of processes."""
        prior, dim = self._prior, self._prior.shape[1]
        chol = np.linalg.cholesky(np.atleast_2d(np.cov(prior, rowvar=False, ddof=0)) + 1e-6 * np.eye(dim))
        pieces = np.array_split(np.arange(len(prior)), SETTLE_PIECES)
        rngs = np.random.default_rng([seed, 1]).spawn(SETTLE_PIECES)
        moved = forked_map(lambda k: self._walk(prior[pieces[k]], chol, rngs[k]), range(SETTLE_PIECES), processes)
        return np.concatenate(moved)

    def _walk(self, x: np.ndarray, chol: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """SETTLE_STEPS random-walk Metropolis steps at π from the rows of x (a -inf start takes any
        finite proposal)."""
        lp = self.logp(x)
        for _ in range(SETTLE_STEPS):
            proposal = _ladder_step(x, chol, rng)
            lp_new = self.logp(proposal)
            with np.errstate(invalid="ignore"):
                accept = _accepted(lp_new - lp, rng)
            x, lp = np.where(accept[:, None], proposal, x), np.where(accept, lp_new, lp)
        return x

    def feasible(self, candidates: list[dict]) -> dict | None:
        """The first of `candidates` (prior draws of the free variables) with a finite log π under the
        event pinned, or None: the batched density at all of them in one call."""
        values = self.matrix(candidates)
        finite = np.all(np.isfinite(values), axis=1)
        ok = np.flatnonzero(finite & np.isfinite(self.logp(np.where(finite[:, None], values, 0.0))))
        return candidates[ok[0]] if len(ok) else None

    def matrix(self, candidates: list[dict]) -> np.ndarray:
        """The candidates' values as a (candidates, dim) matrix (unconstrained values)."""
        return np.asarray([np.concatenate([np.ravel(np.asarray(c[n], dtype=float)) for n in self.names])
                           for c in candidates])

    def _reference(self, candidates: list[dict]) -> tuple[np.ndarray, np.ndarray]:
        """q's means and standard deviations (dim,) from the prior draws of the free variables
        (unconstrained values)."""
        values = self.matrix(candidates)
        self._prior = values[np.all(np.isfinite(values), axis=1)]
        spread = np.nanstd(values, axis=0)
        self._loc, self._scale = np.nanmean(values, axis=0), SPREAD * np.where(spread > 1e-3, spread, 1.0)
        return self._loc, self._scale


@dataclass(frozen=True)
class _BlockKernel:
    """The stage's independent proposal restricted to a block of columns (every column: the full
    proposal): its centres' block coordinates (distinct, with their shares), the block's covariance
    factor and its inverse (the marginal of the full proposal's kernel, N(0, s² Σ_bb), Σ_bb the
    block of the particles' covariance); fixed during the stage (DESIGN §2.3). The factor and its
    inverse are computed once per stage (BLAS per step cost ms: its threads)."""

    columns: np.ndarray
    around: np.ndarray
    share: np.ndarray
    chol: np.ndarray
    inverse: np.ndarray
    centres: np.ndarray  # the distinct centres whitened by the inverse, a column each (`_kde_logpdf`)
    counts: np.ndarray

    @classmethod
    def of(cls, around: np.ndarray, share: np.ndarray, cov: np.ndarray, columns: np.ndarray) -> _BlockKernel:
        part = around[:, columns]
        chol = np.linalg.cholesky(cov[np.ix_(columns, columns)])
        inverse = solve_triangular(chol, np.eye(len(columns)), lower=True)
        distinct, where = np.unique(part, axis=0, return_inverse=True)  # resampled copies: one centre, their shares
        counts = np.bincount(where.ravel(), weights=share, minlength=len(distinct))
        return cls(columns, part, share, chol, inverse, np.ascontiguousarray(_times(distinct, inverse).T), counts)

    def logpdf(self, values: np.ndarray) -> np.ndarray:
        """The block marginal's log density at rows of block values, up to its constant."""
        return _kde_logpdf(values, self.centres, self.counts, self.inverse)

    def draw(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """n draws of the block's values from its marginal."""
        return _kde_draw(self.around, self.chol, n, rng, self.share)


def _block_proposal(x: np.ndarray, blocks: list[_BlockKernel], rng: np.random.Generator
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Metropolis-within-Gibbs with an independent block proposal (DESIGN §2.3): each particle's block
    drawn uniformly (independently of the state), its columns drawn from that block's marginal of the
    stage's proposal, the other columns held; returns the proposals and the log proposal ratios
    log q_b(x_b) - log q_b(x'_b)."""
    which = rng.integers(len(blocks), size=len(x))
    proposal, correction = x.copy(), np.zeros(len(x))
    for b, kernel in enumerate(blocks):
        rows = np.flatnonzero(which == b)
        if not len(rows):
            continue
        drawn = kernel.draw(len(rows), rng)
        density = kernel.logpdf(np.vstack([x[np.ix_(rows, kernel.columns)], drawn]))  # the old values, the drawn
        correction[rows] = density[:len(rows)] - density[len(rows):]
        proposal[np.ix_(rows, kernel.columns)] = drawn
    return proposal, correction


def _block_columns(cond: Conditioned, shapes: list[tuple[int, ...]],
                   blocks: Sequence[Sequence[tuple[str, int | None]]]) -> list[np.ndarray]:
    """Each block's columns in the particles' (particles, dim) matrix: its tuples (variable name,
    element) that are free under the event; a block with none free is left out."""
    column, start = {}, 0
    for f, shape in zip(cond.free, shapes):
        elements = list(f.index) if f.index is not None else (list(range(math.prod(shape))) if shape else [None])
        column.update({(f.source, e): start + k for k, e in enumerate(elements)})
        start += math.prod(shape)
    out = [np.asarray([column[t] for t in block if t in column], dtype=int) for block in blocks]
    return [c for c in out if len(c)]


def next_beta(ll: np.ndarray, beta: float, threshold: float) -> tuple[float, np.ndarray]:
    """The next inverse temperature and the normalised importance weights: the largest β' <= 1 whose
    weights e^{(β' - β) ll} keep an effective sample size (Σw)² / Σw² of at least `threshold` times
    the particles (bisection, as PyMC's `update_beta_and_weights`; BDA3 eq. 10.4)."""
    target = threshold * len(ll)

    def weights(b: float) -> tuple[np.ndarray, float]:  # numpy's sums: scipy's logsumexp cost 6% of an event
        w = np.exp((b - beta) * ll - np.max((b - beta) * ll))
        total = w.sum()
        return w / total, float(total * total / (w * w).sum())

    w, ess = weights(1.0)
    if ess >= target:
        return 1.0, w
    low, high = beta, 1.0
    for _ in range(60):
        mid = 0.5 * (low + high)
        if weights(mid)[1] >= target:
            low = mid
        else:
            high = mid
    if low == beta:  # not even the smallest step keeps the share: take one that moves
        low = high
    return low, weights(low)[0]


def systematic(weights: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Systematic resampling: indices i with the k-th uniform (u + k)/N in i's cumulative weight."""
    n = len(weights)
    edges = np.cumsum(weights)
    edges[-1] = 1.0
    return np.searchsorted(edges, (rng.random() + np.arange(n)) / n, side="left").clip(0, n - 1)


def _per_particle(value, particles: int, core: int) -> np.ndarray:
    """A batched output as (particles, *core shape): one that does not depend on the particles
    (the tuples when only summed ones vary) comes back unbatched, and is repeated."""
    value = np.asarray(value, dtype=float)
    return value if value.ndim > core else np.broadcast_to(value, (particles, *value.shape)).copy()


def _normal_logpdf(x: np.ndarray, loc: np.ndarray, scale: np.ndarray) -> np.ndarray:
    z = (x - loc) / scale
    return -0.5 * np.sum(z * z, axis=1) - np.sum(np.log(scale)) - 0.5 * x.shape[1] * math.log(2 * math.pi)


def _times(z: np.ndarray, matrix: np.ndarray) -> np.ndarray:
    """Each row of z (particles, dim) times matrixᵀ, by einsum: no BLAS call (under load its threads
    cost milliseconds a call: 16 ms for a 3 x 200 triangular solve, a sixth of a Gowalla SMC event)."""
    return np.einsum("pj,ij->pi", z, matrix)


def _ladder_step(x: np.ndarray, chol: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random-walk proposal from each row of x: N(0, c² L Lᵀ) added, c drawn per row from LADDER over √dim."""
    n, dim = x.shape
    factor = rng.choice(LADDER, size=n) / math.sqrt(dim)
    return x + factor[:, None] * _times(rng.standard_normal((n, dim)), chol)


def _accepted(gain: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Metropolis–Hastings' acceptances at log acceptance ratios `gain` (nan, from -inf - -inf: refused)."""
    return np.log(rng.random(len(gain))) < np.where(np.isnan(gain), -np.inf, gain)


def _kde_draw(centres: np.ndarray, chol: np.ndarray, n: int, rng: np.random.Generator,
              share: np.ndarray | None = None) -> np.ndarray:
    """n draws from the stage's independent proposal: a centre chosen with probabilities `share`
    (None: uniformly) plus N(0, s² L Lᵀ), s uniform over KDE_SCALES (module docstring)."""
    scale = KDE_SCALES[rng.integers(len(KDE_SCALES), size=n)]
    noise = _times(rng.standard_normal((n, centres.shape[1])), chol)
    chosen = rng.integers(len(centres), size=n) if share is None else rng.choice(len(centres), size=n, p=share)
    return centres[chosen] + scale[:, None] * noise


def _forgotten(start: np.ndarray, x: np.ndarray) -> bool:
    """Whether the particles have forgotten the stage's start: the correlation with it, estimated without the
    particles' own noise, below DECORRELATED on at least 90% of the coordinates. n particles' sample correlation r
    has E r² = ρ² + (1 - ρ²)²/n (Fisher 1915), so r² - 1/n estimates ρ² where ρ is small: at 200 particles fresh
    draws give |r| >= 0.1 on 16% of the coordinates by chance, and the raw rule held a 9-coordinate stage until
    all nine were below together (21% of the checks at independence). A coordinate constant at the start has
    nothing to forget; a strong negative correlation remembers the start as much as a positive one."""
    corr = np.nan_to_num(_pearson(start, x), nan=0.0)
    return bool(np.mean(corr * corr - 1.0 / len(x) < DECORRELATED ** 2) >= 0.9)


def _kde_logpdf(x: np.ndarray, centres: np.ndarray, counts: np.ndarray, inverse: np.ndarray) -> np.ndarray:
    """log of the proposal's density at each row of x (distinct whitened centres (dim, m), a column each and
    each `counts` times among the proposal's, L⁻¹), up to the constant (it cancels in a proposal ratio):
    log Σ_{i,s} n_i s^-dim exp(-|L⁻¹x - c_i|² / 2s²), in one compiled loop (`_kde_sums`)."""
    return _kde_sums(np.ascontiguousarray(_times(x, inverse)), np.ascontiguousarray(centres), counts,
                     0.5 / KDE_SCALES[0] ** 2, SQUARINGS, KDE_SCALES, *scratch(centres.shape[1]))


@numba.njit(cache=True, nogil=True, fastmath=FAST)
def _kde_sums(z, centres, weights, half_precision, squarings, scales, d2, e, bits, power):  # pragma: no cover
    """Per row r of z: log Σ_k s_k^-dim Σ_i w_i exp(-|z_r - c_i|² / 2s_k²) (centres (dim, m), a column each),
    the scales' log sums combined as a log-sum-exp (numpy's over three values a row cost more than the sums).
    Per scale the sum is taken as Σ_i w_i e_ri^(2^(squarings k)) e^(-d_r h_k), e_ri = exp(-(|z_r - c_i|² - d_r) h)
    with d_r the row's nearest centre's squared distance (its term is 1 at every scale: no underflow) and
    h = h_0 = 1/2s_0² (each narrower scale's kernel is the previous one to the power 2^squarings: squarings,
    not an exponential, as KDE_SCALES are 2^(squarings/2) apart). A term with (|z_r - c_i|² - d_r) h > 50 is
    left out: below e^-50 = 2e-22 of the nearest's at every scale, so all of them together below 2e-22 Σw / min w
    of the sum, under its rounding for the shares here (each at least 1/(2 × the centres)); the others' weights
    and exponents are gathered and their exponentials taken in loops that vectorise (`fastexp.exp_parts`).
    Direct differences, not |z|² + |c|² - 2 z·c: no cancellation far from 0."""
    rows, dim, m, count = z.shape[0], centres.shape[0], centres.shape[1], len(scales)
    out, terms, kept = np.empty(rows), np.empty(count), np.empty(m)
    for r in range(rows):
        for i in range(m):
            d2[i] = 0.0
        for d in range(dim):
            zd = z[r, d]
            for i in range(m):
                diff = zd - centres[d, i]
                d2[i] += diff * diff
        low = smallest(d2, m)
        n = 0
        for i in range(m):
            u = (d2[i] - low) * half_precision
            if u <= 50.0:
                d2[n], kept[n] = -u, weights[i]
                n += 1
        for i in range(n):
            e[i], bits[i] = exp_parts(d2[i])
        for i in range(n):
            e[i] *= power[i]
        peak = -np.inf
        for k in range(count):
            if k:
                for _ in range(squarings):
                    for i in range(n):  # a term below 1e-150 of the nearest's left out: its square is no subnormal
                        e[i] = e[i] * e[i] if e[i] > 1e-150 else 0.0
            total = 0.0
            for i in range(n):
                total += kept[i] * e[i]
            terms[k] = math.log(total) - 0.5 * low / (scales[k] * scales[k]) - dim * math.log(scales[k])
            peak = max(peak, terms[k])
        total = 0.0
        for k in range(count):
            total += math.exp(terms[k] - peak)
        out[r] = math.log(total) + peak
    return out


def _pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|Pearson correlation| per column between a and b (PyMC's `Pearson`)."""
    am, bm = a - a.mean(axis=0), b - b.mean(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.abs(np.sum(am * bm, axis=0) / np.sqrt(np.sum(am**2, axis=0) * np.sum(bm**2, axis=0)))
