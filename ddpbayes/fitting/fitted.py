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
    count = len(draws["intercept"])
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
    who = people[0] if individual is None else str(individual)
    if who not in people:
        raise InputError(f"individual '{who}' is not in '{Path(path).name}' (its first: {', '.join(people[:5])})")
    i = people.index(who)
    kappa = np.asarray(draws["kappa"])[pick]
    m = np.array([[draws[f"m_{s}_{t}"] for t in states] for s in states]).transpose(2, 0, 1)[pick]
    counts = np.asarray(table["counts"], dtype=float).reshape(len(people), k, k)[i]
    alpha = kappa[:, None, None] * m + counts[None]
    init = np.array([draws[f"init_{s}"] for s in states]).T[pick]
    return init, alpha / alpha.sum(axis=-1, keepdims=True), int(table["lengths"][i])


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
