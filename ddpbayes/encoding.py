"""Numbers in JSON, one way everywhere: finite numbers as they are, and the three values JSON
cannot hold as the strings "inf", "-inf" and "nan" (Python's `float()` reads them back).
An unbounded leakage is "inf"; a witness output y -> -inf is "-inf"."""

from __future__ import annotations

import json
import math

import numpy as np


def number(v):
    """One number for JSON (None stays None)."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, (int, np.integer)):
        return int(v)
    v = float(v)
    if math.isfinite(v):
        return v
    return "nan" if math.isnan(v) else "inf" if v > 0 else "-inf"


def jsonable(value):
    """`value` with every number through `number` (dict keys as strings, tuples as lists)."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        if all(type(v) is int for v in value):  # plain ints as they are (ddp's dependence sets: millions)
            return list(value)
        return [jsonable(v) for v in value]
    if isinstance(value, (float, int, np.floating, np.integer)) and not isinstance(value, bool):
        return number(value)
    return value


class JsonDocument:
    """`to_json()` for a class with `to_dict()`: one meaning everywhere (issue #40) — `to_dict()` is
    the JSON document as Python objects, `to_json()` its text, as the command line prints it."""

    def to_json(self) -> str:
        """`to_dict()` as indented JSON text (numbers through `jsonable`: inf and nan as strings).

        Returns
        -------
        str
            The document the command line's ``--format json`` prints.
        """
        return json.dumps(jsonable(self.to_dict()), indent=2, allow_nan=False)
