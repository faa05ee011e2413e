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
from ddpbayes.auditing.verdict import judge
from ddpbayes.encoding import jsonable, number
from ddpbayes.errors import InputError
from ddpbayes.engines import AdversaryLeakage, engine_named
from ddpbayes.fitting.fitted import FORMAT, FixedClustered, read_fit
from ddpbayes.fitting.write import companions
from ddpbayes.fitting.posterior import PosteriorDraws, draw_indices, fit_of, integrated_model, per_cluster, read_draws
from ddpbayes.model.loading import load_model
from ddpbayes.notions import notion as named
from ddpbayes.problem import Adversary
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
    other = _other_template(model_path) if fit is None else None
    if other is not None:
        raise InputError(f"--parameters is built for clustered, gaussian and chain fits; '{model_path}' is a {other} "
                         "fit (audit it without --parameters: its posterior means)")
    if fit is None:
        raise InputError(f"--parameters applies to a model written by `ddpbayes fit` (MODEL.py with MODEL.fit.json "
                         f"beside it): '{model_path}' is not one")
    return fit


def _other_template(model_path: str | Path) -> str | None:
    """The template of a fit written by `ddpbayes fit` that --parameters does not take (graph), else None."""
    fit = companions(Path(model_path))[0] if Path(model_path).suffix == ".py" else None
    try:
        doc = json.loads(fit.read_text()) if fit is not None and fit.is_file() else None
    except (OSError, ValueError):
        return None
    return doc.get("template") if isinstance(doc, dict) and doc.get("format") == FORMAT else None


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
        cluster = _per_cluster(fit, parameters.draws, build)
        result = (_integrated_by_engine(model_path, fit, cluster, parameters, query, mechanism, notion, run)
                  if cluster is not None else None)
        if result is None:
            model = integrated_model(fit, parameters.draws, build)
            result = audit(model, query, mechanism, notion, information=information, **run)
        result.notes.append(f"parameters integrated over {parameters.draws} posterior draws, evenly thinned, each "
                            f"of weight 1/{parameters.draws} (the Bayesian adversary; exact for these draws, a Monte "
                            "Carlo approximation of the posterior)")
        return FittedAudit(parameters, result)
    return _plausible(model_path, fit, parameters, query, mechanism, notion, run, build)


def _integrated_by_engine(model_path, fit: Path, cluster: PerCluster, parameters: Parameters, query: str,
                          mechanism: str, notion: str, run: dict) -> AuditResult | None:
    """integrated:S from the engine that fits the means' model, when it mixes the draws' laws itself
    (`Engine.integrated_leakages`: the structured engine's per-cluster factors for idp, the draw index in
    no clique); None otherwise (then the engine audits `integrated_model`). The information measures
    are not computed this way."""
    start = time.perf_counter()
    if not named(notion).weakest:
        return None
    settings = run["settings"]
    model = load_model(model_path, {"parameters": "mean"}, max_states=settings.max_states)
    base = audit(model, query, mechanism, notion, information=None, **run)
    engine = engine_named(base.engine)
    if engine is None or base.problem is None:
        return None
    targets = [i for i, v in enumerate(base.per_target) if v is not None]
    problem = base.problem.with_adversaries(named(notion).adversaries(len(base.per_target), targets))
    check = engine.plausible_leakages(problem, cluster.fixed, cluster.means, targets)
    if check is None or not _agrees(check[0], base):  # a model file that is not the fit's template
        return None
    found = engine.integrated_leakages(problem, cluster.fixed, cluster.draws, targets)
    if found is None:
        return None
    leaks, note = found
    worst = max(leaks, key=lambda a: a.value)
    per_target: list[float | None] = [None] * len(base.per_target)
    for a in leaks:
        per_target[a.adversary.target] = a.value
    verdict, reason = judge(worst, run["claim"])
    problem = dataclasses.replace(base.problem, model=integrated_model(fit, parameters.draws))
    return dataclasses.replace(base, leakage=worst.value, per_target=per_target, witness=worst.witness, verdict=verdict,
                               verdict_reason=reason, notes=[note], information=None,
                               information_reason="not computed under --parameters integrated:S by per-cluster "
                                                  "factors (the draws' laws mixed cluster by cluster)",
                               target_worst={a.adversary.target: a for a in leaks}, problem=problem,
                               seconds=time.perf_counter() - start)


def _plausible(model_path, fit: Path, parameters: Parameters, query: str, mechanism: str, notion: str,
               run: dict, build: dict) -> FittedAudit:
    """draws:S: one audit per thinned posterior draw, their worst and their summary. The first draw is
    audited by the engine that fits; when that engine gives every draw's leakage at once
    (`Engine.plausible_leakages`: the structured engine's per-cluster factors for idp, or pdp knowing records
    of the target's cluster, of a clustered fit), those are the other draws' leakages, and the engine audits
    the draws they leave and the worst draw (its witness)."""
    start = time.perf_counter()
    indices = draw_indices(fit, parameters.draws)
    cluster = _per_cluster(fit, parameters.draws, build)
    settings = run["settings"]
    quiet = run | {"settings": RunSettings.of(settings, progress=False)}

    def one(k: int) -> AuditResult:
        model = load_model(model_path, {**build, "parameters": f"draw:{k}"}, max_states=settings.max_states)
        return audit(model, query, mechanism, notion, information=None, **quiet)

    with Progress(f"audit: {parameters.draws} plausible models", len(indices), "draws",
                  enabled=settings.progress) as bar:
        results: list[AuditResult | DrawLeakage] = [one(indices[0])]
        bar.advance(1)
        fast = _by_engine(cluster, results[0], run.get("known")) if cluster is not None else None
        if fast is not None and not _agrees(fast[0], results[0]):  # a model file that is not the fit's template
            fast = None
        for j, k in enumerate(indices[1:], 1):
            results.append(one(k) if fast is None or np.isnan(fast[j]).any() else _draw(results[0], fast[j]))
            bar.advance(1)
    worst = int(np.argmax([r.leakage for r in results]))
    if not isinstance(results[worst], AuditResult):  # the witness and notes are the engine's
        results[worst] = one(indices[worst])
    summary = plausible_summary(indices, results, run["claim"])
    return FittedAudit(parameters, _worst(results, indices, summary, time.perf_counter() - start), summary)


def _by_engine(cluster: PerCluster, first: AuditResult, known: list[int] | None) -> np.ndarray | None:
    """Every draw's leakage per target at once from the engine that audited `first` (one of the draws), when it
    can (`Engine.plausible_leakages`: idp, or pdp knowing records of the target's cluster) and the notion has
    one adversary per target (not pdp's lattice; not ddp, whose known sets come from the dependence sets);
    else None."""
    engine, notion = engine_named(first.engine), named(first.notion)
    if engine is None or first.problem is None or notion.needs_dependence_sets:
        return None
    n = len(first.per_target)
    targets = [i for i, v in enumerate(first.per_target) if v is not None]
    if notion.adversary_count(n, targets, known) != len(targets):
        return None
    problem = first.problem.with_adversaries(notion.adversaries(n, targets, known))
    return engine.plausible_leakages(problem, cluster.fixed, cluster.draws, targets)


@dataclass(frozen=True)
class PerCluster:
    """What the engines' per-cluster paths read (`Engine.plausible_leakages`, `Engine.integrated_leakages`):
    the fit's rows with the means fixed, the means as one draw (to check the path against the engine's own
    audit) and the thinned posterior draws."""

    fixed: FixedClustered
    means: PosteriorDraws
    draws: PosteriorDraws


def _per_cluster(fit: Path, count: int, build: dict) -> PerCluster | None:
    """The per-cluster inputs of S = `count` draws, when the fit has them: rows in clusters and a posterior for
    the cluster effect's scale `sigma` (a logit with a random effect per cluster, which `read_fit` gives as
    FixedClustered), and a model file that takes no other keywords; else None. Either way the engine's own
    audit of one model decides whether the path is used (`_agrees`)."""
    doc = json.loads(fit.read_text())
    if (build or not per_cluster(fit) or "sigma" not in doc.get("draws", {})
            or "cluster_index" not in doc.get("table", {})):
        return None
    fixed = read_fit(fit, "mean")
    if not isinstance(fixed, FixedClustered):
        return None
    means = PosteriorDraws(np.zeros(1, dtype=np.int64), np.array([fixed.intercept]), fixed.beta[None, :],
                           np.array([fixed.sigma]), fixed.offset[None, :])
    return PerCluster(fixed, means, read_draws(fit, count))


AGREE = 1e-9  # the engine's own audit and the per-draw path agree to this (relative) or the path is not used


def _agrees(values: np.ndarray, result: AuditResult) -> bool:
    """Whether per-target `values` computed without a model equal `result`'s (same targets, in order): the
    model file builds the fit's template, as `ddpbayes fit` wrote it."""
    found = np.array([v for v in result.per_target if v is not None], dtype=float)
    return found.shape == values.shape and bool(np.all(np.abs(found - values) <= AGREE * np.maximum(1.0, found)))


@dataclass(frozen=True)
class DrawLeakage:
    """One plausible model's leakage from the per-cluster factors: the worst, per target, the verdict."""

    leakage: float
    per_target: list[float | None]
    verdict: str | None


def _draw(first: AuditResult, values: np.ndarray) -> DrawLeakage:
    """A draw's per-target idp `values` (the targets of `first`, in order) judged as an exact leakage."""
    targets = [i for i, v in enumerate(first.per_target) if v is not None]
    per_target: list[float | None] = [None] * len(first.per_target)
    for i, v in zip(targets, values):
        per_target[i] = float(v)
    a = int(np.argmax(values))
    verdict, _ = judge(AdversaryLeakage(Adversary(targets[a]), float(values[a]), None), first.claim)
    return DrawLeakage(float(values[a]), per_target, verdict)


def plausible_summary(indices: np.ndarray, results: list[AuditResult | DrawLeakage], claim: float | None) -> dict:
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


def _worst(results: list[AuditResult | DrawLeakage], indices: np.ndarray, summary: dict, seconds: float) -> AuditResult:
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
