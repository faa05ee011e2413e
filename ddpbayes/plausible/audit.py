"""`audit_fitted`: the audit of a model fitted by `ddpbayes fit` under `--parameters` (DESIGN §9.6).

- `mean`: the model file's build(parameters="mean"), the posterior means fixed (`draw:K`: draw K);
- `integrated:S`: the Bayesian adversary's model, a latent draw index J uniform over S posterior
  draws evenly thinned (`fitting.posterior.integrated_model`): exact for that empirical posterior,
  a Monte Carlo approximation of the posterior itself;
- `draws:S`: Pufferfish privacy (Kifer & Machanavajjhala, TODS 2014) over the class of S plausible
  models, build(parameters="draw:K") for each thinned draw K: the leakage is the worst of theirs,
  and the claim is met only when every one meets it.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddpbayes.auditing import AuditResult, audit
from ddpbayes.encoding import jsonable, number
from ddpbayes.errors import InputError
from ddpbayes.fitting.posterior import draw_indices, fit_of, integrated_model
from ddpbayes.model.loading import load_model
from ddpbayes.progress import Progress
from ddpbayes.settings import RunSettings

DEFAULT_DRAWS = 200  # posterior draws of `integrated` and `draws` when S is not given
MODES = ("mean", "draw", "integrated", "draws")


@dataclass(frozen=True)
class Parameters:
    """How a fitted model's parameters are set: `mode` with `draws` posterior draws (integrated,
    draws), or the draw's index (draw); None for mean."""

    mode: str
    draws: int | None = None

    def __str__(self) -> str:
        return self.mode if self.draws is None else f"{self.mode}:{self.draws}"


def parse_parameters(text: str) -> Parameters:
    """'mean', 'draw:K' (posterior draw K), 'integrated[:S]' or 'draws[:S]' (S posterior draws, default 200)."""
    mode, sep, count = str(text).strip().partition(":")
    number_ok = count.isdigit() and (int(count) > 0 or mode == "draw")
    if mode not in MODES or (mode == "mean" and sep) or (mode == "draw" and not sep) or (sep and not number_ok):
        raise InputError(f"--parameters takes mean, draw:K (posterior draw K), integrated[:S] or draws[:S] (S "
                         f"posterior draws, a positive integer, default {DEFAULT_DRAWS}), got '{text}'")
    return Parameters(mode, None if mode == "mean" else int(count) if sep else DEFAULT_DRAWS)


@dataclass
class FittedAudit:
    """An audit under a fitted model: `result` is the audit (for `draws`, the worst plausible
    model's, with the class's leakage per target and verdict), `plausible` the class's summary."""

    parameters: Parameters
    result: AuditResult
    plausible: dict | None = None

    def to_dict(self) -> dict:
        """The audit's JSON document with `parameters` (and `plausible` for draws:S) added."""
        out = self.result.to_dict() | {"parameters": str(self.parameters)}
        if self.plausible is not None:
            out["plausible"] = jsonable(self.plausible)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)


def check_fitted(model_path: str | Path) -> Path:
    """The `.fit.json` of a model file written by `ddpbayes fit`; any other model is bad input."""
    fit = fit_of(model_path)
    if fit is None:
        raise InputError(f"--parameters applies to a model written by `ddpbayes fit` (MODEL.py with MODEL.fit.json "
                         f"beside it): '{model_path}' is not one")
    return fit


def audit_fitted(model_path: str | Path, parameters: Parameters | str, query: str, mechanism: str, notion: str, *,
                 settings: RunSettings | None = None, claim: float | None = None, information: str | None = "nats",
                 build: dict | None = None, **kwargs) -> FittedAudit:
    """Audit the fitted model at `model_path` with its parameters set by `parameters`; `query`,
    `mechanism`, `notion`, `claim`, `information` and `kwargs` (noise, targets, known, lattice) as
    `audit`'s; `build`: the model file's other keywords (a chain fit's individual and n). `draws:S`
    skips the information measures (one audit per draw)."""
    parameters = parse_parameters(parameters) if isinstance(parameters, str) else parameters
    fit = check_fitted(model_path)
    settings = RunSettings.of(settings)
    run = {"claim": claim, "settings": settings, **kwargs}
    build = build or {}
    if parameters.mode in ("mean", "draw"):  # the model file's own build
        model = load_model(model_path, {**build, "parameters": str(parameters)}, max_states=settings.max_states)
        return FittedAudit(parameters, audit(model, query, mechanism, notion, information=information, **run))
    if parameters.mode == "integrated":
        model = integrated_model(fit, parameters.draws, build)
        result = audit(model, query, mechanism, notion, information=information, **run)
        result.notes.append(f"parameters integrated over {parameters.draws} posterior draws, evenly thinned, each "
                            f"of weight 1/{parameters.draws} (the Bayesian adversary; exact for these draws, a Monte "
                            "Carlo approximation of the posterior)")
        return FittedAudit(parameters, result)
    return _plausible(model_path, fit, parameters, query, mechanism, notion, run, build)


def _plausible(model_path, fit: Path, parameters: Parameters, query: str, mechanism: str, notion: str,
               run: dict, build: dict) -> FittedAudit:
    """draws:S: one audit per thinned posterior draw, their worst and their summary."""
    start = time.perf_counter()
    indices = draw_indices(fit, parameters.draws)
    settings = run["settings"]
    quiet = run | {"settings": RunSettings.of(settings, progress=False)}
    results = []
    with Progress(f"audit: {parameters.draws} plausible models", len(indices), "draws",
                  enabled=settings.progress) as bar:
        for k in indices:
            model = load_model(model_path, {**build, "parameters": f"draw:{k}"}, max_states=settings.max_states)
            results.append(audit(model, query, mechanism, notion, information=None, **quiet))
            bar.advance(1)
    summary = plausible_summary(indices, results, run["claim"])
    return FittedAudit(parameters, _worst(results, indices, summary, time.perf_counter() - start), summary)


def plausible_summary(indices: np.ndarray, results: list[AuditResult], claim: float | None) -> dict:
    """The class's leakages: count, median, 95th percentile (linear interpolation), max, the share
    of draws whose audit passes the claim (None without one), and each draw's index and leakage."""
    values = np.array([r.leakage for r in results], dtype=float)
    verdicts = [r.verdict for r in results]
    return {"draws": len(results), "median": float(np.median(values)), "p95": float(np.percentile(values, 95)),
            "max": float(values.max()),
            "share_meeting_claim": None if claim is None else verdicts.count("pass") / len(results),
            "posterior_draws": [int(k) for k in indices], "leakages": [number(v) for v in values]}


def class_verdict(verdicts: list[str | None]) -> str | None:
    """Pufferfish's guarantee holds for the class when it holds for every model in it: pass when
    every draw passes, fail when one fails, else inconclusive (an estimate that settles nothing)."""
    if verdicts[0] is None:
        return None
    return "pass" if all(v == "pass" for v in verdicts) else "fail" if "fail" in verdicts else "inconclusive"


def _worst(results: list[AuditResult], indices: np.ndarray, summary: dict, seconds: float) -> AuditResult:
    """The class's result: the worst draw's audit with the worst leakage per target over the draws,
    the class's verdict and a note naming the draw."""
    worst = int(np.argmax([r.leakage for r in results]))
    per_target = [None if any(v is None for v in column) else max(column)
                  for column in zip(*(r.per_target for r in results))]
    verdict = class_verdict([r.verdict for r in results])
    base = results[worst]
    reason = None
    if verdict is not None:
        share = summary["share_meeting_claim"]
        reason = (f"meets epsilon = {base.claim:g} for {_percent(share)} of plausible models "
                  f"({round(share * len(results))} of {len(results)} posterior draws)")
    notes = [*base.notes, f"leakage: the worst of {len(results)} plausible models (posterior draws evenly thinned), "
                          f"reached at posterior draw {int(indices[worst])}"]
    return dataclasses.replace(base, per_target=per_target, verdict=verdict, verdict_reason=reason, seconds=seconds,
                               notes=notes, information=None,
                               information_reason="not computed under --parameters draws:S (one audit per draw)")


def _percent(share: float) -> str:
    """A share as a percentage, never rounded up to 100% nor down to 0%."""
    value = 100 * share
    shown = math.floor(value) if value > 99 else math.ceil(value) if value < 1 else round(value)
    return f"{shown:g}%"
