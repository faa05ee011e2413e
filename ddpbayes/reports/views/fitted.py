"""What a report from a spec naming a fit computes (`reports.input.fitted_spec`, DESIGN §9.6): the fit
(or the one kept in the report's folder, when its key matches), then for the target each notion's
audit and calibration with the parameters set each way, classic DP's answer beside."""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ddpbayes.errors import InputError
from ddpbayes.mechanisms import Laplace
from ddpbayes.notions import notion
from ddpbayes.plausible import FittedAudit, FittedCalibration, audit_fitted, calibrate_fitted
from ddpbayes.reports.input.fitted_spec import CLUSTER_KNOWN, CLUSTER_QUERY, FittedSpec
from ddpbayes.reports.views.collect import Progress
from ddpbayes.settings import RunSettings

FIT_DIR = "fit"  # the report's folder keeps the fit here: MODEL.py, MODEL.fit.json and key.json
KEY = "key.json"


@dataclass
class Cell:
    """One (notion, parameters) of the report: its audit at the spec's scale, its calibration for
    the claim (None when not asked), the errors that stopped either, and the seconds each took."""

    notion: str
    parameters: str
    audit: FittedAudit | None = None
    calibration: FittedCalibration | None = None
    errors: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


@dataclass
class FittedView:
    spec: FittedSpec
    fit: dict  # MODEL.fit.json without its table and draws
    reused: bool
    model: Path
    query: str
    cluster: int  # the target's cluster (index in the fit's table)
    label: str  # its label in the data
    cluster_size: int
    cells: list[Cell]
    seconds: float

    def cell(self, name: str, parameters: str) -> Cell:
        return next(c for c in self.cells if c.notion == name and c.parameters == parameters)


def fitted_results(spec: FittedSpec, out: Path, tmp: Path, say: Progress, where: RunSettings) -> FittedView:
    """Fit (or reuse `out`'s kept fit) into `tmp`/fit, then audit and calibrate every cell."""
    start = time.perf_counter()
    model, reused = _fitted(spec, out, tmp / FIT_DIR, say, where.progress)
    doc = json.loads(model.with_suffix(".fit.json").read_text())
    cluster_index = np.asarray(doc["table"]["cluster_index"])
    given = () if spec.known in (None, CLUSTER_KNOWN) else spec.known
    if spec.target >= len(cluster_index) or any(k >= len(cluster_index) for k in given):
        raise InputError(f"{spec.path}: key 'target' or 'known' names a tuple past the fit's {len(cluster_index)} rows")
    cluster = int(cluster_index[spec.target])
    mates = [int(k) for k in np.flatnonzero(cluster_index == cluster) if k != spec.target]
    known_set = mates if spec.known == CLUSTER_KNOWN else None if spec.known is None else list(spec.known)
    query = cluster_query(spec.query, cluster_index == cluster, doc["data"].get("levels"), spec.path)
    settings = RunSettings.of(where, seed=spec.seed)
    cells = []
    for name in spec.notions:
        known = known_set if notion(name).lattice else None
        for mode in spec.parameters:
            cells.append(_cell(spec, model, query, name, mode, known, settings, say))
    fit = {k: v for k, v in doc.items() if k not in ("table", "draws")}
    return FittedView(spec, fit, reused, model, query, cluster, str(doc["table"]["clusters"][cluster]),
                      int((cluster_index == cluster).sum()), cells, time.perf_counter() - start)


def _fitted(spec: FittedSpec, out: Path, folder: Path, say: Progress, progress: bool) -> tuple[Path, bool]:
    """The model file in `folder`: `out`'s kept fit copied when its key matches, else a new fit."""
    from ddpbayes.fitting.run import fit

    key = spec.fit.key()
    name = f"{spec.path.stem}.py"
    kept = out / FIT_DIR
    if (kept / KEY).is_file() and json.loads((kept / KEY).read_text()) == key and (kept / name).is_file():
        say(f"reusing the fit in {kept} (same data sha256, template and options)")
        shutil.copytree(kept, folder)
        return folder / name, True
    folder.mkdir()
    say(f"fitting {spec.fit.data_ref} ({spec.fit.template})")
    r = spec.fit
    found = fit(r.data, r.template, out=folder / name, seed=r.seed, draws=r.draws, tune=r.tune, chains=r.chains,
                progress=progress, **r.options)
    if not found.converged:
        raise InputError(f"{spec.path}: the fit did not converge ({'; '.join(found.doc['diagnostics']['failures'])}): "
                         "no report")
    _portable(folder / name, spec.fit.data_ref)
    (folder / KEY).write_text(json.dumps(key, indent=2) + "\n")
    return folder / name, False


def _portable(model: Path, data_ref: str) -> None:
    """The kept fit without paths of the machine that wrote it, nor the whole posterior (netCDF, megabytes):
    MODEL.fit.json keeps every parameter draw, which is all the audits read."""
    path = model.with_suffix(".fit.json")
    doc = json.loads(path.read_text())
    posterior = Path(doc["posterior"])
    doc.update(model=model.name, posterior=None, seconds=None)
    doc["data"]["file"] = data_ref
    path.write_text(json.dumps(doc))
    posterior.unlink(missing_ok=True)


def cluster_query(spec_query: str, rows: np.ndarray, levels: list[str] | None, path: Path) -> str:
    """The query audited: the spec's, or the count of the target's cluster (`linear:` with 1 on its rows); on a
    categorical fit (its `levels`, model values 0..K-1) `cluster:L` is the count of level L there (`level:`)."""
    kind, sep, level = spec_query.partition(":")
    if kind != CLUSTER_QUERY:
        return spec_query
    ones = ",".join("1" if r else "0" for r in rows)
    if levels is None:
        if sep:
            raise InputError(f"{path}: key 'query' names a level ({spec_query!r}) but the fit's outcome is binary: "
                             "use 'cluster'")
        return f"linear:{ones}"
    if level.strip() not in levels:
        named = "names no level of" if sep else "needs a level of"
        raise InputError(f"{path}: key 'query' {spec_query!r} {named} the categorical outcome: use cluster:L, L one "
                         f"of {', '.join(levels)}")
    return f"level:{levels.index(level.strip())}:{ones}"


def _cell(spec: FittedSpec, model: Path, query: str, name: str, mode: str, known, settings: RunSettings,
          say: Progress) -> Cell:
    """The audit at the spec's scale and, when asked, the calibration for the claim; errors kept."""
    cell = Cell(name, mode)
    run = {"settings": settings, "targets": [spec.target], "known": known}
    say(f"{name} under {mode}: audit at scale {spec.scale:g}")
    start = time.perf_counter()
    try:
        cell.audit = audit_fitted(model, mode, query, Laplace(spec.scale), name, claim=spec.claim, information=None,
                                  **run)
    except Exception as exc:  # one cell's refusal (or an engine's bug) must not lose the others
        cell.errors["audit"] = _reason(exc)
    cell.seconds["audit"] = time.perf_counter() - start
    if name not in spec.calibrate:
        return cell
    say(f"{name} under {mode}: calibrating for epsilon = {spec.claim:g}")
    start = time.perf_counter()
    try:
        cell.calibration = calibrate_fitted(model, mode, query, name, spec.claim, **run)
    except Exception as exc:  # as the audit's
        cell.errors["calibration"] = _reason(exc)
    cell.seconds["calibration"] = time.perf_counter() - start
    return cell


def _reason(exc: Exception) -> str:
    """A refused cell's one-line reason; anything but bad input is an internal error, named as such."""
    if isinstance(exc, InputError):
        return str(exc)
    return f"internal error: {type(exc).__name__}: {exc} (a bug: rerun the cell's audit with --debug)"
