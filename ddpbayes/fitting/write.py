"""Writing a fit (DESIGN §9.3): the model file MODEL.py, MODEL.fit.json beside it (the document,
the table's cluster index and standardised covariates, the parameters' draws) and
MODEL.posterior.nc (ArviZ InferenceData, netCDF via h5netcdf). Files are written in a scratch
folder beside them and moved into place, the model file last: never a half-written file."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from ddpbayes.errors import InputError

MODEL_FILE = '''"""A clustered dependence model fitted by `ddpbayes fit` from {data} (DESIGN §9.1).

{rows:,} records (tuple k is data row k: the vector variable "y") in {clusters:,} clusters of
{cluster}; outcome {outcome}{covariate_text}. The template: y_r ~ Bernoulli(logit^-1(intercept +
x_r . beta + u_c(r))), the cluster effects u_c ~ Normal(0, sigma) latent, x_r the covariates
standardised as in the fit. Posterior means: {means}.

build(parameters="mean") fixes the parameters at their posterior means, "draw:K" at posterior
draw K (0 to {last_draw}, chains in order). The fit, its checks and the draws: {fit_name}; the
whole posterior (ArviZ InferenceData): {posterior_name}. `ddpbayes audit {model_name} ...`
audits it like any model file (-p parameters="'draw:0'" for one draw).
"""

from pathlib import Path

import pymc as pm

from ddpbayes import DependenceModel
from ddpbayes.fitting.fitted import read_fit

FIT = Path(__file__).with_name("{fit_name}")


def build(parameters: str = "mean") -> DependenceModel:
    fit = read_fit(FIT, parameters)
    with pm.Model() as m:
        u = pm.Normal("u", 0.0, fit.sigma, shape=fit.n_clusters)
        pm.Bernoulli("y", logit_p=fit.intercept + fit.x @ fit.beta + u[fit.cluster_index], shape=fit.n)
    return DependenceModel(m, tuples="y")
'''


def check_out(out: str | Path) -> Path:
    """The model file to write, checked before any fitting: a .py path in an existing folder."""
    out = Path(out)
    if out.suffix != ".py":
        raise InputError(f"--out '{out}' must name a .py model file (the posterior is written beside it)")
    if not out.parent.is_dir():
        raise InputError(f"--out '{out}': folder '{out.parent}' does not exist")
    if not os.access(out.parent, os.W_OK):
        raise InputError(f"--out '{out}': folder '{out.parent}' is not writable")
    return out


def companions(out: Path) -> tuple[Path, Path]:
    """MODEL.fit.json and MODEL.posterior.nc beside MODEL.py."""
    return out.with_name(out.stem + ".fit.json"), out.with_name(out.stem + ".posterior.nc")


def model_text(out: Path, doc: dict) -> str:
    """The model file's text for the fit `doc` (its `.fit.json` document)."""
    data, fit_path, posterior_path = doc["data"], *companions(out)
    covariates = data["covariates"]
    means = ", ".join(f"{name} = {p['mean']:.4g}" for name, p in doc["parameters"].items())
    return MODEL_FILE.format(
        data=Path(data["file"]).name, rows=data["rows"], clusters=data["clusters"], cluster=", ".join(data["cluster"]),
        outcome=data["outcome"], covariate_text=f"; covariates {', '.join(covariates)}" if covariates else "",
        means=means, last_draw=len(doc["draws"]["intercept"]) - 1, fit_name=fit_path.name,
        posterior_name=posterior_path.name, model_name=out.name)


def write_fit(out: Path, doc: dict, idata) -> None:
    """Write the three files of a fit, the model file last."""
    fit_path, posterior_path = companions(out)
    scratch = Path(tempfile.mkdtemp(prefix=f".{out.stem}-", dir=out.parent))
    try:
        idata.to_netcdf(str(scratch / posterior_path.name), engine="h5netcdf")
        (scratch / fit_path.name).write_text(json.dumps(doc, separators=(",", ":")) + "\n")
        (scratch / out.name).write_text(model_text(out, doc))
        for path in (posterior_path, fit_path, out):
            os.replace(scratch / path.name, path)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
