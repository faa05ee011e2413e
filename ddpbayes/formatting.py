"""How numbers and long lists read in text meant for people (terminal tables, reprs): a bottom
layer, imported by the model, the audit and the command line alike (the JSON encoding is
`ddpbayes/encoding.py`)."""

from __future__ import annotations

import math


def fmt(v: float | None) -> str:
    """A number in six significant digits; None as "-", infinities as "+inf"/"-inf"."""
    if v is None:
        return "-"
    if math.isinf(v):
        return "+inf" if v > 0 else "-inf"
    return f"{v + 0.0:.6g}"  # -0.0 prints as 0


def abbreviated(items: list[str], keep: int = 12) -> str:
    """The items joined; beyond `keep` the first and last few and how many are left out (the
    JSON output keeps them all)."""
    if len(items) <= keep:
        return ", ".join(items)
    half = keep // 2
    return ", ".join(items[:half]) + f", ... ({len(items) - keep:,} more) ..., " + ", ".join(items[-half:])


def short_text(text: str, keep: int = 100) -> str:
    """`text` whole up to `keep` characters, else its start and how long it is (a `linear:` query over
    2,035 records; the JSON output keeps it whole)."""
    if len(text) <= keep:
        return text
    return f"{text[:keep - 40]}... ({len(text):,} characters; whole in --format json)"


def witness_output(y: tuple[float, ...] | None, event: str | None, profile: bool) -> str:
    """What attains a witness's leakage: `y=0.5`, `y → +∞` (a limit), a program's `event output in {5, 6, 8}`
    (`event`), `y: a set of outputs (privacy profile)` (`profile`), or `y: none` (nothing to learn)."""
    if y is not None:
        shown = ["+∞" if v == math.inf else "-∞" if v == -math.inf else fmt(v) for v in y]
        arrow = " → " if any(math.isinf(v) for v in y) else "="
        return f"y{arrow}{shown[0] if len(shown) == 1 else f'({abbreviated(shown)})'}"
    if event:
        return f"event {event}"
    return "y: a set of outputs (privacy profile)" if profile else "y: none"
