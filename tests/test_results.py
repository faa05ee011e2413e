"""Results keep what the user asked (issue 12): the query as given, the mechanism's epsilon, the
settings; and every JSON document encodes numbers one way ("inf", "-inf", "nan")."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import ddpbayes
from ddpbayes.encoding import jsonable, number
from ddpbayes.queries import parse_query


@pytest.mark.parametrize("spec", ["sum", "count", "mean", "identity", "linear:1,2,3", "linear:0.1,-2.5,1e-300",
                                  "histogram:0,0.5,1", "linear:3,-1,2"])
def test_query_spec_round_trips(spec):
    query = parse_query(spec)
    assert parse_query(query.spec) == query
    if spec not in ("linear:0.1,-2.5,1e-300",):
        assert query.spec == spec


def test_audit_json_keeps_query_epsilon_and_settings(household):
    model = household(n=3)
    r = ddpbayes.audit(model, "linear:1,2,3", "laplace", "idp", epsilon=0.5, seed=4, max_adversaries=99)
    doc = json.loads(r.to_json())
    assert doc["query"] == "linear:1,2,3"
    assert doc["mechanism"]["epsilon"] == 0.5 and doc["mechanism"]["scale"] == pytest.approx(3 / 0.5)  # GS = 3
    assert doc["settings"]["seed"] == 4 and doc["settings"]["max_adversaries"] == 99
    assert r.problem.query == parse_query("linear:1,2,3") and r.problem.settings.seed == 4
    again = ddpbayes.audit(model, doc["query"], "laplace", "idp", epsilon=doc["mechanism"]["epsilon"],
                           **{k: v for k, v in doc["settings"].items()})
    assert again.leakage == r.leakage  # the JSON holds enough to run the audit again


def test_one_number_encoding():
    assert [number(v) for v in (math.inf, -math.inf, math.nan, 2.0, np.float32(0.5), np.int64(3), None)] == \
        ["inf", "-inf", "nan", 2.0, 0.5, 3, None]
    doc = jsonable({"a": (1.0, np.inf), 2: {"b": [np.nan, True]}})
    assert doc == {"a": [1.0, "inf"], "2": {"b": ["nan", True]}}
    json.dumps(doc, allow_nan=False)
    assert [float(v) for v in ("inf", "-inf")] == [math.inf, -math.inf]
