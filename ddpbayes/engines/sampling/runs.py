"""MCMC runs: draws of the tuples given a conditioning event, with ArviZ diagnostics.

One run per event {X_i = t, X_K = x_K}. `condition` (the one conditioning handler) builds the
model once per set of fixed tuples, with their values as shared variables; PyMC's step
methods are compiled once for it (NUTS; exact Gibbs for discrete stand-ins; Slice when the
event confines the free variables to a region with hard boundaries, where NUTS diverges) and
every event on those tuples re-pins the values and runs the same compiled steps. The chains
are driven here, as `pm.sample` drives them (tuning, then draws), without recompiling per
call: on a 10-tuple model that compilation was most of the time. Each chain has its own seed,
derived from the run seed and the event, and starts from the steps' construction state, so the
draws depend neither on the process that ran them nor on the runs drawn before with the same
steps. ArviZ judges the chains. Runs, and events found impossible, are cached on the model: they
depend on neither the query nor the noise scale. `sample_events` draws many events at once, an
event per unit of work (`parallel.map_units`: here, or on Dask workers that rebuild the model
once and keep its compiled steps). Chains start spread out over the prior draws (`_dispersed`);
when they disagree on the query, the event is drawn again by SMC (`settled`, `tempering`), and
the diagnostics say which sampler ran and why.
"""

from __future__ import annotations

import logging
import math
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import arviz as az
import numpy as np
import pymc as pm
import scipy.special
from arviz.utils import Numba

from ddpbayes.engines.sampling.mixture import same_at_every_draw
from ddpbayes.engines.sampling.slicing import BatchedSlice
from ddpbayes.engines.sampling.tempering import GROUP, Tempering, TemperingFailed
from ddpbayes.limits import check_memory
from ddpbayes.model import DependenceModel
from ddpbayes.model.condition import Conditioned, ImpossibleEvent, condition
from ddpbayes.parallel import map_units
from ddpbayes.parallel.forked import local_processes
from ddpbayes.settings import RunSettings

RHAT_MAX = 1.01
SEPARATED = 5.0  # chains' query means this many standard errors apart disagree (`disagreement`)
ESS_MIN = 400  # bulk effective sample size over all chains
LOG = logging.getLogger(__name__)  # at DEBUG: each run's diagnostics with its event (benchmarks/bench_gowalla_ego.py)
SLICE_DIMS = 3  # continuous dimensions up to which Slice samples them (`Chains._slice`)
SLICE_W = 1.0  # Slice's initial interval width (PyMC's default), restored before every chain
WIDEN = 2  # an SMC run over RHAT_MAX is drawn once more with at least this many times the particles (`widen_by`)
WIDEN_MAX = 4  # and at most this many
AIM = 0.006  # the R-hat - 1 the wider run is sized for by the 1/particles rule (`widen_by`): under RHAT_MAX - 1


@dataclass(frozen=True)
class Run:
    """Tuple draws under one conditioning event, and how the chains behaved: x (chains, draws, n),
    or, when the discrete variables were summed out, x (chains, draws, C, n) with `logw`
    (chains, draws, C), each configuration's log-probability given the draw's continuous values
    (x is then `Table.expand`'s read-only view when the tuples do not change between draws)."""

    key: tuple
    x: np.ndarray
    sampler: str
    divergences: int
    logw: np.ndarray | None = None
    groups: int = 1  # SMC: independent runs per chain, their particles concatenated along the draws
    smc: dict | None = None  # SMC: why it ran, its runs' stages, final β and acceptance
    _diagnosed: dict = field(default_factory=dict, compare=False, repr=False)

    def __reduce__(self):
        """Pickled (to and from Dask workers) with x as its one (C, n) table when it is `Table.expand`'s
        broadcast view, and unpickled as that view again: pickling a view copies it per draw, and the
        estimates read the layout (2 workers gave leakages 1e-15 apart from serial)."""
        x, shape = self.x, None
        if same_at_every_draw(x):
            x, shape = np.ascontiguousarray(x[0, 0]), x.shape
        return _unpickled, (x, shape, self.key, self.sampler, self.divergences, self.logw, self.groups, self.smc)

    @property
    def sampler_can_temper(self) -> bool:
        """Whether SMC can draw this run's event again: its free variables are continuous (summed
        discrete ones included), none Gibbs-sampled, and something is free."""
        return "gibbs" not in self.sampler and self.sampler != "none"

    def diagnose(self, q: np.ndarray) -> dict:
        """R-hat and bulk ESS of the query draws (chains, draws), divergences, and the verdict
        (cached per query: calibration asks again at every noise scale)."""
        memo = q.tobytes()
        if memo not in self._diagnosed:
            self._diagnosed[memo] = self._diagnose(q)
        return self._diagnosed[memo]

    def _diagnose(self, q: np.ndarray) -> dict:
        q = q.reshape(q.shape[0] * self.groups, -1)  # SMC: R-hat and ESS across its independent runs
        chains = q.shape[0]
        if np.ptp(q) <= 1e-12 * max(1.0, float(np.max(np.abs(q)))):  # constant up to rounding (a summed law that
            # does not depend on the continuous draw): nothing for ArviZ to judge
            out = {"rhat": 1.0, "ess_bulk": float(q.size), "divergences": 0, "sampler": self.sampler, "ok": True,
                   "chains": chains}
            return out if self.smc is None else {**out, "smc": self.smc}
        with quiet_arviz():
            rhat = float(az.rhat(q)) if chains >= 2 else math.nan  # R-hat compares chains
            ess = float(az.ess(q, method="bulk"))
        ok = rhat <= RHAT_MAX and ess >= ESS_MIN and self.divergences == 0
        ok = ok and (self.smc is None or self.smc["beta_min"] == 1.0)  # SMC that stopped short of β = 1 failed
        LOG.debug("run %s: %s, R-hat %.4f, bulk ESS %.0f", self.key, self.sampler, rhat, ess)
        out = {"rhat": rhat, "ess_bulk": ess, "divergences": self.divergences, "sampler": self.sampler, "ok": ok,
               "chains": chains}
        return out if self.smc is None else {**out, "smc": self.smc}


def _unpickled(x: np.ndarray, shape: tuple | None, key: tuple, *rest) -> Run:
    """A pickled run (`Run.__reduce__`): x broadcast back to every draw when it was shipped once."""
    return Run(key, x if shape is None else np.broadcast_to(x, shape), *rest)


@contextmanager
def quiet_arviz() -> Iterator[None]:
    """ArviZ's own warnings off (a constant chain divides by zero, short chains fail its shape
    check): the diagnostics record what they mean, and the CLI prints one line. ArviZ's NumPy
    variances, not its Numba ones: those are compiled in every process (~0.5 CPU s, issue #42.3)."""
    logger = logging.getLogger("arviz")
    level, numba = logger.level, Numba.numba_flag
    logger.setLevel(logging.ERROR)
    Numba.numba_flag = False
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            yield
    finally:
        logger.setLevel(level)
        Numba.numba_flag = numba


def summarise(per_run: list[dict]) -> dict:
    """One diagnostics record for several runs: worst R-hat and ESS, total divergences, which
    sampler ran and why (`sampler`), and the SMC runs' own record (`smc`) when any ran."""
    if not per_run:
        return {"ok": True, "runs": 0}
    out = {
        "ok": all(d["ok"] for d in per_run),
        "runs": len(per_run),
        "rhat_max": max(d["rhat"] for d in per_run),
        "ess_bulk_min": min(d["ess_bulk"] for d in per_run),
        "divergences": sum(d["divergences"] for d in per_run),
        "samplers": sorted({d["sampler"] for d in per_run}),
        "chains": min(d["chains"] for d in per_run),
    }
    tempered = [d["smc"] for d in per_run if "smc" in d]
    out["sampler"] = "/".join(out["samplers"])
    if tempered:
        worst = max((t for t in tempered if t["nuts_rhat"] is not None), key=lambda t: t["nuts_rhat"],
                    default=tempered[0])
        others = "/".join(s for s in out["samplers"] if not s.startswith("smc"))
        out["sampler"] = (f"smc ({worst['why']})" if len(tempered) == len(per_run) else
                          f"smc in {len(tempered)} of {len(per_run)} runs ({worst['why']}), {others} in the others")
        out["smc"] = {"runs": len(tempered), "direct": sum(t["nuts_rhat"] is None for t in tempered),
                      "independent_runs": sum(t["independent_runs"] for t in tempered),
                      "particles": min(t["particles"] for t in tempered),
                      "particles_max": max(t["particles"] for t in tempered),
                      "widened": sum(t.get("first_rhat") is not None for t in tempered),
                      "stages_max": max(t["stages_max"] for t in tempered),
                      "beta_min": min(t["beta_min"] for t in tempered),
                      "acceptance_min": min(t["acceptance_min"] for t in tempered)}
    return out


def disagreement(q: np.ndarray) -> tuple[str, float | None] | None:
    """Why the chains of a run disagree on the query draws q (chains, draws, C), or None: R-hat
    over RHAT_MAX on a coordinate, or two chains' means more than SEPARATED standard errors apart
    (each chain's ArviZ MCSE; the chains are independent, so their variances add). One chain
    cannot disagree. Returns the reason and the worst R-hat."""
    if q.shape[0] < 2:
        return None
    with quiet_arviz():
        for c in range(q.shape[-1]):
            qc = np.ascontiguousarray(q[..., c])
            if np.ptp(qc) <= 1e-12 * max(1.0, float(np.max(np.abs(qc)))):
                continue
            rhat = float(az.rhat(qc))
            if not rhat <= RHAT_MAX:
                return f"NUTS chains disagreed: R-hat {rhat:.4g}", rhat
            means = qc.mean(axis=1)
            se = np.array([float(np.ravel(az.mcse(chain[None, :]))[0]) for chain in qc])
            a, b = int(np.argmin(means)), int(np.argmax(means))
            gap = (means[b] - means[a]) / math.sqrt(se[a] ** 2 + se[b] ** 2) if se[a] + se[b] > 0 else math.inf
            if gap > SEPARATED and means[b] > means[a]:
                return f"NUTS chains disagreed: chain means {gap:.3g} standard errors apart (R-hat {rhat:.4g})", rhat
    return None


def sample_event(model: DependenceModel, event: dict[int, float], settings: RunSettings) -> Run:
    """Draw the tuples given the event (cached on the model per event and settings; an
    impossible event is remembered as such): by NUTS (or Slice, Gibbs), or, for a choosing run,
    by SMC directly when an earlier choosing run of the model was switched to SMC (`known_multimodal`)."""
    key = _run_key(event, settings)

    def draw() -> Run | ImpossibleEvent:
        try:
            why = _directly(model, event, settings)
            if why is not None:
                try:
                    return _smc(model, event, settings, why)
                except TemperingFailed:  # SMC cannot start here: NUTS, whose diagnostics then say if it mixed
                    pass
            return _sample(model, event, settings, key[1])
        except ImpossibleEvent as e:
            return e

    run = model.memo("sampling", key, draw)
    if isinstance(run, ImpossibleEvent):
        raise run
    return run


def settled(model: DependenceModel, event: dict[int, float], settings: RunSettings,
            values: Callable[[Run], np.ndarray]) -> Run:
    """The event's run, drawn again by SMC (`tempering`) when its NUTS chains disagree on the query
    (`values(run)`: (chains, draws, [K,] C), K summed configurations weighted by the run's law). A
    bounding run is drawn by SMC, without NUTS first, when the event's choosing run was (switched
    or directly), with as many particles per run as it ended with (`widened`): the two sets of runs
    are drawn the same way. A choosing run's switch marks the model known multimodal
    (`known_multimodal`): its later choosing runs go to SMC directly (`sample_event`). A bounding
    run's switch is its event's alone: nothing chosen depends on the bounding draws. Switches and SMC
    runs are cached on the model."""
    chosen = _switch_key(event, settings)
    why = model.memo("sampling", chosen, lambda: None) if model.has_memo("sampling", chosen) else None
    if why is None:
        run = sample_event(model, event, settings)
        if run.smc is not None and settings.role == "choose":  # SMC directly: its bounding runs are SMC's too
            model.memo("sampling", chosen, lambda: (run.smc["why"], run.smc["nuts_rhat"]))
            return widened(model, event, settings, run, values)
        if run.groups > 1 or not run.sampler_can_temper:
            return run
        why = disagreement(_expected(values(run), run.logw))
        if why is None:
            return run
        if settings.role == "choose":
            model.memo("sampling", chosen, lambda: why)
            model.memo("sampling", _multimodal_key(settings), lambda: why)  # the first switch: kept
    elif settings.role != "choose":
        why = (f"the choosing run's {why[0]}", why[1])
    try:
        run = _smc(model, event, _particles(model, event, settings), why)
    except TemperingFailed:  # SMC cannot start here: the NUTS run, whose diagnostics then say it did not mix
        return sample_event(model, event, settings)
    return widened(model, event, settings, run, values) if settings.role == "choose" else run


def widened(model: DependenceModel, event: dict[int, float], settings: RunSettings, run: Run,
            values: Callable[[Run], np.ndarray]) -> Run:
    """A choosing SMC run whose independent runs disagree on the query (R-hat over RHAT_MAX on an
    output: `Run.diagnose`, as the verdict reads it) drawn once more, fresh, with `widen_by` times the
    particles per run; the event's bounding runs then get as many (`_particles`). Only the choosing
    draws decide, so the bounding draws stay fresh for the witness they bound and the bounds keep their
    level (DESIGN §2.3)."""
    rhat = _over_limit(run, values)
    if rhat is None:
        return run
    model.memo("sampling", _widen_key(event, settings), lambda: rhat)
    try:
        return _smc(model, event, _particles(model, event, settings), (run.smc["why"], run.smc["nuts_rhat"]), rhat)
    except TemperingFailed:  # not expected (the same event started before): keep the first run, its R-hat says so
        return run


def rebound(model: DependenceModel, event: dict[int, float], settings: RunSettings, run: Run,
            values: Callable[[Run], np.ndarray]) -> Run | None:
    """A second, fresh SMC bounding run with `widen_by` times the particles of `run`, at most WIDEN_MAX times
    the settings' draws, when `run` (a bounding SMC run) is over RHAT_MAX on an output and has fewer; else
    None. The caller bounds on both and keeps the lower lower bound (`engine._bound`): drawn because of the
    first run's draws, the second cannot raise it (DESIGN §2.3)."""
    rhat = _over_limit(run, values)
    if rhat is None:
        return None
    particles = min(widen_by(rhat) * run.smc["particles"], WIDEN_MAX * settings.draws)
    if particles <= run.smc["particles"]:  # at the rule's most already
        return None
    wide = RunSettings.of(settings, draws=particles)
    try:
        return _smc(model, event, wide, (run.smc["why"], run.smc["nuts_rhat"]), rhat)
    except TemperingFailed:
        return None


def widen_by(rhat: float) -> int:
    """How many times the particles an SMC run over RHAT_MAX is drawn again with: R-hat - 1 across SMC runs
    falls about as 1/particles (DESIGN §2.3), so the factor that brings `rhat` to 1 + AIM, rounded up, at
    least WIDEN and at most WIDEN_MAX (1.0152 -> 3, 1.0233 -> 4)."""
    return int(min(WIDEN_MAX, max(WIDEN, math.ceil((rhat - 1.0) / AIM))))


def _over_limit(run: Run, values: Callable[[Run], np.ndarray]) -> float | None:
    """The worst R-hat of an SMC run not drawn wider already (`widened`, `rebound`) when it is over
    RHAT_MAX, else None."""
    if run.smc is None or run.smc.get("first_rhat") is not None:
        return None
    rhat = _worst_rhat(run, values)
    return rhat if rhat > RHAT_MAX else None


def _worst_rhat(run: Run, values: Callable[[Run], np.ndarray]) -> float:
    """The run's worst R-hat over the query's outputs, as the verdict reads it (`Run.diagnose`); nan last."""
    q = _expected(values(run), run.logw)
    return max((run.diagnose(np.ascontiguousarray(q[..., c]))["rhat"] for c in range(q.shape[-1])),
               key=lambda r: -math.inf if math.isnan(r) else r)


def _particles(model: DependenceModel, event: dict[int, float], settings: RunSettings) -> RunSettings:
    """The settings of the event's SMC run: `widen_by` times the particles when its choosing run was widened
    (by its first R-hat)."""
    key = _widen_key(event, settings)
    if not model.has_memo("sampling", key):
        return settings
    return RunSettings.of(settings, draws=widen_by(model.memo("sampling", key, lambda: None)) * settings.draws)


def _widen_key(event: dict[int, float], settings: RunSettings) -> tuple:
    return ("widen", *_switch_key(event, settings)[1:])


def known_multimodal(model: DependenceModel, settings: RunSettings) -> tuple[str, float | None] | None:
    """Why the model is known multimodal (declared so, `DependenceModel.multimodal`; or an earlier
    choosing run's NUTS chains disagreed, and it was switched to SMC), or None."""
    if model.multimodal:
        return "the model is declared multimodal", None
    key = _multimodal_key(settings)
    return model.memo("sampling", key, lambda: None) if model.has_memo("sampling", key) else None


def _multimodal_key(settings: RunSettings) -> tuple:
    return ("multimodal", sums(settings))


def _directly(model: DependenceModel, event: dict[int, float], settings: RunSettings
              ) -> tuple[str, None] | None:
    """Why a choosing run goes to SMC without a NUTS run first, or None: the model is known
    multimodal and SMC can draw the event (continuous free variables, summed discrete ones
    included). A bounding run follows its choosing run instead (`settled`)."""
    known = known_multimodal(model, settings)
    if known is None or settings.role != "choose":
        return None
    free = _conditioned(model, event, settings).free
    if not free or any(f.discrete for f in free):
        return None
    return "SMC directly: " + (known[0] if model.multimodal else f"an earlier event's {known[0]}"), None


def _smc(model: DependenceModel, event: dict[int, float], settings: RunSettings,
         why: tuple[str, float | None], first_rhat: float | None = None) -> Run:
    """The event's SMC run (cached on the model, the same whichever path asked for it); `first_rhat`:
    the R-hat of the run it replaces with more particles (`widened`)."""
    key = ("smc", *_run_key(event, settings)[1:])
    return model.memo("sampling", key, lambda: _temper(model, event, settings, key, why, first_rhat))


def _conditioned(model: DependenceModel, event: dict[int, float], settings: RunSettings) -> Conditioned:
    """The model conditioned on the event's fixed tuples (cached on the model)."""
    summed = sums(settings)
    return model.memo("sampling", ("condition", frozenset(event), summed),
                      lambda: condition(model, event, summed=summed))


def _chains(model: DependenceModel, event: dict[int, float], settings: RunSettings) -> Chains:
    """The compiled steps of the event's fixed tuples (cached on the model)."""
    return model.memo("sampling", ("conditioned", frozenset(event), sums(settings)),
                      lambda: Chains(_conditioned(model, event, settings), _block_tuples(model)))


def _block_tuples(model: DependenceModel) -> list[list[tuple[str, int | None]]]:
    """The model's declared blocks (`DependenceModel.blocks`) as (variable name, element) per tuple."""
    return [[(model.slots[k].rv.name, model.slots[k].index) for k in block] for block in model.blocks]


def _switch_key(event: dict[int, float], settings: RunSettings) -> tuple:
    """The key under which a choosing run's switch to SMC is remembered: the event and the settings
    its choosing and bounding runs share (not the role, nor the bounding runs' doubled chains)."""
    return ("switch", tuple(sorted(event.items())), settings.draws, settings.tune, settings.seed, sums(settings))


def _expected(q: np.ndarray, logw: np.ndarray | None) -> np.ndarray:
    """Each draw's query (chains, draws, C): the draw, or the mean of its summed law."""
    return q if logw is None else np.einsum("abk,abkc->abc", np.exp(logw), q)


def _temper(model: DependenceModel, event: dict[int, float], settings: RunSettings, key: tuple,
            why: tuple[str, float | None], first_rhat: float | None = None) -> Run:
    chains = _chains(model, event, settings)
    chains.cond.pin(event)
    return chains.temper(settings, (key[1:], settings.role), why, first_rhat)


def sample_events(model: DependenceModel, events: Iterable[dict[int, float]], settings: RunSettings,
                  label: str = "sampling") -> None:
    """Draw every event not drawn yet, a run per unit of work, into the model's cache
    (`sample_event` then finds them; an impossible event is cached as such): choosing runs on a model
    known multimodal (`known_multimodal`) are SMC's from the start, as units of work too; a bounding run
    whose choosing run was SMC's is left to `settled`."""
    todo = {}
    for event in events:
        key = _run_key(event, settings)
        switched = settings.role != "choose" and model.has_memo("sampling", _switch_key(event, settings))
        if not model.has_memo("sampling", key) and not switched:  # its choosing run was SMC's: so is it (`settled`)
            todo.setdefault(key, dict(event))
    quiet = RunSettings.of(settings, progress=False)
    known = known_multimodal(model, settings)  # sent with each unit: a worker's rebuilt model has no mark of its own
    jobs = [(model, event, quiet, known) for event in todo.values()]
    runs = map_units(_event_unit, jobs, settings, label, "MCMC runs",
                     group=lambda unit: frozenset(unit[1]))  # one set of fixed tuples: one compiled step set
    for key, run in zip(todo, runs):
        model.memo("sampling", key, lambda run=run: run)


def _event_unit(job: tuple[DependenceModel, dict[int, float], RunSettings, tuple | None]) -> Run | ImpossibleEvent:
    """One MCMC run (a unit of work): the run, or the event found impossible. `known`: why the
    model is known multimodal in the process that planned the units (a worker's rebuilt model
    is marked so too: its choosing runs go to SMC directly as they would here)."""
    model, event, settings, known = job
    if known is not None and known_multimodal(model, settings) is None:
        model.memo("sampling", _multimodal_key(settings), lambda: known)
    try:
        return sample_event(model, event, settings)
    except ImpossibleEvent as e:
        return e


def bounding(settings: RunSettings) -> RunSettings:
    """The settings of the fresh runs that bound a chosen witness: other seeds (the role is in
    every run's key and seed) and twice the chains, half to estimate, half for its standard error."""
    return RunSettings.of(settings, role="bound", chains=2 * settings.chains)


def roles(settings: RunSettings, chose: str, bounded: str) -> dict:
    """Which runs chose the witness and which bounded it, in words (the output says so): `chose`
    and `bounded` say what each set of runs was drawn for."""
    c = settings.chains
    return {"runs_chose": f"the choosing runs (seed {settings.seed}, role 'choose': {c} chains x {settings.draws} "
                          f"draws per {chose})",
            "runs_bounded": f"fresh runs of {bounded} (role 'bound', other seeds: chains 1-{c} estimate, chains "
                            f"{c + 1}-{2 * c} give the standard error)"}


def _run_key(event: dict[int, float], settings: RunSettings) -> tuple:
    return ("run", tuple(sorted(event.items())), settings.draws, settings.tune, settings.chains, settings.seed,
            settings.role, sums(settings))


def sums(settings: RunSettings) -> bool:
    """Whether runs sum the discrete variables out: the likelihood route does; the posterior
    route counts the target's sampled values, so it samples them."""
    return settings.method != "posterior"


def _sample(model: DependenceModel, event: dict[int, float], settings: RunSettings, key) -> Run:
    chains = _chains(model, event, settings)
    chains.cond.pin(event)
    if settings.role != "choose":  # fresh runs: their own seeds (the choosing runs' stay those of the event alone)
        key = (key, settings.role)
    if not chains.cond.free:  # nothing left to sample: one exact point (with the summed law, if any)
        x, logw = chains.evaluate({})
        x = _repeat(x, settings)
        if logw is None:
            return Run(key, x, "none", 0)
        return Run(key, chains.cond.table.expand(x), "none", 0, _repeat(logw, settings))
    return chains.run(settings, key)


def _seed(settings: RunSettings, key) -> int:
    """A run's seed, from the settings' and the run's key (the event and role)."""
    return (settings.seed * 1_000_003 + zlib.crc32(repr(key).encode())) % (2**31)


def _repeat(a: np.ndarray, settings: RunSettings) -> np.ndarray:
    return np.broadcast_to(a, (settings.chains, settings.draws, *a.shape)).copy()


class Chains:
    """PyMC step methods compiled once for a conditioned model, run for its current pins."""

    def __init__(self, cond: Conditioned, blocks: list[list[tuple[str, int | None]]] | None = None):
        self.cond = cond
        self.blocks = blocks or []  # SMC's Metropolis-within-Gibbs blocks (`_block_tuples`)
        self._steps: dict[bool, object] = {}
        self._tempering: Tempering | None = None  # compiled on the first SMC run

    def evaluate(self, point: dict) -> tuple[np.ndarray, np.ndarray | None]:
        """The tuple values at `point` (n) and the summed law (C) or None."""
        _, x, logw = self.cond.evaluate([point])
        return x[0], (None if logw is None else logw[0])

    def run(self, settings: RunSettings, key) -> Run:
        """Tune, then draw, `settings.chains` chains from the event currently pinned; the seed
        is derived from `key` and the settings, so a run is reproducible on its own."""
        seed = _seed(settings, key)
        starts, confined = self._dispersed(settings.chains, settings.seed)
        self._check_memory(settings, self._values_per_draw(self.evaluate(starts[0])[0].size))
        rngs = np.random.default_rng(seed).spawn(settings.chains)
        if self._batched_slice(confined):  # every chain at once on the batched summed density (`slicing`)
            x, logw = BatchedSlice(self.cond, SLICE_W).run(starts, rngs, settings.tune, settings.draws)
            return Run(key, self.cond.table.expand(x), self._sampler_name(confined), 0, logw)
        step = self._step(confined)
        chains = [self._chain(step, start, settings, rng) for start, rng in zip(starts, rngs)]
        x = np.asarray([draws for draws, _, _ in chains], dtype=float)
        logw = np.asarray([w for _, w, _ in chains], dtype=float) if self.cond.summed else None
        if logw is not None:  # every configuration's tuples: a view when they are the same at every draw
            x = self.cond.table.expand(x)
        return Run(key, x, self._sampler_name(confined), sum(d for _, _, d in chains), logw)

    def temper(self, settings: RunSettings, key, why: tuple[str, float | None], first_rhat: float | None = None
               ) -> Run:
        """SMC for the event currently pinned (`tempering`): GROUP × `settings.chains` independent
        runs of `settings.draws` particles, each chain of the Run GROUP runs end to end (tuning
        steps do not apply: SMC adapts its stages and proposals itself); `first_rhat`: the R-hat of
        the run this one replaces with more particles (`widened`), or None."""
        if self._tempering is None:
            self._tempering = Tempering(self.cond, self.blocks)
        candidates = self.cond.prior_draws(settings.seed)
        start = self._tempering.feasible(candidates)  # all prior draws at once: scored one at a time, 11 s a user
        if start is None:  # the point-wise search with its sweeps: raises ImpossibleEvent as a NUTS run would
            start = self.cond.starting_points(1, settings.seed)[0][0]
        runs = GROUP * settings.chains
        # the tuples counted by SMC's compiled outputs: the point-wise function would be compiled for this alone (2 s)
        tuples = self._tempering.outputs(self._tempering.matrix([start]))[0].shape[1]
        self._check_memory(RunSettings.of(settings, draws=GROUP * settings.draws), self._values_per_draw(tuples))
        out = self._tempering.run(runs, settings.draws, _seed(settings, key), candidates,
                                  local_processes(settings.workers, settings.scheduler))
        shape = (settings.chains, GROUP * settings.draws)
        x = out.tuples.reshape(*shape, -1)
        logw = None if out.weights is None else out.weights.reshape(*shape, -1)
        if logw is not None:  # every configuration's tuples, as `run` keeps them
            x = self.cond.table.expand(x)
        record = {"why": why[0], "nuts_rhat": why[1], "first_rhat": first_rhat, "independent_runs": runs,
                  "particles": settings.draws,
                  "stages_max": max(out.stages), "beta_min": min(out.betas),
                  "acceptance_min": float(np.nanmin(out.acceptance))}
        name = "smc" + (f"+summed {self.cond.configurations}" if self.cond.summed else "")
        return Run(key, x, name, 0, logw, GROUP, record)

    def _dispersed(self, chains: int, seed: int) -> tuple[list[dict], bool]:
        """Starting points spread out, so that chains in different modes can show it (R-hat needs
        overdispersed starts; Gelman & Rubin 1992): the best of the prior draws under the event
        first, then for each next chain the feasible prior draw farthest from those chosen (the
        largest smallest standardised distance over the free coordinates). Not among the best few:
        a mode of small posterior weight has no draw among them (two modes 20 prior SDs apart,
        weights 0.92 and 0.08: the best 64 of 256 draws all in the heavier one, and both chains
        with it, R-hat 1.004 and the leakage 0.14 off)."""
        starts, confined = self.cond.starting_points(chains, seed)
        best = self.cond.prior_draws(seed, feasible=True)
        if chains <= 1 or len(best) < chains:
            return starts, confined
        flat = np.asarray([np.concatenate([np.ravel(np.asarray(p[f.name], dtype=float)) for f in self.cond.free])
                           for p in best])
        flat = (flat - flat.mean(axis=0)) / np.where(flat.std(axis=0) > 0, flat.std(axis=0), 1.0)
        chosen = [0]
        nearest = np.linalg.norm(flat - flat[0], axis=1)
        while len(chosen) < chains:
            nxt = int(np.argmax(nearest)) if nearest.max() > 0 else len(chosen) % len(best)
            chosen.append(nxt)
            nearest = np.minimum(nearest, np.linalg.norm(flat - flat[nxt], axis=1))
        return [best[k] for k in chosen], confined

    def _values_per_draw(self, n: int) -> int:
        """The tuple values a draw keeps, for n tuples: n, or C × n when a continuous tuple beside summed ones
        varies (`Table`)."""
        table = self.cond.table
        varies = table is not None and any(not s and k not in self.cond.fixed for k, s in enumerate(table.summed))
        return n * (self.cond.configurations if varies else 1)

    def _check_memory(self, settings: RunSettings, values: int) -> None:
        """Refuse a run whose draws would not fit in memory, before drawing: each draw keeps its n tuple values and
        C summed configurations' weights, held twice while the chains are stacked (the configurations' tuples
        are kept once, `Table`, unless a continuous tuple varies between draws: then C × n per draw)."""
        cells = settings.chains * settings.draws * (values + self.cond.configurations)
        check_memory(2 * 8 * cells, "an MCMC run's draws", f"{settings.chains} chains x {settings.draws:,} draws x "
                     f"{values:,} tuple values", flag="--draws", advice="lower --draws or --chains")

    def _chain(self, step, start: dict, settings: RunSettings, rng) -> tuple[np.ndarray, np.ndarray | None, int]:
        """One chain, as PyMC's `_iter_sample` runs it: reset the adaptation, tune, stop tuning, draw."""
        step.set_rng(rng)
        _restart(step, settings.tune > 0)
        point, points, diverged = dict(start), [], 0
        for i in range(settings.tune + settings.draws):
            if i == settings.tune:
                step.stop_tuning()
            point, stats = step.step(point)
            if i >= settings.tune:
                points.append(point)
                diverged += sum(bool(s.get("diverging", False)) for s in stats)
        _, x, logw = self.cond.evaluate(points)  # the draws' tuples and summed laws, batched
        return x, logw, diverged

    def _step(self, confined: bool):
        """Heat-bath Gibbs for discrete stand-ins (`HeatBathGibbs`); Slice for continuous ones
        when the event confines them or they are few (`_slice`); NUTS otherwise."""
        use_slice = self._slice(confined)
        if use_slice not in self._steps:
            model = self.cond.model
            names = {f.name for f in self.cond.free if f.discrete}
            discrete = [rv for rv in model.free_RVs if rv.name in names]
            continuous = [rv for rv in model.free_RVs if rv.name not in names]
            logging.getLogger("pymc").setLevel(logging.ERROR)
            with model:
                steps = [HeatBathGibbs(discrete, proposal="proportional")] if discrete else []
                if continuous:
                    steps.append(pm.Slice(continuous, w=SLICE_W) if use_slice else pm.NUTS(continuous))
            self._steps[use_slice] = steps[0] if len(steps) == 1 else pm.CompoundStep(steps)
        return self._steps[use_slice]

    def _batched_slice(self, confined: bool) -> bool:
        """Slice over summed discrete variables only (none Gibbs-sampled): its chains run together on
        the batched summed density (`slicing.BatchedSlice`), PyMC's Slice step not compiled."""
        return self.cond.summed and self._slice(confined) and not any(f.discrete for f in self.cond.free)

    def _slice(self, confined: bool) -> bool:
        """Slice when the event confines the continuous stand-ins (NUTS diverges at hard
        boundaries) or they have at most SLICE_DIMS dimensions: there NUTS builds trees of one
        to three leapfrog steps and its draws are autocorrelated (a Beta rate's log-odds given
        one record: bulk ESS 887 of 2,000 draws at target acceptance 0.8, 642 at 0.95; Slice
        1,733; the hierarchical logit's (log s, u): 668/973 against 1,271/1,876)."""
        dims = sum(int(np.prod(self.cond.model.rvs_to_values[self.cond.model[f.name]].type.shape or (1,)))
                   for f in self.cond.free if not f.discrete)
        return confined or dims <= SLICE_DIMS

    def _sampler_name(self, confined: bool) -> str:
        kinds = {f.discrete for f in self.cond.free}
        use_slice = self._slice(confined)
        parts = (("gibbs", True in kinds), ("slice", False in kinds and use_slice),
                 ("nuts", False in kinds and not use_slice), (f"summed {self.cond.configurations}", self.cond.summed))
        return "+".join(name for name, used in parts if used)


class HeatBathGibbs(pm.CategoricalGibbsMetropolis):
    """Gibbs sampling proper: each discrete dimension in turn is drawn from its full conditional.

    PyMC's CategoricalGibbsMetropolis (either proposal) is Metropolised Gibbs (Liu 1996): it
    always proposes a value other than the current one. For a binary variable whose conditional
    is 1/2 that proposal is always accepted, so the variable flips at every sweep, and two such
    variables keep their parity forever: the chain is not ergodic (family tree, pdp with
    K = {x1}: lower bounds 1.65–1.70 against the exact 1.52548 in 4 of 5 seeds, with R-hat and
    ESS passing; benchmarks/coverage_diagnosis.md). PyMC's BinaryGibbsMetropolis gave biased
    marginals on the household model (P(h | x0 = 0) 0.0551 vs exact 0.0526 over 40,000 draws).
    Here the new value is drawn from softmax over every value, the current one included."""

    def metropolis_proportional(self, q, logp, logp_curr, dim, k):
        given = int(q.data[dim])
        log_probs = np.empty(k)
        for cat in range(k):
            if cat == given:
                log_probs[cat] = logp_curr
            else:
                q.data[dim] = cat
                log_probs[cat] = logp(q)
        if not np.isfinite(log_probs).any():
            q.data[dim] = given
            return logp_curr
        chosen = int(self.rng.choice(k, p=scipy.special.softmax(log_probs)))
        q.data[dim] = chosen
        return float(log_probs[chosen])


def _restart(step, tune: bool) -> None:
    """Put every method of a (compound) step back in its construction state before a chain.

    The compiled steps are shared by every run on the same fixed tuples and, in one process, by
    consecutive chains, so nothing a method adapted may carry over: NUTS resets its step size
    and mass matrix in `reset_tuning`, but PyMC's Slice has no `reset_tuning` and keeps its tuned
    width `w` and `n_tunes`, CategoricalGibbsMetropolis shuffles its list of dimensions in place
    at every step (built in increasing order), and a CompoundStep does not pass `tune` on."""
    for method in getattr(step, "methods", [step]):
        if hasattr(method, "reset_tuning"):
            method.reset_tuning()
        if isinstance(method, pm.Slice):
            method.w = np.full_like(np.asarray(method.w, dtype=float), SLICE_W)
            method.n_tunes = 0.0
        if isinstance(method, HeatBathGibbs):
            method.dimcats.sort()
        if hasattr(method, "tune"):
            method.tune = tune
