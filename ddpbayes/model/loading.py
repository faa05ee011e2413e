"""Model files (DESIGN §4): plain Python exposing `build(**params) -> DependenceModel`."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import sys
from pathlib import Path

from ddpbayes import shipped
from ddpbayes.errors import InputError
from ddpbayes.limits import state_limit
from ddpbayes.model.contract import DependenceModel
from ddpbayes.parallel.modelref import ModelRef


def parse_params(items: list[str]) -> dict:
    """`["n=4", "p=0.2"]` -> `{"n": 4, "p": 0.2}`; values are Python literals."""
    params = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise InputError(f"malformed parameter '{item}': expected key=value, e.g. -p n=4")
        try:
            params[key] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            raise InputError(
                f"malformed parameter '{item}': '{text}' is not a Python literal (quote strings: -p {key}=\"'{text}'\")"
            ) from None
    return params


def load_model(path: str | Path, params: dict | None = None, max_states: int | None = None) -> DependenceModel:
    """Import the model file at `path` and call its `build(**params)`; `max_states` bounds the
    discrete supports inferred while it builds (default: the limit in force, 2^22). A
    `models/NAME.py` or bare `NAME` that names no file from the working directory is the
    shipped example model NAME (`shipped.resolve`, DESIGN §4)."""
    path = shipped.resolve(path, shipped.MODELS)
    if path.is_dir():
        raise InputError(f"model file '{path}' is a directory: name the .py file that defines build(**params)")
    if not path.is_file():
        raise InputError(f"model file '{path}' does not exist (shipped example models, by name or as "
                         f"models/NAME.py: {', '.join(shipped.names(shipped.MODELS))})")
    name = f"ddpbayes_model_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise InputError(f"model file '{path}' cannot be imported (is it a .py file?)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # the user's file: any error, or an exit, is bad input
        raise InputError(f"model file '{path}' failed to import: {_describe(exc)}") from exc
    finally:
        sys.modules.pop(name, None)
    build = getattr(module, "build", None)
    if not callable(build):
        raise InputError(f"model file '{path}' has no function build(**params)")
    params = params or {}
    _check_params(build, params, path)
    try:
        with state_limit(max_states):
            model = build(**params)
    except InputError:
        raise
    except (Exception, SystemExit) as exc:
        raise InputError(f"build() in '{path}' raised {_describe(exc)}") from exc
    if not isinstance(model, DependenceModel):
        raise InputError(f"build() in '{path}' returned {type(model).__name__}, not a DependenceModel")
    model.source = module  # where `fn:NAME` queries find NAME (general_queries.FunctionQuery)
    model.origin = ModelRef.of(path, params, max_states)  # how a Dask worker rebuilds it (`parallel`)
    return model


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"SystemExit (it called exit({exc.code!r}); a model file must not exit)"
    return f"{type(exc).__name__}: {exc}"


def _check_params(build, params: dict, path: Path) -> None:
    sig = inspect.signature(build)
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return
    accepted = [p for p, v in sig.parameters.items() if v.kind in (v.POSITIONAL_OR_KEYWORD, v.KEYWORD_ONLY)]
    unknown = [k for k in params if k not in accepted]
    if unknown:
        raise InputError(
            f"unknown parameter '{unknown[0]}' for build() in '{path}' (it takes: {', '.join(accepted) or 'nothing'})"
        )
