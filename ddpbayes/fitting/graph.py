"""The `graph` template (DESIGN §9.7): a position per node of an edge list (Gowalla's users and
friendships), fitted with one of the project's two models of friends' places, through their own
code in geo/:

- `near` (geo/near.py, geo/near_pymc.py, DESIGN §6.1): a user lives where people live (a KDE of
  the others, bandwidth h fixed at its leave-one-out ML value) or near a friend at one of two
  scales; a pseudo-likelihood of the conditionals p(x_i | x_-i) (Besag 1975). Without
  dependence: every user where people live, w_0 = 1, which has no free parameter;
- `car` (geo/car.py, DESIGN §6): a proper CAR per normalised coordinate on the graph, alpha
  shared. Without dependence: every coordinate N(mu_c, sigma_c), independently.

Checks: conditional predictive replications (each user with friends redrawn from p(x_i | x_-i)
given everyone else's observed position) of the friends' correlation and of the share of
friendships within NEAR_KM; LOO of the conditionals (Bürkner, Gabry & Vehtari 2021's
non-factorised LOO: the pointwise term is log p(x_i | x_-i, theta))."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
from scipy import sparse

from ddpbayes.errors import InputError
from ddpbayes.fitting import checks as ppc
from ddpbayes.fitting.table import columns_of, read_table
from ddpbayes.geo import car, near, near_pymc
from ddpbayes.geo.data import Box, Locations, box_of
from ddpbayes.limits import check_memory

NEAR_KM = 25.0  # friends "within reach": the share of friendships whose ends lie this close
CHECK_DRAWS = 400  # posterior draws the checks replicate and LOO weighs (evenly thinned)
CHUNK = 1 << 21  # cells (redrawn users x others) weighed at once


@dataclass(frozen=True)
class GraphData:
    """Nodes in the file's order with their positions (degrees) in `box`, and the undirected
    edges as pairs of rows (each once; `duplicates` repeated or reversed rows of the edge file,
    `dropped` edges naming an unknown node, dropped on request); `kind` the model fitted."""

    nodes_file: str
    edges_file: str
    id_column: str
    columns: tuple[str, str]
    ends: tuple[str, str]
    ids: tuple[str, ...]
    lat: np.ndarray
    lon: np.ndarray
    pairs: np.ndarray  # (E, 2) rows, a < b
    box: Box
    kind: GraphModel
    duplicates: int
    dropped: int

    @property
    def labels(self) -> tuple[str, ...]:
        return self.ids

    @property
    def cluster_index(self) -> np.ndarray:
        """Each row is its own node (run.py counts the rows by it)."""
        return np.arange(len(self.ids))

    @cached_property
    def km(self) -> np.ndarray:
        """(n, 2) positions in km on the box's plane (`near.plane_km`)."""
        return near.plane_km(self.lat, self.lon, self.box)

    @cached_property
    def adjacency(self) -> sparse.csr_matrix:
        return car.adjacency(len(self.ids), self.pairs)

    @cached_property
    def degree(self) -> np.ndarray:
        return np.asarray(self.adjacency.sum(axis=1)).ravel().astype(np.int64)

    @cached_property
    def directed(self) -> tuple[np.ndarray, np.ndarray]:
        """Both orientations of every edge: (i, f) arrays."""
        a, b = self.pairs[:, 0], self.pairs[:, 1]
        return np.concatenate([a, b]), np.concatenate([b, a])

    @cached_property
    def bandwidth_km(self) -> float:
        """The population's leave-one-out ML bandwidth (km), fixed in the near model (`near.population_bandwidth`)."""
        return near.population_bandwidth(self.km)

    @cached_property
    def near_constants(self) -> near_pymc.NearData:
        """The near model's pseudo-likelihood constants, built once per table."""
        return near_pymc.near_data(self.km, self.pairs, self.bandwidth_km)

    def summary(self) -> str:
        return f"{len(self.ids):,} nodes, {len(self.pairs):,} edges ({self.kind.name} model)"

    def parameter_names(self, independent: bool = False) -> list[str]:
        return self.kind.parameter_names(independent)

    def variables(self, independent: bool = False) -> list[str]:
        return self.kind.variables(independent)

    def hyperparameters(self, independent: bool = False) -> list[str]:
        return self.kind.variables(independent)

    def element_names(self, variable: str) -> list[str]:
        return self.kind.element_names(variable)

    def cells_per_draw(self) -> int:
        """Numbers kept per posterior draw: parameters, a replicated position per node, LOO's terms."""
        return 8 + 4 * len(self.ids)

    def describe(self) -> dict:
        """The `data` block's template part."""
        return {"graph_model": self.kind.name, "id": self.id_column, "columns": list(self.columns),
                "edges_file": self.edges_file, "ends": list(self.ends), "nodes": len(self.ids),
                "edges": len(self.pairs), "edges_duplicate": self.duplicates, "edges_dropped": self.dropped,
                "nodes_with_edges": int((self.degree > 0).sum()),
                "box": {"lat": list(self.box.lat), "lon": list(self.box.lon)}} | self.kind.describe(self)

    def table(self) -> dict:
        """What the model file needs: the nodes' ids and the edges (pairs of rows, flattened)."""
        return {"nodes": list(self.ids), "pairs": self.pairs.ravel().tolist()}


def read(path: str | Path, options: dict, max_rows: int) -> GraphData:
    """The template's view of the node table at `path` and the edge table `options["edges"]`:
    `id` the node column, `columns` (latitude, longitude in degrees), `ends` the edge table's two
    node columns (default its first two), `model` near or car, `box` (default the nodes' bounding
    box widened by 0.5 degrees), `drop_unknown` (drop, not refuse, edges naming an unknown node)."""
    kind = _kind(options.get("model"))
    ident, columns, edges = options.get("id"), options["columns"], options.get("edges")
    if not ident or edges is None:
        raise InputError("the graph template needs --id COL (each node's name) and --edges EDGES.csv")
    if len(columns) != 2:
        raise InputError(f"the graph template takes two columns in --columns: latitude and longitude in degrees, "
                         f"got {len(columns)}")
    nodes = read_table(path, [ident], columns, max_rows)
    ids = nodes[ident].str.strip()
    repeated = ids[ids.duplicated()]
    if len(repeated):
        raise InputError(f"node '{repeated.iloc[0]}' has two rows in '{path}' (column '{ident}')")
    lat, lon = (nodes[c].to_numpy(dtype=float) for c in columns)
    box = _box(options.get("box"), lat, lon, columns, path)
    ends = _ends(edges, options.get("ends") or [])
    table = read_table(edges, ends, [], max_rows)
    pairs, duplicates, dropped = _pairs(table, ends, {v: k for k, v in enumerate(ids)}, edges,
                                        bool(options.get("drop_unknown")))
    data = GraphData(str(path), str(edges), ident, tuple(columns), tuple(ends), tuple(ids), lat, lon, pairs, box,
                     kind, duplicates, dropped)
    kind.check(data)
    return data


def _kind(name) -> GraphModel:
    name = "near" if name is None else name
    if name not in MODELS:
        raise InputError(f"--model must be one of {', '.join(MODELS)} for the graph template, got '{name}'")
    return MODELS[name]


def _box(box, lat: np.ndarray, lon: np.ndarray, columns, path) -> Box:
    """`box` (a Box or LAT_MIN,LAT_MAX,LON_MIN,LON_MAX), else the positions' bounding box + 0.5
    degrees; every position must be a latitude and longitude inside it."""
    if np.abs(lat).max() > 90 or np.abs(lon).max() > 180:
        raise InputError(f"columns '{columns[0]}', '{columns[1]}' of '{path}' must be latitude and longitude in "
                         f"degrees (|lat| <= 90, |lon| <= 180), in that order")
    if box is None:
        return box_of(Locations(np.arange(len(lat)), lat, lon))
    if not isinstance(box, Box):
        values = [float(v) for v in box]
        if len(values) != 4:
            raise InputError(f"--box takes LAT_MIN,LAT_MAX,LON_MIN,LON_MAX, got {len(values)} numbers")
        box = Box(lat=tuple(values[:2]), lon=tuple(values[2:]))
    outside = np.flatnonzero(~box.contains(lat, lon))
    if outside.size:
        raise InputError(f"{outside.size:,} position(s) of '{path}' lie outside the box {box}, the first in data row "
                         f"{outside[0] + 1}")
    return box


def _ends(edges, ends: list[str]) -> list[str]:
    """The edge table's two node columns: `ends`, else its first two."""
    if ends:
        if len(ends) != 2:
            raise InputError(f"--ends names the edge table's two node columns, got {len(ends)}")
        return ends
    header = columns_of(edges)
    if len(header) < 2:
        raise InputError(f"edge file '{edges}' needs two columns (the ends of each edge), it has {len(header)}")
    return [str(c) for c in header[:2]]


def _pairs(table, ends, row_of: dict[str, int], path, drop_unknown: bool) -> tuple[np.ndarray, int, int]:
    """The edges as sorted pairs of rows, each once: (pairs, repeated rows, dropped rows). An end
    naming no node is refused (or dropped), a self-loop refused, no edge left refused."""
    a, b = (table[c].str.strip().map(row_of) for c in ends)
    unknown = np.flatnonzero((a.isna() | b.isna()).to_numpy())
    if unknown.size and not drop_unknown:
        row = unknown[0]
        name = table[ends[0]].iloc[row] if np.isnan(a.iloc[row]) else table[ends[1]].iloc[row]
        raise InputError(f"edge in data row {row + 1} of '{path}' names node '{name}', not in the node table "
                         f"({unknown.size:,} such edges; --drop-unknown drops them)")
    keep = (a.notna() & b.notna()).to_numpy()
    a, b = a.to_numpy()[keep].astype(np.int64), b.to_numpy()[keep].astype(np.int64)
    loops = np.flatnonzero(a == b)
    if loops.size:
        raise InputError(f"edge file '{path}' joins node '{table[ends[0]].to_numpy()[keep][loops[0]]}' to itself "
                         f"({loops.size:,} self-loops): a node is not its own neighbour")
    pairs = np.unique(np.column_stack([np.minimum(a, b), np.maximum(a, b)]).reshape(-1, 2), axis=0)
    if len(pairs) == 0:
        raise InputError(f"no edge of '{path}' joins two nodes of the node table: nothing says how nodes depend")
    return pairs, int(keep.sum() - len(pairs)), int((~keep).sum())


def pymc_model(data: GraphData, independent: bool = False):
    """The chosen model as a PyMC model (None: the template without dependence has no free parameter)."""
    return data.kind.pymc_model(data, independent)


def hyperparameter_draws(posterior, data: GraphData, independent: bool = False) -> dict[str, np.ndarray]:
    """Each named parameter's draws, chains flattened (chain-major), keyed as the JSON names them."""
    if posterior is None:
        return {}
    out = {}
    for variable in data.kind.variables(independent):
        values = posterior[variable].values
        values = values.reshape(values.shape[0] * values.shape[1], -1)
        out |= {name: values[:, j] for j, name in enumerate(data.kind.element_names(variable))}
    return out


class GraphModel:
    """What the template asks of a graph model (`near`, `car`): `parameter_names`, `variables` and
    `element_names` (as a template's data, run.py), `pymc_model(data, independent)`,
    `replicate(draws, data, pick, rng, independent)` the users with friends redrawn from their
    conditionals (D, T, 2) km, `pointwise(draws, data, pick, independent)` LOO's terms."""

    name: str

    def check(self, data: GraphData) -> None:
        """Refuse what the model cannot fit (one line)."""

    def describe(self, data: GraphData) -> dict:
        return {}


class NearModel(GraphModel):
    """geo/near.py's model; h fixed at the leave-one-out ML bandwidth (DESIGN §6.1)."""

    name = "near"
    scales = near_pymc.SCALES

    def check(self, data: GraphData) -> None:
        n = len(data.ids)
        if n < 3:
            raise InputError(f"the near model needs at least 3 nodes (a population besides a user and her friend), "
                             f"got {n}")
        check_memory(8 * 3 * n * n, f"the near model's distances between {n:,} nodes", flag="--max-rows")

    def parameter_names(self, independent: bool = False) -> list[str]:
        return [] if independent else [*self.element_names("w"), *self.element_names("sigma")]

    def variables(self, independent: bool = False) -> list[str]:
        return [] if independent else ["w", "sigma"]

    def element_names(self, variable: str) -> list[str]:
        if variable == "w":
            return ["w_population", *(f"w_{s + 1}" for s in range(self.scales))]
        return [f"sigma_{s + 1}_km" for s in range(self.scales)]

    def describe(self, data: GraphData) -> dict:
        return {"bandwidth_km": data.bandwidth_km}

    def pymc_model(self, data: GraphData, independent: bool):
        return None if independent else near_pymc.pymc_model(data.near_constants, self.scales)

    def replicate(self, draws: dict, data: GraphData, pick: np.ndarray, rng, independent: bool) -> np.ndarray:
        """(D, T, 2) km: each user with friends redrawn from p(x_i | x_-i) per draw (independent:
        w_0 = 1, every user where people live)."""
        constants, h = data.near_constants, data.bandwidth_km
        targets = constants.targets
        degree = data.degree[targets]
        start = np.concatenate([[0], np.cumsum(degree)])  # the targets' edges are consecutive (near_data's order)
        if independent:
            weights, sigma = np.eye(self.scales + 1)[[0] * len(pick)], np.ones((len(pick), self.scales))
        else:
            weights = np.column_stack([draws[name][pick] for name in self.element_names("w")])
            sigma = np.column_stack([draws[name][pick] for name in self.element_names("sigma")])
        cumulative = np.cumsum(weights / weights.sum(axis=1, keepdims=True), axis=1)
        comp = (rng.random((len(pick), len(targets)))[..., None] > cumulative[:, None, :-1]).sum(axis=-1)
        out = _population_draws(data.km, np.broadcast_to(targets, comp.shape), h, rng)
        draw, slot = np.nonzero(comp > 0)
        step = max(1, CHUNK // len(data.km))
        for at in range(0, len(draw), step):
            d, t = draw[at:at + step], slot[at:at + step]
            out[d, t] = _near_draws(data.km, targets[t], start[t], degree[t], constants.edge_friend,
                                    sigma[d, comp[d, t] - 1], h, rng)
        return out

    def pointwise(self, draws: dict, data: GraphData, pick: np.ndarray, independent: bool) -> np.ndarray:
        """(D, T) log p(x_i | x_-i) of the users with friends (independent: log p(x_i), one row)."""
        constants = data.near_constants
        order = constants.bucket_order
        if independent:
            return constants.log_pop[order][None, :]
        function = near_pymc.target_loglik_function(constants, self.scales)
        w = np.column_stack([draws[name][pick] for name in self.element_names("w")])
        sigma = np.column_stack([draws[name][pick] for name in self.element_names("sigma")])
        return np.array([function(w[k], sigma[k]) for k in range(len(pick))])


class CarModel(GraphModel):
    """geo/car.py's proper CAR on the positions normalised in the box (DESIGN §6)."""

    name = "car"

    def parameter_names(self, independent: bool = False) -> list[str]:
        names = [*self.element_names("mu"), *self.element_names("tau")]
        return names if independent else ["alpha", *names]

    def variables(self, independent: bool = False) -> list[str]:
        return ["mu", "tau"] if independent else ["alpha", "mu", "tau"]

    def element_names(self, variable: str) -> list[str]:
        return [f"{variable}_x", f"{variable}_y"] if variable in ("mu", "tau") else [variable]

    def pymc_model(self, data: GraphData, independent: bool):
        x, y = data.box.normalise(data.lat, data.lon)
        return car.pymc_model(x, y, data.adjacency, independent)

    def _conditional(self, draws: dict, data: GraphData, pick: np.ndarray, independent: bool):
        """Per draw and node, each coordinate's conditional mean and SD (D, n, 2) given the others."""
        xy = np.column_stack(data.box.normalise(data.lat, data.lon))
        mu = np.stack([draws["mu_x"][pick], draws["mu_y"][pick]], axis=-1)[:, None, :]
        tau = np.stack([draws["tau_x"][pick], draws["tau_y"][pick]], axis=-1)[:, None, :]
        if independent:
            return mu + np.zeros((1, len(xy), 1)), 1.0 / np.sqrt(tau) + np.zeros((1, len(xy), 1))
        degree = data.degree
        linked = degree > 0
        friends_mean = (data.adjacency @ xy) / np.where(linked, degree, 1.0)[:, None]
        alpha = draws["alpha"][pick][:, None, None]
        mean = np.where(linked[None, :, None], mu + alpha * (friends_mean[None] - mu), mu)
        return mean, 1.0 / np.sqrt(tau * np.where(linked, degree, 1.0)[None, :, None])

    def replicate(self, draws: dict, data: GraphData, pick: np.ndarray, rng, independent: bool) -> np.ndarray:
        """(D, T, 2) km: each user with friends redrawn from its conditional (independent: from N(mu, sigma))."""
        targets = np.flatnonzero(data.degree > 0)
        mean, sd = self._conditional(draws, data, pick, independent)
        xy = mean[:, targets] + sd[:, targets] * rng.normal(size=(len(pick), len(targets), 2))
        lat, lon = data.box.denormalise(xy[..., 0], xy[..., 1])
        return near.plane_km(lat.ravel(), lon.ravel(), data.box).reshape(len(pick), len(targets), 2)

    def pointwise(self, draws: dict, data: GraphData, pick: np.ndarray, independent: bool) -> np.ndarray:
        """(D, n) log p(x_i | x_-i) of every node, both coordinates (independent: log N(x_i; mu, sigma))."""
        xy = np.column_stack(data.box.normalise(data.lat, data.lon))
        mean, sd = self._conditional(draws, data, pick, independent)
        z = (xy[None] - mean) / sd
        return (-0.5 * z**2 - np.log(sd) - 0.5 * math.log(2 * math.pi)).sum(axis=-1)


MODELS = {"near": NearModel(), "car": CarModel()}


def _population_draws(km: np.ndarray, targets: np.ndarray, h: float, rng) -> np.ndarray:
    """x ~ p, the KDE of each target's others (any shape of targets): a uniform other k plus N(0, h² I)."""
    k = rng.integers(len(km) - 1, size=targets.shape)
    k = k + (k >= targets)  # skips the target itself
    return km[k] + rng.normal(0.0, h, (*targets.shape, 2))


def _near_draws(km: np.ndarray, targets: np.ndarray, first: np.ndarray, degree: np.ndarray, friend: np.ndarray,
                sigma: np.ndarray, h: float, rng) -> np.ndarray:
    """x ∝ p(x) N(x; x_f, σ² I) per target (σ per target), f a uniform friend of it
    (near.sample_conditional's mixture: other k with weight ∝ N(x_f; x_k, (σ² + h²) I), then the
    Gaussian product); each target's friends are friend[first : first + degree]."""
    f = friend[first + (rng.random(len(targets)) * degree).astype(np.int64)]
    v = sigma * sigma + h * h
    log_w = -((km[f][:, None, :] - km[None, :, :]) ** 2).sum(axis=-1) / (2 * v[:, None])
    log_w[np.arange(len(targets)), targets] = -np.inf  # the population is the target's others
    k = np.argmax(log_w + rng.gumbel(size=log_w.shape), axis=1)
    mean = (sigma[:, None] ** 2 * km[k] + h * h * km[f]) / v[:, None]
    return mean + rng.normal(0.0, 1.0, (len(targets), 2)) * (sigma * h / np.sqrt(v))[:, None]


def neighbour_statistics(positions: np.ndarray, data: GraphData, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Over the friendships (both orientations, i a user with friends whose position is
    `positions` (..., T, 2) km, f at its observed one): the Pearson correlation of the two ends'
    coordinates (mean of east and north) and the share within NEAR_KM."""
    i, f = data.directed
    slot = np.searchsorted(targets, i)
    a, b = positions[..., slot, :], data.km[f]
    a_c, b_c = a - a.mean(axis=-2, keepdims=True), b - b.mean(axis=0)
    corr = (a_c * b_c).sum(axis=-2) / np.sqrt((a_c**2).sum(axis=-2) * (b_c**2).sum(axis=0))
    within = (((a - b) ** 2).sum(axis=-1) <= NEAR_KM**2).mean(axis=-1)
    return corr.mean(axis=-1), within


def dependence_checks(fitted: dict[str, np.ndarray], independent: dict[str, np.ndarray], u, data: GraphData,
                      reff: tuple[float, float], seed: int, max_draws: int = CHECK_DRAWS) -> dict:
    """The `checks` block (DESIGN §9.7): the friends' correlation and the share of friendships
    within NEAR_KM against conditional replications under the model and without dependence; LOO
    of the conditionals of both; whether the data support the dependence (as §9.2's, on the share)."""
    rng = np.random.default_rng(seed)
    kind = data.kind
    draws = len(next(iter(fitted.values())))
    pick = np.unique(np.linspace(0, draws - 1, min(max_draws, draws)).astype(int))
    targets = np.flatnonzero(data.degree > 0)
    check_memory(8 * 6 * len(pick) * len(data.ids), "the checks' replicated positions", flag="--draws")
    observed = neighbour_statistics(data.km[targets], data, targets)
    under_model = neighbour_statistics(kind.replicate(fitted, data, pick, rng, False), data, targets)
    without = neighbour_statistics(kind.replicate(independent, data, pick, rng, True),
                                   data, targets)
    checks = {"draws": int(len(pick)), "near_km": NEAR_KM}
    for name, k in (("neighbour_correlation", 0), ("friends_within_km", 1)):
        checks[name] = ppc.compare(float(observed[k]), under_model[k]) | \
            {"independent": ppc.short(ppc.compare(float(observed[k]), without[k]))}
    ll = kind.pointwise(fitted, data, pick, False)
    ll_i = kind.pointwise(independent, data, pick, True)
    checks["loo"] = _loo(ll, ll_i, reff)
    checks["dependence_supported"] = ppc.supported(checks, "friends_within_km")
    return checks


def _loo(ll: np.ndarray, ll_i: np.ndarray, reff: tuple[float, float]) -> dict:
    """PSIS-LOO of the model against the template without dependence; a reference without free
    parameters (one row of log-densities) is its own leave-one-out predictive, no weighting."""
    ones = np.ones(ll.shape[1])
    if len(ll_i) > 1:
        return ppc.compare_loo(ll, ll_i, ones, reff)
    c = ppc.psis_loo(ll, ones, reff[0])
    diff = c["pointwise"] - ll_i[0]
    return {"elpd": c["elpd"], "se": c["se"], "elpd_independent": float(ll_i[0].sum()),
            "se_independent": _sum_se(ll_i[0]), "elpd_diff": float(diff.sum()), "se_diff": _sum_se(diff),
            "pareto_k_max": c["pareto_k_max"],
            "pareto_k_over_0_7": c["pareto_k_over_0_7"]}


def _sum_se(values: np.ndarray) -> float:
    """The standard error of a sum of pointwise values, sqrt(N var), as ArviZ's."""
    return float(np.sqrt(len(values) * values.var()))


def model_file(doc: dict) -> tuple[str, dict]:
    """The model file's text (its model's) and its own fields, for write.model_text."""
    data = doc["data"]
    box = Box(lat=tuple(data["box"]["lat"]), lon=tuple(data["box"]["lon"]))
    fields = {"edges_file": Path(data["edges_file"]).name, "edges": data["edges"],
              "columns": ", ".join(data["columns"]), "box": str(box), "scales": near_pymc.SCALES}
    return (CAR_FILE if data["graph_model"] == "car" else NEAR_FILE), fields


CAR_FILE = '''"""A CAR model of positions on a graph, fitted by `ddpbayes fit` from {data} and {edges_file}
(DESIGN §9.7, §6).

{rows:,} nodes' positions ({columns}) normalised in the box {box} (x from longitude, y
from latitude), {edges:,} edges. Each coordinate is a proper CAR on the graph, precision
tau_c (D - alpha W); a node without edges is N(mu_c, 1 / tau_c). Posterior means: {means}.

The tuples: one pm.CAR "pos" of length 2n, pos[k] node k's x and pos[n + k] its y (node k: data
row k), domain [0, 1] per coordinate. build(parameters="mean") fixes the parameters at their
posterior means, "draw:K" at posterior draw K (0 to {last_draw}, chains in order). The fit, its
checks and the draws: {fit_name}; the whole posterior (ArviZ InferenceData): {posterior_name}.
`ddpbayes audit {model_name} ...` audits it (the gaussian engine reads it exactly). Do not draw
from it with pm.draw: PyMC 5.28's CAR sampler draws with covariance Q^-2.
"""

from pathlib import Path

import numpy as np
import pymc as pm

from ddpbayes import DependenceModel, Interval
from ddpbayes.fitting.fitted import read_graph
from ddpbayes.geo.car import adjacency, car_vector_weights

FIT = Path(__file__).with_name("{fit_name}")


def build(parameters: str = "mean") -> DependenceModel:
    fit = read_graph(FIT, parameters)
    p = fit.values
    weights = car_vector_weights(adjacency(fit.n, fit.pairs), p["alpha"], (p["tau_x"], p["tau_y"]))
    with pm.Model() as m:
        pm.CAR("pos", mu=np.repeat([p["mu_x"], p["mu_y"]], fit.n), W=weights, alpha=p["alpha"], tau=1.0)
    return DependenceModel(m, tuples="pos", domains=Interval(0.0, 1.0))
'''

NEAR_FILE = '''"""A near-friend model of positions on a graph, fitted by `ddpbayes fit` from {data} and
{edges_file} (DESIGN §9.7, §6.1).

{rows:,} nodes' positions ({columns}) in km on the plane of the box {box}, {edges:,} edges. A
node with neighbours lives where people live (a KDE of the others) or near a neighbour at one of
{scales} scales: p(x_i | x_-i), fitted as a pseudo-likelihood. Posterior means: {means}.

It is a set of conditionals, not one joint law: build() refuses (the audit engines read joint
laws); near_fit(parameters="mean") gives its ddpbayes.geo.near.NearFit (posterior means, or
"draw:K", K from 0 to {last_draw}), the model of `ddpbayes attack`'s dependent adversary and of
geo.ego's ego networks. The fit, its checks and the draws: {fit_name}; the whole posterior:
{posterior_name}.
"""

from pathlib import Path

from ddpbayes.errors import InputError
from ddpbayes.fitting.fitted import read_graph
from ddpbayes.geo.data import Box
from ddpbayes.geo.near import NearFit

FIT = Path(__file__).with_name("{fit_name}")
SCALES = {scales}


def near_fit(parameters: str = "mean") -> NearFit:
    fit = read_graph(FIT, parameters)
    p = fit.values
    weights = [p["w_population"], *(p[f"w_{{s}}"] for s in range(1, SCALES + 1))]
    return NearFit(Box(lat=fit.box[:2], lon=fit.box[2:]), fit.bandwidth_km, tuple(w / sum(weights) for w in weights),
                   tuple(p[f"sigma_{{s}}_km"] for s in range(1, SCALES + 1)))


def build(parameters: str = "mean"):
    raise InputError("{model_name} is the near-friend model, a set of conditionals fitted as a pseudo-likelihood, "
                     "not a joint law the audit engines read: use near_fit() (ddpbayes.geo.near.NearFit)")
'''
