"""Audit specs: a TOML file whose keys mirror `ddpbayes audit`'s options (one report each).

    title = "Seed 004's contagious family"         # optional, the report's heading
    description = "..."                             # optional, a paragraph under it
    model = "../../models/contagious_family.py"     # relative to the spec file, or a shipped model ("household")
    params = { k = 2, p = 0.1 }                     # build(**params); optional
    query = "count"
    sensitivity = 1.0                               # optional: an expr:/fn: query's sensitivity on continuous domains
    notions = ["dp", "idp", "pdp", "ddp"]
    claim = 1.0                                     # optional
    engine = "auto"                                 # optional (default auto)
    seed = 0                                        # optional (default 0)
    target = 0                                      # optional: an index or a list
    known = [1]                                     # optional: pdp's known set
    draws = 500                                     # optional sampling keys: draws (>= 8), tune, chains
    sweep = [0.25, 0.5, 1, 2, 4]                    # optional: the noise scales (or epsilons) swept
    derive_cov = "[[1, rho], [rho, 1]]"             # optional: a symbolic covariance for the closed form
    calibrate = true                                # optional: mark `calibrate`'s scales on the sweep (default true)
    search = "greedy"                               # optional: pdp's search, full (default) or greedy (a lower bound)
    top_k = 3                                       # optional, with search = "greedy": known sets kept per layer
    [profile]                                       # optional: a section on Gaussian noise (`reports.profile`)
    kind = "gaussian"
    rho = 0.5
    [mechanism]
    kind = "laplace"
    epsilon = 1.0                                   # or scale = 1.0

`load_spec` checks every key and value before anything runs, and reports every problem it found
at once, on one line naming the spec file and each key (`InputError`, `keys.Problems`); what only
the built model can reveal (a target out of range, an unknown build parameter) is reported later,
also naming the spec file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ddpbayes.encoding import JsonDocument
from ddpbayes.errors import InputError
from ddpbayes.queries.general import with_sensitivity
from ddpbayes.limits import positive_finite
from ddpbayes.mechanisms import MECHANISMS, lookup
from ddpbayes.notions import Notion, notion
from ddpbayes.queries import Identity, Query, parse_query
from ddpbayes.reports.input.keys import Problems, check_keys, model_file
from ddpbayes.reports.input.profile_spec import KINDS as PROFILE_KINDS
from ddpbayes.reports.input.profile_spec import ProfileSpec, parse_profile
from ddpbayes.settings import MIN_DRAWS, SEED_LIMIT, RunSettings, search_width
from ddpbayes.symbolic.parse import parse_matrix
from ddpbayes.vocabulary import ENGINES, NOTIONS


# key -> (type, required); lists give their element type as a tuple (list, element type)
TOP = {
    "title": (str, False),
    "description": (str, False),
    "model": (str, True),
    "params": (dict, False),
    "query": (str, True),
    "sensitivity": (float, False),
    "notions": ((list, str), True),
    "claim": (float, False),
    "engine": (str, False),
    "seed": (int, False),
    "target": ((list, int), False),
    "known": ((list, int), False),
    "mechanism": (dict, True),
    "draws": (int, False),
    "tune": (int, False),
    "chains": (int, False),
    "sweep": ((list, float), False),
    "derive_cov": (str, False),
    "calibrate": (bool, False),
    "search": (str, False),
    "top_k": (int, False),
    "profile": (dict, False),
}
MECHANISM = {"kind": (str, True), "scale": (float, False), "epsilon": (float, False)}


@dataclass(frozen=True)
class Spec(JsonDocument):
    """A validated audit spec; `path` is the spec file, `model` the resolved model file.

    The fields are the spec's keys (module docstring), checked by `load_spec`.

    Parameters
    ----------
    path : Path
        The spec file.
    model : Path
        The model file, resolved from the spec's directory.
    model_ref : str
        The model as the spec names it.
    query : str
        The query spec.
    notions : tuple of str
        The notions audited.
    kind : str
        The mechanism's kind.
    scale, epsilon : float or None, default None
        The mechanism's scale or epsilon (exactly one is given).
    params : dict, default {}
        ``build(**params)``'s arguments.
    claim : float or None, default None
        The leakage claimed.
    engine : str, default "auto"
        The engine.
    seed : int, default 0
        The run seed.
    target : tuple of int or None, default None
        The targets; None: every tuple.
    known : tuple of int or None, default None
        pdp's known set.
    draws, tune, chains : int or None, default None
        Sampling settings; None: the defaults.
    sweep : tuple of float or None, default None
        The noise scales (or epsilons) swept, sorted.
    derive_cov : str or None, default None
        A symbolic covariance for the closed form.
    calibrate : bool, default True
        Mark `calibrate`'s scales on the sweep.
    search : str, default "full"
        pdp's search: full, or greedy (a lower bound).
    top_k : int or None, default None
        With the greedy search, known sets kept per layer.
    title, description : str or None, default None
        The report's heading and the paragraph under it.
    sensitivity : float or None, default None
        An expr:/fn: query's sensitivity on continuous domains.
    profile : ProfileSpec or None, default None
        A section on Gaussian noise (`reports.profile`).
    """

    path: Path
    model: Path
    model_ref: str
    query: str
    notions: tuple[str, ...]
    kind: str
    scale: float | None = None
    epsilon: float | None = None
    params: dict = field(default_factory=dict)
    claim: float | None = None
    engine: str = "auto"
    seed: int = 0
    target: tuple[int, ...] | None = None
    known: tuple[int, ...] | None = None
    draws: int | None = None
    tune: int | None = None
    chains: int | None = None
    sweep: tuple[float, ...] | None = None
    derive_cov: str | None = None
    calibrate: bool = True
    search: str = "full"
    top_k: int | None = None
    title: str | None = None
    description: str | None = None
    sensitivity: float | None = None
    profile: ProfileSpec | None = None

    def query_object(self) -> Query:
        """The query, with the spec's `sensitivity` (an expr:/fn: query on continuous domains).

        Returns
        -------
        Query
            The parsed query.
        """
        return with_sensitivity(parse_query(self.query), self.sensitivity)

    def settings(self, where: RunSettings | None = None, pdp: bool = False) -> RunSettings:
        """How the spec's audits run: `where` (workers, scheduler, progress) with the spec's engine
        settings (with `pdp`, the spec's pdp search: `search_width`).

        Parameters
        ----------
        where : RunSettings or None, default None
            Where the audits run; None: the defaults.
        pdp : bool, default False
            Include the spec's pdp search.

        Returns
        -------
        RunSettings
            `where` with the spec's engine, seed, draws, tune, chains (and search).
        """
        width = search_width(self.search, self.top_k, None) if pdp else None
        return RunSettings.of(where, engine=self.engine, seed=self.seed, draws=self.draws, tune=self.tune,
                              chains=self.chains, pdp_greedy=width)

    def audit_kwargs(self, name: str | Notion, where: RunSettings | None = None) -> dict:
        """Keyword arguments of `audit` for the notion `name` (the known set and the search are the
        lattice's only: pdp's).

        Parameters
        ----------
        name : str or Notion
            The notion.
        where : RunSettings or None, default None
            Where the audit runs; None: the defaults.

        Returns
        -------
        dict
            scale, epsilon, claim, targets, known and settings.
        """
        lattice = notion(name).lattice
        return {
            "scale": self.scale,
            "epsilon": self.epsilon,
            "claim": self.claim,
            "targets": None if self.target is None else list(self.target),
            "known": None if self.known is None or not lattice else list(self.known),
            "settings": self.settings(where, pdp=lattice),
        }

    def to_dict(self) -> dict:
        return {
            "title": self.title,
            "model": self.model_ref,
            "params": self.params,
            "query": self.query,
            "sensitivity": self.sensitivity,
            "notions": list(self.notions),
            "mechanism": {"kind": self.kind, "scale": self.scale, "epsilon": self.epsilon},
            "claim": self.claim,
            "engine": self.engine,
            "seed": self.seed,
            "target": None if self.target is None else list(self.target),
            "known": None if self.known is None else list(self.known),
            "draws": self.draws,
            "tune": self.tune,
            "chains": self.chains,
            "sweep": None if self.sweep is None else list(self.sweep),
            "derive_cov": self.derive_cov,
            "calibrate": self.calibrate,
            "search": self.search,
            "top_k": self.top_k,
            **({} if self.profile is None else {"profile": self.profile.to_dict()}),
        }


def audit_spec(raw: dict, path: Path) -> Spec:
    """Check an audit spec read from `path` (every value that can be checked without the model):
    every problem found, then all reported at once (`Problems`)."""
    problems = Problems(path)
    good = check_keys(raw, TOP, problems, "")
    mech = check_keys(good["mechanism"], MECHANISM, problems, "mechanism.") if "mechanism" in good else {}
    model = _check_values(good, mech, problems)
    profile = None
    if "profile" in good and _notions_ok(good):
        profile = parse_profile(good["profile"], problems, good["notions"])
    problems.raise_any()
    target, known, sweep = raw.get("target"), raw.get("known"), raw.get("sweep")
    return Spec(
        path=path,
        model=model,
        model_ref=raw["model"],
        query=raw["query"],
        notions=tuple(raw["notions"]),
        kind=mech["kind"],
        scale=_float(mech.get("scale")),
        epsilon=_float(mech.get("epsilon")),
        params=raw.get("params", {}),
        claim=_float(raw.get("claim")),
        engine=raw.get("engine", "auto"),
        seed=raw.get("seed", 0),
        target=None if target is None else tuple(target),
        known=None if known is None else tuple(known),
        draws=raw.get("draws"),
        tune=raw.get("tune"),
        chains=raw.get("chains"),
        sweep=None if sweep is None else tuple(sorted(float(v) for v in set(sweep))),
        derive_cov=raw.get("derive_cov"),
        calibrate=raw.get("calibrate", True),
        search=raw.get("search", "full"),
        top_k=raw.get("top_k"),
        title=raw.get("title"),
        description=raw.get("description"),
        sensitivity=_float(raw.get("sensitivity")),
        profile=profile,
    )


def _check_values(raw: dict, mech: dict, problems: Problems) -> Path | None:
    """Check every value of the spec's well-typed keys `raw` (and `[mechanism]`'s, `mech`), recording
    each problem; return the resolved model file (None when it is one of them)."""
    model = None
    if "model" in raw:
        with problems.check():
            model = model_file(raw["model"], problems.path)
    flips_bits = _check_mechanism(mech, problems) if "mechanism" in raw else None  # missing: said once
    if "query" in raw:
        _check_query(raw, flips_bits, problems)
    if "notions" in raw and not _notions_ok(raw):
        problems.add(_must("notions", f"a non-empty list of distinct notions from {', '.join(NOTIONS)}",
                           raw["notions"]))
    checks = {
        "engine": (lambda v: v in ("auto", *ENGINES), f"one of auto, {', '.join(ENGINES)}"),
        "claim": (lambda v: math.isfinite(v) and v >= 0, "a non-negative finite number"),
        "seed": (lambda v: 0 <= v < SEED_LIMIT, f"an integer from 0 to {SEED_LIMIT - 1}"),
        "draws": (lambda v: v >= MIN_DRAWS, f"an integer of at least {MIN_DRAWS}"),
        "tune": (lambda v: v >= 0, "a non-negative integer"),
        "chains": (lambda v: v >= 1, "a positive integer"),
        "sweep": (lambda v: len(v) >= 2 and all(map(positive_finite, v)),
                  "a list of at least two positive finite numbers"),
        "target": (lambda v: bool(v) and min(v) >= 0, "a non-empty list of non-negative tuple indices"),
        "known": (lambda v: all(k >= 0 for k in v), "a list of non-negative tuple indices"),
    }
    for key, (ok, must) in checks.items():
        if key in raw and not ok(raw[key]):
            problems.add(_must(key, must, raw[key]))
    if _notions_ok(raw):
        _check_known(raw, problems)
        with problems.check():
            _check_search(raw)
    if "derive_cov" in raw:
        _check_cov(raw["derive_cov"], problems)
    return model


def _must(key: str, must: str, got: object) -> str:
    return f"key '{key}' must be {must}, got {got!r}"


def _check_mechanism(mech: dict, problems: Problems) -> bool | None:
    """`[mechanism]`'s kind and its scale or epsilon; whether the kind flips bits (None: no valid kind)."""
    if ("scale" in mech) == ("epsilon" in mech):
        problems.add("[mechanism] needs exactly one of the keys 'scale' and 'epsilon'")
    for key in ("scale", "epsilon"):
        if key in mech and not positive_finite(mech[key]):
            problems.add(_must(f"mechanism.{key}", "a positive finite number", mech[key]))
    if "kind" not in mech:
        return None
    pure = [k for k in MECHANISMS if k not in PROFILE_KINDS]
    if mech["kind"] not in pure:
        also = " (Gaussian noise goes in a [profile] table)" if mech["kind"] in PROFILE_KINDS else ""
        problems.add(_must("mechanism.kind", f"one of {', '.join(pure)}{also}", mech["kind"]))
        return None
    flips_bits = lookup(mech["kind"]).flips_bits
    if flips_bits and "scale" in mech:
        problems.add("key 'mechanism.scale' does not apply to randomized_response: give 'mechanism.epsilon' (the "
                     "per-bit DP level)")
    return flips_bits


def _check_query(raw: dict, flips_bits: bool | None, problems: Problems) -> None:
    """The query parses, takes the spec's sensitivity, and is the identity under randomized response."""
    try:
        query = parse_query(raw["query"])
    except InputError as exc:
        problems.add(f"key 'query': {exc}")
        return
    if "sensitivity" in raw:
        try:
            with_sensitivity(query, raw["sensitivity"])
        except InputError as exc:
            problems.add(f"key 'sensitivity': {exc}")
    if flips_bits and not isinstance(query, Identity):
        problems.add(_must("query", "'identity' with randomized_response (it perturbs the tuples themselves)",
                           raw["query"]))


def _check_known(raw: dict, problems: Problems) -> None:
    """`known` only with pdp, and disjoint from `target`."""
    if "known" not in raw:
        return
    if not _has_lattice(raw["notions"]):
        problems.add("key 'known' fixes pdp's adversary, but 'notions' has no pdp")
    clash = sorted(set(raw["known"]) & set(raw.get("target", ())))
    if clash:
        problems.add(_must("known", f"disjoint from 'target' (tuple {clash[0]} is in both)", raw["known"]))


def _check_cov(text: str, problems: Problems) -> None:
    """`derive_cov` parses as a square matrix."""
    try:
        cov = parse_matrix(text, "the matrix")
    except InputError as exc:
        problems.add(f"key 'derive_cov': {exc}")
        return
    if not cov.is_square:
        problems.add(_must("derive_cov", f"a square matrix (it is {cov.rows}x{cov.cols})", text))


def _check_search(raw: dict) -> None:
    """`search` and `top_k` as `audit --search --top-k` takes them, and only with pdp among the notions."""
    if "search" not in raw and "top_k" not in raw:
        return
    if not _has_lattice(raw["notions"]):
        key = "search" if "search" in raw else "top_k"
        raise InputError(f"key '{key}' sets pdp's search, but 'notions' has no pdp")
    try:
        search_width(raw.get("search"), raw.get("top_k"), None)
    except InputError as exc:
        message = str(exc).replace("--search", "search").replace("--top-k", "top_k")
        raise InputError(f"key '{'top_k' if 'top_k' in message else 'search'}': {message}") from None
    if raw.get("search") == "greedy" and "known" in raw:
        raise InputError("key 'search': the greedy search searches the known sets and 'known' fixes one")


def _notions_ok(raw: dict) -> bool:
    """Are the spec's (well-typed) notions a non-empty list of distinct known notions?"""
    notions = raw.get("notions")
    return bool(notions) and len(set(notions)) == len(notions) and all(n in NOTIONS for n in notions)


def _has_lattice(notions: list[str]) -> bool:
    """Is pdp, the notion searching the lattice of known sets, among the spec's (checked) notions?"""
    return any(notion(n).lattice for n in notions)


def _float(value) -> float | None:
    return None if value is None else float(value)
