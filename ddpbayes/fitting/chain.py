"""The `chain` template (DESIGN §9.5): per-individual sequences of a categorical state, a Markov
chain per individual whose transition rows share a Dirichlet prior (K states, individual i):

    init ~ Dirichlet(1),  m_s ~ Dirichlet(1) (row s of the shared mean transition matrix),
    kappa ~ LogNormal(log 10, 1.5),  P_i[s] ~ Dirichlet(kappa m_s),
    x_i0 ~ Categorical(init),  x_it ~ Categorical(P_i[x_i,t-1]).

P_i is integrated out: the counts n_i[s] of individual i's transitions from s are
DirichletMultinomial(N_is, kappa m_s), so NUTS samples K^2 + K + 1 numbers whatever the number
of individuals. `independent=True` is every state drawn independently from one Categorical(q),
q ~ Dirichlet(1) (the checks' and LOO's reference)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.fitting import checks as ppc
from ddpbayes.fitting import regimes
from ddpbayes.fitting.table import read_table
from ddpbayes.limits import check_memory

KAPPA_LOG_MEAN, KAPPA_LOG_SD = float(np.log(10.0)), 1.5  # kappa's prior: median 10, 94% in about [0.6, 170]


@dataclass(frozen=True)
class ChainData:
    """Sequences as the template sees them: states numbered in sorted order, individuals in
    order of first appearance, each individual's states in time order."""

    outcome: str
    cluster_columns: tuple[str, ...]
    time: str
    states: tuple[str, ...]
    labels: tuple[str, ...]
    cluster_index: np.ndarray  # (rows,) each row's individual
    sequences: tuple[np.ndarray, ...]
    covariates: tuple[str, ...] = ()
    regimes: int = 0  # hidden regimes (--regimes, regimes.py); 0: none

    def without_regimes(self) -> ChainData:
        """The same table under the plain chain template (the regime checks' reference)."""
        return replace(self, regimes=0)

    @property
    def k(self) -> int:
        return len(self.states)

    @property
    def counts(self) -> np.ndarray:
        """n[i, s, t]: individual i's transitions from s to t."""
        out = np.zeros((len(self.labels), self.k, self.k), dtype=np.int64)
        for i, seq in enumerate(self.sequences):
            np.add.at(out[i], (seq[:-1], seq[1:]), 1)
        return out

    @property
    def first(self) -> np.ndarray:
        return np.array([seq[0] for seq in self.sequences])

    def parameter_names(self, independent: bool = False) -> list[str]:
        """The template's parameters, as the JSON names them (states by their labels)."""
        if independent:
            return [f"q_{s}" for s in self.states]
        if self.regimes:
            return [name for names in regimes.names_by_variable(self).values() for name in names]
        return ["kappa", *(f"init_{s}" for s in self.states), *(f"m_{s}_{t}" for s in self.states for t in self.states)]

    def variables(self, independent: bool = False) -> list[str]:
        if independent:
            return ["q"]
        return list(regimes.VARIABLES) if self.regimes else ["kappa", "init", "m"]

    def hyperparameters(self, independent: bool = False) -> list[str]:
        if independent:
            return ["q"]
        return ["regime_transition"] if self.regimes else ["kappa"]

    def element_names(self, variable: str) -> list[str]:
        """Each scalar of a PyMC variable, as the diagnostics name it."""
        if self.regimes and variable in regimes.VARIABLES:
            return regimes.names_by_variable(self)[variable]
        if variable == "m":
            return [f"m_{s}_{t}" for s in self.states for t in self.states]
        if variable in ("init", "q"):
            return [f"{variable}_{s}" for s in self.states]
        return [variable]

    def cells_per_draw(self) -> int:
        """Numbers kept per draw: parameters, the replicated sequences, LOO's tables."""
        rows = sum(len(s) for s in self.sequences)
        regime = self.regimes * (1 + self.regimes + self.k * self.k) + 4 * rows * self.regimes
        return self.k * self.k + 2 * self.k + 1 + 4 * rows + len(self.labels) * self.k * self.k + regime

    def describe(self) -> dict:
        return {"outcome": self.outcome, "cluster": list(self.cluster_columns), "clusters": len(self.labels),
                "covariates": [], "time": self.time, "states": list(self.states)} | (
                    {"regimes": self.regimes} if self.regimes else {})

    def table(self) -> dict:
        """What the model file needs: each individual's transition counts and length."""
        return {"clusters": list(self.labels), "counts": self.counts.ravel().tolist(),
                "lengths": [len(s) for s in self.sequences]}


def read(path: str | Path, options: dict, max_rows: int) -> ChainData:
    """The template's view of the table at `path`: `options` names `id`, `time`, `state`."""
    import pandas as pd

    ident, time, state = options["id"], options["time"], options["state"]
    if not ident or not time or not state:
        raise InputError("the chain template needs --id COL, --time COL and --state COL")
    table = read_table(path, [ident, state], [time], max_rows)
    states, code = np.unique(table[state].to_numpy(dtype=str), return_inverse=True)
    if len(states) < 2:
        raise InputError(f"column '{state}' of '{path}' holds one state ('{states[0]}'): nothing to fit")
    index, labels = pd.factorize(table[ident], sort=False)
    times = table[time].to_numpy(dtype=float)
    duplicate = pd.DataFrame({"i": index, "t": times}).duplicated()
    if duplicate.any():
        row = int(np.flatnonzero(duplicate.to_numpy())[0])
        raise InputError(f"individual '{labels[index[row]]}' of '{path}' has two rows at {time} = {times[row]:g} "
                         f"(data row {row + 1}): one state per individual and time")
    order = np.lexsort((times, index))  # by individual, then time
    sequences = np.split(code.ravel()[order], np.cumsum(np.bincount(index, minlength=len(labels)))[:-1])
    _check_sequences(sequences, labels, ident, path)
    hidden = regimes.check_regimes(options.get("regimes"))
    if hidden:
        regimes.check_lengths(sequences, labels, ident, path)
    return ChainData(outcome=state, cluster_columns=(ident,), time=time, states=tuple(str(s) for s in states),
                     labels=tuple(str(v) for v in labels), cluster_index=index.astype(np.int64),
                     sequences=tuple(sequences), regimes=hidden)


def _check_sequences(sequences: list[np.ndarray], labels, ident: str, path) -> None:
    """At least two individuals (the shared prior) and two observations each (a transition)."""
    if len(sequences) < 2:
        raise InputError(f"column '{ident}' of '{path}' has one individual: the template needs at least two")
    short = [k for k, seq in enumerate(sequences) if len(seq) < 2]
    if short:
        raise InputError(f"individual '{labels[short[0]]}' ({ident}) of '{path}' has one row ({len(short):,} in all): "
                         "a chain needs at least two observations per individual (drop them)")


def pymc_model(data: ChainData, independent: bool = False):
    """The template as a PyMC model of the counts; `independent`: every state from one Categorical;
    with hidden regimes, regimes.py's model."""
    import pymc as pm

    if data.regimes and not independent:
        return regimes.pymc_model(data)
    k, counts = data.k, data.counts
    coords = {"state": list(data.states), "to": list(data.states)}
    with pm.Model(coords=coords) as model:
        if independent:
            q = pm.Dirichlet("q", np.ones(k), dims="state")
            totals = np.bincount(np.concatenate(data.sequences), minlength=k)
            pm.Multinomial("states", n=int(totals.sum()), p=q, observed=totals)
            return model
        init = pm.Dirichlet("init", np.ones(k), dims="state")
        pm.Multinomial("first", n=len(data.labels), p=init, observed=np.bincount(data.first, minlength=k))
        m = pm.Dirichlet("m", np.ones((k, k)), dims=("state", "to"))
        kappa = pm.LogNormal("kappa", KAPPA_LOG_MEAN, KAPPA_LOG_SD)
        person, source = np.nonzero(counts.sum(axis=2))
        rows = counts[person, source]
        pm.DirichletMultinomial("transitions", n=rows.sum(axis=1), a=kappa * m[source], observed=rows)
    return model


def hyperparameter_draws(posterior, data: ChainData, independent: bool = False) -> dict[str, np.ndarray]:
    """Each named parameter's draws, chains flattened (chain-major), keyed as the JSON names them."""
    k = data.k
    if data.regimes and not independent:
        return regimes.hyperparameter_draws(posterior, data)
    if independent:
        q = posterior["q"].values.reshape(-1, k)
        return {f"q_{s}": q[:, j] for j, s in enumerate(data.states)}
    init, m = posterior["init"].values.reshape(-1, k), posterior["m"].values.reshape(-1, k, k)
    out = {"kappa": posterior["kappa"].values.reshape(-1)}
    out |= {f"init_{s}": init[:, j] for j, s in enumerate(data.states)}
    return out | {f"m_{s}_{t}": m[:, a, b] for a, s in enumerate(data.states) for b, t in enumerate(data.states)}


def stacked(draws: dict[str, np.ndarray], states, prefix: str) -> np.ndarray:
    """`prefix_<s>` (D, K) or `prefix_<s>_<t>` (D, K, K) draws as one array."""
    if prefix == "m":
        return np.stack([np.stack([draws[f"m_{s}_{t}"] for t in states], -1) for s in states], -2)
    return np.stack([draws[f"{prefix}_{s}"] for s in states], -1)


def individual_transitions(kappa: np.ndarray, m: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """E[P_i | kappa, m, data] = (kappa m_s + n_i[s]) / (kappa + N_is), per draw: (D, I, K, K) from
    kappa (D,), m (D, K, K), counts (I, K, K) (Dirichlet-multinomial conjugacy)."""
    alpha = kappa[:, None, None, None] * m[:, None] + counts[None]
    return alpha / alpha.sum(axis=-1, keepdims=True)


def simulate(init: np.ndarray, transitions: np.ndarray, lengths: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Sequences per draw: init (D, K), transitions (D, I, K, K) -> states (D, I, L), L the longest
    length (positions past an individual's length are left as drawn; the statistics mask them)."""
    draws, people, k, _ = transitions.shape
    out = np.empty((draws, people, int(lengths.max())), dtype=np.int64)
    out[:, :, 0] = _categorical(np.broadcast_to(init[:, None], (draws, people, k)), rng)
    d, i = np.meshgrid(np.arange(draws), np.arange(people), indexing="ij")
    for t in range(1, out.shape[2]):
        out[:, :, t] = _categorical(transitions[d, i, out[:, :, t - 1]], rng)
    return out


def _categorical(p: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One draw from each row of probabilities (last axis)."""
    return (np.cumsum(p, axis=-1) < rng.random(p.shape[:-1])[..., None]).sum(axis=-1).clip(max=p.shape[-1] - 1)


def stay_share(seqs: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The share of transitions that stay in their state (the diagonal of the transition counts), (..., I, L)."""
    valid = np.arange(1, seqs.shape[-1])[None, :] < lengths[:, None]
    stays = (seqs[..., 1:] == seqs[..., :-1]) & valid
    return stays.sum(axis=(-2, -1)) / valid.sum()


def mean_longest_run(seqs: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The mean over individuals of each one's longest run of one state, (..., I, L)."""
    run = np.ones(seqs.shape[:-1])
    longest = run.copy()
    for t in range(1, seqs.shape[-1]):
        run = np.where(seqs[..., t] == seqs[..., t - 1], run + 1, 1)
        longest = np.where(t < lengths, np.maximum(longest, run), longest)
    return longest.mean(axis=-1)


def padded(data: ChainData) -> np.ndarray:
    """The data's sequences as one (I, L) array."""
    out = np.zeros((len(data.sequences), max(len(s) for s in data.sequences)), dtype=np.int64)
    for i, seq in enumerate(data.sequences):
        out[i, :len(seq)] = seq
    return out


def dependence_checks(chained: dict[str, np.ndarray], independent: dict[str, np.ndarray], u, data: ChainData,
                      reff: tuple[float, float], seed: int, max_draws: int = 1000) -> dict:
    """The `checks` block (DESIGN §9.5): the share of staying transitions and the mean longest run
    against replications (fresh P_i ~ Dirichlet(kappa m) per individual, as the audited model's
    prior gives them; and independent states), LOO of both over the transitions. With hidden
    regimes, regimes.py's checks."""
    if data.regimes:
        return regimes.dependence_checks(chained, independent, data, reff, seed, max_draws)
    rng = np.random.default_rng(seed)
    draws = len(chained["kappa"])
    pick = np.unique(np.linspace(0, draws - 1, min(max_draws, draws)).astype(int))
    lengths = np.array([len(s) for s in data.sequences])
    people, k = len(data.labels), data.k
    check_memory(8 * len(pick) * people * (k * k + 2 * int(lengths.max())), "the replicated sequences", flag="--draws")
    kappa, m = chained["kappa"][pick], stacked(chained, data.states, "m")[pick]
    fresh = rng.gamma(kappa[:, None, None, None] * m[:, None] + np.zeros((1, people, 1, 1)))
    fresh = fresh / fresh.sum(axis=-1, keepdims=True)
    rep_c = simulate(stacked(chained, data.states, "init")[pick], fresh, lengths, rng)
    q = stacked(independent, data.states, "q")[pick]
    rep_i = simulate(q, np.broadcast_to(q[:, None, None, :], (len(pick), people, k, k)), lengths, rng)
    observed = padded(data)
    checks = {"draws": int(len(pick))}
    for name, statistic in (("stay_share", stay_share), ("longest_run", mean_longest_run)):
        value = float(statistic(observed, lengths))
        checks[name] = ppc.compare(value, statistic(rep_c, lengths)) | {
            "independent": ppc.short(ppc.compare(value, statistic(rep_i, lengths)))}
    checks["loo"] = _loo(chained, independent, data, reff)
    checks["dependence_supported"] = ppc.supported(checks, "stay_share")
    return checks


def _loo(chained: dict[str, np.ndarray], independent: dict[str, np.ndarray], data: ChainData,
         reff: tuple[float, float]) -> dict:
    """PSIS-LOO over the transitions, one left out at a time. P_i integrated out, the chain's
    leave-one-out predictive given (kappa, m) is (kappa m_st + n_ist - 1) / (kappa + N_is - 1)
    (a non-factorised model: Bürkner, Gabry & Vehtari 2021); independent: q_t."""
    counts = data.counts
    person, source, target = np.nonzero(counts)
    check_memory(8 * 3 * len(chained["kappa"]) * len(person), "the LOO log-likelihood tables", flag="--draws")
    kappa, m = chained["kappa"][:, None], stacked(chained, data.states, "m")[:, source, target]
    n, total = counts[person, source, target], counts.sum(axis=2)[person, source]
    ll_c = np.log((kappa * m + n - 1) / (kappa + total - 1))
    ll_i = np.log(stacked(independent, data.states, "q")[:, target])
    return ppc.compare_loo(ll_c, ll_i, n.astype(float), reff)


MODEL_FILE = '''"""A chain dependence model fitted by `ddpbayes fit` from {data} (DESIGN §9.5).

{rows:,} observations of {outcome} for {clusters:,} individuals ({cluster}). The template: each
individual's states are a Markov chain, x_0 ~ Categorical(init), x_t ~ Categorical(P_i[x_t-1]),
P_i's rows ~ Dirichlet(kappa m_s), shared across individuals. Posterior means: {means}.

build(individual=None, parameters="mean", n=None) is one individual's chain (default: the first
in the table), tuple k its k-th observation in time order, valued 0 to K - 1 (the states in
sorted order, listed in {fit_name}); P_i is its posterior mean given the fit (parameters="mean":
averaged over the draws; "draw:K": given draw K, 0 to {last_draw}); n its length (default: its
observations). The posterior (ArviZ InferenceData): {posterior_name}. `ddpbayes audit
{model_name} ...` audits it like any model file (the structured engine reads the chain).
"""

from pathlib import Path

import pymc as pm

from ddpbayes import DependenceModel
from ddpbayes.fitting.fitted import read_chain

FIT = Path(__file__).with_name("{fit_name}")


def build(individual: str | None = None, parameters: str = "mean", n: int | None = None) -> DependenceModel:
    fit = read_chain(FIT, parameters, individual)
    n = fit.n if n is None else n
    with pm.Model() as m:
        x = pm.Categorical("x0", p=fit.init)
        for t in range(1, n):
            x = pm.Categorical(f"x{{t}}", p=pm.math.constant(fit.transition)[x])
    return DependenceModel(m, tuples=[f"x{{t}}" for t in range(n)])
'''


def model_file(doc: dict) -> tuple[str, dict]:
    """The model file's text for the fit `doc` (with hidden regimes: regimes.py's) and its own fields."""
    data = doc["data"]
    text = regimes.MODEL_FILE if data.get("regimes") else MODEL_FILE
    return text, {"clusters": data["clusters"], "cluster": ", ".join(data["cluster"]), "outcome": data["outcome"],
                  "regimes": data.get("regimes", 0)}
