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
