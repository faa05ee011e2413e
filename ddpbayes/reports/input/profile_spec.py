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

from ddpbayes.limits import positive_finite
from ddpbayes.profiles import DEFAULT_DELTA
from ddpbayes.reports.input.keys import Problems
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


def parse_profile(table: dict, problems: Problems, notions: list[str]) -> ProfileSpec | None:
    """Check every key and value of `[profile]`, each problem recorded in `problems` naming its key;
    the table, or None when it has a problem."""
    before = len(problems.found)

    def bad(key: str, must: str) -> None:
        problems.add(f"key 'profile.{key}' must be {must}, got {table[key]!r}")

    unknown = [f"'profile.{key}'" for key in table if key not in KEYS]
    if unknown:
        problems.add(f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} (allowed: {', '.join(KEYS)})")
    if "kind" not in table:
        problems.add("missing key 'profile.kind'")
    elif table["kind"] not in KINDS:
        bad("kind", f"one of {', '.join(KINDS)}")
    for key in ("rho", "epsilon", "sigma"):
        if key in table and not positive_finite(table[key]):
            bad(key, "a positive finite number")
    if sum(key in table for key in ("rho", "epsilon", "sigma")) != 1:
        problems.add("[profile] needs exactly one of the keys 'rho', 'epsilon' and 'sigma'")
    delta = table.get("delta", DEFAULT_DELTA)
    if isinstance(delta, bool) or not isinstance(delta, (int, float)) or not 0 < delta < 1:
        bad("delta", "a number strictly between 0 and 1")
    chosen = table.get("notions", notions)
    if (not isinstance(chosen, list) or not chosen or not all(isinstance(n, str) for n in chosen)
            or len(set(chosen)) != len(chosen) or any(n not in NOTIONS for n in chosen)):
        bad("notions", f"a non-empty list of distinct notions from {', '.join(NOTIONS)}")
    for key in ("title", "text"):
        if key in table and not isinstance(table[key], str):
            bad(key, "a string")
    if len(problems.found) > before:
        return None
    return ProfileSpec(table["kind"], tuple(chosen), float(delta), *(_float(table.get(k)) for k in ("rho", "epsilon",
                       "sigma")), table.get("title"), table.get("text"))


def _float(v) -> float | None:
    return None if v is None else float(v)
