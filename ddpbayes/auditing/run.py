"""`audit`: the leakage of a mechanism on a dependence model under one notion, with a verdict."""

from __future__ import annotations

import html
import itertools
import json
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from ddpbayes.auditing.joint import composition_block
from ddpbayes.encoding import jsonable, number
from ddpbayes.engines import AdversaryLeakage, Engine, Witness, engine_named, passed_over, select_engine
from ddpbayes.errors import InputError
from ddpbayes.formatting import abbreviated, fmt
from ddpbayes.auditing.information import check_unit, information_block
from ddpbayes.notions.lattice import greedy_pdp, greedy_reason, layer_bounds
from ddpbayes.limits import MAX_SECONDS, byte_text, check_memory, count_text, state_limit
from ddpbayes.mechanisms import Mechanism, make_mechanism
from ddpbayes.model import DependenceModel
from ddpbayes.notions import (
    adversaries,
    adversary_count,
    check_notion,
    dp_leakage,
    lattice_summary,
    worst_of,
)
from ddpbayes.parallel import map_units
from ddpbayes.problem import Adversary, Problem
from ddpbayes.profiles import Profile
from ddpbayes.progress import Progress, duration
from ddpbayes.queries import Query, parse_query
from ddpbayes.settings import RunSettings

if TYPE_CHECKING:
    import pandas

RELATIVE_TOLERANCE = 1e-9  # exact leakage within this of the claim passes (floating-point rounding)
CHUNK = 1024  # adversaries handed to an exact engine at once: the lattice is streamed, never listed
WINDOW = 64  # batches of CHUNK adversaries handed to the workers at once
HTML_ROWS = 40  # targets an AuditResult's HTML table shows before it elides the middle


@dataclass(repr=False)
class AuditResult:
    """The leakage of one audit: the worst adversary of the notion (its value, witness, and for an
    estimate its 90% interval and MCMC diagnostics), the worst per target, the verdict against
    the claim, and what was asked (`problem`: model, query, mechanism and settings; its query and
    mechanism as given, with epsilon, go to JSON).

    In a notebook it shows itself as a one-line repr and an HTML table (`_repr_html_`, one row per
    audited target); `to_dict`/`to_json` are the CLI's `--format json` document, `to_dataframe`
    one row per audited target with its worst adversary's witness."""

    notion: str
    leakage: float
    per_target: list[float | None]
    witness: Witness | None
    engine: str
    verdict: str | None
    claim: float | None
    seconds: float
    ci: tuple[float, float] | None = None
    reason: str | None = None
    verdict_reason: str | None = None
    diagnostics: dict | None = None
    lattice: list[AdversaryLeakage] | None = None
    dependence_sets: list[list[int]] | None = None
    mechanism: dict = field(default_factory=dict)
    query: str = ""
    tuples: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problem: Problem | None = field(default=None, compare=False)
    composition: dict | None = None  # several releases: the joint leakage against Thms 3–4 (`composition.summary`)
    information: dict | None = None  # 004's KL/MI/CMI beside the leakage (`information.audit`); None when not asked
    information_reason: str | None = None  # why `information` is not available
    profile: Profile | None = None  # (ε, δ) mechanisms: the notion's privacy profile; `leakage` is ε at its δ
    target_worst: dict[int, AdversaryLeakage] | None = field(default=None, compare=False)  # each target's worst

    @property
    def lower_bound(self) -> bool:
        """True for a greedy pdp search's result: a lower bound on the notion, not its value."""
        return self.notion == "pdp" and self.problem is not None and self.problem.settings.pdp_greedy > 0

    def to_dict(self) -> dict:
        """The audit as `ddpbayes audit --format json` prints it (numbers as `encoding.number`:
        inf and nan as strings)."""
        out = {
            "notion": self.notion,
            "leakage": number(self.leakage),
            "lower_bound": self.lower_bound,
            "per_target": [None if v is None else number(v) for v in self.per_target],
            "witness": None if self.witness is None else self.witness.to_json(),
            "engine": self.engine,
            "verdict": self.verdict,
            "claim": self.claim,
            "ci": None if self.ci is None else [number(v) for v in self.ci],
            "seconds": round(self.seconds, 4),
            "reason": self.reason,
            "verdict_reason": self.verdict_reason,
            "diagnostics": self.diagnostics,
            "query": self.query,
            "mechanism": self.mechanism,
            "tuples": self.tuples,
            "notes": self.notes,
        }
        if self.profile is not None:  # delta, epsilon_at_delta, profile, zcdp_rho, gdp_mu (DESIGN §3.5)
            out.update(self.profile.to_json(self.problem.mechanism.delta))
        if self.information is not None or self.information_reason is not None:
            out["information"] = self.information
            if self.information_reason is not None:
                out["information_reason"] = self.information_reason
        if self.composition is not None:
            out["composition"] = self.composition
        if self.problem is not None:
            out["settings"] = self.problem.settings.to_json()
            if getattr(self.problem.query, "given", None) is not None:  # an expr:/fn: query's --sensitivity
                out["sensitivity_given"] = self.problem.query.given
        if self.dependence_sets is not None:
            out["dependence_sets"] = self.dependence_sets
        if self.lattice is not None:
            out["lattice"] = [
                {"target": r.adversary.target, "known": sorted(r.adversary.known), "leakage": number(r.value)}
                for r in self.lattice
            ]
            out["lattice_summary"] = lattice_summary(self.lattice)
        return jsonable(out)

    def to_json(self) -> str:
        """`to_dict` as JSON text: exactly what `ddpbayes audit --format json` prints."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)

    def to_dataframe(self) -> pandas.DataFrame:
        """A pandas DataFrame, one row per audited target: `target` (its index), `name`, `leakage`,
        `lower` and `upper` (an estimate's interval, else NaN), and its worst adversary's witness:
        `known` (tuple indices), `known_values`, `t`, `t_prime`, `y`. `attrs` holds notion, engine,
        lower_bound (a greedy search), claim, verdict and delta (Gaussian noise: `leakage` is ε at
        that δ). Needs pandas: `pip install 'ddpbayes[dataframe]'`."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("AuditResult.to_dataframe needs pandas: pip install 'ddpbayes[dataframe]' "
                              "(or pip install pandas)") from None
        rows = []
        for i, value in self._audited():
            worst = (self.target_worst or {}).get(i)
            w = None if worst is None else worst.witness
            ci = None if worst is None else worst.ci
            known = None if w is None else sorted(w.adversary.known)
            rows.append({
                "target": i, "name": self._name(i), "leakage": float(value),
                "lower": math.nan if ci is None else float(ci[0]), "upper": math.nan if ci is None else float(ci[1]),
                "known": known,
                "known_values": None if w is None or w.known_values is None else [_plain(w.known_values.get(k))
                                                                                   for k in known],
                "t": None if w is None else _plain(w.t), "t_prime": None if w is None else _plain(w.t_prime),
                "y": None if w is None or w.y is None else (float(w.y[0]) if len(w.y) == 1
                                                           else tuple(float(v) for v in w.y)),
            })
        columns = ["target", "name", "leakage", "lower", "upper", "known", "known_values", "t", "t_prime", "y"]
        frame = pd.DataFrame(rows, columns=columns)
        frame.attrs.update(notion=self.notion, engine=self.engine, lower_bound=self.lower_bound, claim=self.claim,
                           verdict=self.verdict, delta=self._delta())
        return frame

    def __repr__(self) -> str:
        """One line: notion, leakage (ε at δ for Gaussian noise; ≥ for a lower bound), interval,
        engine, verdict and claim, and the witness."""
        parts = [f"{self.notion} leakage{'>=' if self.lower_bound else '='}{fmt(self.leakage)}"]
        if self._delta() is not None:
            parts.append(f"(epsilon at delta={self._delta():g})")
        if self.lower_bound:
            parts.append("(a lower bound: greedy search)")
        if self.ci is not None:
            parts.append(f"ci=[{fmt(self.ci[0])}, {fmt(self.ci[1])}]")
        parts.append(f"engine={self.engine}")
        if self.claim is not None:
            parts.append(f"verdict={self.verdict} claim={fmt(self.claim)}")
        return f"AuditResult({' '.join(parts)}; witness: {self._witness_text(self.witness)})"

    def _repr_html_(self) -> str:
        """A small self-contained HTML table for Jupyter: a header line (notion, leakage, engine,
        verdict), then one row per audited target with its leakage, interval and witness (the first
        and last `HTML_ROWS // 2` when there are more; `to_dataframe` has them all)."""
        e = html.escape
        head = (f"<b>{e(self.notion)}</b> leakage {'&ge; ' if self.lower_bound else ''}{e(fmt(self.leakage))}"
                + (f" (epsilon at delta = {self._delta():g})" if self._delta() is not None else "")
                + (" (a lower bound: greedy search)" if self.lower_bound else "")
                + (f", interval [{e(fmt(self.ci[0]))}, {e(fmt(self.ci[1]))}]" if self.ci is not None else "")
                + f" &middot; engine {e(self.engine)}"
                + (f" &middot; verdict <b>{e(str(self.verdict))}</b> (claim {e(fmt(self.claim))})"
                   if self.claim is not None else "")
                + f" &middot; query {e(self.query)}, mechanism {e(self.mechanism_text())}")
        audited = self._audited()
        rows_shown = audited if len(audited) <= HTML_ROWS else [*audited[:HTML_ROWS // 2], None,
                                                            *audited[-(HTML_ROWS // 2):]]
        estimate = any(w.ci is not None for w in (self.target_worst or {}).values())
        leakage = ("leakage (lower bound)" if self.lower_bound
                   else "leakage (epsilon at delta)" if self._delta() is not None else "leakage")
        cells = ["target", "tuple", leakage, *(["interval"] if estimate else []), "witness"]
        rows = ["<tr>" + "".join(f"<th>{c}</th>" for c in cells) + "</tr>"]
        for item in rows_shown:
            if item is None:
                rows.append(f'<tr><td colspan="{len(cells)}">&hellip; {len(audited) - HTML_ROWS:,} more targets '
                            "(to_dataframe() has them all)</td></tr>")
                continue
            i, value = item
            worst = (self.target_worst or {}).get(i)
            ci = None if worst is None else worst.ci
            interval = ["" if ci is None else f"[{fmt(ci[0])}, {fmt(ci[1])}]"] if estimate else []
            witness = "" if worst is None else self._witness_text(worst.witness)
            rows.append("<tr>" + "".join(f"<td>{e(c)}</td>" for c in (str(i), self._name(i), fmt(value),
                                                                      *interval, witness)) + "</tr>")
        notes = "".join(f"<p>{e(text)}</p>" for text in (self.reason, self.verdict_reason) if text)
        return (f'<div class="ddpbayes-audit"><p>AuditResult: {head}</p>{notes}'
                f"<table>{''.join(rows)}</table></div>")

    def mechanism_text(self) -> str:
        """The mechanism's parameters as given, `kind=laplace, scale=1.0, epsilon=1.0` (Gaussian
        noise: sigma, rho, epsilon and delta)."""
        shown = ("kind", "sigma", "rho", "epsilon", "delta") if self.profile is not None else ("kind", "scale",
                                                                                             "epsilon")
        return ", ".join(f"{k}={v}" for k, v in self.mechanism.items() if k in shown)

    def _delta(self) -> float | None:
        """The δ at which `leakage` is ε (Gaussian noise: DESIGN §3.5), else None."""
        return None if self.profile is None or self.problem is None else self.problem.mechanism.delta

    def _audited(self) -> list[tuple[int, float]]:
        """(target, its worst leakage) for every audited target."""
        return [(i, v) for i, v in enumerate(self.per_target) if v is not None]

    def _name(self, k: int) -> str:
        """Tuple k's name (its index when the result names no tuples)."""
        return self.tuples[k] if k < len(self.tuples) else str(k)

    def _witness_text(self, w: Witness | None) -> str:
        """`target x0, known {x1=1}, t=1 t'=0, y=0.5` (long lists abbreviated)."""
        if w is None:
            return "none"
        known = sorted(w.adversary.known)
        names = [self._name(k) for k in known]
        if w.known_values is not None:
            names = [f"{name}={fmt(w.known_values.get(k))}" for name, k in zip(names, known)]
        y = "-" if w.y is None else fmt(w.y[0]) if len(w.y) == 1 else f"({abbreviated([fmt(v) for v in w.y])})"
        return (f"target {self._name(w.adversary.target)}, known {{{abbreviated(names)}}}, "
                f"t={fmt(w.t)} t'={fmt(w.t_prime)}, y={y}")


def _plain(v: float | None) -> float | None:
    """A plain Python float (not np.float64), None kept."""
    return None if v is None else float(v)


def audit(
    model: DependenceModel,
    query: str | Query,
    mechanism: str | Mechanism,
    notion: str,
    *,
    scale: float | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    rho: float | None = None,
    claim: float | None = None,
    targets: Sequence[int] | None = None,
    known: Sequence[int] | None = None,
    lattice: bool = False,
    information: str | None = "nats",
    settings: RunSettings | None = None,
    **run,
) -> AuditResult:
    """Leakage of `mechanism` releasing `query` on `model` under `notion` (DESIGN §1).

    `mechanism` is a Mechanism, or its kind with `scale` or `epsilon` (classic DP's scale:
    global sensitivity / epsilon); Gaussian noise takes σ as `scale`, or `rho` (zCDP), or `epsilon`
    with `delta` (the analytic Gaussian mechanism), and its leakage is ε at `delta` (default 1e-6)
    on the notion's privacy profile (`profile`; DESIGN §3.5). `targets` restricts the targets; `known` fixes the
    adversary's knowledge for pdp; `lattice` keeps every pdp adversary in the result.
    How it runs is `settings` with any `RunSettings` field given by name in `run` (engine,
    method, seed, draws, tune, chains, workers, scheduler, max_runs, max_states, max_adversaries, pdp_greedy,
    progress, force). With pdp_greedy = k (`--search greedy --top-k k`), pdp is seed 003's greedy search:
    a lower bound (`reason` and `lower_bound` say so), which can fail a claim but never pass it.
    `information` ("nats", the default as on the command line, or "bits"; None skips them) adds
    seed 004's KL/MI/CMI (DESIGN §3.4); loops over audits pass None so as not to pay for them.
    """
    start = time.perf_counter()
    settings = RunSettings.of(settings, **run)
    check_notion(notion)
    check_unit(information)
    query = (parse_query(query) if isinstance(query, str) else query).bind(model)
    query.check(model.domains)
    if isinstance(mechanism, str):
        with state_limit(settings.max_states):  # --epsilon may enumerate the domains (an expr: query's sensitivity)
            mechanism = make_mechanism(mechanism, query, model.domains, scale=scale, epsilon=epsilon, delta=delta,
                                       rho=rho)
    else:
        if delta is not None or rho is not None:
            raise InputError("delta and rho set a mechanism built from its kind: give them to the Mechanism itself")
        mechanism.check(query, model.domains)
    if targets is None and known is not None:  # with --known alone, every unknown tuple is a target
        targets = [i for i in range(model.n) if i not in set(known)]
    targets = _targets(targets, model.n)
    known = _known(known, targets, model.n, notion)
    if lattice and notion != "pdp":
        raise InputError("--lattice lists the pdp adversaries: use it with --notion pdp")
    _check_greedy(settings.pdp_greedy, notion, known, lattice)
    if claim is not None and (not isinstance(claim, (int, float)) or math.isnan(claim) or claim < 0):
        raise InputError(f"the claim must be a non-negative number, got {claim}")
    problem = Problem(model, query, mechanism, settings=settings)

    with state_limit(settings.max_states):
        evaluated = _evaluate(problem, notion, targets, known, lattice)
    worst, per_target = evaluated.worst, evaluated.per_target
    verdict, verdict_reason = judge(worst, claim, lower_bound=evaluated.bound is not None)
    profile = None if worst.profile is None else worst.profile.with_rho()  # ρ for the worst adversary only
    result = AuditResult(
        notion=notion,
        leakage=worst.value,
        per_target=per_target,
        witness=worst.witness,
        engine=evaluated.engine,
        verdict=verdict,
        verdict_reason=verdict_reason,
        diagnostics=worst.diagnostics,
        claim=claim,
        seconds=time.perf_counter() - start,
        ci=worst.ci,
        reason="; ".join(r for r in (evaluated.bound, worst.reason) if r) or None,
        lattice=evaluated.lattice,
        dependence_sets=None if evaluated.dependence_sets is None else [sorted(s) for s in evaluated.dependence_sets],
        mechanism=mechanism.describe(),
        query=query.spec,
        tuples=model.names,
        notes=[*evaluated.notes, *getattr(query, "sensitivity_notes", lambda _: [])(model.domains),  # expr:/fn:
               *_profile_notes(mechanism, profile)],
        problem=problem,
        profile=profile,
        target_worst={i: _settled(r) for i, r in sorted(evaluated.by_target.items())},
    )
    if information is not None:  # 004's measures in this unit (nats or bits; DESIGN §3.4)
        result.information, result.information_reason = information_block(
            problem, evaluated.engine, notion, targets, per_target, worst.adversary.target, information)
    if mechanism.composed:
        result.composition = composition_block(result, evaluated.engine, evaluated.dependence_sets, notion, targets,
                                               known, lower_bounds=evaluated.bound is not None)
    return result


def _settled(record: AdversaryLeakage) -> AdversaryLeakage:
    """A target's worst adversary as the result keeps it: a privacy profile without its pending ρ
    search (a closure over the engine's data; only the notion's worst adversary pays for ρ)."""
    if record.profile is None or record.profile.pending is None:
        return record
    return replace(record, profile=replace(record.profile, pending=None))


def _profile_notes(mechanism: Mechanism, profile: Profile | None) -> list[str]:
    """What the leakage of an (ε, δ) mechanism means (DESIGN §3.5)."""
    if not mechanism.profile:
        return []
    if profile is None:
        raise InputError(f"the engine computed no privacy profile for {mechanism.kind} noise")
    note = [(f"{mechanism.kind} noise: the leakage is the epsilon at delta = {mechanism.delta:g} of the notion's "
             "privacy profile delta(epsilon) = sup over its adversaries, x_K and t != t' of the hockey-stick "
             "divergence (Gaussian tails leave the pure-epsilon log-ratio unbounded in general)")]
    if profile.certified is False:
        note.append("the sign changes of some pairs' L(y|t) - e^epsilon L(y|t') were found on a 0.05-sigma grid and "
                    "refined, without the proof of completeness Descartes' rule gives for the others (DESIGN §3.5)")
    if profile.rho_note and profile.rho is not None:
        note.append(f"zCDP rho {profile.rho:.6g}: {profile.rho_note}")
    return note


@dataclass
class _Evaluated:
    worst: AdversaryLeakage
    per_target: list[float | None]
    engine: str
    dependence_sets: list[frozenset[int]] | None = None
    lattice: list[AdversaryLeakage] | None = None
    notes: list[str] = field(default_factory=list)
    bound: str | None = None  # why the leakage is only a lower bound on the notion (a greedy search)
    by_target: dict[int, AdversaryLeakage] = field(default_factory=dict)  # each target's worst adversary


def _evaluate(problem: Problem, notion: str, targets: list[int], known: list[int] | None,
              lattice: bool) -> _Evaluated:
    """Every adversary of the notion, by the engine that fits (dp needs none)."""
    n, settings = problem.model.n, problem.settings
    if notion == "dp":
        results = dp_leakage(problem, targets)
        by_target = _fold_targets(results, {})
        return _Evaluated(worst_of(results), _values(by_target, n), "analytic", by_target=by_target)
    chosen = select_engine(problem, "sampling" if settings.method == "posterior" else settings.engine)
    dep_sets = chosen.dependence_sets(problem) if notion == "ddp" else None
    greedy = settings.pdp_greedy if notion == "pdp" else 0
    searched = None
    if greedy:
        searched = _greedy(chosen, problem, targets, greedy)
    elif notion == "pdp" and known is None and not lattice:
        searched = chosen.pdp_worst(problem, targets)
    kept, by_target = None, {}
    if searched is not None:
        worst = worst_of(searched)
        _fold_targets(searched, by_target)
    else:
        count = adversary_count(notion, n, targets, known)
        _check_lattice(chosen, problem, notion, targets, count, settings.max_adversaries, lattice)
        advs = adversaries(notion, n, targets, known, dep_sets)
        chunk = count if chosen.estimates else CHUNK  # an estimating engine plans its MCMC runs as a whole
        bar = Progress(notion, count, "adversaries", enabled=settings.progress and count > chunk)
        worst, kept = _stream(chosen, problem, advs, chunk, bar, lattice, by_target)
    auto = passed_over(problem, chosen) if settings.engine == "auto" and settings.method != "posterior" else []
    return _Evaluated(worst, _values(by_target, n), chosen.name, dep_sets, kept, auto + chosen.notes(problem),
                      greedy_reason(greedy) if greedy else None, by_target)


def _greedy(engine: Engine, problem: Problem, targets: list[int], top_k: int) -> list[AdversaryLeakage]:
    """Seed 003's greedy pdp search (`lattice_search`), its worst case checked against
    --max-adversaries before any adversary is evaluated, with a progress line (the search makes
    an engine call per layer at least, however few adversaries it has)."""
    count = len(targets) * sum(layer_bounds(problem.model.n, top_k))
    if count > problem.settings.max_adversaries:
        what = (f"the greedy pdp search (top-k = {top_k}) evaluates up to {count:,} adversaries "
                f"({len(targets)} targets x {count // len(targets):,} known sets)")
        _refuse(engine, problem, what, count, problem.settings.max_adversaries, "lower --top-k or restrict --target")
    chunk = count if engine.estimates else CHUNK  # an estimating engine plans a layer's MCMC runs as a whole
    bar = Progress(f"pdp greedy (top-k = {top_k})", count, "adversaries", enabled=problem.settings.progress)
    return greedy_pdp(engine, problem, targets, top_k, chunk, bar)


def _stream(engine: Engine, problem: Problem, advs: Iterator[Adversary], chunk: int, bar: Progress,
            keep: bool, by_target: dict[int, AdversaryLeakage],
            ) -> tuple[AdversaryLeakage, list[AdversaryLeakage] | None]:
    """Evaluate the adversaries `chunk` at a time, a batch per unit of work (`parallel.map_units`:
    here or on Dask workers), `WINDOW` batches in flight, keeping only the running worst, overall
    and per target in `by_target` (and every result only when `keep`, for --lattice): memory does
    not grow with the lattice. The batches are the same whatever the workers, and folded in order,
    so are the results."""
    worst, kept = None, [] if keep else None
    while batches := [b for b in (list(itertools.islice(advs, chunk)) for _ in range(WINDOW)) if b]:
        units = [(engine.name, problem, tuple(batch)) for batch in batches]
        for results in map_units(_batch_leakage, units, problem.settings, "adversaries",
                                 "adversaries", bar=bar, weight=lambda unit: len(unit[2])):
            if keep:
                kept += results
            worst = worst_of(results + ([worst] if worst else []))
            _fold_targets(results, by_target)
    return worst, kept


def _fold_targets(results: list[AdversaryLeakage],
                  by_target: dict[int, AdversaryLeakage]) -> dict[int, AdversaryLeakage]:
    """Fold `results` into each target's worst adversary so far, picked as the notion's is (`worst_of`:
    for estimates by the selection-half score, with the largest upper bound: DESIGN §2.3)."""
    groups: dict[int, list[AdversaryLeakage]] = {}
    for r in results:
        groups.setdefault(r.adversary.target, []).append(r)
    for i, group in groups.items():
        by_target[i] = worst_of(group + ([by_target[i]] if i in by_target else []))
    return by_target


def _values(by_target: dict[int, AdversaryLeakage], n: int) -> list[float | None]:
    """Each target's worst leakage (None where not a target): its worst adversary's value, which
    `worst_of` makes the largest of the target's (as `notions.worst_by_target` takes it)."""
    return [by_target[i].value if i in by_target else None for i in range(n)]


def _batch_leakage(unit: tuple[str, Problem, tuple[Adversary, ...]]) -> list[AdversaryLeakage]:
    """One unit of work: the named engine's leakage for a batch of adversaries."""
    name, problem, batch = unit
    return engine_named(name).leakage(problem.with_adversaries(batch))


def _check_lattice(engine: Engine, problem: Problem, notion: str, targets: list[int], count: int, limit: int,
                   lattice: bool) -> None:
    """Before any adversary is evaluated (DESIGN §2.4), refuse: more than `limit`, saying what they
    would cost and, with --lattice, the memory it would hold; more than the engine estimates it can
    evaluate in MAX_SECONDS (a day) unless --force; --lattice results that would not fit in memory."""
    n = problem.model.n
    if count > len(targets):
        what = (f"the {notion} lattice has {count_text(count)} adversaries ({len(targets)} targets x 2^{n - 1} known "
                "sets)")
        advice = ("fix the adversary's knowledge with --known, restrict --target, search it greedily with "
                  "--search greedy (Li et al. 2019; a lower bound), or use the gaussian engine's lattice search for "
                  "Gaussian models")
    else:
        what = f"the {notion} audit has {count_text(count)} adversaries (one per target)"
        advice = "restrict --target"
    memory = count * (700 + 60 * (n - 1))
    held = f", and --lattice would hold about {byte_text(memory)}" if lattice else ""
    if count > limit:
        _refuse(engine, problem, what, count, limit, advice, held)
    each = engine.seconds_per_adversary(problem)
    if each is not None and count > MAX_SECONDS / each and not problem.settings.force:
        raise InputError(f"{what}: at roughly {each * 1e3:.3g} ms each the {engine.name} engine would take about "
                         f"{_time_text(count, each)}, over the limit of {duration(MAX_SECONDS)} (--force runs it "
                         f"anyway){held}; {advice}")
    if lattice:
        check_memory(memory, f"--lattice's {count_text(count)} kept results", flag="--max-adversaries")


def _refuse(engine: Engine, problem: Problem, what: str, count: int, limit: int, advice: str, held: str = "") -> None:
    """The one-line refusal of `count` adversaries over `limit`, with the engine's own estimate of the time."""
    each = engine.seconds_per_adversary(problem)
    cost = "" if each is None else f"; at roughly {each * 1e3:.3g} ms each it would take about " + _time_text(count, each)
    raise InputError(f"{what}, over the limit of {count_text(limit)} (raise --max-adversaries){cost}{held}; "
                     f"{advice}")


def _time_text(count: int, each: float) -> str:
    """`count` adversaries at `each` seconds as a duration; a count past a float's range in
    seconds as a power of ten (a lattice of 2^20000 adversaries)."""
    if count.bit_length() < 1000:
        return duration(count * each)
    return f"{count_text(count * round(each * 1e9) // 10**9).removeprefix('about ')} s"


def judge(worst: AdversaryLeakage, claim: float | None, lower_bound: bool = False) -> tuple[str | None, str | None]:
    """pass / fail / inconclusive against `claim`, and why when it is not plain.

    An exact leakage passes when it is at most the claim (to floating-point rounding). An
    estimate fails when its held-out lower bound exceeds the claim, passes only when its upper
    bound clears the claim and nothing blocks a pass (every target and known value compared),
    and needs passing MCMC diagnostics for
    either (DESIGN §2.3). A `lower_bound` on the notion (a greedy pdp search) fails a claim
    below it, soundly, and never passes one."""
    verdict, reason = _judge(worst, claim)
    if verdict == "pass" and lower_bound:
        return "inconclusive", ("a lower bound cannot pass a claim: the known sets the search did not visit may leak "
                                "more (--search full searches every one)")
    return verdict, reason


def _judge(worst: AdversaryLeakage, claim: float | None) -> tuple[str | None, str | None]:
    if claim is None:
        return None, None
    if worst.ci is None:
        return ("pass" if worst.value <= claim * (1 + RELATIVE_TOLERANCE) + 1e-12 else "fail"), worst.reason
    diag = worst.diagnostics or {}
    lower, upper = worst.ci
    if not diag.get("ok", True):
        if diag.get("chains", 2) < 2:
            return "inconclusive", "R-hat compares chains and needs at least 2 per run: raise --chains"
        return "inconclusive", (
            f"MCMC diagnostics failed (R-hat max {diag.get('rhat_max', float('nan')):.4g}, "
            f"bulk ESS min {diag.get('ess_bulk_min', float('nan')):.4g}, divergences {diag.get('divergences', 0)}); "
            "raise --draws/--tune"
        )
    level = "95% " if diag else ""  # no diagnostics: a sure range (dp of an expr: query with a bounded sensitivity)
    if lower > claim:
        return "fail", f"the {level}lower bound {lower:.4g} exceeds the claim"
    if upper <= claim and not diag.get("pass_blocked"):
        return "pass", f"the {level}upper bound {upper:.4g} clears the claim"
    if upper <= claim:
        return "inconclusive", diag["pass_blocked"]
    return "inconclusive", (f"the claim lies inside the interval [{lower:.4g}, {upper:.4g}]; "
                            + ("raise --draws" if diag else "give --sensitivity"))


def _targets(targets: Sequence[int] | None, n: int) -> list[int]:
    if targets is None:
        return list(range(n))
    targets = sorted(set(targets))
    if not targets:
        raise InputError("no target is left: name at least one tuple that the adversary does not know")
    bad = [t for t in targets if not 0 <= t < n]
    if bad:
        raise InputError(f"target {bad[0]} is out of range: the model has tuples 0..{n - 1}")
    return targets


def _known(known: Sequence[int] | None, targets: list[int], n: int, notion: str) -> list[int] | None:
    if known is None:
        return None
    if notion != "pdp":
        raise InputError(f"--known fixes the adversary of pdp; {notion} fixes its own (use --notion pdp)")
    known = sorted(set(known))
    bad = [k for k in known if not 0 <= k < n]
    if bad:
        raise InputError(f"known tuple {bad[0]} is out of range: the model has tuples 0..{n - 1}")
    clash = [k for k in known if k in targets]
    if clash:
        raise InputError(f"known tuple {clash[0]} is also a target: the adversary cannot know its own target")
    return known


def _check_greedy(top_k: int, notion: str, known: list[int] | None, lattice: bool) -> None:
    """--search greedy searches pdp's known sets: not another notion's adversaries, nor one fixed
    known set (--known), nor the whole lattice (--lattice)."""
    if not top_k:
        return
    if notion != "pdp":
        raise InputError(f"--search greedy (--pdp-greedy) searches the pdp lattice: use it with --notion pdp, not {notion}")
    if known is not None:
        raise InputError("--search greedy searches the known sets and --known fixes one: use one of them")
    if lattice:
        raise InputError("--lattice lists every pdp adversary and --search greedy visits only some: use one of them")
