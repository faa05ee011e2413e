"""Sequential Monte Carlo across modes: PyMC's SMC kernel, tempered from a reference to the event's
conditional (DESIGN §2.3, issue #42).

When a run's NUTS chains disagree (`runs.disagreement`: chains in different modes, e.g. a Gowalla
user's friends in different cities), the event is drawn again by SMC (Del Moral, Doucet & Jasra
2006; PyMC's `sample_smc` kernels, after Ching & Chen 2007): particles start from a proper
reference q and move through π_β ∝ q^(1-β) π^β, β from 0 to 1, each stage reweighting by
(β' - β)(log π - log q), resampling and mutating by Metropolis steps invariant for π_β. Every
particle sees every mode at small β, and the mode weights are set by the reweighting, not by
where a chain started. π is the conditioned model's density (`ddp_joint`, with the summed
discrete variables inside it as a log-sum-exp); q is a Normal per unconstrained coordinate with
the mean and twice the spread of the prior draws (`Conditioned.starting_points`' candidates):
the prior, made proper and Gaussian, since the conditioned model's free variables are Flat.

As `runs.Chains` does for NUTS, the kernel is compiled once per conditioned model and driven here
(PyMC's `_sample_smc_sequentially` loop) for every event pinned on it; the reference's moments
are shared variables. A run is `groups` × `chains` independent SMC runs of `draws` particles;
the particles of one SMC run share ancestors (resampling), so its standard errors come from the
spread between independent runs (`estimate.ratio_at`), not from the particles' own spread.
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass

import numpy as np
import pymc as pm
import pytensor
import pytensor.tensor as pt
from pymc.smc.kernels import IMH
from pytensor.graph.replace import graph_replace

from ddpbayes.model.condition import Conditioned

GROUP = 4  # independent SMC runs per chain of the run they replace (standard errors between runs)
SPREAD = 2.0  # the reference's standard deviation, in prior standard deviations
MAX_STAGES = 200  # a run that has not reached β = 1 by then is reported as such (never silently cut)


class TemperingFailed(Exception):
    """SMC could not start: no particle of the reference has a finite density under the event."""


@dataclass(frozen=True)
class Tempered:
    """The particles of `runs` independent SMC runs: values (runs, draws) per free variable, and
    each run's stages, final β and the kernel's last acceptance rate."""

    particles: dict[str, np.ndarray]
    stages: list[int]
    betas: list[float]
    acceptance: list[float]


class Tempering:
    """PyMC's IMH SMC kernel compiled once for a conditioned model, run for its current pins."""

    def __init__(self, cond: Conditioned):
        self.cond = cond
        base = cond.model
        names = [f.name for f in cond.free]
        joint = base.replace_rvs_by_values([base["ddp_joint"]])[0]
        self._loc = {n: pytensor.shared(np.zeros(base.rvs_to_values[base[n]].type.shape)) for n in names}
        self._scale = {n: pytensor.shared(np.ones(base.rvs_to_values[base[n]].type.shape)) for n in names}
        logging.getLogger("pymc").setLevel(logging.ERROR)
        with pm.Model() as self.model:
            rvs = {n: pm.Normal(n, self._loc[n], self._scale[n], shape=base.rvs_to_values[base[n]].type.shape)
                   for n in names}
            reference = sum(pm.logp(pm.Normal.dist(self._loc[n], self._scale[n]), rv).sum() for n, rv in rvs.items())
            values = {base.rvs_to_values[base[n]]: rv for n, rv in rvs.items()}
            target = graph_replace(joint, values, strict=False)
            pm.Potential("ddp_tempered", pt.switch(pt.isnan(target), -np.inf, target) - reference)  # NaN: outside
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self.kernel = IMH(draws=1, model=self.model, random_seed=0)
        self._draws = 1

    def run(self, runs: int, draws: int, seed: int, candidates: list[dict]) -> Tempered:
        """`runs` independent SMC runs of `draws` particles for the event currently pinned, seeded."""
        self._reference(candidates)
        self._size(draws)
        rngs = np.random.default_rng(seed).spawn(runs)
        out: dict[str, list] = {n: [] for n in self._loc}
        stages, betas, acceptance = [], [], []
        for rng in rngs:
            start = {n: rng.normal(self._loc[n].get_value(), self._scale[n].get_value(),
                                   size=(draws, *self._loc[n].get_value().shape)) for n in self._loc}
            stage, rate = self._temper(start, rng)
            for n, v in self._unpack().items():
                out[n].append(v)
            stages.append(stage)
            betas.append(float(self.kernel.beta))
            acceptance.append(rate)
        return Tempered({n: np.asarray(v) for n, v in out.items()}, stages, betas, acceptance)

    def _temper(self, start: dict, rng: np.random.Generator) -> tuple[int, float]:
        """PyMC's SMC loop for one run: reweight to the next β (effective sample size halved), resample, mutate."""
        kernel = self.kernel
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            kernel.initialize(start, rng)
            if not np.isfinite(kernel.likelihood_logp).any():
                raise TemperingFailed("no particle drawn from the reference is feasible under the event")
            stage = 0
            try:
                while kernel.beta < 1 and stage < MAX_STAGES:
                    kernel.update_beta_and_weights()
                    kernel.step()
                    stage += 1
            except ValueError as e:  # PyMC's kernel: weights or particles' covariance not finite
                raise TemperingFailed(str(e)) from e
        return stage, float(kernel.acc_rate) if kernel.acc_rate is not None else float("nan")

    def _unpack(self) -> dict[str, np.ndarray]:
        """The final particles by variable (draws, *shape), in the order the kernel holds them."""
        out, at = {}, 0
        for v in self.kernel.variables:
            shape, size = self.kernel.var_info[v.name]
            out[v.name] = self.kernel.tempered_posterior[:, at:at + size].reshape(-1, *shape)
            at += size
        return out

    def _reference(self, candidates: list[dict]) -> None:
        """q's moments from the prior draws of the free variables (unconstrained values)."""
        for n in self._loc:
            values = np.asarray([c[n] for c in candidates], dtype=float)
            spread = np.nanstd(values, axis=0)
            self._loc[n].set_value(np.nanmean(values, axis=0))
            self._scale[n].set_value(SPREAD * np.where(spread > 1e-3, spread, 1.0))

    def _size(self, draws: int) -> None:
        """The kernel's particle count (a plain attribute of PyMC's kernel: its functions do not depend on it)."""
        self.kernel.draws = draws
