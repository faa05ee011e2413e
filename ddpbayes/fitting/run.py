"""`ddpbayes fit` and `ddpbayes.fit(...)` (DESIGN §9): read a table, fit a template with PyMC's
NUTS, check convergence and the dependence, write the model file (nothing when the fit fails,
unless `force`)."""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from time import perf_counter
import warnings
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddpbayes.encoding import jsonable
from ddpbayes.errors import InputError
from ddpbayes.fitting import checks as ppc
from ddpbayes.fitting import categorical, chain, clustered, gaussian, graph
from ddpbayes.fitting import regimes as chain_regimes
from ddpbayes.fitting.diagnostics import convergence, relative_ess
from ddpbayes.fitting.fitted import FORMAT
from ddpbayes.fitting.spatial import add_split
from ddpbayes.fitting.table import DEFAULT_MAX_ROWS
from ddpbayes.fitting.write import check_out, companions, write_fit
from ddpbayes.limits import check_memory, check_positive_int
from ddpbayes.progress import Progress


@dataclass(frozen=True)
class Template:
    """What `fit` asks of a template (DESIGN §9): `read(path, options, max_rows)` its view of the
    table (an object with `labels`, `covariates`, `parameter_names`, `variables`,
    `hyperparameters`, `cells_per_draw`, `describe`, `table`), `model(data, independent)` the PyMC
    model with or without its effects `u` (None: without them it has no free parameter, and it is
    not sampled), `draws(posterior, data, independent)` each parameter's
    draws, `checks(draws, draws_independent, u, data, reff, seed)` the `checks` block; the model
    file's text is the module's MODEL_FILE, or its `model_file(doc)` (write.py)."""

    read: Callable
    model: Callable
    draws: Callable
    checks: Callable


TEMPLATES = {
    "clustered": Template(categorical.read, categorical.pymc_model, categorical.hyperparameter_draws,
                          categorical.dependence_checks),  # a 0/1 outcome: clustered's; K > 2 levels: categorical's
    "gaussian": Template(gaussian.read, gaussian.pymc_model, gaussian.hyperparameter_draws, gaussian.dependence_checks),
    "chain": Template(chain.read, chain.pymc_model, chain.hyperparameter_draws, chain.dependence_checks),
    "graph": Template(graph.read, graph.pymc_model, graph.hyperparameter_draws, graph.dependence_checks),
}
HDI = 0.94
TARGET_ACCEPT = 0.8  # NUTS's target acceptance unless the template asks for another (PyMC's default)
DENSE_UP_TO = 200  # parameters up to which NUTS adapts a dense mass matrix (DESIGN §9.1: intercept vs effects)


@dataclass(frozen=True)
class Sampler:
    """NUTS settings: draws and tuning steps per chain, chains, seed."""

    draws: int = 1000
    tune: int = 1000
    chains: int = 4
    seed: int = 0

    def check(self) -> None:
        for name in ("draws", "chains"):
            check_positive_int(getattr(self, name), f"--{name}")
        if self.chains < 2:
            raise InputError(f"--chains must be at least 2: R-hat compares chains (DESIGN §9.2), got {self.chains}")
        if isinstance(self.tune, bool) or not isinstance(self.tune, int) or self.tune < 0:
            raise InputError(f"--tune must be a non-negative integer, got {self.tune}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < 2**32:
            raise InputError(f"--seed must be an integer from 0 to {2**32 - 1}, got {self.seed}")

    def seeds(self) -> list[int]:
        """Four independent seeds from one: the clustered fit, the independent fit, the checks, and a
        spatial fit's reference without the field (SeedSequence's states extend: the first three as before)."""
        return [int(s) for s in np.random.SeedSequence(self.seed).generate_state(4)]


@dataclass(frozen=True)
class FitResult:
    """A fit, as `fit` returns it.

    Parameters
    ----------
    doc : dict
        The fit's document: what MODEL.fit.json holds (docs/reference/json.md, `ddpbayes fit`).
    """

    doc: dict

    @property
    def converged(self) -> bool:
        """Whether every convergence check passed (`diagnostics.ok`)."""
        return self.doc["diagnostics"]["ok"]

    @property
    def model(self) -> str | None:
        """The model file written, or None."""
        return self.doc["model"]

    def to_dict(self) -> dict:
        """The document `ddpbayes fit --format json` prints.

        Returns
        -------
        dict
            The keys of docs/reference/json.md's `ddpbayes fit` section, without those of MODEL.fit.json only.
        """
        return {k: v for k, v in self.doc.items() if k not in ("table", "draws", "field", "format")}


def fit(data: str | Path, template: str = "clustered", *, cluster: str | Sequence[str] = (), outcome: str | None = None,
        covariates: str | Sequence[str] = (), coords: str | Sequence[str] = (), group: str | Sequence[str] = (),
        columns: str | Sequence[str] = (),
        domain: Sequence[float] | None = None, id: str | None = None, time: str | None = None,
        state: str | None = None, edges: str | Path | None = None, ends: str | Sequence[str] = (),
        regimes: int | None = None, model: str | None = None, box: Sequence[float] | None = None,
        drop_unknown: bool = False, ordered: bool = False,
        out: str | Path | None = None, seed: int = 0, draws: int = 1000,
        tune: int = 1000, chains: int = 4, force: bool = False, max_rows: int = DEFAULT_MAX_ROWS,
        progress: bool = False) -> FitResult:
    """Fit `template` to the table at `data` and, when it converged (or `force`), write the model
    file `out` with its posterior beside it (DESIGN §9).

    Parameters
    ----------
    data : str or Path
        A CSV file (or Parquet, with pyarrow installed), one record per row.
    template : str, default "clustered"
        The dependence template: "clustered" (binary records in clusters, a logit with a cluster
        effect, DESIGN §9.1; categorical records, §9.9) or "gaussian" (a continuous column in groups, a normal model with a
        group effect, DESIGN §9.4) or "chain" (per-individual sequences of a categorical state,
        Markov chains with a shared Dirichlet prior, DESIGN §9.5) or "graph" (a position per node
        of an edge list, the near-friend or the CAR model of friends' places, DESIGN §9.7).
    cluster : str or sequence of str
        clustered: the column(s) naming each row's cluster ("x,y": the pair identifies it).
    outcome : str
        clustered: the column of the records: binary (0/1), or 3 to 20 levels (text or integers, sorted, the
        first the reference: a baseline-category logit, DESIGN §9.9).
    covariates : str or sequence of str, default ()
        Numeric columns entering the linear predictor (standardised); gaussian also takes a text
        column of two values (coded 0/1).
    coords : str or sequence of str, default ()
        clustered: two numeric columns X,Y, each cluster's place: a spatial Gaussian process
        between the clusters (DESIGN §9.8), its length scale in their units.
    group : str or sequence of str
        gaussian: the column(s) naming each row's group.
    columns : str or sequence of str
        gaussian: the continuous column, or several fitted jointly (DESIGN §9.4b: each row a
        vector, the records its cells); graph: latitude and longitude (degrees).
    domain : (low, high) or None
        gaussian: every value's declared range; None: the data's range.
    id, time, state : str
        chain: the columns naming each row's individual, its time (ordering its rows) and its state;
        graph: `id` the column naming each node.
    regimes : int or None, default None
        chain: R >= 2 hidden regimes, one transition matrix each (a Markov-switching chain, DESIGN
        §9.5); None: the plain chain.
    edges : str, Path or None
        graph: the edge table (CSV or Parquet), one edge per row, undirected.
    ends : str or sequence of str, default ()
        graph: the edge table's two node columns (default: its first two).
    model : str or None
        graph: "near" (the default: geo/near.py's near-friend model) or "car" (geo/car.py's CAR).
    box : (lat_min, lat_max, lon_min, lon_max) or None
        graph: the box positions are normalised in (default: the nodes' bounding box + 0.5 degrees).
    drop_unknown : bool, default False
        graph: drop the edges naming a node not in the table (counted) instead of refusing them.
    ordered : bool, default False
        clustered: the outcome's levels are ordered: a cumulative logit with one effect per cluster (DESIGN §9.9).
    out : str, Path or None, default None
        The model file to write (MODEL.py; MODEL.fit.json and MODEL.posterior.nc beside it); None writes nothing.
    seed, draws, tune, chains : int
        NUTS: the seed (same seed, same document), draws and tuning steps per chain, chains.
    force : bool, default False
        Write the files even when the convergence checks fail.
    max_rows : int, default 1,000,000
        Refuse a larger table before reading it whole.
    progress : bool, default False
        Progress lines on stderr.

    Returns
    -------
    FitResult
        Its `to_dict()` holds `template`, `parameters`, `diagnostics`, `checks` and `model`.
    """
    start = perf_counter()
    if template not in TEMPLATES:
        raise InputError(f"unknown template '{template}' (templates: {', '.join(TEMPLATES)})")
    chosen = TEMPLATES[template]
    if regimes is not None and template != "chain":
        raise InputError(f"--regimes applies to the chain template, not {template}")
    sampler = Sampler(draws, tune, chains, seed)
    sampler.check()
    out = check_out(out) if out is not None else None
    options = {"cluster": _columns(cluster, "--cluster", empty=True), "outcome": outcome,
               "covariates": _columns(covariates, "--covariates", empty=True),
               "coords": _columns(coords, "--coords", empty=True),
               "group": _columns(group, "--group", empty=True), "columns": _columns(columns, "--columns", empty=True),
               "domain": domain, "id": id, "time": time, "state": state, "edges": edges, "regimes": regimes,
               "ends": _columns(ends, "--ends", empty=True), "model": model, "box": box, "drop_unknown": drop_unknown,
               "ordered": ordered}
    _say(progress, f"reading {data}")
    prepared = chosen.read(data, options, max_rows)
    _check_sizes(prepared, sampler)
    _say(progress, prepared.summary() if hasattr(prepared, "summary")
         else f"{len(prepared.cluster_index):,} rows in {len(prepared.labels):,} clusters")
    seeds = sampler.seeds()
    hidden = getattr(prepared, "regimes", 0)
    idata = _sample(chosen.model(prepared), sampler, seeds[0], f"fit: NUTS, {template}"
                    + (f" with {hidden} hidden regimes" if hidden else ""), progress,
                    dense_allowed=getattr(prepared, "dense_mass_matrix", True),
                    target_accept=getattr(prepared, "target_accept", TARGET_ACCEPT))
    if hidden:
        idata = chain_regimes.ordered(idata)
    spatial = getattr(prepared, "spatial", None)
    if spatial:
        add_split(idata, spatial, seeds[0])
    reference = chosen.model(prepared, independent=True)
    idata_ind = None if reference is None else _sample(reference, sampler, seeds[1],
                                                        "fit: NUTS, without cluster effects", progress)
    idata_plain = _sample(chosen.model(prepared.without_field()), sampler, seeds[3],
                          "fit: NUTS, without the spatial field", progress) if spatial else None
    idata_chain = _sample(chosen.model(prepared.without_regimes()), sampler, seeds[3],
                          "fit: NUTS, without hidden regimes", progress) if hidden else None
    _say(progress, "checks: posterior predictive and LOO")
    doc = _document(template, prepared, Path(data), idata, idata_ind, sampler, seeds[2])
    if spatial:
        _add_spatial(doc, prepared, idata, idata_plain, seeds[2])
    if hidden:
        _add_regimes(doc, prepared, idata, idata_chain, seeds[2])
    write = out is not None and (doc["diagnostics"]["ok"] or force)
    if write:
        doc["model"], doc["posterior"] = str(out), str(companions(out)[1])
    doc["seconds"] = perf_counter() - start
    doc = jsonable(doc)
    if write:
        write_fit(out, doc, idata)
    return FitResult(doc)


def _columns(value: str | Sequence[str], flag: str, empty: bool = False) -> list[str]:
    """'a,b' or ['a', 'b'] -> ['a', 'b'], no name twice."""
    names = [c.strip() for c in value.split(",")] if isinstance(value, str) else [str(c) for c in value]
    names = [c for c in names if c]
    if not names and not empty:
        raise InputError(f"{flag} names no column")
    if len(set(names)) != len(names):
        raise InputError(f"{flag} names a column twice: {','.join(names)}")
    return names


def _check_sizes(data, sampler: Sampler) -> None:
    """The posterior and the checks' tables fit in memory before sampling starts."""
    cells = sampler.draws * sampler.chains * data.cells_per_draw()
    check_memory(8 * cells, "the posterior draws and the checks' tables", flag="--draws")


def _say(progress: bool, line: str) -> None:
    if progress:
        print(f"ddpbayes: {line}", file=sys.stderr, flush=True)


@contextmanager
def _quiet_pymc():
    """PyMC's own log lines off (the progress lines say what runs)."""
    logger = logging.getLogger("pymc")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _sample(model, sampler: Sampler, seed: int, label: str, progress: bool, dense_allowed: bool = True,
            target_accept: float = TARGET_ACCEPT):
    """NUTS on `model`, PyMC's own sampler, chains on up to as many cores as there are; a dense mass
    matrix while the model has at most DENSE_UP_TO parameters (its cost grows as their square) and the
    template allows it (`dense_allowed`); NUTS's step size adapted to `target_accept` (the template's, else PyMC's 0.8).
    BLAS on one thread (the forked chains inherit it): a chain is one core's work, and OpenBLAS's
    threads on a busy machine made the spatial GP's 65 x 65 triangular solves 100 times slower
    (23 ms against 0.2 ms, DESIGN §9.8)."""
    import pymc as pm
    from threadpoolctl import threadpool_limits

    total = sampler.chains * (sampler.tune + sampler.draws)
    dense = dense_allowed and sum(int(np.prod(v.shape.eval())) for v in model.free_RVs) <= DENSE_UP_TO
    with Progress(label, total, "iterations", enabled=progress) as bar, _quiet_pymc(), warnings.catch_warnings(), \
            threadpool_limits(limits=1, user_api="blas"):
        warnings.filterwarnings("ignore", message=".*experimental feature.*")  # PyMC's word on its dense adaptation
        return pm.sample(draws=sampler.draws, tune=sampler.tune, chains=sampler.chains,
                         init="jitter+adapt_full" if dense else "jitter+adapt_diag", target_accept=target_accept,
                         cores=min(sampler.chains, os.cpu_count() or 1), random_seed=seed, progressbar=False,
                         compute_convergence_checks=False, callback=lambda trace, draw: bar.advance(1), model=model)


def _document(template: str, data, path: Path, idata, idata_ind, sampler: Sampler, seed: int) -> dict:
    """The fit's document: what `--format json` prints, and what MODEL.fit.json holds besides
    (`table`, `draws`)."""
    import pymc as pm

    chosen = TEMPLATES[template]
    draws = chosen.draws(idata.posterior, data)
    draws_ind = chosen.draws(None if idata_ind is None else idata_ind.posterior, data, independent=True)
    u = categorical.cluster_effects(idata, data)
    names = data.parameter_names()
    reff = (relative_ess(idata, data.hyperparameters()),
            1.0 if idata_ind is None else relative_ess(idata_ind, data.hyperparameters(True)))
    return {
        "format": FORMAT,
        "template": template,
        "parameters": {name: _summary(draws[name]) for name in names},
        "diagnostics": convergence(idata, idata_ind, data),
        "checks": chosen.checks(draws, draws_ind, u, data, reff, seed),
        "model": None,
        "posterior": None,
        "data": {"file": str(path), "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                 "rows": len(data.cluster_index)} | data.describe(),
        "sampler": {"method": "NUTS", "draws": sampler.draws, "tune": sampler.tune, "chains": sampler.chains,
                    "seed": sampler.seed, "pymc": pm.__version__},
        "table": data.table(),
        "draws": {name: draws[name].tolist() for name in names},
    }


def _flat_draws(values: np.ndarray) -> np.ndarray:
    """(chain, draw, ...) -> (chain x draw, ...), chains in order: (D, clusters), or (D, groups, columns)."""
    return values.reshape(-1, *values.shape[2:])


def _add_spatial(doc: dict, data, idata, idata_plain, seed: int) -> None:
    """A spatial fit's additions to its document (DESIGN §9.8): the field at the clusters (`field`,
    MODEL.fit.json only), the convergence of the fit without the field, the spatial checks."""
    plain = data.without_field()
    draws = clustered.hyperparameter_draws(idata.posterior, data)
    draws_plain = clustered.hyperparameter_draws(idata_plain.posterior, plain)
    k = len(data.labels)
    u, u_plain = (i.posterior["u"].values.reshape(-1, k) for i in (idata, idata_plain))
    reff = (relative_ess(idata, data.hyperparameters()), relative_ess(idata_plain, plain.hyperparameters()))
    doc["field"] = {"mean": draws["f"].mean(axis=0).tolist(), "draws": draws["f"].tolist()}
    failures = [f"without the spatial field, {f}" for f in convergence(idata_plain, None, plain)["failures"]]
    doc["diagnostics"]["failures"] += failures
    doc["diagnostics"]["ok"] = not doc["diagnostics"]["failures"]
    doc["checks"] |= ppc.spatial_checks(draws, draws_plain, u, u_plain, data, reff, seed)


def _add_regimes(doc: dict, data, idata, idata_chain, seed: int) -> None:
    """A regime fit's additions (DESIGN §9.5): the convergence of the plain chain fit it is compared
    with, and the regime checks (windows of the stay share, LOO against the plain chain)."""
    plain = data.without_regimes()
    draws = chain_regimes.hyperparameter_draws(idata.posterior, data)
    draws_chain = chain.hyperparameter_draws(idata_chain.posterior, plain)
    reff = (relative_ess(idata, data.hyperparameters()), relative_ess(idata_chain, plain.hyperparameters()))
    doc["diagnostics"]["failures"] += [f"without hidden regimes, {f}"
                                       for f in convergence(idata_chain, None, plain)["failures"]]
    doc["diagnostics"]["ok"] = not doc["diagnostics"]["failures"]
    doc["checks"] |= chain_regimes.regime_checks(draws, draws_chain, data, reff, seed)


def _summary(values: np.ndarray) -> dict:
    """A parameter's posterior mean, SD and 94% HDI."""
    import arviz as az

    low, high = az.hdi(values, hdi_prob=HDI)
    return {"mean": float(values.mean()), "sd": float(values.std(ddof=1)), "hdi": [float(low), float(high)]}
