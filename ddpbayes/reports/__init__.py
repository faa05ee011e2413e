"""Verification reports: `ddpbayes report SPEC.toml --out DIR`. A report is built in three steps:
its spec is read and checked (`input`: an audit spec, one with `releases` a composition spec, one
with `[attack]` the attack's, one with `[[case]]` tables several mechanisms on several models, one
with `[fit]` a model fitted from a data table), what it
shows is computed (`views`) and rendered (`render`).

DIR receives index.html (self-contained: inline CSS, figures as data URIs), report.md,
results.json (every number shown) and ``figures/*.png``, written atomically (`render.atomic`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ddpbayes.errors import InputError
from ddpbayes.model import DependenceModel
from ddpbayes.model.loading import load_model
from ddpbayes.reports.input import AttackSpec, CompositionSpec, FittedSpec, MechanismsSpec, Spec, load_spec
from ddpbayes.reports.render.atomic import check_target, write_directory
from ddpbayes.reports.render.attack import write_report
from ddpbayes.reports.render.composition_doc import composition_document, composition_json
from ddpbayes.reports.render.content import build_document
from ddpbayes.reports.render.fitted_doc import fitted_document, fitted_json
from ddpbayes.reports.render.mechanisms_doc import mechanisms_document, mechanisms_json
from ddpbayes.reports.render.document import Document
from ddpbayes.reports.render.pages import write_pages
from ddpbayes.reports.render.results import command_for, results_json
from ddpbayes.reports.views.attack import attack_results
from ddpbayes.reports.views.collect import Progress, collect
from ddpbayes.reports.views.composition import collect_composition
from ddpbayes.reports.views.fitted import fitted_results
from ddpbayes.reports.views.mechanisms import collect_mechanisms
from ddpbayes.settings import RunSettings

__all__ = ["Spec", "build_report", "load_spec"]


def build_report(
    spec_path: str | Path,
    out: str | Path,
    *,
    progress: bool = True,
    models: dict | None = None,
    where: RunSettings | None = None,
) -> dict:
    """Write the report of the spec at `spec_path` to the directory `out`; return results.json's
    content. `models` caches built models across reports by (file, params): the sampling
    engine's MCMC runs are cached on the model, so specs sharing a model share them. `where`
    says where units of work run (`parallel`: the sweep's points, MCMC runs, the attack's blocks).

    Parameters
    ----------
    spec_path : str or Path
        The TOML spec (`load_spec`).
    out : str or Path
        The report's directory, written atomically: index.html, report.md, results.json, figures/.
    progress : bool, default True
        Progress lines on stderr.
    models : dict or None, default None
        A cache of built models by (file, params), shared across calls; None: no cache.
    where : RunSettings or None, default None
        Where units of work run; None: the defaults.

    Returns
    -------
    dict
        The content of results.json.

    Raises
    ------
    InputError
        If the spec is invalid, or a value only the built model can check is wrong (naming the
        spec file).
    """
    spec = load_spec(spec_path)
    out = Path(out)
    check_target(out, "results.json")  # before the work: a report only replaces a report
    command = command_for(Path(spec_path), out)
    say = Progress(progress, Path(spec_path).stem)
    where = RunSettings.of(where, progress=progress)
    if isinstance(spec, AttackSpec):
        results = attack_results(spec, say, where)
        say("writing figures and pages")
        written = write_report(results, out, command, spec.audit_users)
        say(f"wrote {out}")
        return written
    if isinstance(spec, FittedSpec):  # the fit is kept in the report's folder, and reused from there
        return _write_fitted(spec, out, command, say, where)

    def pages() -> tuple[Document, dict]:
        if isinstance(spec, MechanismsSpec):  # several models, one per case
            view = collect_mechanisms(spec, lambda case: _built(case.model, case.params, models), say, where)
            return mechanisms_document(view, command), mechanisms_json(view, command)
        model = _model(spec, models)
        if isinstance(spec, CompositionSpec):  # its audits run with the spec's settings alone
            composed = collect_composition(spec, model, say)
            return composition_document(composed, command), composition_json(composed, command)
        collected = collect(spec, model, say, where)
        return build_document(collected, command), results_json(collected, command)

    return _write(spec, out, say, pages)


def _write(spec, out: Path, say: Progress, pages: Callable[[], tuple[Document, dict]]) -> dict:
    """The document and results.json `pages` gives, written atomically to `out`: index.html,
    report.md, figures/ and results.json (whose content is returned). Errors from the spec's
    values name the spec file."""
    data: dict = {}

    def build(tmp: Path) -> None:
        say(f"loading {spec.model_ref}")
        try:
            doc, results = pages()
        except InputError as exc:  # from the spec's values (params, targets, ...): name the spec file
            if str(spec.path) in str(exc):
                raise
            raise InputError(f"{spec.path}: {exc}") from exc
        say("writing figures and pages")
        data.update(results)
        write_pages(tmp, doc, data)

    write_directory(out, "results.json", build)
    say(f"wrote {out}")
    return data


def _write_fitted(spec: FittedSpec, out: Path, command: str, say: Progress, where: RunSettings) -> dict:
    """A report from a spec naming a fit: fitted (or the kept fit reused) into the new folder, audited, written."""
    data: dict = {}

    def build(tmp: Path) -> None:
        view = fitted_results(spec, out, tmp, say, where)
        say("writing figures and pages")
        data.update(fitted_json(view, command))
        write_pages(tmp, fitted_document(view, command), data)

    write_directory(out, "results.json", build)
    say(f"wrote {out}")
    return data


def _model(spec: Spec, models: dict | None) -> DependenceModel:
    return _built(spec.model, spec.params, models)


def _built(file: Path, params: dict, models: dict | None) -> DependenceModel:
    """The model `file` builds with `params`, kept in `models` (when given) by (file, params)."""
    if models is None:
        return load_model(file, params)
    key = (str(file), json.dumps(params, sort_keys=True))
    if key not in models:
        models[key] = load_model(file, params)
    return models[key]
