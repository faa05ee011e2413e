"""Calibrate Laplace or Gaussian noise to a notion under a model, and compare the recipes
(DESIGN §3.1, §3.3, §3.5).

Laplace methods: `exact`, the smallest Laplace scale whose audited leakage under the notion is
at most eps; `dpm`, 000's dependent perturbation mechanism (`dpm.dpm_scale`); `group`, the
group-privacy baseline L dQ / eps (000 Thm. 7); `dp`, classic DP's dQ / eps.

Gaussian methods (the leakage is ε at δ of the notion's privacy profile): `exact`, the smallest
σ whose leakage is at most eps; `dp`, the analytic Gaussian mechanism's σ (Balle & Wang 2018)
for the global L2 sensitivity Δ₂; `group`, the analytic σ for L Δ₂ (L tuples move the query by at
most L Δ₂ in L2 norm); `dpm` is n/a: 000's and 001's DPM calibrates Laplace noise only.

Why root-finding works: leak(i, K) is non-increasing in the Laplace scale, for every model,
adversary and notion. For s2 > s1, Lap(s2) = Lap(s1) + Z with Z independent of both and
Z ~ r δ_0 + (1 - r) Lap(s2), r = (s1 / s2)^2 (characteristic functions: 1 / (1 + s2² w²) =
1 / (1 + s1² w²) · [r + (1 - r) / (1 + s2² w²)]). So the release at s2 is the release at s1
plus noise that ignores the data, L_s2(y | t, x_K) = E_Z L_s1(y - Z | t, x_K), and a ratio of
two such averages is at most the sup of the ratio of their terms (post-processing). For the
exact engine leak(b) is also continuous (a max, over outputs that do not move with b, of
continuous functions); for the gaussian engine and for dp it is exactly c / b.

`exact`: f(b) = leak(b) - eps. From the classic scale b0 = dQ / eps, jump to b1 = b0 leak(b0)
/ eps (the root when leak is c / b: one step for gaussian and dp), bracket the root by doubling
or halving, solve with brentq to 1e-10 relative, then step up until leak(b) <= eps, so the
scale meets eps and is the smallest that does to 1e-9 relative. If the leakage stays at or below
eps down to b0 / 2^50 the notion needs no noise to speak of, and that tiny scale is returned
with a note; an infinite leakage at every scale is an InputError. Sampling engine: f uses the
upper confidence bound (conservative; approximate like the bound itself, DESIGN §2.3). The
plug-in estimate from the cached draws is non-increasing by the same argument applied to the
draws' empirical law, but the bound's Monte Carlo margin can jump when the witness changes,
so the scale is a crossing point of the bound rather than a certified minimum. Every method's
scale is confirmed by a final audit (its verdict against eps).

Gaussian noise: ε at δ is non-increasing in σ, for every model, adversary and notion. For
σ2 > σ1, N(0, σ2²) = N(0, σ1²) + N(0, σ2² - σ1²) with the second term independent of the data,
so the release at σ2 is the release at σ1 passed through one Markov kernel K (adding that
noise) whatever t, t' and x_K are; the hockey-stick divergence E_e^ε(P || Q) = sup_S P(S) -
e^ε Q(S) cannot grow under a common kernel (data processing: K^{-1}(S) is one of the sets of
the sup), so δ(ε) at σ2 is at most δ(ε) at σ1 for every ε, and ε(δ) = inf{ε : δ(ε) <= δ} with
it. The same root-finding applies, started at the analytic σ; the jump is then only a start.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scipy import special

from ddpbayes.auditing import AuditResult, audit
from ddpbayes.ddp import views
from ddpbayes.ddp.coefficients import dependence_engine
from ddpbayes.ddp.dpm import DPMScale, dp_scale, dpm_scale, group_scale
from ddpbayes.ddp.idp_bounds import IdpBounds, dependence_profile, idp_bounds
from ddpbayes.ddp.roots import safe_root
from ddpbayes.encoding import JsonDocument, jsonable, number
from ddpbayes.errors import InputError
from ddpbayes.limits import check_positive_finite, state_limit
from ddpbayes.mechanisms import REGISTRY, Laplace, Mechanism
from ddpbayes.mechanisms.gaussian import check_delta, global_l2_sensitivity
from ddpbayes.mechanisms.make import make_mechanism
from ddpbayes.model import DependenceModel
from ddpbayes.model.reference import provenance
from ddpbayes.notions import NOTIONS, Notion
from ddpbayes.notions import notion as named
from ddpbayes.problem import dependence_size
from ddpbayes.mechanisms.gaussian.gdp import analytic_sigma
from ddpbayes.progress import Progress
from ddpbayes.queries import Query, parse_query
from ddpbayes.queries.general import with_sensitivity
from ddpbayes.settings import RunSettings
from ddpbayes.vocabulary import CALIBRATION_METHODS

if TYPE_CHECKING:
    import pandas
    from matplotlib.axes import Axes

METHODS = CALIBRATION_METHODS
BETA = 0.05  # (alpha, beta)-accuracy: P(|noise| > alpha) = beta, alpha = scale ln(1 / beta) (001 Lemmas 1–2)
MAX_STEPS = 50  # doublings or halvings of the scale when bracketing
NOISES = tuple(kind for kind, cls in REGISTRY.items() if cls.calibratable)  # laplace, gaussian
DPM_NA = ("n/a for Gaussian noise: Liu et al. 2016's (DDP) dependent perturbation mechanism sets a Laplace scale "
          "DS_Q / epsilon; it has no Gaussian counterpart")
BOUNDS_NA = ("n/a for Gaussian noise: Wu et al.'s (IDP) Prop. 3 and Thm. 4 bound epsilon-DP mechanisms, and it is "
             "(epsilon, delta)")


@dataclass
class MethodRow:
    """One recipe's scale, its accuracy, its audited leakage under every notion, 004's bounds.

    Parameters
    ----------
    method : str
        The recipe: exact, dpm, group or dp.
    scale : float
        The Laplace scale, or the Gaussian σ when `gaussian`.
    audits : dict[str, AuditResult]
        The audit at that scale under each notion that could be audited.
    errors : dict[str, str]
        Why a notion could not be audited.
    bounds : IdpBounds or None
        004's bounds; None for Gaussian noise.
    gaussian : bool, default False
        Whether `scale` is a Gaussian σ.
    """

    method: str
    scale: float
    audits: dict[str, AuditResult]
    errors: dict[str, str]
    bounds: IdpBounds | None  # None for Gaussian noise (BOUNDS_NA)
    gaussian: bool = False  # the scale is a Gaussian σ (else a Laplace scale)

    @property
    def alpha(self) -> float:
        """The noise magnitude exceeded with probability BETA: ``P(|Lap(b)| > a) = e^{-a/b}``;
        ``P(|N(0, σ²)| > a) = BETA`` at a = σ Φ^{-1}(1 - BETA / 2)."""
        if self.gaussian:
            return self.scale * float(special.ndtri(1 - BETA / 2))
        return self.scale * math.log(1 / BETA)

    def to_dict(self) -> dict:
        out = {
            "scale": self.scale,
            "alpha": self.alpha,
            "beta": BETA,
            "leakage": {n: number(a.leakage) for n, a in self.audits.items()},
            "verdict": {n: a.verdict for n, a in self.audits.items()},
            "idp_bounds": None if self.bounds is None else self.bounds.to_dict(),
        }
        if self.bounds is None:
            out["idp_bounds_reason"] = BOUNDS_NA
        if any(a.ci is not None for a in self.audits.values()):
            out["ci"] = {n: None if a.ci is None else [number(v) for v in a.ci] for n, a in self.audits.items()}
        if self.errors:
            out["errors"] = self.errors
        return out


@dataclass(repr=False)
class Calibration(JsonDocument):
    """The scale `method` prescribes for `notion` at `epsilon`, its final audit, and the comparison.

    Its views (`ddp.views`): a one-line repr, a notebook's HTML table (`_repr_html_`),
    `to_dataframe` (one row per recipe), `plot` (leakage against the scale per notion), and
    `to_dict`/`to_json`, the document ``ddpbayes calibrate --format json`` prints.

    Parameters
    ----------
    method : str
        The recipe chosen: exact, dpm, group or dp.
    notion : str
        The notion's name.
    epsilon : float
        The privacy budget.
    scale : float
        The scale `method` prescribes (Laplace scale, or Gaussian σ).
    audit : AuditResult
        The audit of that scale under `notion`.
    rows : list of MethodRow
        Every recipe's scale and audits.
    dpm : DPMScale or None
        The DPM's fixed point; None for Gaussian noise.
    dependence_size : int
        L = ``max |N(i)| + 1``.
    engine : str
        The engine that read the dependence structure.
    query : str
        The query's spec.
    tuples : list of str
        The tuples' names.
    notes : list of str, default []
        Notes from the recipes and the engines.
    mechanism : str, default "laplace"
        The noise calibrated.
    delta : float or None, default None
        Gaussian noise: the δ at which the leakage is read.
    """

    method: str
    notion: str
    epsilon: float
    scale: float
    audit: AuditResult
    rows: list[MethodRow]
    dpm: DPMScale | None  # None for Gaussian noise (DPM_NA)
    dependence_size: int
    engine: str
    query: str
    tuples: list[str]
    notes: list[str] = field(default_factory=list)
    mechanism: str = "laplace"
    delta: float | None = None  # Gaussian noise: the δ at which the leakage is read

    @property
    def leakage_at_scale(self) -> float:
        return self.audit.leakage

    def row(self, method: str) -> MethodRow:
        return next(r for r in self.rows if r.method == method)

    def __repr__(self) -> str:
        return views.summary(self)

    def _repr_html_(self) -> str:
        return views.table(self)

    def to_dataframe(self) -> pandas.DataFrame:
        """One row per recipe: method, scale, alpha, each notion's leakage there, Wu et al.'s
        Prop. 3 and Thm. 4 bounds; `attrs` hold the chosen scale and verdict (`views.frame`).
        Needs pandas: ``pip install 'ddpbayes[dataframe]'``.

        Returns
        -------
        pandas.DataFrame
            One row per recipe.
        """
        return views.frame(self)

    def plot(self, ax: Axes | None = None, scales: Sequence[float] | None = None) -> Axes:
        """Each notion's leakage against the noise scale (log axis), epsilon and the recipes'
        scales drawn (`views.plot`).

        Parameters
        ----------
        ax : matplotlib.axes.Axes or None, default None
            Where to draw; None: a new figure.
        scales : sequence of float or None, default None
            More scales to draw the leakage at, each audited now under every notion; None: only
            the recipes' scales (no new audit).

        Returns
        -------
        matplotlib.axes.Axes
            The axes drawn on.
        """
        return views.plot(self, ax, scales)

    def to_dict(self) -> dict:
        """The calibration as ``ddpbayes calibrate --format json`` prints it (docs/reference/json.md).

        Returns
        -------
        dict
            The JSON document, as Python objects (`to_json` is its text).
        """
        comparison = {r.method: r.to_dict() for r in self.rows}
        gaussian = {}
        if self.dpm is None:
            comparison = {m: comparison.get(m, {"scale": None, "reason": DPM_NA}) for m in METHODS}
            gaussian = {"mechanism": self.mechanism, "delta": self.delta}
        return jsonable({
            "scale": self.scale,
            "method": self.method,
            "notion": self.notion,
            "epsilon": self.epsilon,
            "leakage_at_scale": number(self.leakage_at_scale),
            "verdict": self.audit.verdict,
            "ci": None if self.audit.ci is None else [number(v) for v in self.audit.ci],
            "engine": self.engine,
            "query": self.query,
            "tuples": self.tuples,
            "model": None if self.audit.problem is None else provenance(self.audit.problem.model),
            "L": self.dependence_size,
            "dpm": {"scale": None, "reason": DPM_NA} if self.dpm is None else self.dpm.to_dict(),
            "comparison": comparison,
            "notes": self.notes,
            **gaussian,
        })


def calibrate(
    model: DependenceModel,
    query: str | Query,
    notion: str | Notion,
    epsilon: float,
    *,
    method: str = "exact",
    mechanism: str = "laplace",
    delta: float | None = None,
    sensitivity: float | None = None,
    settings: RunSettings | None = None,
    **run,
) -> Calibration:
    """The Laplace scale (or Gaussian σ, with `delta`) each method prescribes for `epsilon`,
    audited under every notion.

    Parameters
    ----------
    model : DependenceModel
        The tuples and their dependence.
    query : str or Query
        The statistic released (a spec is parsed), bound to `model`.
    notion : str or Notion
        The notion the scale is calibrated to.
    epsilon : float
        The target leakage, finite and > 0.
    method : str, default "exact"
        The recipe whose scale is returned: one of `METHODS` (dpm: Laplace only).
    mechanism : str, default "laplace"
        The noise: laplace or gaussian.
    delta : float or None, default None
        Gaussian noise only (and required there): the δ at which the leakage is read.
    sensitivity : float or None, default None
        An expr:/fn: query's sensitivity on continuous domains (``--sensitivity``).
    settings : RunSettings or None, default None
        How to run the audits; None: the defaults.
    **run
        Any `RunSettings` field by name (engine, seed, draws, ...), applied over `settings`.

    Returns
    -------
    Calibration
        The chosen scale, its final audit and every recipe's row.

    Raises
    ------
    InputError
        For an unknown method or mechanism, an epsilon that is not finite and positive, a missing
        or invalid `delta`, dpm with Gaussian noise, a query that does not fit the model, or a
        chosen scale whose leakage cannot be audited.
    """
    settings = RunSettings.of(settings, **run)
    notion = named(notion).name  # a name or a Notion; the calibration keeps the name (JSON)
    if method not in METHODS:
        raise InputError(f"unknown method '{method}' (use {', '.join(METHODS)})")
    check_positive_finite(epsilon, "epsilon")
    query = with_sensitivity(parse_query(query) if isinstance(query, str) else query, sensitivity).bind(model)
    query.check(model.domains)
    noise = _noise(mechanism, delta, method, query, model)
    with state_limit(settings.max_states):  # every method needs it: an expr: query enumerates (and caches) it here
        query.global_sensitivity(model.domains)
    engine, dep = dependence_engine(model, settings)
    size = dependence_size(dep)
    exact, notes = exact_scale(model, query, notion, epsilon, settings, mechanism=noise)
    if noise.profile:
        return _gaussian(model, query, notion, epsilon, method, noise, exact, notes, size, engine.name, settings)
    dpm = dpm_scale(model, query, epsilon, settings)
    scales = {
        "exact": exact,
        "dpm": dpm.scale,
        "group": group_scale(model, query, epsilon, size),
        "dp": dp_scale(model, query, epsilon),
    }
    profile = dependence_profile(model, settings)
    rows = [_row(model, query, m, scales[m], epsilon, settings, profile) for m in METHODS]
    chosen = rows[METHODS.index(method)]
    final = _final(chosen, notion, method)
    notes += list(profile.notes) + _dpm_notes(dpm, rows[METHODS.index("dpm")], notion, epsilon)
    notes += [n for n in final.notes if n not in notes]  # the engine's own, e.g. an untruncated model
    return Calibration(method, notion, float(epsilon), scales[method], final, rows, dpm, size,
                       engine.name, query.spec, model.names, notes)


def _noise(kind: str, delta: float | None, method: str, query: Query, model: DependenceModel) -> Mechanism:
    """The mechanism at scale 1 whose scale is solved for: Laplace, or Gaussian read at `delta`."""
    cls = REGISTRY.get(kind)
    if cls is None or not cls.calibratable:
        raise InputError(f"calibrate sets the scale of Laplace or Gaussian noise: the mechanism must be "
                         f"{' or '.join(NOISES)}, not '{kind}'")
    if not cls.profile:
        return make_mechanism(kind, query, model.domains, scale=1.0, delta=delta)  # refuses a delta
    if delta is None:
        raise InputError("calibrating Gaussian noise needs --delta: the leakage is epsilon at delta of the profile")
    check_delta(delta)
    if method == "dpm":
        raise InputError(f"--method dpm is {DPM_NA}")
    return make_mechanism(kind, query, model.domains, scale=1.0, delta=float(delta))


def _gaussian(model, query, notion, epsilon, method, noise, exact, notes, size, engine, settings) -> Calibration:
    """The Gaussian rows: exact, the analytic σ for L Δ₂ (group) and for Δ₂ (dp); DPM is n/a."""
    l2 = global_l2_sensitivity(query, model.domains)
    scales = {"exact": exact, "group": analytic_sigma(epsilon, noise.delta, size * l2),
              "dp": analytic_sigma(epsilon, noise.delta, l2)}
    rows = [_row(model, query, m, s, epsilon, settings, None, noise) for m, s in scales.items()]
    final = _final(next(r for r in rows if r.method == method), notion, method)
    notes += [n for n in final.notes if n not in notes]
    return Calibration(method, notion, float(epsilon), scales[method], final, rows, None, size, engine,
                       query.spec, model.names, notes, noise.kind, noise.delta)


def _final(chosen: MethodRow, notion: str, method: str) -> AuditResult:
    final = chosen.audits.get(notion)
    if final is None:
        raise InputError(f"the {notion} leakage at the {method} scale could not be audited: {chosen.errors[notion]}")
    return final


def exact_scale(
    model: DependenceModel, query: Query, notion: str, epsilon: float, settings: RunSettings | None = None,
    *, mechanism: Mechanism | None = None, targets: Sequence[int] | None = None, known: Sequence[int] | None = None,
) -> tuple[float, list[str]]:
    """The smallest scale of `mechanism` (default Laplace; Gaussian: σ, the leakage read at its
    δ) whose leakage under `notion` (an estimate's upper bound) is at most `epsilon`, with notes
    (module docstring).

    Parameters
    ----------
    model : DependenceModel
        The tuples and their dependence.
    query : Query
        The statistic released, bound to `model`.
    notion : str
        The notion's name.
    epsilon : float
        The target leakage.
    settings : RunSettings or None, default None
        How to run the audits; None: the defaults.
    mechanism : Mechanism or None, default None
        The noise whose scale is solved for; None: Laplace.
    targets, known : sequence of int or None, default None
        The audits' targets (None: every tuple) and pdp's known set (None: every known set).

    Returns
    -------
    tuple of (float, list of str)
        The scale, and notes (e.g. that no noise to speak of is needed).

    Raises
    ------
    InputError
        If the leakage is infinite at a scale tried, or stays above `epsilon` up to 2^50 times the start.
    """
    settings = settings or RunSettings()
    mechanism = mechanism or Laplace(1.0)
    name = "Gaussian sigma" if mechanism.profile else "Laplace scale"
    # the root-finding's length is not known: a line once it has taken HEARTBEAT seconds (DESIGN §2.4)
    with Progress(f"calibrate ({notion}, {name})", None, "audits", enabled=settings.progress, slow_only=True) as bar:

        def level(b: float) -> float:
            r = audit(model, query, _at(mechanism, b), notion, information=None, settings=settings, target=targets,
                      known=known)
            bar.advance(1)
            if math.isinf(r.leakage):
                raise InputError(f"no {name} bounds the {notion} leakage: {r.reason or 'it is infinite'}")
            return r.leakage if r.ci is None else max(r.leakage, r.ci[1])

        if mechanism.profile:
            b0 = analytic_sigma(epsilon, mechanism.delta, global_l2_sensitivity(query, model.domains))
        else:
            b0 = dp_scale(model, query, epsilon)
        v0 = level(b0)
        notes: list[str] = []
        start = b0 * v0 / epsilon if v0 > 0 else b0
        lo, hi = _bracket(level, epsilon, start)
        if lo is None:
            notes.append(f"the {notion} leakage stays at or below epsilon down to scale {hi:.3g}: "
                         "no noise to speak of is needed")
            return hi, notes
        b = hi if lo == hi else safe_root(lambda s: level(s) - epsilon, lo, hi, epsilon * 1e-12)
        return float(b), notes


def _at(mechanism: Mechanism, scale: float) -> Mechanism:
    """`mechanism` with its scale set (Gaussian σ or Laplace scale: `Mechanism.with_scale`)."""
    return mechanism.with_scale(scale)


def _bracket(level: Callable[[float], float], epsilon: float, start: float) -> tuple[float | None, float]:
    """(lo, hi) with level(lo) > eps >= level(hi) (lo = hi when start is the root; lo None when
    no scale down to start / 2^MAX_STEPS leaks more than eps)."""
    v = level(start)
    if abs(v - epsilon) <= 1e-12 * epsilon:  # the jump hit the root (leak = c / b)
        return start, start
    if v > epsilon:
        lo = start
        for _ in range(MAX_STEPS):
            hi = lo * 2
            if level(hi) <= epsilon:
                return lo, hi
            lo = hi
        raise InputError(f"the leakage stays above epsilon up to scale {lo:.3g}")
    hi = start
    for _ in range(MAX_STEPS):
        lo = hi / 2
        if level(lo) > epsilon:
            return lo, hi
        hi = lo
    return None, hi


def _dpm_notes(dpm: DPMScale, row: MethodRow, notion: str, epsilon: float) -> list[str]:
    """When some rho_ij > 1, what the DPM scale then guarantees: its audited leakage under `notion`."""
    note = dpm.coefficients.assumption_note()
    if note is None:
        return []
    audited = row.audits.get(notion)
    if audited is None:
        return [f"{note}; the {notion} leakage at the dpm scale could not be audited: {row.errors[notion]}"]
    meets = "meets" if audited.verdict == "pass" else "does not meet" if audited.verdict == "fail" else "may not meet"
    leak = f"{notion} leakage {audited.leakage:.6g}"
    return [f"{note}; audited, the dpm scale {dpm.scale:.6g} gives {leak}, which {meets} epsilon = {epsilon:g}"]


def _row(model, query, method, scale, epsilon, settings, profile, noise: Mechanism | None = None) -> MethodRow:
    noise = noise or Laplace(1.0)
    audits, errors = {}, {}
    for notion in NOTIONS:
        try:
            audits[notion] = audit(model, query, _at(noise, scale), notion, claim=epsilon, information=None,
                                   settings=settings)
        except InputError as exc:  # e.g. a sampling pdp lattice too large to estimate
            errors[notion] = str(exc)
    if noise.profile:
        return MethodRow(method, scale, audits, errors, None, gaussian=True)
    return MethodRow(method, scale, audits, errors, idp_bounds(model, query, scale, profile))
