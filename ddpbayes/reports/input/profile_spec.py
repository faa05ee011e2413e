"""The spec's `[profile]` table: Gaussian noise for a report section (`reports.views.profile`).

    [profile]
    kind = "gaussian"          # or "discrete_gaussian"
    rho = 0.5                  # exactly one of rho (zCDP), epsilon (with delta: the analytic σ) and sigma
    delta = 1e-6               # the δ at which ε is read (default 1e-6)
    notions = ["idp"]          # optional: default the spec's notions
    title = "..."              # optional: the section's heading
    text = "..."               # optional: paragraphs under it (a blank line between two)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ddpbayes.errors import InputError
from ddpbayes.limits import positive_finite
from ddpbayes.profiles import DEFAULT_DELTA
from ddpbayes.vocabulary import NOTIONS

KINDS = ("gaussian", "discrete_gaussian")
KEYS = {"kind": str, "rho": float, "epsilon": float, "sigma": float, "delta": float, "notions": list, "title": str,
        "text": str}


@dataclass(frozen=True)
class ProfileSpec:
    """The validated `[profile]` table."""

    kind: str
    notions: tuple[str, ...]
    delta: float = DEFAULT_DELTA
    rho: float | None = None
    epsilon: float | None = None
    sigma: float | None = None
    title: str | None = None
    text: str | None = None

    def to_dict(self) -> dict:
        return {"kind": self.kind, "rho": self.rho, "epsilon": self.epsilon, "sigma": self.sigma, "delta": self.delta,
                "notions": list(self.notions), "title": self.title}


def parse_profile(table: dict, path: Path, notions: list[str]) -> ProfileSpec:
    """Check every key and value of `[profile]`; each problem one line naming the spec and key."""
    def bad(key: str, must: str) -> InputError:
        return InputError(f"{path}: key 'profile.{key}' must be {must}, got {table[key]!r}")

    for key in table:
        if key not in KEYS:
            raise InputError(f"{path}: unknown key 'profile.{key}' (allowed: {', '.join(KEYS)})")
    if "kind" not in table:
        raise InputError(f"{path}: missing key 'profile.kind'")
    if table["kind"] not in KINDS:
        raise bad("kind", f"one of {', '.join(KINDS)}")
    for key in ("rho", "epsilon", "sigma"):
        if key in table and not positive_finite(table[key]):
            raise bad(key, "a positive finite number")
    if sum(key in table for key in ("rho", "epsilon", "sigma")) != 1:
        raise InputError(f"{path}: [profile] needs exactly one of the keys 'rho', 'epsilon' and 'sigma'")
    delta = table.get("delta", DEFAULT_DELTA)
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        raise bad("delta", "a number strictly between 0 and 1")
    chosen = table.get("notions", notions)
    if (not isinstance(chosen, list) or not chosen or len(set(chosen)) != len(chosen)
            or any(n not in NOTIONS for n in chosen)):
        raise bad("notions", f"a non-empty list of distinct notions from {', '.join(NOTIONS)}")
    for key in ("title", "text"):
        if key in table and not isinstance(table[key], str):
            raise bad(key, "a string")
    return ProfileSpec(table["kind"], tuple(chosen), float(delta), *(_float(table.get(k)) for k in ("rho", "epsilon",
                       "sigma")), table.get("title"), table.get("text"))


def _float(v) -> float | None:
    return None if v is None else float(v)
