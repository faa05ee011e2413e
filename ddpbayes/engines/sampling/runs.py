"""MCMC runs: draws of the tuples given a conditioning event, with ArviZ diagnostics.

One run per event {X_i = t, X_K = x_K}: `condition` (the one conditioning handler) builds the
model, PyMC samples it (NUTS, Gibbs for discrete stand-ins, Slice when the event confines the
free variables to a region with hard boundaries, where NUTS diverges), and ArviZ judges the
chains. Runs are cached on the model: they do not depend on the query or the noise scale.
"""

from __future__ import annotations

import logging
import sys
import zlib
from dataclasses import dataclass

import arviz as az
import numpy as np
import pymc as pm

from ddpbayes.model import DependenceModel
from ddpbayes.model.condition import TUPLES, Conditioned, condition

RHAT_MAX = 1.01
ESS_MIN = 400  # bulk effective sample size over all chains


@dataclass(frozen=True)
class Settings:
    draws: int = 1000
    tune: int = 1000
    chains: int = 2
    seed: int = 0
    progress: bool = False

    @classmethod
    def from_options(cls, options: dict) -> Settings:
        return cls(
            draws=options.get("draws") or cls.draws,
            tune=options.get("tune") if options.get("tune") is not None else cls.tune,
            chains=options.get("chains") or cls.chains,
            seed=options.get("seed") if options.get("seed") is not None else cls.seed,
            progress=bool(options.get("progress")),
        )


@dataclass(frozen=True)
class Run:
    """Tuple draws (chains, draws, n) under one conditioning event, and how the chains behaved."""

    key: tuple
    x: np.ndarray
    sampler: str
    divergences: int

    def diagnose(self, q: np.ndarray) -> dict:
        """R-hat and bulk ESS of the query draws (chains, draws), divergences, and the verdict."""
        if np.ptp(q) == 0:
            return {"rhat": 1.0, "ess_bulk": float(q.size), "divergences": 0, "sampler": self.sampler, "ok": True}
        rhat = float(az.rhat(q))
        ess = float(az.ess(q, method="bulk"))
        ok = rhat <= RHAT_MAX and ess >= ESS_MIN and self.divergences == 0
        return {"rhat": rhat, "ess_bulk": ess, "divergences": self.divergences, "sampler": self.sampler, "ok": ok}


def summarise(per_run: list[dict]) -> dict:
    """One diagnostics record for several runs: worst R-hat and ESS, total divergences."""
    if not per_run:
        return {"ok": True, "runs": 0}
    return {
        "ok": all(d["ok"] for d in per_run),
        "runs": len(per_run),
        "rhat_max": max(d["rhat"] for d in per_run),
        "ess_bulk_min": min(d["ess_bulk"] for d in per_run),
        "divergences": sum(d["divergences"] for d in per_run),
        "samplers": sorted({d["sampler"] for d in per_run}),
    }


def sample_event(model: DependenceModel, event: dict[int, float], settings: Settings) -> Run:
    """Draw the tuples given the event (cached on the model per event and settings)."""
    key = ("run", tuple(sorted(event.items())), settings.draws, settings.tune, settings.chains, settings.seed)
    if key not in model.cache:
        model.cache[key] = _sample(model, event, settings, key[1])
    return model.cache[key]


def _sample(model: DependenceModel, event: dict[int, float], settings: Settings, key) -> Run:
    cond = condition(model, event)
    if not cond.free:  # every variable is pinned: one exact point
        x = np.array([[[event[k] for k in range(model.n)]]] * settings.chains)
        return Run(key, np.repeat(x, settings.draws, axis=1), "none", 0)
    if settings.progress:
        what = ", ".join(f"{model.names[k]}={v:g}" for k, v in key) or "nothing known"
        print(f"ddpbayes: sampling given {what}", file=sys.stderr, flush=True)
    return sample_conditioned(cond, settings, key)


def sample_conditioned(cond: Conditioned, settings: Settings, key) -> Run:
    """Sample a conditioned model with PyMC; the seed is derived from `key` and the settings."""
    seed = (settings.seed * 1_000_003 + zlib.crc32(repr(key).encode())) % (2**31)
    starts, confined = cond.starting_points(settings.chains, seed)
    logging.getLogger("pymc").setLevel(logging.ERROR)
    with cond.model:
        steps = _steps(cond, confined)
        idata = pm.sample(
            draws=settings.draws,
            tune=settings.tune,
            chains=settings.chains,
            cores=1,
            random_seed=seed,
            initvals=starts,
            init="adapt_diag",
            step=steps or None,
            progressbar=False,
            compute_convergence_checks=False,
            var_names=[TUPLES],
        )
    stats = getattr(idata, "sample_stats", {})
    nuts = "diverging" in stats
    divergences = int(stats["diverging"].sum()) if nuts else 0
    sampler = "+".join(name for name, used in (("gibbs", any(f.discrete for f in cond.free)),
                                               ("slice", confined and not nuts), ("nuts", nuts)) if used)
    return Run(key, np.asarray(idata.posterior[TUPLES].values, dtype=float), sampler, divergences)


def _steps(cond: Conditioned, confined: bool) -> list:
    """Exact Gibbs for discrete stand-ins (PyMC's default BinaryGibbsMetropolis gave biased
    marginals on the household model: P(h | x0 = 0) 0.0551 vs exact 0.0526 over 40,000 draws);
    Slice for continuous ones when the event confines them (NUTS diverges at hard boundaries);
    PyMC assigns NUTS to the rest."""
    model = cond.model
    discrete = [rv for rv in model.free_RVs if rv.name in {f.name for f in cond.free if f.discrete}]
    continuous = [rv for rv in model.free_RVs if rv not in discrete]
    steps = [pm.CategoricalGibbsMetropolis(discrete)] if discrete else []
    if confined and continuous:
        steps.append(pm.Slice(continuous))
    return steps
