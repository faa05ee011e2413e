"""The `chain` template with hidden regimes, `--regimes R` (DESIGN §9.5): a Markov-switching chain.
Individual i's transition t (t >= 1, from day t - 1 to day t) has a hidden regime z_it:

    init ~ Dirichlet(1_K)              x_i0 ~ Categorical(init)
    regime_init ~ Dirichlet(1_R)       z_i1 ~ Categorical(regime_init)
    regime_transition[r] ~ Dirichlet(1_R + STICKY e_r)       z_it ~ Categorical(regime_transition[z_i,t-1])
    transition[r, s] ~ Dirichlet(1_K)  x_it ~ Categorical(transition[z_it, x_i,t-1])

shared across individuals. NUTS samples the marginal likelihood, z summed out by the forward
algorithm (log space, every individual at once, sequences padded to the longest with a mask).
The regimes are identified by sorting each draw's regimes by their mean stay probability
(`ordered`): the posterior is invariant under relabelling (the priors are), so the sorted draws
are the posterior restricted to the ordered regimes."""

from __future__ import annotations

import numpy as np
from scipy.special import gammaln, logsumexp

from ddpbayes.errors import InputError
from ddpbayes.fitting import checks as ppc
from ddpbayes.limits import check_memory

STICKY = 4.0  # extra prior weight on staying in a regime: prior mean stay (1 + STICKY) / (R + STICKY), 5/6 at R = 2
VARIABLES = ("init", "regime_init", "regime_transition", "transition")


def check_regimes(regimes) -> int:
    """--regimes as an integer of at least 2 (None: 0, no regimes)."""
    if regimes is None:
        return 0
    if isinstance(regimes, bool) or not isinstance(regimes, (int, np.integer)) or regimes < 2:
        raise InputError(f"--regimes must be an integer of at least 2 (hidden regimes; without it: none), "
                         f"got {regimes}")
    return int(regimes)


def check_lengths(sequences, labels, ident: str, path) -> None:
    """Every individual at least 3 observations (two transitions: one says nothing of a regime's
    persistence) and one of at least 5 (two windows of the regime check, `window_length`)."""
    short = [k for k, seq in enumerate(sequences) if len(seq) < 3]
    if short:
        raise InputError(f"--regimes: individual '{labels[short[0]]}' ({ident}) of '{path}' has "
                         f"{len(sequences[short[0]])} rows ({len(short):,} individuals under 3): hidden regimes "
                         "need at least 3 observations per individual (drop them)")
    if max(len(seq) for seq in sequences) < 5:
        raise InputError(f"--regimes: every individual of '{path}' has under 5 rows: the sequences are too short "
                         "to tell regimes apart (the regime check needs two windows of two transitions)")


def names_by_variable(data) -> dict[str, list[str]]:
    """Each PyMC variable's scalars as the JSON names them (regimes numbered 0 to R - 1)."""
    states, r = data.states, range(data.regimes)
    return {"init": [f"init_{s}" for s in states], "regime_init": [f"regime_init_{a}" for a in r],
            "regime_transition": [f"regime_{a}_{b}" for a in r for b in r],
            "transition": [f"p_{a}_{s}_{t}" for a in r for s in states for t in states]}


def transitions_of(data) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each individual's transitions padded to the longest: from-states, to-states (I, L - 1) and
    the mask of real ones."""
    people, longest = len(data.sequences), max(len(s) for s in data.sequences)
    prev, nxt = np.zeros((people, longest - 1), np.int64), np.zeros((people, longest - 1), np.int64)
    mask = np.zeros((people, longest - 1), bool)
    for i, seq in enumerate(data.sequences):
        prev[i, :len(seq) - 1], nxt[i, :len(seq) - 1], mask[i, :len(seq) - 1] = seq[:-1], seq[1:], True
    return prev, nxt, mask


def forward_tensor(log_rho, log_a, log_p, prev: np.ndarray, nxt: np.ndarray, mask: np.ndarray):
    """log p(x_i1..x_iT | x_i0, regime parameters) per individual (I,), PyTensor: the forward
    algorithm over the transitions (Rabiner 1989, in log space), a masked step leaving alpha as it is."""
    import pytensor
    import pytensor.tensor as pt

    log_b = log_p[:, prev, nxt].dimshuffle(2, 1, 0)  # (T, I, R): each transition's probability under each regime

    def step(log_b_t, mask_t, alpha, log_a_):
        moved = pt.logsumexp(alpha[:, :, None] + log_a_[None], axis=1) + log_b_t
        return pt.switch(mask_t[:, None], moved, alpha)

    alpha0 = log_rho[None, :] + log_b[0]
    alphas, _ = pytensor.scan(step, sequences=[log_b[1:], pt.as_tensor(mask.T[1:].astype("int8"))],
                              outputs_info=[alpha0], non_sequences=[log_a])
    return pt.logsumexp(alphas[-1], axis=1)


def forward(log_rho: np.ndarray, log_a: np.ndarray, log_p: np.ndarray, prev: np.ndarray, nxt: np.ndarray,
            mask: np.ndarray) -> np.ndarray:
    """The same per draw in NumPy: log_rho (D, R), log_a (D, R, R), log_p (D, R, K, K) -> (D, I)."""
    log_b = log_p[:, :, prev, nxt].transpose(0, 2, 3, 1)  # (D, I, T, R)
    alpha = log_rho[:, None, :] + log_b[:, :, 0]
    for t in range(1, prev.shape[1]):
        moved = logsumexp(alpha[:, :, :, None] + log_a[:, None], axis=2) + log_b[:, :, t]
        alpha = np.where(mask[None, :, t, None], moved, alpha)
    return logsumexp(alpha, axis=-1)


def pymc_model(data):
    """The regime model of `data` (`ChainData` with `regimes` R >= 2): the first states a Multinomial
    of init, the transitions' marginal likelihood by `forward_tensor` (a Potential)."""
    import pymc as pm

    k, r = data.k, data.regimes
    prev, nxt, mask = transitions_of(data)
    coords = {"state": list(data.states), "to": list(data.states), "regime": list(range(r)),
              "regime_to": list(range(r))}
    with pm.Model(coords=coords) as model:
        init = pm.Dirichlet("init", np.ones(k), dims="state")
        pm.Multinomial("first", n=len(data.labels), p=init, observed=np.bincount(data.first, minlength=k))
        rho = pm.Dirichlet("regime_init", np.ones(r), dims="regime")
        a = pm.Dirichlet("regime_transition", np.ones((r, r)) + STICKY * np.eye(r), dims=("regime", "regime_to"))
        p = pm.Dirichlet("transition", np.ones((r, k, k)), dims=("regime", "state", "to"))
        pm.Potential("transitions", forward_tensor(pm.math.log(rho), pm.math.log(a), pm.math.log(p),
                                                   prev, nxt, mask).sum())
    return model


def ordered(idata):
    """`idata` with each draw's regimes sorted by their mean stay probability, mean_s transition[r, s, s]
    (ascending): the identifying constraint, applied to every regime-indexed variable."""
    post = idata.posterior
    p = post["transition"].values  # (C, D, R, K, K)
    order = np.argsort(np.diagonal(p, axis1=-2, axis2=-1).mean(axis=-1), axis=-1, kind="stable")  # (C, D, R)
    rho = np.take_along_axis(post["regime_init"].values, order, axis=-1)
    a = np.take_along_axis(post["regime_transition"].values, order[..., :, None], axis=-2)
    a = np.take_along_axis(a, order[..., None, :], axis=-1)
    p = np.take_along_axis(p, order[..., :, None, None], axis=-3)
    for name, values in (("regime_init", rho), ("regime_transition", a), ("transition", p)):
        post[name] = (post[name].dims, values)
    return idata


def hyperparameter_draws(posterior, data) -> dict[str, np.ndarray]:
    """Each named parameter's draws (chains flattened, chain-major), as the JSON names them."""
    names = names_by_variable(data)
    out = {}
    for variable in VARIABLES:
        values = posterior[variable].values.reshape(-1, len(names[variable]))
        out |= {name: values[:, j] for j, name in enumerate(names[variable])}
    return out


def stacked(draws: dict[str, np.ndarray], data) -> tuple[np.ndarray, ...]:
    """init (D, K), regime_init (D, R), regime_transition (D, R, R), transition (D, R, K, K) from named draws."""
    names, k, r = names_by_variable(data), data.k, data.regimes
    shapes = {"init": (k,), "regime_init": (r,), "regime_transition": (r, r), "transition": (r, k, k)}
    return tuple(np.stack([draws[n] for n in names[v]], -1).reshape(-1, *shapes[v]) for v in VARIABLES)


def simulate(init, rho, a, p, lengths: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Sequences of the regime model per draw (D, I, L), regimes drawn afresh (positions past an
    individual's length are drawn too; the statistics mask them)."""
    from ddpbayes.fitting.chain import _categorical

    draws, people = len(init), len(lengths)
    out = np.empty((draws, people, int(lengths.max())), dtype=np.int64)
    d = np.repeat(np.arange(draws)[:, None], people, axis=1)
    out[:, :, 0] = _categorical(np.broadcast_to(init[:, None], (draws, people, init.shape[1])), rng)
    z = _categorical(np.broadcast_to(rho[:, None], (draws, people, rho.shape[1])), rng)
    for t in range(1, out.shape[2]):
        if t > 1:
            z = _categorical(a[d, z], rng)
        out[:, :, t] = _categorical(p[d, z, out[:, :, t - 1]], rng)
    return out


def window_length(lengths: np.ndarray) -> int:
    """W = max(2, min(floor(sqrt(median transitions)), floor(longest transitions / 2))): windows of
    about sqrt(T) transitions, and two of them in the longest sequence."""
    transitions = lengths - 1
    return int(max(2, min(np.floor(np.sqrt(np.median(transitions))), transitions.max() // 2)))


def window_stay_variance(seqs: np.ndarray, lengths: np.ndarray, width: int) -> np.ndarray:
    """The regime check's statistic, (..., I, L) -> (...): each individual's transitions cut into
    consecutive windows of `width` (the remainder dropped), the variance (ddof 0) of the stay share
    across its windows, averaged over the individuals with at least two windows. A chain with one
    transition matrix per individual keeps it small; regimes that switch raise it."""
    windows = (lengths - 1) // width  # (I,)
    count = int(windows.max())
    stays = (seqs[..., 1:1 + count * width] == seqs[..., :count * width]).astype(float)
    shares = stays.reshape(*stays.shape[:-1], count, width).mean(axis=-1)  # (..., I, W)
    valid = np.arange(count)[None, :] < windows[:, None]
    n = np.maximum(windows, 1)
    mean = (shares * valid).sum(axis=-1) / n
    var = (((shares - mean[..., None]) ** 2) * valid).sum(axis=-1) / n
    keep = windows >= 2
    return var[..., keep].mean(axis=-1)


def individual_loglik(draws: dict[str, np.ndarray], data) -> np.ndarray:
    """log p(individual i's sequence | draw) (D, I): the first state's and the forward algorithm's."""
    init, rho, a, p = stacked(draws, data)
    prev, nxt, mask = transitions_of(data)
    check_memory(8 * 2 * len(init) * prev.size * data.regimes, "the forward algorithm's tables", flag="--draws")
    return np.log(init[:, data.first]) + forward(np.log(rho), np.log(a), np.log(p), prev, nxt, mask)


def chain_individual_loglik(draws: dict[str, np.ndarray], data) -> np.ndarray:
    """The same under the plain chain template (DESIGN §9.5), P_i integrated out: the first state's
    log init plus, per from-state s, log B(kappa m_s + n_i[s]) - log B(kappa m_s) (a Pólya urn's
    sequence probability), (D, I)."""
    from ddpbayes.fitting.chain import stacked as chain_stacked

    kappa = draws["kappa"][:, None, None, None]
    m, init = chain_stacked(draws, data.states, "m"), chain_stacked(draws, data.states, "init")
    alpha, counts = kappa * m[:, None], data.counts[None]  # (D, I, K, K)
    per_row = (gammaln(alpha.sum(-1)) - gammaln(alpha.sum(-1) + counts.sum(-1))
               + (gammaln(alpha + counts) - gammaln(alpha)).sum(-1))
    return np.log(init[:, data.first]) + per_row.sum(-1)


def independent_individual_loglik(draws: dict[str, np.ndarray], data) -> np.ndarray:
    """Under independent states: the sum of log q over each individual's sequence, (D, I)."""
    from ddpbayes.fitting.chain import stacked as chain_stacked

    totals = np.array([np.bincount(s, minlength=data.k) for s in data.sequences])  # (I, K)
    return np.log(chain_stacked(draws, data.states, "q")) @ totals.T


def _pick(draws: dict[str, np.ndarray], max_draws: int) -> np.ndarray:
    count = len(next(iter(draws.values())))
    return np.unique(np.linspace(0, count - 1, min(max_draws, count)).astype(int))


def _replicated(draws: dict[str, np.ndarray], data, lengths: np.ndarray, pick: np.ndarray, rng) -> np.ndarray:
    check_memory(8 * len(pick) * len(lengths) * (data.regimes * data.k ** 2 + 2 * int(lengths.max())),
                 "the replicated sequences", flag="--draws")
    return simulate(*(v[pick] for v in stacked(draws, data)), lengths, rng)


def dependence_checks(regime: dict[str, np.ndarray], independent: dict[str, np.ndarray], data,
                      reff: tuple[float, float], seed: int, max_draws: int = 1000) -> dict:
    """The `checks` block of a regime fit (DESIGN §9.5): stay_share and longest_run against
    replications of the regime model (fresh regimes) and of independent states, LOO of both with
    one individual left out at a time."""
    from ddpbayes.fitting.chain import mean_longest_run, padded, simulate as chain_simulate, stacked as chain_stacked
    from ddpbayes.fitting.chain import stay_share

    rng = np.random.default_rng(seed)
    pick, lengths = _pick(regime, max_draws), np.array([len(s) for s in data.sequences])
    rep_r = _replicated(regime, data, lengths, pick, rng)
    q = chain_stacked(independent, data.states, "q")[pick]
    rep_i = chain_simulate(q, np.broadcast_to(q[:, None, None, :], (len(pick), len(lengths), data.k, data.k)),
                           lengths, rng)
    observed = padded(data)
    checks = {"draws": int(len(pick))}
    for name, statistic in (("stay_share", stay_share), ("longest_run", mean_longest_run)):
        value = float(statistic(observed, lengths))
        checks[name] = ppc.compare(value, statistic(rep_r, lengths)) | {
            "independent": ppc.short(ppc.compare(value, statistic(rep_i, lengths)))}
    ones = np.ones(len(lengths))
    checks["loo"] = ppc.compare_loo(individual_loglik(regime, data), independent_individual_loglik(independent, data),
                                    ones, reff) | {"unit": "individual"}
    checks["dependence_supported"] = ppc.supported(checks, "stay_share")
    return checks


def regime_checks(regime: dict[str, np.ndarray], chain: dict[str, np.ndarray], data, reff: tuple[float, float],
                  seed: int, max_draws: int = 1000) -> dict:
    """Do the data support the regimes? The variance across windows of the stay share
    (`window_stay_variance`) against replications of the regime model and of the plain chain
    (fresh P_i ~ Dirichlet(kappa m_s)), and LOO of the regime fit against the plain chain's, one
    individual left out at a time; `regimes_supported`: the plain chain reaches the data's window
    variance in under 1% of replications and LOO prefers the regimes by two standard errors."""
    from ddpbayes.fitting.chain import padded, simulate as chain_simulate, stacked as chain_stacked

    rng = np.random.default_rng([seed, 2])
    pick, lengths = _pick(regime, max_draws), np.array([len(s) for s in data.sequences])
    width = window_length(lengths)
    rep_r = _replicated(regime, data, lengths, pick, rng)
    kappa, m = chain["kappa"][pick], chain_stacked(chain, data.states, "m")[pick]
    fresh = rng.gamma(kappa[:, None, None, None] * m[:, None] + np.zeros((1, len(lengths), 1, 1)))
    rep_c = chain_simulate(chain_stacked(chain, data.states, "init")[pick], fresh / fresh.sum(-1, keepdims=True),
                           lengths, rng)
    value = float(window_stay_variance(padded(data), lengths, width))
    windows = ppc.compare(value, window_stay_variance(rep_r, lengths, width)) | {
        "window": width, "chain": ppc.short(ppc.compare(value, window_stay_variance(rep_c, lengths, width)))}
    loo = ppc.compare_loo(individual_loglik(regime, data), chain_individual_loglik(chain, data),
                          np.ones(len(lengths)), reff)
    loo = {"elpd": loo["elpd"], "se": loo["se"], "elpd_chain": loo["elpd_independent"],
           "se_chain": loo["se_independent"], "elpd_diff": loo["elpd_diff"], "se_diff": loo["se_diff"],
           "pareto_k_max": loo["pareto_k_max"], "pareto_k_over_0_7": loo["pareto_k_over_0_7"]}
    supported = windows["chain"]["p_value"] < ppc.FLAG_P and loo["elpd_diff"] > 2 * loo["se_diff"]
    return {"window_stay_variance": windows, "loo_regimes": loo, "regimes_supported": bool(supported)}


MODEL_FILE = '''"""A chain dependence model with hidden regimes fitted by `ddpbayes fit` from {data} (DESIGN §9.5).

{rows:,} observations of {outcome} for {clusters:,} individuals ({cluster}), {regimes} hidden regimes.
The template: x_0 ~ Categorical(init); each transition t >= 1 has a hidden regime z_t, z_1 ~
Categorical(regime_init), z_t ~ Categorical(regime_transition[z_t-1]), and x_t ~
Categorical(transition[z_t, x_t-1]), one transition matrix per regime, shared by every
individual; the regimes are numbered by their mean stay probability (ascending). Posterior means:
{means}.

build(individual=None, parameters="mean", n=None) is one individual's chain (default: the first
in the table), tuple k its k-th observation in time order, valued 0 to K - 1 (the states in
sorted order, listed in {fit_name}), the regimes z_t latent (the structured engine sums them
out); the parameters are shared, so the individual sets only n, its length (default: its
observations). parameters="mean": the posterior means; "draw:K": draw K, 0 to {last_draw}. The
posterior (ArviZ InferenceData): {posterior_name}. `ddpbayes audit {model_name} ...` audits it like
any model file.
"""

from pathlib import Path

import pymc as pm

from ddpbayes import DependenceModel
from ddpbayes.fitting.fitted import read_regimes

FIT = Path(__file__).with_name("{fit_name}")


def build(individual: str | None = None, parameters: str = "mean", n: int | None = None) -> DependenceModel:
    fit = read_regimes(FIT, parameters, individual)
    n = fit.n if n is None else n
    with pm.Model() as m:
        x = pm.Categorical("x0", p=fit.init)
        for t in range(1, n):
            z = pm.Categorical(f"z{{t}}", p=fit.regime_init if t == 1 else pm.math.constant(fit.regime_transition)[z])
            x = pm.Categorical(f"x{{t}}", p=pm.math.constant(fit.transition)[z, x])
    return DependenceModel(m, tuples=[f"x{{t}}" for t in range(n)])
'''
