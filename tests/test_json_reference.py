"""docs/reference/json.md documents every key of every JSON document ddpbayes writes (issue #31).

The page's tables give, per section (`(json-NAME)=` labels), the key paths of one document kind
(`witness.known`, lists as `rows[].epsilon`, a key that is data as `<name>`). A row whose type names
another section ({ref}`... <json-NAME>`) hands that key's value to that section (each item of a list,
unless that section documents the list itself as `[]...`); a row `*` (or `path.*`) with such a type
says that the other section's keys also belong at that level.

The test runs the commands in-process on small shipped models with fast settings, reads the shipped
reports' results.json, and checks both ways: every emitted path is documented in its section, and
every documented path is emitted by at least one document. It checks keys, not values.
"""

from __future__ import annotations

import inspect
import json
import re
import shlex
from pathlib import Path

import pytest

from ddpbayes.cli.main import main

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "json.md"
LABEL = re.compile(r"^\((json-[a-z0-9-]+)\)=\s*$")
ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|([^|]*)\|")
REFERENCE = re.compile(r"\{ref\}`[^`<]*<(json-[a-z0-9-]+)>`")


def noisy_count(answers, rng):
    """A mechanism given as a function: a program (from Python, and as a file on the command line)."""
    return round(answers[0] + rng.laplace(0, 1.0))


PROGRAM = inspect.getsource(noisy_count)
UNBOUNDED = """import numpy as np
import pymc as pm
from ddpbayes import DependenceModel


def build():
    with pm.Model() as m:
        pm.MvNormal("x", mu=np.zeros(2), cov=np.array([[1.0, 0.5], [0.5, 1.0]]), shape=2)
    return DependenceModel(m, tuples="x")
"""

# Documented keys no built-in can emit, with why (the test cannot produce them).
UNREACHABLE = {
    ("json-report-fitted", "cells[].errors.<what>"): "no cell of the shipped fitted report is refused (tests/"
                                                     "test_fitted_report.py builds reports from fits)",
    **{("json-diagnostics", f"target_bound{key}"): "only a sampling audit of a continuous target emits it (MCMC: "
                                                     "tests/test_sampling_continuous.py)"
       for key in ("", ".certified", ".plug_in_bound", ".target_values", ".reason")},
    ("json-diagnostics", "sampler"): "every MCMC estimate has it, but the fast documents' estimates are summed "
                                     "exactly and the shipped reports' results.json predate it "
                                     "(tests/test_sampling_modes.py's slow test checks it)",
    ("json-diagnostics", "smc"): "SMC runs only when NUTS chains disagree, which no fast built-in does "
                                 "(tests/test_sampling_modes.py's slow test checks the record)",
    ("json-sampled-audit", "density_error"): "the shipped report's results.json predates it (tests/test_ego.py's "
                                             "end-to-end audit checks it)",
    ("json-information-target", "dp_note"): "a note on the dp bound comes only from a user's Mechanism subclass: the "
                                            "built-in mechanisms with information measures have exact dp levels",
}

# The sampling engine's posterior route (`--method posterior`) compiles and runs MCMC (about 10 s even at 8
# draws): its one key of its own is checked by the slow test below.
POSTERIOR = ("audit models/beta_bernoulli.py -p n=2 --query count --mechanism laplace --scale 1 --notion idp "
             "--engine sampling --method posterior --draws 8 --tune 8 --target 0 --workers 1 --format json")
POSTERIOR_ONLY = {("json-diagnostics", "method")}

# A fit compiles two PyMC models and runs NUTS twice (20 s on an idle machine, even this short one, which fails its
# convergence checks and is written with --force): its sections are checked by the slow test below, which also
# reads the MODEL.fit.json it writes.
FIT = ("fit {tmp}/small.csv --template clustered --cluster village --outcome pos --covariates age --draws 30 --tune 30 "
       "--chains 2 --out {tmp}/small.py --force --quiet --format json")
FIT_TABLE = "village,pos,age\n" + "".join(f"v{i // 5},{int(i % 3 == 0) ^ (i // 5 % 2)},{i % 4}\n" for i in range(30))
FIT_GAUSSIAN = ("fit {tmp}/heights.csv --template gaussian --group fam --columns h --covariates sex --draws 30 "
                "--tune 30 --chains 2 --out {tmp}/heights.py --force --quiet --format json")
FIT_GAUSSIAN_TABLE = "fam,sex,h\n" + "".join(f"f{i // 3},{'mf'[i % 2]},{60 + (i * 7) % 11}\n" for i in range(30))
FIT_JOINT = ("fit {tmp}/pairs.csv --template gaussian --group fam --columns h,w --draws 30 --tune 30 --chains 2 "
             "--out {tmp}/pairs.py --force --quiet --format json")
FIT_JOINT_TABLE = "fam,h,w\n" + "".join(f"f{i // 3},{60 + (i * 7) % 11},{50 + (i * 5) % 13}\n" for i in range(30))
FIT_CHAIN = ("fit {tmp}/days.csv --template chain --id person --time day --state place --draws 30 --tune 30 "
             "--chains 2 --out {tmp}/days.py --force --quiet --format json")
FIT_CHAIN_TABLE = "person,day,place\n" + "".join(f"p{i // 6},{i % 6},{'ab'[(i * i) % 3 == 0]}\n" for i in range(30))
FIT_GRAPH = ("fit {tmp}/places.csv --template graph --edges {tmp}/friends.csv --id who --columns lat,lon "
             "--model MODEL --draws 30 --tune 30 --chains 2 --out {tmp}/places_MODEL.py --force --quiet --format json")
FIT_GRAPH_NODES = "who,lat,lon\n" + "".join(f"u{i},{40 + (i * 7) % 5 / 10},{-100 + (i * 3) % 7 / 10}\n" for i in range(8))
FIT_GRAPH_EDGES = "a,b\nu0,u1\nu1,u2\nu2,u0\nu3,u4\nu5,u6\nu6,u7\nu9,u0\n"
FIT_SPATIAL = ("fit {tmp}/villages.csv --template clustered --cluster village --outcome pos --coords east,north "
               "--draws 30 --tune 30 --chains 2 --out {tmp}/villages.py --force --quiet --format json")
FIT_SPATIAL_TABLE = "village,pos,east,north\n" + "".join(
    f"v{i // 5},{int(i % 3 == 0) ^ (i // 5 % 2)},{i // 5},{(i // 5) ** 2}\n" for i in range(30))
FIT_CATEGORICAL = ("fit {tmp}/grades.csv --template clustered --cluster school --outcome grade --draws 30 --tune 30 "
                   "--chains 2 --out {tmp}/grades.py --force --quiet --format json")
FIT_CATEGORICAL_TABLE = "school,grade\n" + "".join(f"s{i // 5},{'abc'[(i * i + i // 5) % 3]}\n" for i in range(30))
FIT_SECTIONS = {"json-fit", "json-fit-check"}

# An audit of a fitted model under draws:S runs one audit per draw (the structured engine's quadrature, seconds each):
# checked by the slow test below on a fit written by hand in the `.fit.json` format.
FITTED = ("audit {tmp}/villages.py --parameters draws:2 --query count --mechanism laplace --scale 1 --notion idp "
          "--target 0 --claim 1 --format json")
FITTED_CALIBRATE = ("calibrate {tmp}/villages.py --parameters draws:2 --query count --notion idp --epsilon 1 "
                    "--target 0 --format json")
FITTED_SECTIONS = {"json-audit-fitted", "json-calibrate-fitted"}

# Each command is one document of its section; fast settings only (the exact, structured and gaussian
# engines, and the sampling engine where nothing continuous is left to sample: the MCMC estimates'
# diagnostics come from the shipped reports, which the sampling engine made).
HOUSEHOLD = "audit models/household.py --format json --notion"
COMMANDS = {
    "json-audit": [
        f"{HOUSEHOLD} idp --query count --mechanism laplace --epsilon 1 --claim 1",
        f"{HOUSEHOLD} dp --query count --mechanism laplace --epsilon 1",
        f"{HOUSEHOLD} ddp --query count --mechanism laplace --epsilon 1",
        f"{HOUSEHOLD} pdp --query count --mechanism laplace --epsilon 1 --lattice",
        f"{HOUSEHOLD} pdp --query count --mechanism laplace --epsilon 1 --search greedy",
        f"{HOUSEHOLD} idp --release linear:1,1,0,0:laplace:1 --release linear:0,0,1,1:laplace:2",
        f"{HOUSEHOLD} idp --query count --mechanism gaussian --sigma 2 --delta 1e-5",
        f"{HOUSEHOLD} pdp --query count --mechanism gaussian --epsilon 1 --delta 1e-6",
        f"{HOUSEHOLD} idp --query count --mechanism discrete_gaussian --sigma 2",
        f"{HOUSEHOLD} idp --query count --mechanism geometric --scale 1 --information bits",
        f"{HOUSEHOLD} idp --query identity --mechanism randomized_response --epsilon 1",
        f"{HOUSEHOLD} idp --query count --mechanism laplace --scale 1 --engine sampling --workers 1",
        f"{HOUSEHOLD} idp -p n=3 --query linear:1,1,0;0,1,1 --mechanism report_noisy_max --epsilon 1",
        f"{HOUSEHOLD} idp -p n=3 --query linear:1,1,0;0,1,1 --mechanism exponential --epsilon 1",
        f"{HOUSEHOLD} idp -p n=3 --query count --mechanism truncated_geometric --epsilon 1",
        f"{HOUSEHOLD} idp -p n=3 --query count --mechanism truncated_geometric --epsilon 1 "
        "--mechanism-param variant=balcer_vadhan",
        f"{HOUSEHOLD} idp -p n=3 --query identity --mechanism prefix_sums --epsilon 1",
        f"{HOUSEHOLD} idp -p n=3 --query count --mechanism program:{{tmp}}/noisy_count.py:noisy_count "
        "--program-runs 200 --workers 1 --claim 1",
        f"{HOUSEHOLD} dp -p n=3 --query count --mechanism program:{{tmp}}/noisy_count.py:noisy_count "
        "--program-runs 200 --target 0",
        "audit models/hmm_regimes.py -p n=3 --query identity --mechanism sparse_vector --epsilon 1 "
        "--mechanism-param threshold=0.5 --mechanism-param cutoff=1 --notion idp --format json",
        "audit models/hmm_regimes.py -p n=3 --query identity --mechanism numerical_sparse_vector --epsilon 1 "
        "--mechanism-param threshold=0.5 --mechanism-param cutoff=1 --notion idp --format json",
        "audit models/markov_chain.py -p n=5 --query count --mechanism laplace --epsilon 1 --notion idp "
        "--engine structured --format json",
        "audit models/galton_families.py -p k=3 --query mean --mechanism gaussian --rho 0.5 --notion idp --format json",
        "audit models/galton_families.py -p k=3 --query expr:height[0]*height[1] --sensitivity 1 "
        "--mechanism laplace --scale 1 --notion dp --format json",
        "audit {tmp}/unbounded.py --query sum --mechanism laplace --scale 1 --notion idp --format json",
    ],
    "json-rho": ["rho models/household.py --scale 1 --format json"],
    "json-calibrate": [
        "calibrate models/household.py --query count --notion idp --epsilon 1 --engine sampling --max-adversaries 4 "
        "--workers 1 --format json",  # exact sums (no MCMC) give intervals; the pdp lattice is over the limit
        "calibrate models/household.py --query count --notion ddp --epsilon 1 --method dpm --format json",
        "calibrate models/household.py -p n=2 --query count --notion idp --epsilon 1 --mechanism gaussian "
        "--delta 1e-6 --format json",
    ],
    "json-derive-gaussian": [
        "derive gaussian --cov [[1,r],[r,1]] --format json",
        "derive gaussian --cov [[1,0.5],[0.5,1]] --mechanism gaussian --sigma 1 --width 1 --delta 1e-6 --format json",
    ],
    "json-derive-gaussian-rho": ["derive gaussian-rho --cov [[1,r],[r,1]] --format json"],
    "json-attack": [
        "attack --targets 20 --epsilons 1 --grid 5 --workers 1 --format json",
        "attack --targets 20 --epsilons 1 --grid 5 --workers 1 --region cities --format json",
    ],
    "json-mechanisms": ["mechanisms --format json"],
}


def documented() -> dict[str, dict[str, str | None]]:
    """Each section's documented paths, each with the section it hands its value to (or None)."""
    sections: dict[str, dict[str, str | None]] = {}
    current = None
    for line in PAGE.read_text().splitlines():
        label = LABEL.match(line)
        if label:
            current = sections.setdefault(label.group(1), {})
            continue
        row = ROW.match(line)
        if row and current is not None:
            path, kind = row.group(1), row.group(2)
            assert path not in current, f"{path} documented twice in one section"
            refer = REFERENCE.search(kind)
            current[path] = refer.group(1) if refer else None
    return sections


def report_section(doc: dict) -> str:
    """The section of a shipped results.json, by its kind."""
    if "ddpbayes_attack_report" in doc:
        return "json-report-attack"
    if "cases" in doc:
        return "json-report-mechanisms"
    if "fit" in doc["spec"]:
        return "json-report-fitted"
    if "releases" in doc["spec"]:
        return "json-report-composition"
    return "json-report"


def matching(path: str, key: str, rows: dict[str, str | None]) -> str | None:
    """The documented path for `key` under the documented path `path`: the key itself, else a
    `<placeholder>` (a key that is data)."""
    exact = f"{path}.{key}" if path else key
    if exact in rows:
        return exact
    for name in rows:
        head, _, last = name.rpartition(".")
        if head == path and last.startswith("<") and last.endswith(">"):
            return name
    return None


def walk(value, path: str, section: str, docs: dict, seen: dict[str, set], missing: set) -> None:
    """Record every path of `value` (found at the documented `path` of `section`) as seen, or as missing."""
    rows = docs[section]
    if isinstance(value, list):
        for item in value:
            walk(item, f"{path}[]", section, docs, seen, missing)
        return
    if not isinstance(value, dict):
        return
    for key, item in value.items():
        name = matching(path, key, rows)
        if name is None:
            merged = f"{path}.*" if path else "*"  # every key of another section also belongs here
            if rows.get(merged) is None:
                missing.add(f"{section}: {path + '.' if path else ''}{key}")
            else:
                seen.setdefault(section, set()).add(merged)
                walk({key: item}, "", rows[merged], docs, seen, missing)
            continue
        seen.setdefault(section, set()).add(name)
        target = rows[name]
        if target is None:
            walk(item, name, section, docs, seen, missing)
        elif isinstance(item, list) and not any(row.startswith("[]") for row in docs[target]):  # a list of them
            for each in item:
                walk(each, "", target, docs, seen, missing)
        elif item is not None:
            walk(item, "", target, docs, seen, missing)


def run(argv: list[str], capsys) -> object:
    """The JSON a command prints (it must run: exit 0, or 1 for a failed claim)."""
    capsys.readouterr()
    code = main(argv)
    out = capsys.readouterr().out
    assert code in (0, 1), f"{shlex.join(argv)} exited {code}"
    return json.loads(out)


def python_audits() -> tuple[list[dict], set[str]]:
    """Audits from Python of what only Python can pass: a function (`mechanism.from`) and, with diffprivlib
    installed, a library object audited as a program (`mechanism.why`); and the audit paths left unproduced."""
    import ddpbayes

    model = ddpbayes.load_model(str(ROOT / "models" / "household.py"), {"n": 3})
    docs = [ddpbayes.audit(model, "count", noisy_count, "idp", program_runs=200, workers=1).to_dict()]
    try:
        from diffprivlib.mechanisms import LaplaceTruncated
    except ImportError:  # pip install ".[interop]"
        return docs, {"mechanism.why"}
    library = LaplaceTruncated(epsilon=1, sensitivity=1, lower=0, upper=3)
    docs.append(ddpbayes.audit(model, "count", library, "idp", program_runs=200, workers=1).to_dict())
    return docs, set()


@pytest.fixture(scope="module")
def docs() -> dict[str, dict[str, str | None]]:
    return documented()


def test_the_page_parses_into_sections_whose_references_exist(docs):
    assert {"json-audit", "json-rho", "json-calibrate", "json-derive-gaussian", "json-derive-gaussian-rho",
            "json-attack", "json-mechanisms", "json-report", "json-report-composition", "json-report-mechanisms",
            "json-report-attack"} <= set(docs)
    assert all(docs.values()), [name for name, rows in docs.items() if not rows]
    assert {target for rows in docs.values() for target in rows.values() if target} <= set(docs)


def test_every_key_is_documented_and_every_documented_key_exists(docs, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    (tmp_path / "noisy_count.py").write_text(PROGRAM)
    (tmp_path / "unbounded.py").write_text(UNBOUNDED)
    seen: dict[str, set] = {}
    missing: set = set()
    for section, commands in COMMANDS.items():
        for command in commands:
            walk(run(shlex.split(command.replace("{tmp}", str(tmp_path))), capsys), "", section, docs, seen, missing)
    python_docs, unproduced = python_audits()
    for doc in python_docs:
        walk(doc, "", "json-audit", docs, seen, missing)
    for results in sorted(ROOT.glob("reports/*/results.json")):
        doc = json.loads(results.read_text())
        walk(doc, "", report_section(doc), docs, seen, missing)
    assert not missing, "emitted but not documented in docs/reference/json.md:\n" + "\n".join(sorted(missing))
    left = {("json-audit", path) for path in unproduced} | set(UNREACHABLE) | POSTERIOR_ONLY
    left |= {(section, path) for section in FIT_SECTIONS | FITTED_SECTIONS for path in docs[section]}
    never = sorted(f"{section}: {path}" for section, rows in docs.items() for path in rows
                   if path not in seen.get(section, set()) and (section, path) not in left)
    assert not never, "documented but emitted by no document of this test:\n" + "\n".join(never)


@pytest.mark.slow
def test_the_posterior_route_keys_are_documented(docs, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    seen: dict[str, set] = {}
    missing: set = set()
    walk(run(shlex.split(POSTERIOR), capsys), "", "json-audit", docs, seen, missing)
    assert not missing, "emitted but not documented in docs/reference/json.md:\n" + "\n".join(sorted(missing))
    assert all(path in seen.get(section, set()) for section, path in POSTERIOR_ONLY)


@pytest.mark.slow
def test_the_fit_keys_are_documented(docs, capsys, tmp_path):
    (tmp_path / "small.csv").write_text(FIT_TABLE)
    (tmp_path / "heights.csv").write_text(FIT_GAUSSIAN_TABLE)
    (tmp_path / "pairs.csv").write_text(FIT_JOINT_TABLE)
    (tmp_path / "days.csv").write_text(FIT_CHAIN_TABLE)
    (tmp_path / "places.csv").write_text(FIT_GRAPH_NODES)
    (tmp_path / "friends.csv").write_text(FIT_GRAPH_EDGES)
    (tmp_path / "villages.csv").write_text(FIT_SPATIAL_TABLE)
    (tmp_path / "grades.csv").write_text(FIT_CATEGORICAL_TABLE)
    graphs = [(FIT_GRAPH.replace("MODEL", m) + " --drop-unknown", f"places_{m}") for m in ("near", "car")]
    seen: dict[str, set] = {}
    missing: set = set()
    regimes = (FIT_CHAIN.replace("days.py", "regimes.py") + " --regimes 2", "regimes")
    fits = ((FIT, "small"), (FIT_GAUSSIAN, "heights"), (FIT_JOINT, "pairs"), (FIT_CHAIN, "days"), regimes,
            (FIT_SPATIAL, "villages"), (FIT_CATEGORICAL, "grades"), *graphs)
    for command, name in fits:  # each template, the clustered one with its spatial field, the chain with regimes
        capsys.readouterr()
        code = main(shlex.split(command.replace("{tmp}", str(tmp_path))))
        assert code == 4  # too short to converge: written because of --force
        walk(json.loads(capsys.readouterr().out), "", "json-fit", docs, seen, missing)
        walk(json.loads((tmp_path / f"{name}.fit.json").read_text()), "", "json-fit", docs, seen, missing)
    assert not missing, "emitted but not documented in docs/reference/json.md:\n" + "\n".join(sorted(missing))
    never = sorted(f"{section}: {path}" for section in FIT_SECTIONS for path in docs[section]
                   if path not in seen.get(section, set()))
    assert not never, "documented but emitted by no document of this test:\n" + "\n".join(never)


@pytest.mark.slow
def test_the_fitted_audit_keys_are_documented(docs, capsys, tmp_path):
    from ddpbayes.fitting.write import companions, model_text

    draws = {"intercept": [-0.5, 0.0, 0.5], "sigma": [0.5, 1.0, 1.5]}
    doc = {"format": 1, "template": "clustered",
           "parameters": {k: {"mean": sum(v) / 3, "sd": 0.5, "hdi": [min(v), max(v)]} for k, v in draws.items()},
           "data": {"file": "villages.csv", "rows": 4, "outcome": "pos", "cluster": ["village"], "clusters": 2,
                    "covariates": [], "covariate_mean": [], "covariate_sd": []},
           "table": {"clusters": ["a", "b"], "cluster_index": [0, 0, 1, 1], "x": []}, "draws": draws}
    out = tmp_path / "villages.py"
    companions(out)[0].write_text(json.dumps(doc))
    out.write_text(model_text(out, doc))
    seen: dict[str, set] = {}
    missing: set = set()
    walk(run(shlex.split(FITTED.replace("{tmp}", str(tmp_path))), capsys), "", "json-audit-fitted", docs, seen, missing)
    walk(run(shlex.split(FITTED_CALIBRATE.replace("{tmp}", str(tmp_path))), capsys), "", "json-calibrate-fitted", docs,
         seen, missing)
    assert not missing, "emitted but not documented in docs/reference/json.md:\n" + "\n".join(sorted(missing))
    never = sorted(f"{section}: {path}" for section in FITTED_SECTIONS for path in docs[section]
                   if path not in seen.get(section, set()))
    assert not never, "documented but emitted by no document of this test:\n" + "\n".join(never)
