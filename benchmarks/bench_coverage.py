"""Benchmark: coverage of the sampling engine's bounds on models with exact answers (issue #27; not a test).

For each model below and each notion the sampling engine supports (idp, pdp with a fixed known
set, ddp; dp is model-free and needs no engine), the truth is computed once by an exact route on
the same problem — the exact engine (discrete models), the structured engine's quadrature
(Beta / logit-normal latents), the gaussian engine's closed form (Gaussian models) or a formula
written here — and the same audit is then run with `engine="sampling"` for seeds 0 .. N-1, with
`claim = truth`. For every (model, notion) the script prints:

- LB miss: how often the one-sided 95% lower bound `ci[0]` exceeds the truth (nominal <= 5%);
- UB miss: how often the (approximate) one-sided 95% upper bound `ci[1]` is below the truth;
- CI miss: how often the interval [ci[0], ci[1]] ("90%: two one-sided 95% bounds") misses it;
- false FAIL: how often the verdict is `fail` with the claim equal to the truth (a FAIL must
  mean the mechanism misses its claim, so any FAIL here is false; target <= 5%);
- inconclusive-by-diagnostics count (R-hat / ESS / divergences failed), mean and max |estimate -
  truth|, and seconds per sampling audit (wall clock; the first seed of a model includes
  PyTensor compilation of its step methods, hence also the median).

Each rate comes with its Clopper–Pearson 95% interval (scipy.stats.beta). A "miss" compares with
a relative tolerance of 1e-9 (the exact routes agree to ~1e-13). A last block pools each bound
over every (model, notion) row.

Every audit releases the model's query with its case's mechanism (Laplace noise unless named) at `--epsilon` (classic DP's scale:
sensitivity / epsilon) and audits one target (tuple 0, or the one named in the table) so that a
full run stays feasible; the sampling settings are the engine's defaults (2 chains, 1000 tuning
steps, 1000 draws per chain; a row may name more draws) unless --draws / --tune / --chains say
otherwise, with workers = 1 (one process: another job may share the cores).

Models (name: what, exact route):
    household      models/household.py n=4, count; exact
    independent    models/independent.py n=3 p=0.3, count; exact (every notion 1/b)
    pair           models/correlated_pair.py positive, sum; exact
    markov         models/markov_chain.py n=4, count (a binary chain); exact
    catchain       models/categorical_chain.py n=3 k=3, sum (a 3-state chain); exact
    hmm            models/hmm_regimes.py n=4, count (hidden regimes); exact
    family         models/family_tree.py generations=2, count (ddp != idp); exact
    hier_bern      inline: region -> 2 households -> 2 members each (discrete hierarchy); exact
    beta_bern      models/beta_bernoulli.py n=5 a=2 b=5, count (the issue's siblings); structured
    logit_bern     inline: r ~ N(0, 1.5), X_k ~ Bernoulli(sigmoid(r)), n=4, count; structured
    beta_chain     inline: a binary chain n=4 with stay probability p ~ Beta(2, 2), count; structured
    beta_hmm       inline: hidden regimes (stay 0.8), emission accuracy a ~ Beta(8, 2), n=3, count; structured
    mixed_latent   inline: r ~ N(0, 1.5), h ~ Bernoulli(0.3), X_k ~ Bernoulli(sigmoid(r + 2h)), n=3; structured
    beta_bern10    models/beta_bernoulli.py n=10 a=2 b=5, count (512 configurations summed); structured
    beta_bern11    models/beta_bernoulli.py n=11 a=2 b=5, count (ten siblings summed: 1,024 configurations), 4000
                   draws per chain (its kernel's Monte Carlo error, see CASES); structured
    beta_trgeom    models/beta_bernoulli.py n=5 a=2 b=5, count, truncated geometric on 0..5 (a joint law); structured
    galton         models/galton_families.py k=3, mean (continuous, MvNormal); gaussian
    hier_gauss     inline: mu ~ N(0,1), a_j ~ N(mu,1), X_jk ~ N(a_j,1), 2x2 on [-1, 1], sum; gaussian
    hier_logit     models/hierarchical_logit.py (s ~ HalfNormal, r ~ N(0, s), X_k ~ Bernoulli(sigmoid(r))), count;
                   formula (a two-normal Gauss–Hermite rule, `hier_logit_truth`)
    ddp_ex1        models/ddp_example1.py, sum, target d_i (Uniform, non-Gaussian); formula 1.5/b
    beta_cont      inline: mu ~ Beta(2, 2), X_0, X_1 | mu ~ Beta(1 + mu, 2 - mu) on [0.1, 0.9], sum: a continuous
                   target whose bound over the domain certifies (issue #42.2); formula (quadrature, `beta_cont_truth`)
    modes          inline: mu ~ ½N(-10, 1) + ½N(10, 1), X_0, X_1 ~ Bernoulli(sigmoid(mu / 4)), count: two modes 20
                   prior SDs apart, crossed by SMC (issue #42.1); formula (quadrature, `modes_truth`)
    chain3         models/uncertain_stay_chain.py (3 levels, 5 days, p_stay ~ Beta(2, 2)), sum: a 3-level chain
                   summed given p_stay (issue #42.3); structured

Beside the misses, for every audit the verdict the same interval gives at claim = truth + 0.15
(a true claim: should PASS) and truth - 0.15 (a false one: should FAIL), with `auditing.judge`
on the audited target's worst adversary; printed as the shares that pass / fail / are
inconclusive at each (issue #42.5: a tool that always says inconclusive is sound and useless).

Usage (from the repository root):
    python benchmarks/bench_coverage.py                          # every model, 20 seeds
    python benchmarks/bench_coverage.py --seeds 5                # reduced scale
    python benchmarks/bench_coverage.py --models household beta_bern --notions idp --seeds 40
    python benchmarks/bench_coverage.py --draws 500 --json out.json
    python benchmarks/bench_coverage.py --table out.json --markdown   # reprint a saved run
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import resource
import statistics
import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS_DIR = ROOT / "models"
NOTIONS = ("idp", "pdp", "ddp")  # the notions the sampling engine estimates (dp is model-free)
REL_TOL = 1e-9
SHIFT = 0.15  # the claims truth ± SHIFT whose verdicts are counted (issue #42.5)


def _quiet():
    warnings.filterwarnings("ignore")
    for name in ("pymc", "pytensor", "arviz"):
        logging.getLogger(name).setLevel(logging.ERROR)


# --- inline models ------------------------------------------------------------------------


def hier_bern():
    """A discrete hierarchy: a region's exposure z ~ Bernoulli(0.3); household j's exposure
    h_j | z ~ Bernoulli(0.7 if z else 0.1), j = 0, 1; member (j, k)'s infection
    X_jk | h_j ~ Bernoulli(0.8 if h_j else 0.1). Tuples x0, x1 (household 0), x2, x3 (household 1)."""
    import pymc as pm

    from ddpbayes import DependenceModel

    with pm.Model() as m:
        z = pm.Bernoulli("z", 0.3)
        names = []
        for j in range(2):
            h = pm.Bernoulli(f"h{j}", pm.math.switch(z, 0.7, 0.1))
            for k in range(2):
                names.append(f"x{2 * j + k}")
                pm.Bernoulli(names[-1], pm.math.switch(h, 0.8, 0.1))
    return DependenceModel(m, tuples=names)


def logit_bern():
    """Exchangeable binary records with a logit-normal rate: r ~ N(0, 1.5),
    X_k | r ~ Bernoulli(sigmoid(r)), n = 4."""
    import pymc as pm

    from ddpbayes import DependenceModel

    with pm.Model() as m:
        r = pm.Normal("r", 0.0, 1.5)
        pm.Bernoulli("x", pm.math.sigmoid(r), shape=4)
    return DependenceModel(m, tuples="x")


def hier_gauss():
    """A Gaussian hierarchy: mu ~ N(0, 1); group means a_j ~ N(mu, 1), j = 0, 1; members
    X_jk ~ N(a_j, 1), two per group; every domain [-1, 1]. Tuples x0, x1 (group 0), x2, x3."""
    import pymc as pm

    from ddpbayes import DependenceModel, Interval

    with pm.Model() as m:
        mu = pm.Normal("mu", 0.0, 1.0)
        names = []
        for j in range(2):
            a = pm.Normal(f"a{j}", mu, 1.0)
            for k in range(2):
                names.append(f"x{2 * j + k}")
                pm.Normal(names[-1], a, 1.0)
    return DependenceModel(m, tuples=names, domains=Interval(-1.0, 1.0))


def beta_chain():
    """A binary chain whose stay probability is unknown: p ~ Beta(2, 2); X_0 ~ Bernoulli(0.5);
    X_k = X_(k-1) with probability p, n = 4. Given p the chain is summed; p is sampled."""
    import pymc as pm

    from ddpbayes import DependenceModel

    with pm.Model() as m:
        p = pm.Beta("p", 2.0, 2.0)
        prev = pm.Bernoulli("x0", 0.5)
        for k in range(1, 4):
            prev = pm.Bernoulli(f"x{k}", pm.math.switch(prev, p, 1 - p))
    return DependenceModel(m, tuples=[f"x{k}" for k in range(4)])


def beta_hmm():
    """Hidden regimes with an unknown emission accuracy: a ~ Beta(8, 2); regimes z_k a binary
    chain (z_0 ~ Bernoulli(0.5), stay 0.8); X_k | z_k ~ Bernoulli(a if z_k else 1 - a), n = 3."""
    import pymc as pm

    from ddpbayes import DependenceModel

    with pm.Model() as m:
        a = pm.Beta("a", 8.0, 2.0)
        z = pm.Bernoulli("z0", 0.5)
        for k in range(3):
            if k:
                z = pm.Bernoulli(f"z{k}", pm.math.switch(z, 0.8, 0.2))
            pm.Bernoulli(f"x{k}", pm.math.switch(z, a, 1 - a))
    return DependenceModel(m, tuples=[f"x{k}" for k in range(3)])


def mixed_latent():
    """A household with a continuous effect too: r ~ N(0, 1.5), h ~ Bernoulli(0.3),
    X_k | r, h ~ Bernoulli(sigmoid(r + 2h)), n = 3 (h is summed with the records, r sampled)."""
    import pymc as pm

    from ddpbayes import DependenceModel

    with pm.Model() as m:
        r = pm.Normal("r", 0.0, 1.5)
        h = pm.Bernoulli("h", 0.3)
        for k in range(3):
            pm.Bernoulli(f"x{k}", pm.math.sigmoid(r + 2 * h))
    return DependenceModel(m, tuples=[f"x{k}" for k in range(3)])


def hier_logit_truth(b: float, known: tuple[int, ...] = (), n: int = 4, nodes: int = 300) -> float:
    """The exact leakage of models/hierarchical_logit.py (tau = 1) for a count with Laplace(b),
    target 0 and known tuples `known` (every value of theirs tried): r = s·u with s = |z|, so
    r has the law of z·u for independent standard normals z, u, and P(X = x) = E[Π_k sigmoid(r)^x_k
    (1 - sigmoid(r))^(1 - x_k)] by a tensor Gauss–Hermite rule (300² nodes: settled to ~1e-11).
    The sup over y of the Laplace mixtures' log-ratio is at a count level or y -> ±inf (004 Lemma 1)."""
    import itertools

    import numpy as np
    from scipy.special import comb, expit, roots_hermite

    x, w = roots_hermite(nodes)
    z, wz = math.sqrt(2) * x, w / math.sqrt(math.pi)
    p, weight = expit(np.outer(z, z).ravel()), np.outer(wz, wz).ravel()
    levels = np.arange(n + 1, dtype=float)
    free = n - 1 - len(known)
    best = 0.0
    for xk in itertools.product((0, 1), repeat=len(known)):
        laws = []
        for t in (0, 1):
            fixed = t + sum(xk)
            like = weight * np.prod([p if v else 1 - p for v in (t, *xk)], axis=0)
            law = np.zeros(n + 1)
            for m in range(free + 1):
                law[fixed + m] = np.sum(like * comb(free, m) * p ** m * (1 - p) ** (free - m))
            laws.append(law / law.sum())
        for y in [*levels, math.inf, -math.inf]:
            k = np.exp(levels / b) if y == math.inf else np.exp(-levels / b) if y == -math.inf else \
                np.exp(-np.abs(y - levels) / b)
            best = max(best, abs(math.log(laws[1] @ k) - math.log(laws[0] @ k)))
    return best


# --- the benchmark's models ---------------------------------------------------------------


def beta_cont():
    import pymc as pm

    import ddpbayes

    with pm.Model() as m:
        mu = pm.Beta("mu", 2, 2)
        pm.Beta("x", 1 + mu, 2 - mu, shape=2)
    return ddpbayes.DependenceModel(m, "x", domains=ddpbayes.Interval(0.1, 0.9))


def beta_cont_truth(b: float, lo: float = 0.1, hi: float = 0.9) -> float:
    """sup over t, t' in [lo, hi] and y of log L(y|t) - log L(y|t') for `beta_cont`: f(x_1 | t) by
    Gauss–Legendre over mu, L(y | t) on a grid of x_1 and of y, y -> ±inf by the records' moment
    generating functions, (t, t') on a 33-point grid (the answer moves smoothly in t)."""
    import numpy as np
    from scipy import stats
    from scipy.special import logsumexp

    mu, w = np.polynomial.legendre.leggauss(200)
    mu, w = (mu + 1) / 2, w / 2
    z, v = np.polynomial.legendre.leggauss(400)
    z, v = (z + 1) / 2, v / 2
    x = np.linspace(1e-7, 1 - 1e-7, 4001)
    dx = np.gradient(x)
    ys = np.linspace(lo - 3 * b, hi + 1 + 3 * b, 401)
    pdf = stats.beta(1 + mu[:, None], 2 - mu[:, None])
    mgf = {s: np.log((pdf.pdf(z[None, :]) * np.exp(s * z) * v).sum(1)) for s in (1 / b, -1 / b)}
    inner, up, down = [], [], []
    for t in np.linspace(lo, hi, 33):
        post = 6 * mu * (1 - mu) * stats.beta.pdf(t, 1 + mu, 2 - mu) * w
        post /= post.sum()
        f = (post[:, None] * pdf.pdf(x[None, :])).sum(0)
        f /= (f * dx).sum()
        inner.append(logsumexp(-np.abs(ys[:, None] - t - x[None, :]) / b + np.log(f * dx)[None, :], axis=1))
        up.append(t / b + logsumexp(np.log(post) + mgf[1 / b]))
        down.append(-t / b + logsumexp(np.log(post) + mgf[-1 / b]))
    inner = np.array(inner)
    return float(max((inner[:, None] - inner[None]).max(), np.ptp(up), np.ptp(down)))


def modes():
    """mu ~ 0.5 N(-10, 1) + 0.5 N(10, 1) (through s ~ Bernoulli(1/2), summed out); X_0, X_1 ~
    Bernoulli(sigmoid(mu / 4)) given mu (tests/test_sampling_modes.py's model)."""
    import pymc as pm

    from ddpbayes import DependenceModel

    with pm.Model() as m:
        s = pm.Bernoulli("s", 0.5)
        mu = pm.Normal("mu", -10 + 20 * s, 1.0)
        for k in range(2):
            pm.Bernoulli(f"x{k}", pm.math.sigmoid(mu / 4))
    return DependenceModel(m, tuples=["x0", "x1"])


def modes_truth(b: float) -> float:
    """idp of X_0 for `modes` under count + Laplace(b): P(X_1 | X_0) from E[p^a (1 - p)^c] by
    quadrature over the mixture, then the log-ratio of the two Laplace mixtures at its breakpoints
    y = 0, 1, 2 and y -> ±inf (004 Lemma 1)."""
    import numpy as np
    from scipy import integrate, special, stats

    def moment(a: int, c: int) -> float:
        def f(u: float) -> float:
            return (0.5 * (stats.norm.pdf(u, -10, 1) + stats.norm.pdf(u, 10, 1)) * special.expit(u / 4) ** a
                    * special.expit(-u / 4) ** c)
        return integrate.quad(f, -30, 30, points=[-10, 10], epsabs=1e-13, limit=200)[0]

    law = {x0: np.array([moment(x0 + x1, 2 - x0 - x1) for x1 in (0, 1)]) for x0 in (0, 1)}
    law = {x0: w / w.sum() for x0, w in law.items()}
    counts = np.array([0.0, 1.0])

    def log_density(y: float, x0: int) -> float:
        if math.isinf(y):  # L(y | x0) e^{±y / b} as y -> ±inf
            return math.log(law[x0] @ np.exp(math.copysign(1, y) * (x0 + counts) / b))
        return math.log(law[x0] @ np.exp(-np.abs(y - x0 - counts) / b))

    return max(log_density(y, t) - log_density(y, 1 - t) for t in (0, 1) for y in (0.0, 1.0, 2.0, math.inf, -math.inf))


@dataclass(frozen=True)
class Case:
    name: str
    load: object  # (file name, params) or a function returning a DependenceModel
    query: str
    truth_engine: str  # exact, structured, gaussian, or "formula"
    target: int = 0
    known: tuple[int, ...] = (1,)  # pdp's adversary: A(target, known)
    notions: tuple[str, ...] = NOTIONS
    formula: dict = field(default_factory=dict)  # notion -> truth as a function of the scale b
    note: str = ""
    mechanism: str = "laplace"  # a kind; a joint law's --mechanism-param values in `params`
    params: dict = field(default_factory=dict)
    draws: int = 1000  # draws per chain unless --draws says otherwise (the engine's default 1000)


CASES = [
    Case("household", ("household.py", {"n": 4}), "count", "exact"),
    Case("independent", ("independent.py", {"n": 3, "p": 0.3}), "count", "exact"),
    Case("pair", ("correlated_pair.py", {}), "sum", "exact"),
    Case("markov", ("markov_chain.py", {"n": 4}), "count", "exact"),
    Case("catchain", ("categorical_chain.py", {"n": 3, "k": 3}), "sum", "exact"),
    Case("hmm", ("hmm_regimes.py", {"n": 4}), "count", "exact"),
    Case("family", ("family_tree.py", {"generations": 2}), "count", "exact"),
    Case("hier_bern", hier_bern, "count", "exact", known=(2,)),
    Case("beta_bern", ("beta_bernoulli.py", {"n": 5, "a": 2.0, "b": 5.0}), "count", "structured"),
    Case("logit_bern", logit_bern, "count", "structured"),
    Case("beta_chain", beta_chain, "count", "structured"),
    Case("beta_hmm", beta_hmm, "count", "structured"),
    Case("mixed_latent", mixed_latent, "count", "structured"),
    # ten siblings: 2^9 = 512 joint values of the others, summed exactly (issue #42.3; Gibbs under the old 256)
    Case("beta_bern10", ("beta_bernoulli.py", {"n": 10, "a": 2.0, "b": 5.0}), "count", "structured"),
    # eleven siblings: the ten others' 1,024 configurations summed exactly. The sup is at y -> +inf,
    # where a draw's kernel e^t (1 - p + p e)^10 has relative variance 3.9 (t = 1) and 7.4 (t = 0)
    # under p's posterior (quadrature), so at 1000 draws 1.645 se is ~0.14 and a claim 0.15 above
    # the truth cannot pass; 4x the draws halves the se (README, "The #42 rows at 20 seeds")
    Case("beta_bern11", ("beta_bernoulli.py", {"n": 11, "a": 2.0, "b": 5.0}), "count", "structured", draws=4000),
    # a joint-law mechanism (issue #42.4): the truncated geometric on the count of Beta siblings
    Case("beta_trgeom", ("beta_bernoulli.py", {"n": 5, "a": 2.0, "b": 5.0}), "count", "structured",
         mechanism="truncated_geometric", params={"n": "5"}),
    # s ~ HalfNormal(1), r ~ Normal(0, s), X_k ~ Bernoulli(sigmoid(r)): quadrature does not settle;
    # truth by the two-normal Gauss–Hermite formula above (ddp = idp: every record depends on every other)
    Case("hier_logit", ("hierarchical_logit.py", {}), "count", "formula",
         formula={"idp": lambda b: hier_logit_truth(b), "pdp": lambda b: hier_logit_truth(b, (1,)),
                  "ddp": lambda b: hier_logit_truth(b)}),
    Case("galton", ("galton_families.py", {"k": 3}), "mean", "gaussian"),
    Case("hier_gauss", hier_gauss, "sum", "gaussian", known=(2,)),
    # d_i's sum with D_j = 0.5 d_i + 0.5 X is 1.5 t + 0.5 X, a location family in t: 1.5 / b for
    # idp; N(d_i) = {d_j}, so ddp = idp. pdp with d_j known has no closed form here: left out.
    Case("ddp_ex1", ("ddp_example1.py", {}), "sum", "formula", notions=("idp", "ddp"),
         formula={"idp": lambda b: 1.5 / b, "ddp": lambda b: 1.5 / b}),
    # a continuous target with a certified bound over its domain (DESIGN §2.3, "Between the target values")
    Case("beta_cont", beta_cont, "sum", "formula", notions=("idp",), formula={"idp": beta_cont_truth}),
    # two modes 20 prior SDs apart: NUTS's chains disagree and every event is drawn by SMC (issue #42.1)
    Case("modes", modes, "count", "formula", notions=("idp",), formula={"idp": modes_truth}),
    # a 3-level, 5-day chain with an uncertain stay probability: 81 configurations summed per draw (issue #42.3)
    Case("chain3", ("uncertain_stay_chain.py", {}), "sum", "structured", notions=("idp",)),
]
BY_NAME = {c.name: c for c in CASES}


def load_case(case: Case):
    import ddpbayes

    if callable(case.load):
        return case.load()
    file, params = case.load
    return ddpbayes.load_model(MODELS_DIR / file, params)


def audit_args(case: Case, notion: str, epsilon: float) -> dict:
    args = {"epsilon": epsilon, "targets": [case.target], "information": None}
    if case.params:
        args["mechanism_params"] = dict(case.params)
    if notion == "pdp":
        args["known"] = list(case.known)
    return args


# --- statistics --------------------------------------------------------------------------


def clopper_pearson(k: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """The exact (Clopper–Pearson) two-sided interval for a binomial proportion k / n."""
    from scipy.stats import beta

    if n == 0:
        return (math.nan, math.nan)
    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def rate(k: int, n: int) -> str:
    lo, hi = clopper_pearson(k, n)
    return f"{k}/{n} [{lo:.2f},{hi:.2f}]"


def tail(k: int, n: int, level: float = 0.05) -> float:
    """P(at least k misses in n independent bounds that each miss with probability `level`)."""
    from scipy.stats import binom

    return float(binom.sf(k - 1, n, level))


def above(x: float, truth: float) -> bool:
    return x > truth + REL_TOL * max(1.0, abs(truth))


def below(x: float, truth: float) -> bool:
    return x < truth - REL_TOL * max(1.0, abs(truth))


# --- the run -----------------------------------------------------------------------------


def truth_of(case: Case, model, notion: str, epsilon: float) -> tuple[float, float]:
    """(truth, scale b) by the case's exact route."""
    import ddpbayes

    r = ddpbayes.audit(model, case.query, case.mechanism, notion,
                       engine="exact" if case.truth_engine == "formula" else case.truth_engine,
                       **audit_args(case, notion, epsilon)) if case.truth_engine != "formula" else None
    if r is not None:
        return float(r.leakage), float(r.mechanism["scale"])
    from ddpbayes.mechanisms import make_mechanism

    b = make_mechanism("laplace", ddpbayes.parse_query(case.query), model.domains, epsilon=epsilon).scale
    return float(case.formula[notion](b)), float(b)


def cpu_times() -> tuple[float, float]:
    """CPU seconds of this process and of its finished children (user + system)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def cpu_seconds(since: tuple[float, float]) -> float:
    return sum(now - then for now, then in zip(cpu_times(), since))


def shifted_verdicts(worst, truth: float) -> dict:
    """The verdicts the audit's interval gives at claim = truth + SHIFT (true: should pass) and
    truth - SHIFT (false: should fail), by the engine's own rule (`auditing.judge`)."""
    from ddpbayes.auditing.verdict import judge

    return {"verdict_up": judge(worst, truth + SHIFT)[0], "verdict_down": judge(worst, max(truth - SHIFT, 0.0))[0]}


def save(args, rows: list[dict]) -> None:
    """Every audit so far to --json (after each audit: a run stopped early keeps what it measured)."""
    if args.json:
        args.json.write_text(json.dumps({"settings": {k: str(v) if isinstance(v, Path) else v
                                                      for k, v in vars(args).items()}, "rows": rows}, indent=1))


def run_case(case: Case, args, done: list[dict]) -> list[dict]:
    """Every notion of `case` over the seeds (`done`: the rows of earlier models, for `save`)."""
    import ddpbayes

    rows = []
    model = load_case(case)
    for notion in case.notions:
        if notion not in args.notions:
            continue
        truth, b = truth_of(case, model, notion, args.epsilon)
        draws = args.draws or case.draws
        row = {"model": case.name, "notion": notion, "truth": truth, "truth_engine": case.truth_engine, "scale": b,
               "draws": draws, "target": case.target, "known": list(case.known) if notion == "pdp" else None,
               "audits": []}
        print(f"  {case.name:11s} {notion}: truth {truth:.5f} ({case.truth_engine}), b = {b:.4g}, "
              f"{draws} draws per chain", flush=True)
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            start, cpu = time.perf_counter(), cpu_times()
            r = ddpbayes.audit(model, case.query, case.mechanism, notion, claim=truth, engine="sampling", seed=seed,
                               draws=draws, tune=args.tune, chains=args.chains, workers=1,
                               **audit_args(case, notion, args.epsilon))
            wall = time.perf_counter() - start
            lo, hi = r.ci
            d = r.diagnostics or {}
            a = {"seed": seed, "estimate": float(r.leakage), "lo": float(lo), "hi": float(hi), "verdict": r.verdict,
                 "diag_ok": bool(d.get("ok", True)), "held_out": d.get("held_out"), "held_out_se": d.get("held_out_se"),
                 "seconds": wall, "cpu_seconds": cpu_seconds(cpu),
                 "K": sorted(r.witness.adversary.known) if r.witness is not None else None,
                 **shifted_verdicts(r.target_worst[case.target], truth),
                 "target_bound": d.get("target_bound"), "pass_blocked": d.get("pass_blocked")}
            row["audits"].append(a)
            if args.verbose:
                print(f"    seed {seed:3d}: est {a['estimate']:.4f} [{lo:.4f}, {hi:.4f}] {r.verdict:12s} "
                      f"diag {'ok' if a['diag_ok'] else 'FAILED'} +{SHIFT}: {a['verdict_up']:12s} -{SHIFT}: "
                      f"{a['verdict_down']:12s} {wall:6.1f} s wall {a['cpu_seconds']:6.1f} s CPU load "
                      f"{os.getloadavg()[0]:.1f}"
                      f"{'  LB>truth' if above(lo, truth) else ''}{'  UB<truth' if below(hi, truth) else ''}",
                      flush=True)
            save(args, [*done, *rows, row])
        rows.append(summarise(row))
        mark_repeats(rows)
        print("    " + line(rows[-1]), flush=True)
    return rows


def mark_repeats(rows: list[dict]) -> None:
    """A row whose adversary (target, K) an earlier row of the same model already audited — ddp
    with K = {} is idp, ddp with K = pdp's known set is that pdp — reuses its cached MCMC runs
    and repeats its figures: `repeats` names that row; it is shown, not pooled."""
    for j, row in enumerate(rows):
        ks = {tuple(a["K"] or ()) for a in row["audits"]}
        row["repeats"] = None
        for prev in rows[:j]:
            if (prev["model"] == row["model"] and prev.get("draws") == row.get("draws") and len(ks) == 1
                    and {tuple(a["K"] or ()) for a in prev["audits"]} == ks and prev["truth"] == row["truth"]):
                row["repeats"] = prev["notion"]
                break


def summarise(row: dict) -> dict:
    truth, audits = row["truth"], row["audits"]
    n = len(audits)
    row["n"] = n
    row["lb_miss"] = sum(above(a["lo"], truth) for a in audits)
    row["ub_miss"] = sum(below(a["hi"], truth) for a in audits)
    row["ci_miss"] = sum(above(a["lo"], truth) or below(a["hi"], truth) for a in audits)
    row["false_fail"] = sum(a["verdict"] == "fail" for a in audits)
    row["diag_failed"] = sum(not a["diag_ok"] for a in audits)
    errs = [abs(a["estimate"] - truth) for a in audits]
    row["mean_abs_err"] = statistics.fmean(errs)
    row["max_abs_err"] = max(errs)
    secs = [a["seconds"] for a in audits]
    row["mean_s"], row["median_s"] = statistics.fmean(secs), statistics.median(secs)
    cpu = [a["cpu_seconds"] for a in audits if a.get("cpu_seconds") is not None]
    row["mean_cpu"] = statistics.fmean(cpu) if cpu else math.nan
    row["summed"] = all(a["lo"] == a["hi"] == a["estimate"] for a in audits)  # no MCMC: summed exactly
    for side in ("up", "down"):
        verdicts = [a.get(f"verdict_{side}") for a in audits]
        row[f"shifted_{side}"] = None if None in verdicts else {v: verdicts.count(v) for v in
                                                               ("pass", "fail", "inconclusive")}
    return row


HEADER = (f"{'model':11s} {'notion':8s} {'truth':>8s} {'LB miss [CP 95%]':>18s} {'UB miss [CP 95%]':>18s} "
          f"{'CI miss [CP 95%]':>18s} {'false FAIL [CP 95%]':>19s} {'diag':>4s} {'|err| mean/max':>15s} "
          f"{'s/audit mean/med':>16s} {'CPU s':>6s}")


def model_label(row: dict) -> str:
    """The row's model, with its draws per chain when not the engine's default 1000."""
    return row["model"] + (f" ({row['draws']} draws)" if row.get("draws", 1000) != 1000 else "")


def line(row: dict) -> str:
    n = row["n"]
    notion = row["notion"] + (f"={row['repeats']}" if row.get("repeats") else "")
    return (f"{model_label(row):11s} {notion:8s} {row['truth']:8.5f} {rate(row['lb_miss'], n):>18s} "
            f"{rate(row['ub_miss'], n):>18s} {rate(row['ci_miss'], n):>18s} {rate(row['false_fail'], n):>19s} "
            f"{row['diag_failed']:4d} {row['mean_abs_err']:7.4f}/{row['max_abs_err']:.4f} "
            f"{row['mean_s']:7.1f}/{row['median_s']:.1f} {row['mean_cpu']:6.1f}")


def markdown(rows: list[dict]) -> str:
    out = ["| model | notion | truth (route) | LB > truth | UB < truth | interval misses | "
           "false FAIL (claim = truth) | "
           "diag. failed | mean / max abs. error | s per audit (mean / median) | CPU s per audit (mean) |",
           "| --- | --- | ---: | --- | --- | --- | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        n = r["n"]
        notion = r["notion"] + (f" (= {r['repeats']}: same K, same runs)" if r.get("repeats") else "")
        route = r["truth_engine"] + ("; sampling engine summed it exactly" if r.get("summed") else "")
        out.append(f"| {model_label(r)} | {notion} | {r['truth']:.5f} ({route}) | {rate(r['lb_miss'], n)} | "
                   f"{rate(r['ub_miss'], n)} | {rate(r['ci_miss'], n)} | {rate(r['false_fail'], n)} | "
                   f"{r['diag_failed']} | {r['mean_abs_err']:.4f} / {r['max_abs_err']:.4f} | "
                   f"{r['mean_s']:.1f} / {r['median_s']:.1f} | {r['mean_cpu']:.1f} |")
    return "\n".join(out)


def pooled(rows: list[dict]) -> dict:
    """Sums over the rows, a row that repeats an earlier row's adversary counted once."""
    keys = ("n", "lb_miss", "ub_miss", "ci_miss", "false_fail", "diag_failed")
    return {k: sum(r[k] for r in rows if not r.get("repeats")) for k in keys}


def pooled_lines(rows: list[dict]) -> list[tuple[str, dict, int]]:
    """(label, sums, distinct rows) over every row and over the estimated ones (MCMC ran)."""
    estimated = [r for r in rows if not r.get("summed")]
    return [("all", pooled(rows), sum(not r.get("repeats") for r in rows)),
            ("estimated (MCMC)", pooled(estimated), sum(not r.get("repeats") for r in estimated))]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", choices=list(BY_NAME), default=list(BY_NAME), metavar="MODEL",
                   help=f"models to run (default all: {' '.join(BY_NAME)})")
    p.add_argument("--notions", nargs="+", choices=NOTIONS, default=list(NOTIONS))
    p.add_argument("--seeds", type=int, default=20, help="seeds per model and notion (default 20)")
    p.add_argument("--first-seed", type=int, default=0)
    p.add_argument("--draws", type=int, help="draws per chain (default: the row's, 1000 unless it says otherwise)")
    p.add_argument("--tune", type=int, default=1000, help="tuning steps per chain (default 1000)")
    p.add_argument("--chains", type=int, default=2)
    p.add_argument("--epsilon", type=float, default=1.0, help="Laplace at classic DP's scale for this epsilon")
    p.add_argument("--json", type=Path, help="write every audit's figures here")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown too")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per audit")
    p.add_argument("--table", type=Path, nargs="+",
                   help="print the table of --json files written earlier (merged: a later file's row of the same "
                        "model, notion and draws adds its audits when its seeds are new, else replaces it), run "
                        "nothing")
    args = p.parse_args(argv)
    if args.table:
        merged: dict = {}
        for path in args.table:
            saved = json.loads(path.read_text())
            for r in saved["rows"]:
                r.setdefault("draws", saved["settings"].get("draws") or 1000)
                key = (r["model"], r["notion"], r["draws"])
                if key in merged and not {a["seed"] for a in r["audits"]} & {a["seed"] for a in merged[key]["audits"]}:
                    r = {**merged[key], "audits": merged[key]["audits"] + r["audits"]}  # other seeds: pooled
                merged[key] = r
        order = {name: k for k, name in enumerate(BY_NAME)}
        rows = [summarise(r) for r in sorted(merged.values(), key=lambda r: (order.get(r["model"], 99),
                                                                             NOTIONS.index(r["notion"])))]
        for r in rows:
            r.pop("repeats", None)
        mark_repeats(rows)
        report(rows, args.markdown)
        return 0
    _quiet()
    print(f"bench_coverage: {time.strftime('%Y-%m-%d %H:%M')} cpus={os.cpu_count()} load {os.getloadavg()}")
    print(f"  seeds {args.first_seed}..{args.first_seed + args.seeds - 1}, draws {args.draws or 'per row'}, "
          f"tune {args.tune}, "
          f"chains {args.chains}, Laplace at epsilon {args.epsilon}, workers 1", flush=True)
    start = time.perf_counter()
    rows = []
    for name in args.models:
        rows += run_case(BY_NAME[name], args, rows)
    report(rows, args.markdown)
    print(f"total wall {time.perf_counter() - start:.0f} s; load after {os.getloadavg()}")
    save(args, rows)
    return 0


def shifted_report(rows: list[dict]) -> None:
    """The verdicts at claim = truth ± SHIFT per row that recorded them, and pooled (repeats counted once)."""
    kept = [r for r in rows if r.get("shifted_up") and not r.get("repeats")]
    if not kept:
        return
    print(f"\nverdicts at claim = truth + {SHIFT} (should pass) | truth - {SHIFT} (should fail):")

    def shares(label: str, up: dict, down: dict, n: int) -> None:
        print(f"  {label:20s} +{SHIFT}: pass {rate(up['pass'], n)}, inconclusive {rate(up['inconclusive'], n)}, "
              f"fail {up['fail']}/{n} | -{SHIFT}: fail {rate(down['fail'], n)}, inconclusive "
              f"{rate(down['inconclusive'], n)}, pass {down['pass']}/{n}")

    for r in kept:
        shares(f"{model_label(r)} {r['notion']}", r["shifted_up"], r["shifted_down"], r["n"])
    total = {side: {v: sum(r[f"shifted_{side}"][v] for r in kept) for v in ("pass", "fail", "inconclusive")}
             for side in ("up", "down")}
    shares(f"pooled ({len(kept)} rows)", total["up"], total["down"], sum(r["n"] for r in kept))


def report(rows: list[dict], as_markdown: bool) -> None:
    print()
    print(HEADER)
    for r in rows:
        print(line(r))
    print("(ddp=idp / ddp=pdp: ddp's adversary is that row's (same K), on the same cached runs; not pooled)")
    for label, tot, distinct in pooled_lines(rows):
        n = tot["n"]
        print(f"pooled, {label}, over {distinct} distinct rows ({n} audits): LB miss {rate(tot['lb_miss'], n)}, "
              f"UB miss {rate(tot['ub_miss'], n)}, CI miss {rate(tot['ci_miss'], n)}, false FAIL "
              f"{rate(tot['false_fail'], n)}, diagnostics failed {tot['diag_failed']}")
        print(f"  at a nominal 5% per bound, P(>= {tot['lb_miss']} LB misses) = {tail(tot['lb_miss'], n):.3f}, "
              f"P(>= {tot['ub_miss']} UB misses) = {tail(tot['ub_miss'], n):.3f} (exact binomial, {n} independent "
              "audits)")
    shifted_report(rows)
    if as_markdown:
        print()
        print(markdown(rows))
        for label, tot, distinct in pooled_lines(rows):
            n = tot["n"]
            print(f"| pooled | {label} ({distinct} rows) | | {rate(tot['lb_miss'], n)} | {rate(tot['ub_miss'], n)} | "
                  f"{rate(tot['ci_miss'], n)} | {rate(tot['false_fail'], n)} | {tot['diag_failed']} | | | |")


if __name__ == "__main__":
    sys.exit(main())
