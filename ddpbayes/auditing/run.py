"""`audit`: the leakage of a mechanism on a dependence model under one notion, with a verdict
(DESIGN §1): the release is checked, the notion's adversaries evaluated (`_evaluate`), and the
worst judged against the claim (`verdict`) into an `AuditResult` (`result`)."""

from __future__ import annotations

import inspect
import itertools
import math
import numbers
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields, replace

from ddpbayes.auditing.cost import check_adversaries, refuse
from ddpbayes.auditing.information import check_unit, information_block
from ddpbayes.auditing.joint import composition_block
from ddpbayes.auditing.result import AuditResult
from ddpbayes.auditing.verdict import judge
from ddpbayes.engines import AdversaryLeakage, Declined, Engine, engine_named, passed_over, select_engine
from ddpbayes.errors import InputError
from ddpbayes.limits import state_limit
from ddpbayes.mechanisms import Mechanism, lookup, make_mechanism
from ddpbayes.mechanisms.interop import from_library, library_object
from ddpbayes.mechanisms.program import Program
from ddpbayes.model import DependenceModel
from ddpbayes.notions import Notion, fold_targets, worst_of
from ddpbayes.notions import notion as named
from ddpbayes.notions.lattice import greedy_pdp, greedy_reason, layer_bounds
from ddpbayes.parallel import map_units
from ddpbayes.problem import Adversary, DependenceSets, Problem
from ddpbayes.profiles import Profile
from ddpbayes.progress import Progress
from ddpbayes.queries import Query, parse_query
from ddpbayes.queries.general import with_sensitivity
from ddpbayes.settings import RunSettings, search_width
from ddpbayes.vocabulary import LIBRARY, PROGRAM

CHUNK = 1024  # adversaries handed to an exact engine at once: the lattice is streamed, never listed
WINDOW = 64  # batches of CHUNK adversaries handed to the workers at once
SETTINGS = [f.name for f in fields(RunSettings)]  # what `audit(**run)` takes besides its own keywords


def audit(
    model: DependenceModel,
    query: str | Query,
    mechanism: str | Mechanism | object,
    notion: str | Notion,
    *,
    scale: float | None = None,
    epsilon: float | None = None,
    delta: float | None = None,
    rho: float | None = None,
    sigma: float | None = None,
    mechanism_params: dict[str, str] | None = None,
    sensitivity: float | None = None,
    claim: float | None = None,
    target: int | Sequence[int] | None = None,
    known: Sequence[int] | None = None,
    pairs: str | Sequence | None = None,
    lattice: bool = False,
    search: str | None = None,
    top_k: int | None = None,
    information: str | None = "nats",
    settings: RunSettings | None = None,
    **run,
) -> AuditResult:
    """Leakage of `mechanism` releasing `query` on `model` under `notion` (DESIGN §1).

    The notion's adversaries are evaluated by the engine that fits the problem (or the one
    `settings` names), and the worst is judged against `claim` (`judge`). With search="greedy"
    (`--search greedy --top-k k`), pdp is Li et al.'s greedy search: a lower bound (`reason`
    and `lower_bound` say so), which can fail a claim but never pass it. Each keyword is the
    command line's flag of the same name (`--mechanism-param` is `mechanism_params`); the older
    spellings `params`, `targets` and `pdp_greedy` are accepted too (`_spelled`).

    Parameters
    ----------
    model : DependenceModel
        The tuples and their dependence.
    query : str or Query
        The statistic released: a query spec (parsed) or a `Query`; bound to `model`.
    mechanism : str, Mechanism or object
        A Mechanism; or its kind, with `scale` or `epsilon`; or a DP library's object (a
        diffprivlib mechanism, an OpenDP measurement) or a function ``mechanism(answers, rng)``,
        which `mechanisms.interop.from_library` reads as the exact law ddpbayes has for it, or as
        a program (a certified lower bound, DESIGN §2.6); ``"program:FILE:NAME"``, or
        ``"py:MODULE:EXPRESSION"``, such an object built by a Python expression (`library_object`).
    notion : str or Notion
        A notion's name or a `Notion` (`ddpbayes.notions`: DP, IDP, PDP, DDP).
    scale : float or None, default None
        The noise's scale (Gaussian noise: σ), for a mechanism given by its kind.
    epsilon : float or None, default None
        Classic DP's budget, setting the scale to global sensitivity / epsilon; Gaussian noise:
        with `delta`, the analytic Gaussian mechanism.
    delta : float or None, default None
        Gaussian noise: the δ at which the leakage is read, as ε on the notion's privacy profile
        (`profile`; default 1e-6; DESIGN §3.5).
    rho : float or None, default None
        Gaussian noise: σ from zCDP's rho.
    sigma : float or None, default None
        Gaussian noise: its standard deviation (``--sigma``; the same as `scale` for it).
    mechanism_params : dict[str, str] or None, default None
        A mechanism with a joint output law (report-noisy-max, sparse vector, ...; DESIGN §5.2):
        its parameters by name, as strings (as ``--mechanism-param NAME=VALUE`` gives them).
        Also spelled `params` (not to be confused with `load_model`'s model parameters).
    sensitivity : float or None, default None
        An expr:/fn: query's sensitivity on continuous domains (``--sensitivity``).
    claim : float or None, default None
        The leakage claimed (>= 0); None: no verdict.
    target : int, sequence of int or None, default None
        The target or targets (``--target``; also spelled `targets`); None: every tuple (every
        unknown one with `known`).
    known : sequence of int or None, default None
        Fixes the adversary's knowledge for pdp.
    pairs : str, path, sequence or None, default None
        dp of a program (``--pairs``): a JSON file, or the list itself, of [x, x'] pairs of
        neighbouring databases (each the n records' values); None: pairs searched over the
        domains (DESIGN §2.6).
    lattice : bool, default False
        Keep every pdp adversary in the result.
    search : str or None, default None
        pdp: "full" (every known set, the default) or "greedy" (``--search``; a lower bound).
    top_k : int or None, default None
        With search="greedy": known sets kept per layer (``--top-k``; default 3). The same width
        is also spelled ``pdp_greedy=k``.
    information : str or None, default "nats"
        Seed 004's KL/MI/CMI in "nats" or "bits" (DESIGN §3.4); None skips them (loops over
        audits pass None so as not to pay for them).
    settings : RunSettings or None, default None
        How it runs; None: the defaults.
    **run
        Any `RunSettings` field by name (engine, method, seed, draws, tune, chains, workers,
        scheduler, max_runs, max_states, max_adversaries, pdp_greedy, progress, force,
        program_runs), applied over `settings`; and the older spellings `params` and `targets`.

    Returns
    -------
    AuditResult
        The worst leakage, its witness, the worst per target and the verdict.

    Raises
    ------
    InputError
        For an unknown keyword or notion, one thing given under two names, a query or mechanism
        that does not fit the model, a target out of range, a negative claim, an information unit
        other than nats or bits, or a problem past the size limits.
    """
    start = time.perf_counter()
    mechanism_params = _spelled("mechanism_params", mechanism_params, "params", run.pop("params", None))
    targets = _spelled("target", target, "targets", run.pop("targets", None))
    targets = [targets] if isinstance(targets, numbers.Integral) else targets
    _check_keywords(run)
    width = search_width(search, top_k, run.pop("pdp_greedy", None))
    settings = RunSettings.of(settings, pdp_greedy=width, **run)
    notion = named(notion)
    check_unit(information)
    if sensitivity is not None:
        query = with_sensitivity(parse_query(query) if isinstance(query, str) else query, sensitivity)
    query, mechanism = _release(model, query, mechanism, settings, scale=_scale(mechanism, scale, sigma),
                                epsilon=epsilon, delta=delta, rho=rho, params=mechanism_params)
    if targets is None and known is not None:  # with --known alone, every unknown tuple is a target
        targets = [i for i in range(model.n) if i not in set(known)]
    targets = _targets(targets, model.n)
    known = _known(known, targets, model.n, notion)
    notion.check_lattice(lattice)
    notion.check_search(settings.pdp_greedy, known, lattice)
    notion.check_pairs(pairs, mechanism.black_box)
    if claim is not None and (not isinstance(claim, (int, float)) or math.isnan(claim) or claim < 0):
        raise InputError(f"the claim must be a non-negative number, got {claim}")
    problem = Problem(model, query, mechanism, settings=settings)

    with state_limit(settings.max_states):
        evaluated = _evaluate(problem, notion, targets, known, lattice, pairs)
    result = _result(problem, notion, evaluated, claim, start)
    if information is not None:  # 004's measures in this unit (nats or bits; DESIGN §3.4)
        result.information, result.information_reason = information_block(
            problem, evaluated.engine, notion, targets, result.per_target, evaluated.worst.adversary.target,
            information)
    if mechanism.composed:
        result.composition = composition_block(audit, result, evaluated.engine, evaluated.dependence_sets, notion,
                                               targets, known, lower_bounds=evaluated.bound is not None)
    return result


KEYWORDS = [name for name, p in inspect.signature(audit).parameters.items() if p.kind is p.KEYWORD_ONLY]


def _spelled(name: str, value: object, old: str, old_value: object) -> object:
    """A keyword given under its name (the command line's flag) or its older spelling, not both."""
    if value is not None and old_value is not None:
        raise InputError(f"{old} is the older spelling of {name}: give one of them")
    return old_value if value is None else value


def _check_keywords(run: dict) -> None:
    """Every keyword left in `**run` is a RunSettings field; else one line naming audit's own keywords too."""
    unknown = sorted(set(run) - set(SETTINGS))
    if unknown:
        raise InputError(f"unknown setting '{unknown[0]}' (audit's keywords: {', '.join(KEYWORDS)}; run settings: "
                         f"{', '.join(SETTINGS)})")


def _scale(mechanism: object, scale: float | None, sigma: float | None) -> float | None:
    """`sigma` is Gaussian noise's scale (``--sigma``), refused for other noise and beside `scale`."""
    if sigma is None:
        return scale
    kind = lookup(mechanism) if isinstance(mechanism, str) else None
    if kind is None or not kind.gaussian:
        raise InputError(f"sigma is the standard deviation of Gaussian noise: give {mechanism!r} noise scale= or "
                         "epsilon=")
    if scale is not None:
        raise InputError("give the Gaussian noise's sigma once: sigma= or scale=, not both")
    return sigma


def _release(model: DependenceModel, query: str | Query, mechanism: str | Mechanism | object, settings: RunSettings,
             **noise) -> tuple[Query, Mechanism]:
    """The query bound to the model and the mechanism, checked against it: built from its kind
    with `noise` (scale, epsilon, delta, rho, params), or as given (delta, rho and params then refused); any other
    object is a library's mechanism or a function (`from_library`: a one-line InputError if it is neither)."""
    query = (parse_query(query) if isinstance(query, str) else query).bind(model)
    query.check(model.domains)
    if isinstance(mechanism, str) and mechanism.startswith((PROGRAM, LIBRARY)):  # code: a black box, an object
        given = [name.replace("params", "mechanism-param") for name, value in noise.items() if value]
        if given:
            what = "a program" if mechanism.startswith(PROGRAM) else "a library object"
            raise InputError(f"{what} makes its own noise: drop --{', --'.join(given)} (its settings are its own "
                             "code)")
        mechanism = (Program.from_spec(mechanism, getattr(model, "source", None)) if mechanism.startswith(PROGRAM)
                     else library_object(mechanism))
    if not isinstance(mechanism, (str, Mechanism)):  # a diffprivlib / OpenDP object, or a function
        mechanism = from_library(mechanism)
    if isinstance(mechanism, str):
        with state_limit(settings.max_states):  # --epsilon may enumerate the domains (an expr: query's sensitivity)
            return query, make_mechanism(mechanism, query, model.domains, **noise)
    if noise["delta"] is not None or noise["rho"] is not None or noise["params"]:
        raise InputError("delta, rho and params set a mechanism built from its kind: give them to the Mechanism itself")
    mechanism.check(query, model.domains)
    return query, mechanism


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


def _known(known: Sequence[int] | None, targets: list[int], n: int, notion: Notion) -> list[int] | None:
    notion.check_known(known)
    if known is None:
        return None
    known = sorted(set(known))
    bad = [k for k in known if not 0 <= k < n]
    if bad:
        raise InputError(f"known tuple {bad[0]} is out of range: the model has tuples 0..{n - 1}")
    clash = [k for k in known if k in targets]
    if clash:
        raise InputError(f"known tuple {clash[0]} is also a target: the adversary cannot know its own target")
    return known


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


def _evaluate(problem: Problem, notion: Notion, targets: list[int], known: list[int] | None,
              lattice: bool, pairs: str | Sequence | None = None) -> _Evaluated:
    """Every adversary of the notion, by the engine that fits (a model-free notion needs none; a
    program's classic dp is certified on neighbouring databases, `pairs` or searched): found by a
    search (pdp's greedy one, or the engine's own) or streamed one by one."""
    if notion.model_free:
        results = notion.leakage(problem, targets, pairs)
        by_target = fold_targets(results, {})
        engine = "program" if problem.mechanism.black_box else "analytic"
        return _Evaluated(worst_of(results), _values(by_target, problem.model.n), engine, by_target=by_target)
    name = "sampling" if problem.settings.method == "posterior" else problem.settings.engine
    declined: dict[str, str] = {}
    while True:  # under auto, an engine that declines while computing hands the problem to the next one
        chosen = select_engine(problem, name, declined)
        try:
            return _evaluate_on(chosen, problem, notion, targets, known, lattice, declined)
        except Declined as e:
            if name != "auto":
                raise
            declined[chosen.name] = str(e)


def _evaluate_on(chosen: Engine, problem: Problem, notion: Notion, targets: list[int], known: list[int] | None,
                 lattice: bool, declined: dict[str, str]) -> _Evaluated:
    """`_evaluate` on the engine chosen; `declined`: the engines auto passed over while computing, and why."""
    n, settings = problem.model.n, problem.settings
    dep_sets = notion.dependence_sets(chosen, problem)
    greedy = settings.pdp_greedy  # 0 but for a notion that takes --search greedy (`Notion.check_search`)
    searched = (_greedy(chosen, problem, targets, greedy) if greedy
                else notion.searched(chosen, problem, targets, known, lattice))
    kept, by_target = None, {}
    if searched is not None:
        worst = worst_of(searched)
        fold_targets(searched, by_target)
    else:
        worst, kept = _every(chosen, problem, notion, targets, known, dep_sets, lattice, by_target)
    auto = settings.engine == "auto" and settings.method != "posterior"
    auto_notes = passed_over(problem, chosen, declined) if auto else []
    return _Evaluated(worst, _values(by_target, n), chosen.name, dep_sets, kept, auto_notes + chosen.notes(problem),
                      greedy_reason(greedy) if greedy else None, by_target)


def _greedy(engine: Engine, problem: Problem, targets: list[int], top_k: int) -> list[AdversaryLeakage]:
    """Seed 003's greedy pdp search (`notions.lattice`), its worst case checked against
    --max-adversaries before any adversary is evaluated, with a progress line (the search makes
    an engine call per layer at least, however few adversaries it has)."""
    count = len(targets) * sum(layer_bounds(problem.model.n, top_k))
    if count > problem.settings.max_adversaries:
        what = (f"the greedy pdp search (top-k = {top_k}) evaluates up to {count:,} adversaries "
                f"({len(targets)} targets x {count // len(targets):,} known sets)")
        refuse(engine, problem, what, count, problem.settings.max_adversaries, "lower --top-k or restrict --target")
    chunk = count if engine.estimates else CHUNK  # an estimating engine plans a layer's MCMC runs as a whole
    bar = Progress(f"pdp greedy (top-k = {top_k})", count, "adversaries", enabled=problem.settings.progress)
    return greedy_pdp(engine, problem, targets, top_k, chunk, bar)


def _every(engine: Engine, problem: Problem, notion: Notion, targets: list[int], known: list[int] | None,
           dep_sets: list[frozenset[int]] | None, keep: bool, by_target: dict[int, AdversaryLeakage],
           ) -> tuple[AdversaryLeakage, list[AdversaryLeakage] | None]:
    """Every adversary of the notion, once `cost` allows them, streamed (`_stream`) with a progress line."""
    n, settings = problem.model.n, problem.settings
    count = notion.adversary_count(n, targets, known)
    check_adversaries(engine, problem, notion, targets, known, count, settings.max_adversaries, keep)
    advs = notion.adversaries(n, targets, known, dep_sets)
    chunk = count if engine.estimates else CHUNK  # an estimating engine plans its MCMC runs as a whole
    # one chunk (a sparse-vector lattice's few slow adversaries): a line only once it has taken a heartbeat
    shown = settings.progress and (count > chunk or not engine.estimates)
    bar = Progress(notion.name, count, "adversaries", enabled=shown, slow_only=count <= chunk)
    return _stream(engine, problem, advs, chunk, bar, keep, by_target)


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
            fold_targets(results, by_target)
    return worst, kept


def _values(by_target: dict[int, AdversaryLeakage], n: int) -> list[float | None]:
    """Each target's worst leakage (None where not a target): its worst adversary's value, which
    `worst_of` makes the largest of the target's (as `notions.worst_by_target` takes it)."""
    return [by_target[i].value if i in by_target else None for i in range(n)]


def _sorted_sets(sets: Sequence[frozenset[int]] | None) -> Sequence[list[int]] | None:
    """Each N(i) as a sorted list; an engine's lazily computed sets stay lazy (`DependenceSets`: the JSON reads
    every set, the text and ddp's adversaries only the audited targets')."""
    if sets is None:
        return None
    return sets.map(sorted) if isinstance(sets, DependenceSets) else [sorted(s) for s in sets]


def _batch_leakage(unit: tuple[str, Problem, tuple[Adversary, ...]]) -> list[AdversaryLeakage]:
    """One unit of work: the named engine's leakage for a batch of adversaries."""
    name, problem, batch = unit
    return engine_named(name).leakage(problem.with_adversaries(batch))


def _result(problem: Problem, notion: Notion, evaluated: _Evaluated, claim: float | None, start: float) -> AuditResult:
    """The evaluated worst adversary judged against `claim`, with what was asked."""
    worst, (model, query, mechanism) = evaluated.worst, (problem.model, problem.query, problem.mechanism)
    verdict, verdict_reason = judge(worst, claim, lower_bound=evaluated.bound is not None)
    profile = None if worst.profile is None else worst.profile.with_rho()  # ρ for the worst adversary only
    return AuditResult(
        notion=notion.name,
        leakage=worst.value,
        per_target=evaluated.per_target,
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
        dependence_sets=_sorted_sets(evaluated.dependence_sets),
        mechanism=mechanism.describe(),
        query=query.spec,
        tuples=model.names,
        notes=[*evaluated.notes, *query.sensitivity_notes(model.domains),  # expr:/fn:
               *_profile_notes(mechanism, profile), *mechanism.notes()],
        problem=problem,
        profile=profile,
        target_worst={i: _settled(r) for i, r in sorted(evaluated.by_target.items())},
    )


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
