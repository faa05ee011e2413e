"""Model files (DESIGN §4): plain Python exposing `build(**params) -> DependenceModel`."""

from __future__ import annotations

import ast
import inspect
import sys
import types
from pathlib import Path

from ddpbayes import shipped
from ddpbayes.errors import InputError
from ddpbayes.limits import state_limit
from ddpbayes.model.contract import DependenceModel
from ddpbayes.model.usercode import is_interrupt, untraced, user_code, watched
from ddpbayes.model.reference import ModelRef

MAX_SOURCE_BYTES = 16 * 2**20  # a model file larger than this is refused before it is read (it travels to workers)


def parse_params(items: list[str]) -> dict:
    """`["n=4", "p=0.2"]` -> `{"n": 4, "p": 0.2}`; values are Python literals."""
    params = {}
    for item in items:
        key, sep, text = item.partition("=")
        key = key.strip()
        if not sep or not key.isidentifier():
            raise InputError(f"malformed parameter '{_short(item)}': expected key=value, e.g. -p n=4")
        try:
            params[key] = ast.literal_eval(text.strip())
        except (ValueError, SyntaxError):
            raise InputError(f"malformed parameter '{_short(item)}': '{_short(text)}' is not a Python literal "
                             f"(quote strings: -p {key}=\"'{_short(text)}'\")") from None
        except (MemoryError, RecursionError):  # the parser's nesting limit (a long run of '-', '(' or '[')
            raise InputError(f"malformed parameter '{_short(item)}': nested too deeply to read as a Python literal "
                             "(-p takes numbers, strings, lists, ...)") from None
    return params


def _short(text: str, width: int = 60) -> str:
    """`text`, cut to `width` characters for a one-line message."""
    return text if len(text) <= width else f"{text[:width]}... ({len(text):,} characters)"


def load_model(path: str | Path, params: dict | None = None, max_states: int | None = None) -> DependenceModel:
    """Import the model file at `path` and call its `build(**params)`; `max_states` bounds the
    discrete supports inferred while it builds (default: the limit in force, 2^22). A
    `models/NAME.py` or bare `NAME` that names no file from the working directory is the
    shipped example model NAME (`shipped.resolve`, DESIGN §4).

    Parameters
    ----------
    path : str or Path
        The model file (a .py file defining ``build(**params)``), or a shipped model's name.
    params : dict or None, default None
        Keyword arguments for ``build``; None: none.
    max_states : int or None, default None
        Bound on the discrete supports inferred while it builds; None: the limit in force.

    Returns
    -------
    DependenceModel
        What ``build(**params)`` returned, remembering its file and parameters (so that Dask
        workers can rebuild it).

    Raises
    ------
    InputError
        If the file is missing, not a regular .py file, too large or unreadable; if it fails to
        import, has no ``build``, or ``build`` rejects `params`, raises or returns something other
        than a `DependenceModel`.

    Examples
    --------
    >>> from ddpbayes.model.loading import load_model
    >>> model = load_model("household", {"n": 3})  # the shipped example model
    >>> model.n
    3
    """
    path = shipped.resolve(path, shipped.MODELS)
    if path.is_dir():
        raise InputError(f"model file '{path}' is a directory: name the .py file that defines build(**params)")
    if path.exists() and not path.is_file():
        raise InputError(f"model file '{path}' is not a regular file (a device or a pipe is not read)")
    if not path.is_file():
        raise InputError(f"model file '{path}' does not exist (shipped example models, by name or as "
                         f"models/NAME.py: {', '.join(shipped.names(shipped.MODELS))})")
    if path.stat().st_size > MAX_SOURCE_BYTES:
        raise InputError(f"model file '{path}' has {path.stat().st_size:,} bytes, over the "
                         f"{MAX_SOURCE_BYTES:,} a model file may have (keep data in files the model reads)")
    if path.suffix != ".py":
        raise InputError(f"model file '{path}' cannot be imported (is it a .py file?)")
    try:
        source = path.read_bytes()
    except OSError as exc:
        raise InputError(f"model file '{path}' cannot be read: {exc.strerror or exc}") from None
    return load_source(path, source, params or {}, max_states)


def load_source(path: str | Path, source: bytes, params: dict, max_states: int | None) -> DependenceModel:
    """The model of `source`, the text of the model file at `path`, as `load_model` builds it; a Dask
    worker rebuilds a model from the text its reference carries (`ModelRef`), never from the file,
    which may have been edited since."""
    path = Path(path)
    name = f"ddpbayes_model_{abs(hash(path.resolve()))}"
    module = types.ModuleType(name)
    module.__file__ = str(path)
    sys.modules[name] = module
    try:
        with watched(f"the import of model file '{path}'"), user_code(), untraced():
            exec(compile(source, str(path), "exec"), module.__dict__)
    except BaseException as exc:  # the user's file: any error, an exit, a GeneratorExit is bad input
        if is_interrupt(exc):
            raise
        raise InputError(f"model file '{path}' failed to import: {_describe(exc)}") from exc
    finally:
        sys.modules.pop(name, None)
    build = getattr(module, "build", None)
    if not callable(build):
        raise InputError(f"model file '{path}' has no function build(**params)")
    _check_params(build, params, path)
    try:
        with state_limit(max_states), watched(f"build() in model file '{path}'"), user_code(), untraced():
            model = build(**params)
    except InputError:
        raise
    except BaseException as exc:
        if is_interrupt(exc):
            raise
        raise InputError(f"build() in '{path}' raised {_describe(exc)}") from exc
    if not isinstance(model, DependenceModel):
        raise InputError(f"build() in '{path}' returned {type(model).__name__}, not a DependenceModel")
    model.source = module  # where `fn:NAME` queries find NAME (queries/fn.py, FunctionQuery)
    model.origin = ModelRef.of(path, source, params, max_states, load_source)  # how a Dask worker rebuilds it
    return model


def _describe(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"SystemExit (it called exit({exc.code!r}); a model file must not exit)"
    return " ".join(f"{type(exc).__name__}: {exc}".split())


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
