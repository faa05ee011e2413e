"""Audit specs: a TOML file whose keys mirror `ddpbayes audit`'s options (one report each).

    title = "Seed 004's contagious family"         # optional, the report's heading
    description = "..."                             # optional, a paragraph under it
    model = "../../models/contagious_family.py"     # relative to the spec file
    params = { k = 2, p = 0.1 }                     # build(**params); optional
    query = "count"
    notions = ["dp", "idp", "pdp", "ddp"]
    claim = 1.0                                     # optional
    engine = "auto"                                 # optional (default auto)
    seed = 0                                        # optional (default 0)
    target = 0                                      # optional: an index or a list
    known = [1]                                     # optional: pdp's known set
    draws = 500                                     # optional sampling keys: draws, tune, chains
    sweep = [0.25, 0.5, 1, 2, 4]                    # optional: the noise scales (or epsilons) swept
    derive_cov = "[[1, rho], [rho, 1]]"             # optional: a symbolic covariance for the closed form
    calibrate = true                                # optional: mark `calibrate`'s scales on the sweep (default true)
    [mechanism]
    kind = "laplace"
    epsilon = 1.0                                   # or scale = 1.0

Every problem is reported on one line naming the spec file (`InputError`).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ddpbayes.engines import ENGINES
from ddpbayes.errors import InputError
from ddpbayes.notions import NOTIONS

_TYPES = {bool: "true or false", int: "an integer", float: "a number", str: "a string", dict: "a table", list: "a list"}

# key -> (type, required); lists give their element type as a tuple (list, element type)
TOP = {
    "title": (str, False),
    "description": (str, False),
    "model": (str, True),
    "params": (dict, False),
    "query": (str, True),
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
}
MECHANISM = {"kind": (str, True), "scale": (float, False), "epsilon": (float, False)}


@dataclass(frozen=True)
class Spec:
    """A validated audit spec; `path` is the spec file, `model` the resolved model file."""

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
    title: str | None = None
    description: str | None = None

    def audit_kwargs(self, notion: str) -> dict:
        """Keyword arguments of `audit` for one notion (the known set is pdp's only)."""
        return {
            "scale": self.scale,
            "epsilon": self.epsilon,
            "claim": self.claim,
            "targets": None if self.target is None else list(self.target),
            "known": None if self.known is None or notion != "pdp" else list(self.known),
            "engine": self.engine,
            "seed": self.seed,
            "draws": self.draws,
            "tune": self.tune,
            "chains": self.chains,
        }

    def to_json(self) -> dict:
        return {
            "title": self.title,
            "model": self.model_ref,
            "params": self.params,
            "query": self.query,
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
        }


def load_spec(path: str | Path) -> Spec:
    """Read and validate the spec at `path`."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"spec file '{path}' does not exist")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid TOML: {exc}") from None
    _check_keys(raw, TOP, path, "")
    mech = raw["mechanism"]
    _check_keys(mech, MECHANISM, path, "mechanism.")
    if ("scale" in mech) == ("epsilon" in mech):
        raise InputError(f"{path}: [mechanism] needs exactly one of 'scale' and 'epsilon'")
    model = (path.parent / raw["model"]).resolve()
    if not model.is_file():
        raise InputError(f"{path}: model file '{raw['model']}' does not exist (resolved to {model})")
    notions = tuple(raw["notions"])
    bad = [n for n in notions if n not in NOTIONS]
    if bad or not notions or len(set(notions)) != len(notions):
        why = f"unknown notion '{bad[0]}'" if bad else "empty or repeated notions"
        raise InputError(f"{path}: {why} in 'notions' (use a list of distinct {', '.join(NOTIONS)})")
    engine = raw.get("engine", "auto")
    if engine not in ("auto", *ENGINES):
        raise InputError(f"{path}: unknown engine '{engine}' (use auto, {', '.join(ENGINES)})")
    for key in ("scale", "epsilon"):
        if key in mech and not (math.isfinite(mech[key]) and mech[key] > 0):
            raise InputError(f"{path}: mechanism.{key} must be a positive finite number, got {mech[key]}")
    sweep = raw.get("sweep")
    if sweep is not None and (len(sweep) < 2 or not all(math.isfinite(v) and v > 0 for v in sweep)):
        raise InputError(f"{path}: 'sweep' needs at least two positive finite numbers, got {sweep}")
    target = raw.get("target")
    return Spec(
        path=path,
        model=model,
        model_ref=raw["model"],
        query=raw["query"],
        notions=notions,
        kind=mech["kind"],
        scale=_float(mech.get("scale")),
        epsilon=_float(mech.get("epsilon")),
        params=raw.get("params", {}),
        claim=_float(raw.get("claim")),
        engine=engine,
        seed=raw.get("seed", 0),
        target=None if target is None else tuple(target),
        known=None if raw.get("known") is None else tuple(raw["known"]),
        draws=raw.get("draws"),
        tune=raw.get("tune"),
        chains=raw.get("chains"),
        sweep=None if sweep is None else tuple(sorted(float(v) for v in set(sweep))),
        derive_cov=raw.get("derive_cov"),
        calibrate=raw.get("calibrate", True),
        title=raw.get("title"),
        description=raw.get("description"),
    )


def _check_keys(table: dict, schema: dict, path: Path, prefix: str) -> None:
    for key in table:
        if key not in schema:
            raise InputError(f"{path}: unknown key '{prefix}{key}' (allowed: {', '.join(schema)})")
    for key, (kind, required) in schema.items():
        if key not in table:
            if required:
                raise InputError(f"{path}: missing key '{prefix}{key}'")
            continue
        value = table[key]
        if key == "target" and _is(value, int):
            table[key] = value = [value]
        if not _is(value, kind):
            raise InputError(f"{path}: '{prefix}{key}' must be {_describe(kind)}, got {type(value).__name__} {value!r}")


def _is(value, kind) -> bool:
    if isinstance(kind, tuple):
        return isinstance(value, list) and all(_is(v, kind[1]) for v in value)
    if isinstance(value, bool) or kind is bool:
        return isinstance(value, bool) and kind is bool
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def _describe(kind) -> str:
    if isinstance(kind, tuple):
        return f"a list of {_TYPES[kind[1]].split(' ', 1)[1]}s"
    return _TYPES[kind]


def _float(value) -> float | None:
    return None if value is None else float(value)
