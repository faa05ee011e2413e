"""What a fitted model file reads (DESIGN §9.3): its `.fit.json`, with the parameters fixed at the
posterior means (`parameters="mean"`) or at one posterior draw (`"draw:K"`). Light on purpose
(json and NumPy only): a fitted model file loads in well under a second."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddpbayes.errors import InputError

FORMAT = 1  # the `.fit.json` layout this code reads and writes


@dataclass(frozen=True)
class FixedClustered:
    """A clustered fit with fixed parameters: the log-odds of row r are
    intercept + x[r] @ beta + offset[cluster_index[r]] + u[cluster_index[r]], u_c ~ Normal(0, sigma);
    `offset` is a spatial fit's field at the clusters, fixed as a parameter, and `sigma` its iid
    part's SD sigma_iid (DESIGN §9.8; else zeros and the fit's sigma)."""

    intercept: float
    beta: np.ndarray
    sigma: float
    x: np.ndarray
    cluster_index: np.ndarray
    n_clusters: int
    offset: np.ndarray

    @property
    def n(self) -> int:
        return len(self.cluster_index)


@dataclass(frozen=True)
class FixedGaussian:
    """A gaussian fit with fixed parameters: row r is Normal(intercept + x[r] @ beta +
    u[cluster_index[r]], sigma_residual), u_g ~ Normal(0, sigma_group), every value in `domain`."""

    intercept: float
    beta: np.ndarray
    sigma_group: float
    sigma_residual: float
    x: np.ndarray
    cluster_index: np.ndarray
    n_clusters: int
    domain: tuple[float, float]

    @property
    def n(self) -> int:
        return len(self.cluster_index)


@dataclass(frozen=True)
class FixedJointGaussian:
    """A gaussian fit on several columns (DESIGN §9.4b) with fixed parameters: row r's vector is
    MvNormal(intercept + x[r] @ beta + u[cluster_index[r]], cov_residual), u_g ~ MvNormal(0, cov_group);
    `domains` each column's [low, high]."""

    intercept: np.ndarray  # (C,)
    beta: np.ndarray  # (p, C)
    cov_group: np.ndarray  # (C, C)
    cov_residual: np.ndarray  # (C, C)
    x: np.ndarray
    cluster_index: np.ndarray
    n_clusters: int
    domains: tuple[tuple[float, float], ...]

    @property
    def n(self) -> int:
        return len(self.cluster_index)

    @property
    def width(self) -> int:
        return len(self.intercept)

    @property
    def mean(self) -> np.ndarray:
        """The rows' means without group effects (n, C)."""
        return self.intercept[None, :] + self.x @ self.beta

    @property
    def chol_group(self) -> np.ndarray:
        return np.linalg.cholesky(self.cov_group)

    def cells_residual_covariance(self) -> np.ndarray:
        """The cells' residual covariance, I_n kron Sigma_residual (n C x n C, block diagonal, dense),
        refused in one line when it would pass the memory bound (`limits.check_memory`)."""
        from ddpbayes.limits import check_memory

        size = self.n * self.width
        check_memory(8 * 4 * size * size, f"the {size:,} cells' {size:,} x {size:,} covariance",
                     advice="the gaussian engine reads a model of several columns densely (DESIGN §9.4b): fit fewer "
                            "rows or columns")
        return np.kron(np.eye(self.n), self.cov_residual)

    def cell_domains(self) -> list:
        """Every cell's declared Interval, row-major (tuple r C + c: column c's domain)."""
        from ddpbayes import Interval

        per_column = [Interval(lo, hi) for lo, hi in self.domains]
        return per_column * self.n


def read_gaussian_joint(path: str | Path, parameters: str = "mean") -> FixedJointGaussian:
    """The gaussian fit on several columns stored at `path`, its parameters fixed at their posterior
    means ("mean") or at posterior draw K ("draw:K"). Sigma = diag(sd) R diag(sd) of the fixed SDs
    and correlations (under "mean", of their posterior means, as the one-column template's)."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"fit file '{path}' cannot be read: {exc}") from None
    if doc.get("format") != FORMAT or "table" not in doc or len(doc.get("data", {}).get("columns", [])) < 2:
        raise InputError(f"fit file '{path}' is not a gaussian fit of several columns written by this version of "
                         "ddpbayes fit")
    values = _values(doc, parameters, path)
    data, table = doc["data"], doc["table"]
    cols, covariates = data["columns"], data["covariates"]
    index = np.asarray(table["cluster_index"], dtype=np.int64)
    x = np.asarray(table["x"], dtype=float).reshape(len(index), len(covariates))
    beta = np.array([[values[f"beta_{v}_{c}"] for c in cols] for v in covariates], dtype=float).reshape(-1, len(cols))
    return FixedJointGaussian(np.array([values[f"intercept_{c}"] for c in cols]), beta,
                              _joint_covariance(values, cols, "group"), _joint_covariance(values, cols, "residual"),
                              x, index, len(table["clusters"]),
                              tuple((float(lo), float(hi)) for lo, hi in data["domains"]))


def _joint_covariance(values: dict[str, float], columns: list[str], kind: str) -> np.ndarray:
    """diag(sd) R diag(sd) from the parameters sigma_<kind>_<c> and rho_<kind>_<a>_<b>."""
    sd = np.array([values[f"sigma_{kind}_{c}"] for c in columns])
    corr = np.eye(len(columns))
    for i, a in enumerate(columns):
        for j in range(i + 1, len(columns)):
            corr[i, j] = corr[j, i] = values[f"rho_{kind}_{a}_{columns[j]}"]
    return sd[:, None] * corr * sd[None, :]


def read_fit(path: str | Path, parameters: str = "mean") -> FixedClustered | FixedGaussian:
    """The fit stored at `path` with its parameters fixed (what a fitted model file's `build` reads).

    Parameters
    ----------
    path : str or Path
        The MODEL.fit.json that `ddpbayes fit` wrote.
    parameters : str, default "mean"
        "mean": the posterior means; "draw:K": posterior draw K (chains in order). A spatial
        fit's field at the clusters likewise (its posterior mean, or draw K).

    Returns
    -------
    FixedClustered or FixedGaussian
        The parameters, the rows' clusters and standardised covariates (and a gaussian fit's domain).

    Raises
    ------
    InputError
        If the file cannot be read, is not a fit of this layout, or `parameters` is neither.
    """
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"fit file '{path}' cannot be read: {exc}") from None
    if doc.get("format") != FORMAT or "table" not in doc:
        raise InputError(f"fit file '{path}' is not a fit written by this version of ddpbayes fit")
    if "levels" in doc.get("data", {}):
        raise InputError(f"fit file '{path}' is a categorical clustered fit: its model file reads it "
                         "(read_categorical)")
    values = _values(doc, parameters, path)
    table = doc["table"]
    index = np.asarray(table["cluster_index"], dtype=np.int64)
    x = np.asarray(table["x"], dtype=float).reshape(len(index), len(doc["data"]["covariates"]))
    beta = np.array([values[f"beta_{c}"] for c in doc["data"]["covariates"]], dtype=float)
    if "sigma_group" in values:  # a gaussian fit (DESIGN §9.4)
        low, high = doc["data"]["domain"]
        return FixedGaussian(values["intercept"], beta, values["sigma_group"], values["sigma_residual"], x, index,
                             len(table["clusters"]), (float(low), float(high)))
    k = len(table["clusters"])
    sigma = values.get("sigma_iid", values["sigma"])  # a spatial fit's u_c: its iid part (BYM2, DESIGN §9.8)
    return FixedClustered(values["intercept"], beta, sigma, x, index, k, _field(doc, parameters, k))


@dataclass(frozen=True)
class FixedCategorical:
    """A categorical clustered fit (DESIGN §9.9) with fixed parameters over `k` levels. Baseline-category
    logit: eta_rj = fixed[r, j-1] + u_j[cluster_index[r]] for j = 1..k-1 (level 0 the reference),
    u_j ~ Normal(0, sigma[j-1]), `cut` empty. Cumulative logit (`cut` the k-1 cutpoints):
    P(y_r <= i) = logit^-1(cut[i] - fixed[r, 0] - u[cluster_index[r]]), u ~ Normal(0, sigma[0])."""

    k: int
    fixed: np.ndarray  # (n, k-1) baseline-category, (n, 1) cumulative
    sigma: np.ndarray
    cut: np.ndarray
    cluster_index: np.ndarray
    n_clusters: int

    @property
    def n(self) -> int:
        return len(self.cluster_index)


def read_categorical(path: str | Path, parameters: str = "mean") -> FixedCategorical:
    """The categorical clustered fit at `path` with its parameters fixed at their posterior means ("mean")
    or at posterior draw K ("draw:K")."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"fit file '{path}' cannot be read: {exc}") from None
    if doc.get("format") != FORMAT or "levels" not in doc.get("data", {}):
        raise InputError(f"fit file '{path}' is not a categorical clustered fit written by this version of "
                         "ddpbayes fit")
    return categorical_fit(doc, parameters, path)


def categorical_fit(doc: dict, parameters: str, path: Path) -> FixedCategorical:
    """`read_categorical` of the fit document `doc` (read from `path`)."""
    data, table = doc["data"], doc["table"]
    values = _values(doc, parameters, path)
    levels, covariates = data["levels"], data["covariates"]
    index = np.asarray(table["cluster_index"], dtype=np.int64)
    x = np.asarray(table["x"], dtype=float).reshape(len(index), len(covariates))
    if data["link"] == "cumulative logit":
        beta = np.array([values[f"beta_{c}"] for c in covariates], dtype=float)
        cut = np.array([values[f"cut_{i}"] for i in range(1, len(levels))])
        return FixedCategorical(len(levels), (x @ beta)[:, None], np.array([values["sigma"]]), cut, index,
                                len(table["clusters"]))
    others = levels[1:]
    beta = np.array([[values[f"beta_{c}_{v}"] for v in others] for c in covariates], dtype=float)
    beta = beta.reshape(len(covariates), len(others))
    fixed = np.array([values[f"intercept_{v}"] for v in others])[None, :] + x @ beta
    return FixedCategorical(len(levels), fixed, np.array([values[f"sigma_{v}"] for v in others]), np.zeros(0), index,
                            len(table["clusters"]))


def level_probabilities(columns: list, ordered: bool):
    """The (n, k) matrix of level probabilities of a categorical model file from k-1 vectors (PyTensor),
    built element by element so that the structured engine sees row r read only its cluster's effects.
    Baseline-category (`columns` eta_1..eta_{k-1}, eta_0 = 0): p_j = 1 / sum_l exp(eta_l - eta_j).
    Cumulative (`columns` a_i = cut_i - eta): p_0 = s(a_1), p_j = s(a_{j+1}) s(-a_j) (1 - e^(a_j - a_{j+1})),
    p_{k-1} = s(-a_{k-1}), s the logistic function (no cancellation in either tail)."""
    import pytensor.tensor as pt

    if ordered:
        s = pt.sigmoid
        p = [s(columns[0]), *(s(columns[j]) * s(-columns[j - 1]) * -pt.expm1(columns[j - 1] - columns[j])
                              for j in range(1, len(columns))), s(-columns[-1])]
    else:
        eta = [pt.zeros_like(columns[0]), *columns]
        p = [1.0 / sum(pt.exp(e - eta_j) for e in eta) for eta_j in eta]
    unit = np.eye(len(p))
    return sum(pj[:, None] * unit[j][None, :] for j, pj in enumerate(p))


def _field(doc: dict, parameters: str, clusters: int) -> np.ndarray:
    """A spatial fit's field at the clusters: its posterior mean ("mean") or draw K ("draw:K", checked
    by `_values`); zeros for a fit without one."""
    if "field" not in doc:
        return np.zeros(clusters)
    if parameters == "mean":
        return np.asarray(doc["field"]["mean"], dtype=float)
    return np.asarray(doc["field"]["draws"][int(str(parameters).partition(":")[2])], dtype=float)


def _values(doc: dict, parameters: str, path: Path) -> dict[str, float]:
    """Each parameter's fixed value under `parameters`."""
    if parameters == "mean":
        return {name: float(p["mean"]) for name, p in doc["parameters"].items()}
    head, _, k = str(parameters).partition(":")
    draws = doc["draws"]
    count = len(next(iter(draws.values())))
    if head == "draw" and k.isdigit() and int(k) < count:
        return {name: float(v[int(k)]) for name, v in draws.items()}
    raise InputError(f"parameters must be 'mean' or 'draw:K' with K from 0 to {count - 1} (the posterior draws of "
                     f"'{path.name}'), got '{parameters}'")


@dataclass(frozen=True)
class FixedChain:
    """One individual's chain from a chain fit: x_0 ~ Categorical(init), x_t ~ Categorical(transition[x_t-1]),
    `n` its observations."""

    init: np.ndarray
    transition: np.ndarray
    n: int


def read_chain(path: str | Path, parameters: str = "mean", individual: str | None = None) -> FixedChain:
    """Individual `individual`'s chain (default: the table's first) from the chain fit at `path`
    (DESIGN §9.5): P_i = E[P_i | kappa, m, data] = (kappa m_s + n_i[s]) / (kappa + N_is), averaged
    over the posterior draws ("mean") or at draw K ("draw:K"); init likewise."""
    path = Path(path)
    doc = _chain_document(path)
    pick = _draw_indices(parameters, len(doc["draws"]["kappa"]), path)
    init, transition, n = chain_draws(path, pick, individual, doc)
    return FixedChain(init.mean(axis=0), transition.mean(axis=0), n)


def chain_draws(path: str | Path, pick: np.ndarray, individual: str | None = None,
                doc: dict | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """Individual `individual`'s (default: the first) initial law (D, K) and P_i = E[P_i | kappa, m, data]
    (D, K, K) at the posterior draws `pick` of the chain fit at `path`, and its number of observations."""
    doc = doc or _chain_document(Path(path))
    table, states, draws = doc["table"], doc["data"]["states"], doc["draws"]
    people, k = table["clusters"], len(states)
    i = _individual(table, individual, path)
    kappa = np.asarray(draws["kappa"])[pick]
    m = np.array([[draws[f"m_{s}_{t}"] for t in states] for s in states]).transpose(2, 0, 1)[pick]
    counts = np.asarray(table["counts"], dtype=float).reshape(len(people), k, k)[i]
    alpha = kappa[:, None, None] * m + counts[None]
    init = np.array([draws[f"init_{s}"] for s in states]).T[pick]
    return init, alpha / alpha.sum(axis=-1, keepdims=True), int(table["lengths"][i])


@dataclass(frozen=True)
class FixedRegimes:
    """One individual's chain with hidden regimes (DESIGN §9.5, --regimes): x_0 ~ Categorical(init),
    z_1 ~ Categorical(regime_init), z_t ~ Categorical(regime_transition[z_t-1]),
    x_t ~ Categorical(transition[z_t, x_t-1]); `n` its observations."""

    init: np.ndarray
    regime_init: np.ndarray
    regime_transition: np.ndarray
    transition: np.ndarray
    n: int


def read_regimes(path: str | Path, parameters: str = "mean", individual: str | None = None) -> FixedRegimes:
    """A regime fit's chain at `path`: the posterior means of its shared parameters ("mean") or
    draw K ("draw:K"); `individual` (default: the table's first) sets only the length."""
    path = Path(path)
    doc = _chain_document(path)
    pick = _draw_indices(parameters, len(doc["draws"]["init_" + doc["data"]["states"][0]]), path)
    init, rho, a, p, n = regime_draws(path, pick, individual, doc)
    return FixedRegimes(init.mean(axis=0), rho.mean(axis=0), a.mean(axis=0), p.mean(axis=0), n)


def regime_draws(path: str | Path, pick: np.ndarray, individual: str | None = None, doc: dict | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """init (D, K), regime_init (D, R), regime_transition (D, R, R), transition (D, R, K, K) at the
    posterior draws `pick` of the regime fit at `path`, and individual `individual`'s observations."""
    doc = doc or _chain_document(Path(path))
    table, states, draws = doc["table"], doc["data"]["states"], doc["draws"]
    regimes, k = range(doc["data"]["regimes"]), len(states)

    def column(names: list[str], shape: tuple[int, ...]) -> np.ndarray:
        return np.array([draws[name] for name in names], dtype=float).T[pick].reshape(-1, *shape)

    r = len(regimes)
    init = column([f"init_{s}" for s in states], (k,))
    rho = column([f"regime_init_{a}" for a in regimes], (r,))
    a = column([f"regime_{a}_{b}" for a in regimes for b in regimes], (r, r))
    p = column([f"p_{a}_{s}_{t}" for a in regimes for s in states for t in states], (r, k, k))
    return init, rho, a, p, int(table["lengths"][_individual(table, individual, path)])


def _individual(table: dict, individual: str | None, path) -> int:
    """The index of `individual` (default: the first) among a chain fit's individuals."""
    people = table["clusters"]
    who = people[0] if individual is None else str(individual)
    if who not in people:
        raise InputError(f"individual '{who}' is not in '{Path(path).name}' (its first: {', '.join(people[:5])})")
    return people.index(who)


def _chain_document(path: Path) -> dict:
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"fit file '{path}' cannot be read: {exc}") from None
    if doc.get("format") != FORMAT or "counts" not in doc.get("table", {}):
        raise InputError(f"fit file '{path}' is not a chain fit written by this version of ddpbayes fit")
    return doc


def _draw_indices(parameters: str, count: int, path: Path) -> np.ndarray:
    """Every draw ("mean") or draw K ("draw:K")."""
    if parameters == "mean":
        return np.arange(count)
    head, _, k = str(parameters).partition(":")
    if head == "draw" and k.isdigit() and int(k) < count:
        return np.array([int(k)])
    raise InputError(f"parameters must be 'mean' or 'draw:K' with K from 0 to {count - 1} (the posterior draws of "
                     f"'{path.name}'), got '{parameters}'")


@dataclass(frozen=True)
class FixedGraph:
    """A graph fit (DESIGN §9.7) with fixed parameters: `values` by their JSON names, the nodes'
    count `n`, the edges `pairs` (E, 2) rows, the box (lat_min, lat_max, lon_min, lon_max) and,
    for the near model, the bandwidth in km."""

    values: dict
    n: int
    pairs: np.ndarray
    box: tuple[float, float, float, float]
    bandwidth_km: float | None


def read_graph(path: str | Path, parameters: str = "mean") -> FixedGraph:
    """The graph fit stored at `path` with its parameters fixed at their posterior means ("mean")
    or at posterior draw K ("draw:K"); InputError when it cannot be read or is not a graph fit."""
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise InputError(f"fit file '{path}' cannot be read: {exc}") from None
    if doc.get("format") != FORMAT or doc.get("template") != "graph" or "pairs" not in doc.get("table", {}):
        raise InputError(f"fit file '{path}' is not a graph fit written by this version of ddpbayes fit")
    count = len(next(iter(doc["draws"].values())))
    pick = _draw_indices(parameters, count, path)
    values = {name: float(p["mean"]) for name, p in doc["parameters"].items()} if parameters == "mean" else \
        {name: float(v[pick[0]]) for name, v in doc["draws"].items()}
    data, table = doc["data"], doc["table"]
    box = (*data["box"]["lat"], *data["box"]["lon"])
    return FixedGraph(values, len(table["nodes"]), np.asarray(table["pairs"], dtype=np.int64).reshape(-1, 2),
                      tuple(float(v) for v in box), data.get("bandwidth_km"))
