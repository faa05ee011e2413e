"""The terminal text of an audit over many records stays readable: a long query and the ddp
dependence sets are abbreviated (the JSON keeps them whole). Before: a fitted survey's audit
printed its 4,076-character `linear:` query and 2,035 dependence sets of 30 names each."""

from __future__ import annotations

import json

import numpy as np
import pymc as pm

import ddpbayes
from ddpbayes import DependenceModel
from ddpbayes.cli.text import audit_text
from ddpbayes.formatting import short_text


def test_short_text_keeps_short_text_and_says_how_long_the_rest_is():
    assert short_text("count") == "count"
    long = "linear:" + ",".join(["1"] * 200)
    shown = short_text(long)
    assert len(shown) < 120 and shown.startswith(long[:60]) and f"{len(long):,} characters" in shown


def test_a_ddp_audit_over_forty_records_prints_a_short_text():
    cluster = np.repeat([0, 1], 20)
    with pm.Model() as m:
        u = pm.Normal("u", 0.0, 1.0, shape=2)
        pm.Bernoulli("y", logit_p=-0.3 + u[cluster], shape=40)
    model = DependenceModel(m, tuples="y")
    query = "linear:" + ",".join(["1"] * 40)
    found = ddpbayes.audit(model, query, "laplace", "ddp", scale=1.0, engine="structured")
    text = audit_text(found)
    assert max(len(line) for line in text.splitlines()) < 250
    assert "(28 more audited tuples)" in text and "(7 more)" in text  # 12 of 40 sets, 19 mates: 12 shown
    assert json.loads(found.to_json())["query"] == query  # whole in the JSON
    assert len(json.loads(found.to_json())["dependence_sets"]) == 40
