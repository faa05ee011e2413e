"""The exact leakage of DP-Sniper's mechanisms at its own input pairs, from ddpbayes' white-box laws (issue #28
item 4): the column a certified lower bound is compared with.

For an input pair (a1, a2) the model is one record x ~ Bernoulli(1/2) and the query's answers are a1 when x = 0,
a2 when x = 1 (`expr:a1_c + (a2_c - a1_c) * x` per answer); its idp leakage is then max over outputs y, both
ways, of log p(y | a1) - log p(y | a2): classic DP's ratio for that pair, computed by `audit` on the exact
engine (every output of a finite output space; every breakpoint and limit for Laplace noise). The mechanism's
value is the largest over DP-Sniper's pairs (`dpsniper_programs.patterns`): what its certified bound estimates.

ReportNoisyMax3/4 release the noisy maximum: its supremum over the continuous output is computed from the
densities' stationary points (`mechanisms/noisy_max_value.py`). SVT3 releases the noisy answer that was compared
with the threshold: its supremum over the value is a certified branch and bound (`mechanisms/svt_value.py`, within
1e-9). SVT34Parallel runs SVT3 and SVT4 (c = 2) with independent noise on the same answers: the log-ratio of the
joint output is the sum of the two parts', so for each direction of a pair the supremum is the sum of the parts'
directed suprema, and the value is the larger direction's (`svt34_leakage`). NumericalSVT releases fresh noisy answers
(`mechanisms/numerical_svt.py`): its supremum is on the answers' grid. PrefixSum releases the running
sums of Laplace-noised answers: an invertible map of Laplace noise on the answers, so its leakage is that of
Laplace noise on the answers (post-processing by a bijection changes no likelihood ratio). LaplaceParallel
releases one answer twenty times with independent Laplace(200) noise: for one record the likelihood ratio is the
product of the twenty ratios, each at most e^{|a1 - a2|/200} and all attained together (every y_i beyond both
answers), so its leakage is that of Laplace(200/20 = 10) noise on the answer, which is what is audited (the
exact engine's output grid for twenty noisy coordinates, 4^20 points, is over its limit).

    python benchmarks/dpsniper_exact.py          # prints the table
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]

from dpsniper_programs import BENCHMARK  # noqa: E402

EPS = 0.1  # DP-Sniper's epsilon
SVT = {"sensitivity": "1", "cutoff": "1"}
# name -> (kind, noise keywords for audit, --mechanism-param settings, how many copies of the answers)
WHITE_BOX: dict[str, tuple[str, dict, dict, int]] = {
    "LaplaceMechanism": ("laplace", {"scale": 1 / EPS}, {}, 1),
    "TruncatedGeometricMechanism": ("truncated_geometric", {"epsilon": EPS},
                                    {"variant": "balcer_vadhan", "n": "5", "sensitivity": "1"}, 1),
    "NoisyHist1": ("laplace", {"scale": 1 / EPS}, {}, 1),
    "NoisyHist2": ("laplace", {"scale": EPS}, {}, 1),
    "ReportNoisyMax1": ("report_noisy_max", {"scale": 2 / EPS}, {"noise": "laplace"}, 1),
    "ReportNoisyMax2": ("report_noisy_max", {"scale": 2 / EPS}, {"noise": "exponential"}, 1),
    "ReportNoisyMax3": ("report_noisy_max", {"scale": 2 / EPS}, {"noise": "laplace", "returns": "value"}, 1),
    "ReportNoisyMax4": ("report_noisy_max", {"scale": 2 / EPS}, {"noise": "exponential", "returns": "value"}, 1),
    "SparseVectorTechnique1": ("sparse_vector", {"epsilon": EPS}, {**SVT, "variant": "1", "threshold": "0.5"}, 1),
    "SparseVectorTechnique2": ("sparse_vector", {"epsilon": EPS}, {**SVT, "variant": "2", "threshold": "1"}, 1),
    "SparseVectorTechnique3": ("sparse_vector", {"epsilon": EPS}, {**SVT, "variant": "3", "threshold": "1"}, 1),
    "SparseVectorTechnique4": ("sparse_vector", {"epsilon": EPS}, {**SVT, "variant": "4", "threshold": "1"}, 1),
    "SparseVectorTechnique5": ("sparse_vector", {"epsilon": EPS}, {**SVT, "variant": "5", "threshold": "1"}, 1),
    "SparseVectorTechnique6": ("sparse_vector", {"epsilon": EPS}, {**SVT, "variant": "6", "threshold": "1"}, 1),
    "NumericalSVT": ("numerical_sparse_vector", {"epsilon": EPS},
                     {"sensitivity": "1", "cutoff": "2", "threshold": "1"}, 1),
    "Rappor": ("rappor", {}, {}, 1),
    "OneTimeRappor": ("one_time_rappor", {}, {"f": "0.95"}, 1),
    "LaplaceParallel": ("laplace", {"scale": 1 / 0.005 / 20}, {}, 1),  # twenty releases at eps = 0.005: below
    "PrefixSum": ("prefix_sums", {"scale": 1 / EPS}, {}, 1),
}


def pair_model():
    """One record x ~ Bernoulli(1/2): its two values select the pair's two answer vectors."""
    import pymc as pm

    from ddpbayes import DependenceModel

    with pm.Model() as m:
        pm.Bernoulli("x", 0.5)
    return DependenceModel(m, tuples=["x"])


def pair_query(a1: np.ndarray, a2: np.ndarray, copies: int = 1) -> str:
    parts = [f"{u:g} + ({v - u:g}) * x" for u, v in zip(a1, a2)] * copies
    return "expr:" + ";".join(parts)


def svt34_leakage(a1: np.ndarray, a2: np.ndarray) -> float:
    """SVT34Parallel at the pair (a1, a2): max over the two directions of SVT3's directed supremum plus SVT4's
    (c = 2, T = 1, ε = 0.1 each, as DP-Sniper's `svt34_parallel`)."""
    from ddpbayes.mechanisms import SparseVector

    svt3, svt4 = SparseVector(1 / EPS, 3, 1.0, 2), SparseVector(1 / EPS, 4, 1.0, 2)
    best = -np.inf
    for a, b in ((a1, a2), (a2, a1)):
        answers = np.vstack([a, b])
        table = svt4.log_prob(svt4.output_space(answers), answers)
        part4 = float(np.max(table[:, 0] - table[:, 1]))
        part3 = svt3.sup_log_ratio(np.array([[0.0, -np.inf], [-np.inf, 0.0]]), answers, directed=True)[0]
        best = max(best, part3 + part4)
    return best


def exact_leakage(name: str) -> tuple[float, list] | None:
    """(the largest exact leakage over DP-Sniper's input pairs, that pair) for mechanism `name`, or None."""
    from ddpbayes.auditing import audit

    if name == "SVT34Parallel":
        bench = next(b for b in BENCHMARK if b.name == name)
        return max((svt34_leakage(a1, a2), [a1.tolist(), a2.tolist()]) for a1, a2 in bench.pairs)
    if name not in WHITE_BOX:
        return None
    kind, noise, params, copies = WHITE_BOX[name]
    bench = next(b for b in BENCHMARK if b.name == name)
    model = pair_model()
    best = (-1.0, None)
    for a1, a2 in bench.pairs:
        result = audit(model, pair_query(a1, a2, copies), kind, "idp", params=params or None, information=None,
                       engine="exact", **noise)
        if result.leakage > best[0]:
            best = (result.leakage, [a1.tolist(), a2.tolist()])
    return best


def main() -> None:
    print(f"{'mechanism':<28} {'DP-Sniper eps_lcb':>17} {'exact':>9} {'seconds':>8}  pair")
    for bench in BENCHMARK:
        start = time.perf_counter()
        found = exact_leakage(bench.name)
        seconds = time.perf_counter() - start
        value, pair = (float("nan"), "-") if found is None else found
        print(f"{bench.name:<28} {bench.dpsniper_eps_lcb:>17.4f} {value:>9.4f} {seconds:>8.2f}  {pair}")


if __name__ == "__main__":
    main()
