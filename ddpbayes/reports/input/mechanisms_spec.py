"""Mechanisms-under-dependence specs: several mechanisms on several dependence models, each audited
under the notions it names next to its nominal ε, the classic DP level `--notion dp` gives (issue #28
item 5, DESIGN §5.2). A spec with `[[case]]` tables instead of one `query` and `[mechanism]`:

    title = "..."                                   # optional
    description = "..."                             # optional
    notions = ["dp", "idp", "pdp", "ddp"]           # optional: every case's notions, unless it names its own
    [[case]]
    label = "household: report-noisy-max"           # optional: the case's name in the report
    model = "../../models/household.py"             # relative to the spec file, or a shipped model
    params = { n = 6 }                              # optional: build(**params)
    query = "histogram:-0.5,0.5,1.5"
    mechanism = "report_noisy_max"                  # a kind of `ddpbayes mechanisms` (pure ε)
    epsilon = 1.0                                   # optional: or scale; neither for a mechanism set by its params
    mechanism_params = { noise = "laplace" }        # optional: as --mechanism-param NAME=VALUE
    notions = ["dp", "idp", "pdp", "ddp"]           # optional when the spec gives them
    engine = "exact"                                # optional (default auto)
    note = "..."                                    # optional: why the leakage is what it is (the report shows it)

Every key and value is checked before anything runs, and every problem found is reported at once,
on one line naming the spec file and each key (`case[2].mechanism_params`); what only the built
model reveals (a variant out of range, a query too wide) is reported when the case runs, naming
the spec file and the case.
What the report computes from it: `reports.views.mechanisms`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ddpbayes.encoding import JsonDocument
from ddpbayes.errors import InputError
from ddpbayes.limits import positive_finite
from ddpbayes.mechanisms import MECHANISMS, lookup
from ddpbayes.mechanisms.joint import parse_params
from ddpbayes.queries import parse_query
from ddpbayes.reports.input.keys import Problems, check_keys, model_file
from ddpbayes.settings import SEED_LIMIT, RunSettings
from ddpbayes.vocabulary import ENGINES, NOTIONS

KEYS = {"title": (str, False), "description": (str, False), "notions": ((list, str), False),
        "seed": (int, False), "case": ((list, dict), True)}
CASE = {"label": (str, False), "model": (str, True), "params": (dict, False), "query": (str, True),
        "mechanism": (str, True), "epsilon": (float, False), "scale": (float, False),
        "mechanism_params": (dict, False), "notions": ((list, str), False), "engine": (str, False),
        "note": (str, False)}


@dataclass(frozen=True)
class MechanismCase:
    """One (model, query, mechanism) audited under `notions`; `model` is the resolved model file."""

    index: int
    label: str
    model: Path
    model_ref: str
    params: dict
    query: str
    mechanism: str
    notions: tuple[str, ...]
    epsilon: float | None = None
    scale: float | None = None
    mechanism_params: dict | None = None  # name -> text, as --mechanism-param gives them
    engine: str = "auto"
    note: str | None = None

    def settings(self, where: RunSettings | None = None, seed: int = 0) -> RunSettings:
        return RunSettings.of(where, engine=self.engine, seed=seed)

    def audit_kwargs(self) -> dict:
        """The noise keywords of `audit` for this case (its scale or epsilon and its params)."""
        return {"epsilon": self.epsilon, "scale": self.scale, "params": dict(self.mechanism_params or {}) or None}

    def to_dict(self) -> dict:
        return {"label": self.label, "model": self.model_ref, "params": self.params, "query": self.query,
                "mechanism": self.mechanism, "epsilon": self.epsilon, "scale": self.scale,
                "mechanism_params": dict(self.mechanism_params or {}), "notions": list(self.notions),
                "engine": self.engine, "note": self.note}


@dataclass(frozen=True)
class MechanismsSpec(JsonDocument):
    """A validated mechanisms-under-dependence spec; `path` is the spec file."""

    path: Path
    cases: tuple[MechanismCase, ...]
    seed: int = 0
    title: str | None = None
    description: str | None = None

    @property
    def model_ref(self) -> str:
        """What the report loads (for its progress line): the cases' model files."""
        return ", ".join(dict.fromkeys(c.model_ref for c in self.cases))

    def to_dict(self) -> dict:
        return {"title": self.title, "description": self.description, "seed": self.seed,
                "cases": [c.to_dict() for c in self.cases]}


def load_mechanisms_spec(raw: dict, path: Path) -> MechanismsSpec:
    """Check a spec with `[[case]]` tables (every value that can be checked without the models):
    every problem of every case found, then all reported at once (`Problems`)."""
    problems = Problems(path)
    good = check_keys(raw, KEYS, problems, "")
    if "case" in good and not good["case"]:
        problems.add("key 'case' must be a non-empty list of [[case]] tables")
    default = good.get("notions")
    if default is not None and not _check_notions(default, problems, "notions"):
        default = []  # said once; each case without its own notions is then not checked again
    seed = good.get("seed", 0)
    if not 0 <= seed < SEED_LIMIT:
        problems.add(f"key 'seed' must be an integer from 0 to {SEED_LIMIT - 1}, got {seed!r}")
    cases = [_case(table, k, problems, default) for k, table in enumerate(good.get("case", []))]
    labels = [c.label for c in cases if c is not None]
    twice = next((label for label in labels if labels.count(label) > 1), None)
    if twice is not None:
        problems.add(f"two cases are labelled '{twice}': give each a distinct 'label'")
    problems.raise_any()
    return MechanismsSpec(path=path, cases=tuple(cases), seed=seed, title=raw.get("title"),
                          description=raw.get("description"))


def _case(raw: dict, k: int, problems: Problems, default: list[str] | None) -> MechanismCase | None:
    """The case `raw`, the k-th; None when it has a problem (each recorded in `problems`)."""
    prefix = f"case[{k}]."
    before = len(problems.found)
    good = check_keys(raw, CASE, problems, prefix)

    def bad(key: str, must: str) -> None:
        problems.add(f"key '{prefix}{key}' must be {must}, got {good[key]!r}")

    model = None
    if "model" in good:
        with problems.check():
            model = model_file(good["model"], problems.path, f"{prefix}model")
    if "query" in good:
        try:
            parse_query(good["query"])
        except InputError as exc:
            problems.add(f"key '{prefix}query': {exc}")
    cls = lookup(good["mechanism"]) if "mechanism" in good else None
    if "mechanism" in good and (cls is None or cls.gaussian):
        pure = [kind for kind in MECHANISMS if not lookup(kind).gaussian]
        bad("mechanism", f"a pure-ε mechanism of `ddpbayes mechanisms`: one of {', '.join(pure)}")
        cls = None
    if "epsilon" in good and "scale" in good:
        problems.add(f"case[{k}] gives both 'epsilon' and 'scale': give at most one")
    for key in ("epsilon", "scale"):
        if key in good and not positive_finite(good[key]):
            bad(key, "a positive finite number")
    given = _mechanism_params(good.get("mechanism_params", {}), cls, prefix, problems)
    notions = good.get("notions", default)
    if notions is None:
        problems.add(f"missing key '{prefix}notions' (or a top-level 'notions' for every case)")
    elif notions is not default:
        _check_notions(notions, problems, f"{prefix}notions")
    engine = good.get("engine", "auto")
    if engine not in ("auto", *ENGINES):
        bad("engine", f"one of auto, {', '.join(ENGINES)}")
    if len(problems.found) > before:
        return None
    label = raw.get("label") or f"{Path(raw['model']).stem}: {raw['mechanism']} on {raw['query']}"
    return MechanismCase(index=k, label=label, model=model, model_ref=raw["model"], params=raw.get("params", {}),
                         query=raw["query"], mechanism=cls.kind, notions=tuple(notions),
                         epsilon=_float(raw.get("epsilon")), scale=_float(raw.get("scale")),
                         mechanism_params=given, engine=engine, note=raw.get("note"))


def _mechanism_params(table: dict, cls, prefix: str, problems: Problems) -> dict[str, str]:
    """`mechanism_params` as --mechanism-param gives them (name -> text), checked against the
    mechanism `cls` (None: not known, so only each value's type is checked)."""
    given = {}
    for name, value in table.items():
        if not isinstance(value, (str, int, float, bool)):
            problems.add(f"key '{prefix}mechanism_params.{name}' must be a string, number or boolean, got {value!r}")
            continue
        given[name] = str(value).lower() if isinstance(value, bool) else str(value)
    if cls is not None and len(given) == len(table):
        try:
            parse_params(cls.kind, cls.parameters, given)
        except InputError as exc:
            problems.add(f"key '{prefix}mechanism_params': {exc}")
    return given


def _check_notions(notions: list[str], problems: Problems, key: str) -> bool:
    if not notions or len(set(notions)) != len(notions) or any(n not in NOTIONS for n in notions):
        problems.add(f"key '{key}' must be a non-empty list of distinct notions from {', '.join(NOTIONS)}, "
                     f"got {notions!r}")
        return False
    return True


def _float(value) -> float | None:
    return None if value is None else float(value)
