"""The mechanisms-under-dependence report (issue #28 item 5): its spec's one-line errors, and a built
report whose results.json holds exactly what `audit` gives for the same cases (the nominal ε being the
dp notion's value)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddpbayes import audit
from ddpbayes.errors import InputError
from ddpbayes.model.loading import load_model
from ddpbayes.reports import build_report, load_spec
from ddpbayes.reports.input import MechanismsSpec

MODELS = Path(__file__).resolve().parents[1] / "models"
CASES = f"""
notions = ["dp", "idp", "pdp", "ddp"]

[[case]]
label = "count"
model = "{MODELS / 'household.py'}"
params = {{ n = 3 }}
query = "count"
mechanism = "truncated_geometric"
epsilon = 1.0
mechanism_params = {{ n = 3 }}

[[case]]
label = "members"
model = "{MODELS / 'household.py'}"
params = {{ n = 3 }}
query = "identity"
mechanism = "rnm"
epsilon = 0.5
mechanism_params = {{ noise = "exponential" }}
notions = ["idp", "pdp"]
"""


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mech.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_spec_with_cases_is_a_mechanisms_spec(tmp_path):
    spec = load_spec(_spec(tmp_path, CASES))
    assert isinstance(spec, MechanismsSpec)
    assert [c.mechanism for c in spec.cases] == ["truncated_geometric", "report_noisy_max"]  # aliases resolved
    assert spec.cases[0].notions == ("dp", "idp", "pdp", "ddp") and spec.cases[1].notions == ("idp", "pdp")
    assert spec.cases[1].mechanism_params == {"noise": "exponential"}


@pytest.mark.parametrize("edit, message", [
    (("epsilon = 0.5\n", "epsilon = 0.5\nrepeat = 2\n"), "unknown key 'case[1].repeat'"),
    (('mechanism = "rnm"', 'mechanism = "noisy_minimum"'), "key 'case[1].mechanism' must be a pure-ε mechanism"),
    (('mechanism = "rnm"', 'mechanism = "gaussian"'), "key 'case[1].mechanism' must be a pure-ε mechanism"),
    (('noise = "exponential"', 'nois = "exponential"'),
     "key 'case[1].mechanism_params': the report_noisy_max mechanism has no parameter 'nois'"),
    (("mechanism_params = { n = 3 }", 'mechanism_params = { n = "three" }'),
     "key 'case[0].mechanism_params': --mechanism-param n= must be an integer"),
    (("mechanism_params = { n = 3 }", "mechanism_params = { n = [3] }"),
     "key 'case[0].mechanism_params.n' must be a string, number or boolean"),
    (('notions = ["idp", "pdp"]', 'notions = ["idp", "xdp"]'), "key 'case[1].notions' must be"),
    (('query = "count"', 'query = "cont"'), "key 'case[0].query': unknown query 'cont'"),
    (("epsilon = 1.0", "epsilon = -1.0"), "key 'case[0].epsilon' must be a positive finite number"),
    (("epsilon = 1.0", "epsilon = 1.0\nscale = 2.0"), "case[0] gives both 'epsilon' and 'scale'"),
    (('label = "members"', 'label = "count"'), "two cases are labelled 'count'"),
    (('notions = ["dp", "idp", "pdp", "ddp"]\n', ""), "missing key 'case[0].notions'"),
])
def test_spec_errors_are_one_line_naming_the_file_and_key(tmp_path, edit, message):
    old, new = edit
    assert old in CASES
    path = _spec(tmp_path, CASES.replace(old, new, 1))
    with pytest.raises(InputError) as info:
        load_spec(path)
    text = str(info.value)
    assert "\n" not in text and text.startswith(str(path)) and message in text, text


def test_a_bad_value_only_the_mechanism_sees_names_the_case(tmp_path):
    path = _spec(tmp_path, CASES.replace('noise = "exponential"', 'noise = "gumbel"'))
    load_spec(path)  # a parameter's value is the mechanism's to judge, when the case runs
    with pytest.raises(InputError) as info:
        build_report(path, tmp_path / "out", progress=False)
    text = str(info.value)
    assert text.startswith(str(path)) and "case[1]" in text and "gumbel" in text and "\n" not in text
    assert not (tmp_path / "out").exists()


def test_the_report_holds_what_audit_gives(tmp_path):
    path = _spec(tmp_path, CASES)
    out = tmp_path / "out"
    data = build_report(path, out, progress=False)
    assert {p.name for p in out.iterdir()} == {"index.html", "report.md", "results.json", "figures"}
    assert data == json.loads((out / "results.json").read_text(encoding="utf-8"))
    model = load_model(MODELS / "household.py", {"n": 3})
    settings = [("count", "truncated_geometric", 1.0, {"n": "3"}, ("dp", "idp", "pdp", "ddp")),
                ("identity", "report_noisy_max", 0.5, {"noise": "exponential"}, ("idp", "pdp"))]
    for case, (query, kind, eps, params, notions) in zip(data["cases"], settings):
        def leak(name):
            return audit(model, query, kind, name, epsilon=eps, params=params, information=None).leakage

        nominal = leak("dp")
        assert case["nominal"] == nominal
        assert case["audits"]["dp"]["leakage"] == nominal
        others = [n for n in notions if n != "dp"]
        assert set(case["leakage"]) == set(others)
        for name in others:
            assert case["leakage"][name] == leak(name)
            assert case["ratio"][name] == pytest.approx(case["leakage"][name] / nominal, rel=1e-15)
    count = data["cases"][0]
    assert count["leakage"]["idp"] > count["nominal"]  # the household's shared exposure moves the count
    text = (out / "report.md").read_text(encoding="utf-8")
    assert "Ghosh et al. 2009" in text and "Lyu et al. 2017" in text and "ddpbayes audit" in text


def test_the_shipped_year_svt_pdp_witness_attains_its_leakage():
    """The shipped report's 365-day chain, SVT Alg. 1, pdp: its printed witness (day 2, days 5 on known, a first TRUE
    on day 5) evaluated from the definition. Given X_5, the known days after it are independent of days 0-4 (Markov)
    and emit nothing once day 5 answers TRUE (c = 1), so P(y | X_2 = t, x_K) sums the four unknown days of
    pi(x0) P(x0,x1) P(x1,t) P(t,x3) P(x3,x4) P(x4,x5) (p_stay = 0.8, stationary start: the model's defaults) times
    the integral over the threshold noise rho ~ Lap(rho_scale) of prod_{j<5} F(T + rho - x_j) (1 - F(T + rho - x_5)),
    F the Laplace(nu_scale) CDF (scipy's quad between the kinks); its log ratio at t, t' is the printed leakage."""
    import itertools
    import math

    import numpy as np
    from scipy.integrate import quad

    results = json.loads((Path(__file__).resolve().parents[1] / "reports" / "mechanisms_under_dependence"
                          / "results.json").read_text())
    case = next(c for c in results["cases"] if c["label"] == "365-day chain: SVT Alg. 1, days")
    pdp = case["audits"]["pdp"]
    w, mech = pdp["witness"], pdp["mechanism"]
    assert case["params"] == {"n": 365} and mech["variant"] == 1 and mech["cutoff"] == 1
    assert w["target"] == 2 and w["known"] == list(range(5, 365)) and w["y"][:6] == [0.0] * 5 + [1.0]
    assert set(w["y"][6:]) == {-1.0}
    x5, big_t, rho, nu = int(w["known_values"]["5"]), mech["threshold"], mech["rho_scale"], mech["nu_scale"]
    step = np.array([[0.8, 0.2], [0.2, 0.8]])

    def cdf(x, b):  # Laplace(0, b)
        return 0.5 * math.exp(x / b) if x < 0 else 1 - 0.5 * math.exp(-x / b)

    def output(xs):
        def g(r):
            return math.exp(-abs(r) / rho) / (2 * rho) * math.prod(cdf(big_t + r - x, nu) for x in xs[:5]) * \
                (1 - cdf(big_t + r - xs[5], nu))
        kinks = sorted({0.0} | {float(x) - big_t for x in xs})
        return sum(quad(g, a, b, epsabs=0, epsrel=1e-13, limit=200)[0]
                   for a, b in zip([-np.inf] + kinks, kinks + [np.inf]))

    def likelihood(t):
        num = den = 0.0
        for x0, x1, x3, x4 in itertools.product((0, 1), repeat=4):
            weight = 0.5 * step[x0, x1] * step[x1, t] * step[t, x3] * step[x3, x4] * step[x4, x5]
            num += weight * output([x0, x1, t, x3, x4, x5])
            den += weight
        return num / den

    ratio = np.log(likelihood(int(w["t"])) / likelihood(int(w["t_prime"])))
    assert ratio == pytest.approx(pdp["leakage"], abs=1e-10)
