"""`--parameters` on gaussian and chain fits (issue #41, DESIGN §9.6): mean, draws:S and (chains)
integrated:S on small hand-made fits, against values written here: a Gaussian draw's leakage from its
covariance (DESIGN §2.2's closed form for a sum with Laplace noise), a chain draw's and the mixture
over draws' by enumeration of the chain's sequences (`bruteforce.leak_bruteforce`)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from bruteforce import leak_bruteforce

from ddpbayes.cli.main import main
from ddpbayes.fitting.fitted import FORMAT
from ddpbayes.fitting.write import model_text
from ddpbayes.plausible import audit_fitted

GROUPS = [3, 2]
LOW, HIGH = 56.0, 79.0
SIGMA_GROUP = [1.0, 1.5, 2.5]  # three posterior draws
SIGMA_RESIDUAL = [2.0, 1.0, 2.2]
STATES = ["a", "b"]
KAPPA = [2.0, 6.0, 1.0]
M = np.array([[[0.7, 0.3], [0.4, 0.6]], [[0.9, 0.1], [0.2, 0.8]], [[0.5, 0.5], [0.1, 0.9]]])
INIT = np.array([[0.5, 0.5], [0.8, 0.2], [0.3, 0.7]])
COUNTS = np.array([[[2, 1], [0, 0]], [[1, 1], [1, 0]]])  # individuals p (4 days) and q (3 days)


def _write(out: Path, doc: dict) -> Path:
    doc["parameters"] = {k: {"mean": float(np.mean(v))} for k, v in doc["draws"].items()}
    out.with_name(out.stem + ".fit.json").write_text(json.dumps(doc))
    out.write_text(model_text(out, doc))
    return out


@pytest.fixture(scope="module")
def gaussian(tmp_path_factory) -> Path:
    """A gaussian fit's files as `ddpbayes fit` writes them: groups of 3 and 2, three draws."""
    index = [g for g, size in enumerate(GROUPS) for _ in range(size)]
    draws = {"intercept": [64.0] * 3, "beta_sex": [2.5] * 3, "sigma_group": SIGMA_GROUP,
             "sigma_residual": SIGMA_RESIDUAL}
    doc = {"format": FORMAT, "template": "gaussian", "draws": draws,
           "data": {"file": "t.csv", "rows": len(index), "outcome": "h", "cluster": ["fam"], "clusters": len(GROUPS),
                    "covariates": ["sex"], "domain": [LOW, HIGH]},
           "table": {"clusters": ["f0", "f1"], "cluster_index": index, "x": [(-1.0) ** k for k in range(len(index))]}}
    return _write(tmp_path_factory.mktemp("gaussian") / "families.py", doc)


@pytest.fixture(scope="module")
def chain(tmp_path_factory) -> Path:
    """A chain fit's files: two individuals, three draws of (kappa, m, init)."""
    draws = {"kappa": KAPPA} | {f"init_{s}": INIT[:, j].tolist() for j, s in enumerate(STATES)}
    draws |= {f"m_{s}_{t}": M[:, a, b].tolist() for a, s in enumerate(STATES) for b, t in enumerate(STATES)}
    doc = {"format": FORMAT, "template": "chain", "draws": draws,
           "data": {"file": "t.csv", "rows": 7, "outcome": "place", "cluster": ["person"], "clusters": 2,
                    "covariates": [], "time": "day", "states": STATES},
           "table": {"clusters": ["p", "q"], "counts": COUNTS.ravel().tolist(), "lengths": [4, 3]}}
    return _write(tmp_path_factory.mktemp("chain") / "days.py", doc)


def gaussian_leak(sigma_group: float, sigma_residual: float, target: int, b: float) -> float:
    """The sum with Laplace(b), K empty: X_i = t moves E[q | t] by t Σ_j Cov_ij / Cov_ii and leaves its variance,
    so the leakage is (HIGH - LOW) Σ_j Cov_ij / (Cov_ii b) (DESIGN §2.2), Cov = s_g² within a group + s_e² I."""
    index = np.repeat(np.arange(len(GROUPS)), GROUPS)
    cov = sigma_group**2 * (index[:, None] == index[None, :]) + sigma_residual**2 * np.eye(len(index))
    return (HIGH - LOW) * cov[target].sum() / (cov[target, target] * b)


def chain_joint(init: np.ndarray, p: np.ndarray, n: int) -> np.ndarray:
    joint = np.zeros((2,) * n)
    for x in itertools.product(range(2), repeat=n):
        joint[x] = init[x[0]] * np.prod([p[x[t - 1], x[t]] for t in range(1, n)])
    return joint


def chain_draw(d: int, person: int) -> tuple[np.ndarray, np.ndarray]:
    """Draw d's chain of one individual: P = (kappa m_s + n[s]) / (kappa + N_s), DESIGN §9.5."""
    alpha = KAPPA[d] * M[d] + COUNTS[person]
    return INIT[d], alpha / alpha.sum(axis=1, keepdims=True)


def test_gaussian_draws_leak_as_each_draws_covariance_says(gaussian):
    """Rows 0 (a group of 3) and 3 (a group of 2): each draw's leakage, the class's per target, and mean's."""
    b, targets = 10.0, [0, 3]
    got = audit_fitted(gaussian, "draws:3", "sum", "laplace", "idp", scale=b, targets=targets)
    expected = {i: [gaussian_leak(g, e, i, b) for g, e in zip(SIGMA_GROUP, SIGMA_RESIDUAL)] for i in targets}
    assert got.plausible["leakages"] == pytest.approx([max(e) for e in zip(*expected.values())], rel=1e-9)
    for i in targets:
        assert got.result.per_target[i] == pytest.approx(max(expected[i]), rel=1e-9)
    mean = audit_fitted(gaussian, "mean", "sum", "laplace", "idp", scale=b, targets=targets)
    for i in targets:
        assert mean.result.per_target[i] == pytest.approx(
            gaussian_leak(np.mean(SIGMA_GROUP), np.mean(SIGMA_RESIDUAL), i, b), rel=1e-9)


@pytest.mark.slow
def test_chain_draws_and_the_mixture_over_them_by_enumeration(chain):
    """Individual q (3 days), the sum with Laplace(1), idp of each day: each draw's chain, and integrated:3, the
    mixture (1/3) Σ_d of the draws' joint laws, each by enumeration of the 8 sequences."""
    days = [0, 1, 2]
    joints = [chain_joint(*chain_draw(d, 1), 3) for d in range(3)]
    draws = audit_fitted(chain, "draws:3", "sum", "laplace", "idp", scale=1.0, targets=days,
                         build={"individual": "q"})
    integrated = audit_fitted(chain, "integrated:3", "sum", "laplace", "idp", scale=1.0, targets=days,
                              build={"individual": "q"}, information=None)
    for day in days:
        per_draw = [leak_bruteforce(j, [[0, 1]] * 3, [1.0] * 3, 1.0, day) for j in joints]
        assert draws.result.per_target[day] == pytest.approx(max(per_draw), abs=1e-9)
        mixed = leak_bruteforce(sum(joints) / 3, [[0, 1]] * 3, [1.0] * 3, 1.0, day)
        assert integrated.result.per_target[day] == pytest.approx(mixed, abs=1e-9)
    worst = [max(leak_bruteforce(j, [[0, 1]] * 3, [1.0] * 3, 1.0, day) for day in days) for j in joints]
    assert draws.plausible["leakages"] == pytest.approx(worst, abs=1e-9)


def cli(capsys, model: Path, *argv) -> tuple[int, str, str]:
    code = main(["audit", str(model), "--query", "sum", "--mechanism", "laplace", "--scale", "1", "--notion", "idp",
                 *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_command_line_passes_a_chains_individual_and_length(chain, capsys):
    """draws:2 (draws 0 and 2) of individual q's chain run for 4 days: each draw's worst day by enumeration."""
    code, out, err = cli(capsys, chain, "--parameters", "draws:2", "-p", "individual='q'", "-p", "n=4",
                         "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["parameters"] == "draws:2" and doc["plausible"]["posterior_draws"] == [0, 2]
    expected = [max(leak_bruteforce(chain_joint(*chain_draw(d, 1), 4), [[0, 1]] * 4, [1.0] * 4, 1.0, day)
                    for day in range(4)) for d in (0, 2)]
    assert doc["plausible"]["leakages"] == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("case", ["gaussian integrated", "chain other -p", "gaussian -p"])
def test_bad_input_is_one_line_exit_2(case, gaussian, chain, capsys):
    model, extra, message = {
        "gaussian integrated": (gaussian, ["--parameters", "integrated:2"], "not built for gaussian fits"),
        "chain other -p": (chain, ["-p", "days=3"], "takes parameters, individual, n"),
        "gaussian -p": (gaussian, ["-p", "n=3"], "takes one parameter"),
    }[case]
    code, out, err = cli(capsys, model, *extra)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: ") and message in err, err
