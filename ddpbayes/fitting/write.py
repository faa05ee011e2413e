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
    """The model file's text for the fit `doc` (its `.fit.json` document), from its template's `MODEL_FILE`."""
    import importlib

    template = importlib.import_module(f"ddpbayes.fitting.{doc['template']}")
    data, fit_path, posterior_path = doc["data"], *companions(out)
    covariates = data["covariates"]
    means = ", ".join(f"{name} = {p['mean']:.4g}" for name, p in doc["parameters"].items())
    low, high = data.get("domain", (None, None))
    text = template.model_file(doc) if hasattr(template, "model_file") else template.MODEL_FILE
    coords = ", ".join(data.get("spatial", {}).get("coords", []))
    return text.format(
        data=Path(data["file"]).name, rows=data["rows"], clusters=data["clusters"], cluster=", ".join(data["cluster"]),
        outcome=data["outcome"], covariate_text=f"; covariates {', '.join(covariates)}" if covariates else "",
        means=means, last_draw=len(next(iter(doc["draws"].values()))) - 1, fit_name=fit_path.name,
        posterior_name=posterior_path.name, model_name=out.name, low=low, high=high, coords=coords)


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
