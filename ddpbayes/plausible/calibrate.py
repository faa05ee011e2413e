"""`calibrate_fitted`: the smallest Laplace scale that meets epsilon under a fitted model, its
parameters set as `--parameters` says (DESIGN §9.6, issue #41 item 4).

- `mean` (`draw:K`): the smallest scale for the model file's build, the posterior means fixed;
- `integrated:S`: the smallest scale for the Bayesian adversary's model (`integrated_model`);
- `draws:S`: the smallest scale under which every plausible model meets epsilon. Each draw's
  leakage is non-increasing in the scale (ddp.calibration: Lap(s2) is Lap(s1) plus noise that
  ignores the data), so the class's leakage max_k leak_k(b) is too, and it is at most epsilon
  exactly when b is at least every draw's own smallest scale b_k: the class's scale is max_k b_k.
  The draws are taken from the leakiest at classic DP's scale down; a draw that already meets epsilon
  at the largest b_k found so far needs no root-finding (its own b_k is at most that), so only the
  draws that raise it are solved (the order only saves work: the maximum is the same in any order).

Classic DP's answer for the same release is beside it: Laplace noise of scale b on a query of
global sensitivity dQ is (dQ / b)-DP under independence, so classic DP asks dQ / epsilon.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ddpbayes.auditing import audit
from ddpbayes.ddp.calibration import exact_scale
from ddpbayes.ddp.dpm import dp_scale
from ddpbayes.encoding import JsonDocument, number
from ddpbayes.errors import InputError
from ddpbayes.fitting.posterior import draw_indices, integrated_model
from ddpbayes.limits import check_positive_finite, state_limit
from ddpbayes.mechanisms import Laplace
from ddpbayes.model.loading import load_model
from ddpbayes.notions import notion as named
from ddpbayes.plausible.audit import FittedAudit, Parameters, audit_fitted, check_fitted, parse_parameters
from ddpbayes.queries import Query, parse_query
from ddpbayes.settings import RunSettings


@dataclass(repr=False)
class FittedCalibration(JsonDocument):
    """The smallest Laplace scale meeting `epsilon` under `notion` with the fitted parameters set by
    `parameters`, the audit at that scale (`found`, epsilon its claim) and classic DP's scale;
    `solved` maps the posterior draws whose own smallest scale was solved (draws:S) to it."""

    parameters: Parameters
    notion: str
    epsilon: float
    scale: float
    sensitivity: float
    found: FittedAudit
    query: str
    solved: dict[int, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def classic_scale(self) -> float:
        """Classic DP's scale for epsilon: dQ / epsilon."""
        return self.sensitivity / self.epsilon

    @property
    def classic_epsilon(self) -> float:
        """Classic DP's epsilon of the calibrated release: dQ / scale."""
        return self.sensitivity / self.scale

    def to_dict(self) -> dict:
        """The document `ddpbayes calibrate MODEL.py --parameters MODE --format json` prints."""
        r = self.found.result
        return {
            "parameters": str(self.parameters), "method": "exact", "notion": self.notion, "epsilon": self.epsilon,
            "scale": self.scale, "leakage_at_scale": number(r.leakage), "verdict": r.verdict, "engine": r.engine,
            "query": self.query, "sensitivity": self.sensitivity,
            "classic_dp": {"scale": self.classic_scale, "epsilon_at_scale": self.classic_epsilon},
            "solved_draws": None if self.parameters.mode != "draws" else
            {"posterior_draws": list(self.solved), "scales": list(self.solved.values())},
            "audit": self.found.to_dict(), "notes": self.notes,
        }


def calibrate_fitted(model_path: str | Path, parameters: Parameters | str, query: str | Query, notion: str,
                     epsilon: float, *, settings: RunSettings | None = None, targets: Sequence[int] | None = None,
                     known: Sequence[int] | None = None) -> FittedCalibration:
    """The smallest Laplace scale whose leakage under `notion` (for `targets`, pdp's `known`) is
    at most `epsilon` on the fitted model at `model_path`, its parameters set by `parameters`
    (module docstring); confirmed by an audit at that scale with epsilon as the claim."""
    parameters = parse_parameters(parameters) if isinstance(parameters, str) else parameters
    fit = check_fitted(model_path)
    check_positive_finite(epsilon, "epsilon")
    notion = named(notion).name
    settings = RunSettings.of(settings)
    query = parse_query(query) if isinstance(query, str) else query
    solve = {"settings": settings, "targets": targets, "known": known}
    notes: list[str] = []
    solved: dict[int, float] = {}
    if parameters.mode == "draws":
        scale, solved = _class_scale(model_path, fit, parameters.draws, query, notion, epsilon, notes, **solve)
    else:
        model = (integrated_model(fit, parameters.draws) if parameters.mode == "integrated" else
                 load_model(model_path, {"parameters": str(parameters)}, max_states=settings.max_states))
        scale = _solve(model, query, notion, epsilon, notes, **solve)
    found = audit_fitted(model_path, parameters, query, Laplace(scale), notion, settings=settings, claim=epsilon,
                         information=None, targets=targets, known=known)
    problem = found.result.problem
    with state_limit(settings.max_states):  # an expr: query enumerates its domain
        sensitivity = problem.query.global_sensitivity(problem.model.domains)
    return FittedCalibration(parameters, notion, float(epsilon), scale, float(sensitivity), found, query.spec, solved,
                             notes)


def _solve(model, query: Query, notion: str, epsilon: float, notes: list[str], *, settings: RunSettings,
           targets, known) -> float:
    """`exact_scale` on one model, its notes kept."""
    scale, said = exact_scale(model, query.bind(model), notion, epsilon, settings, targets=targets, known=known)
    notes += [n for n in said if n not in notes]
    return scale


def _class_scale(model_path, fit: Path, draws: int, query: Query, notion: str, epsilon: float, notes: list[str],
                 **solve) -> tuple[float, dict[int, float]]:
    """max_k b_k over the thinned draws, solving only the draws that do not yet meet epsilon at the
    largest b_k so far (module docstring); returns it and the solved draws' scales."""
    settings = solve["settings"]
    models = {int(k): load_model(model_path, {"parameters": f"draw:{int(k)}"}, max_states=settings.max_states)
              for k in draw_indices(fit, draws)}
    first = next(iter(models.values()))
    classic = dp_scale(first, query.bind(first), epsilon)
    at_classic = {k: _leakage(m, query, notion, classic, **solve) for k, m in models.items()}
    best, solved = 0.0, {}
    for k in sorted(models, key=lambda k: -at_classic[k]):  # the leakiest first: it likely needs the most noise
        if best > 0 and _leakage(models[k], query, notion, best, **solve) <= epsilon:
            continue
        solved[k] = _solve(models[k], query, notion, epsilon, notes, **solve)
        best = max(best, solved[k])
    return best, solved


def _leakage(model, query: Query, notion: str, scale: float, *, settings: RunSettings, targets, known) -> float:
    """The leakage at `scale` (an estimate's upper bound, as `exact_scale` reads it)."""
    r = audit(model, query.bind(model), Laplace(scale), notion, information=None, settings=settings, target=targets,
              known=known)
    if r.leakage == float("inf"):
        raise InputError(f"no Laplace scale bounds the {notion} leakage: {r.reason or 'it is infinite'}")
    return r.leakage if r.ci is None else max(r.leakage, r.ci[1])
