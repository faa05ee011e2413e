"""The keys of a spec's tables and their types, checked for every kind of spec (audit, composition,
attack): one line per problem, naming the spec file and the key."""

from __future__ import annotations

from pathlib import Path

from ddpbayes import shipped
from ddpbayes.errors import InputError

_TYPES = {bool: "true or false", int: "an integer", float: "a number", str: "a string", dict: "a table", list: "a list"}


def check_keys(table: dict, schema: dict, path: Path, prefix: str) -> None:
    """Every key of `table` in `schema` (key -> (type, required)), every required one present, each
    of its type; a problem is one line naming the spec file and the key (`InputError`)."""
    for key in table:
        if key not in schema:
            raise InputError(f"{path}: unknown key '{prefix}{key}' (allowed: {', '.join(schema)})")
    for key, (kind, required) in schema.items():
        if key not in table:
            if required:
                raise InputError(f"{path}: missing key '{prefix}{key}'")
            continue
        value = table[key]
        if key == "target" and _is(value, int):
            table[key] = value = [value]
        if not _is(value, kind):
            raise InputError(f"{path}: key '{prefix}{key}' must be {_describe(kind)}, "
                             f"got {type(value).__name__} {value!r}")


def model_file(given: str, path: Path, key: str = "model") -> Path:
    """The model file a spec at `path` names by `given`: relative to the spec's folder, or a shipped
    model (`shipped.resolve_from`: `household`, `models/household.py`); else one line naming the key."""
    model = shipped.resolve_from(path.parent, given, shipped.MODELS)
    if not model.is_file():
        raise InputError(f"{path}: key '{key}' must be an existing model file, relative to the spec, or a shipped "
                         f"model ({', '.join(shipped.names(shipped.MODELS))}), got {given!r} (resolved to {model})")
    return model


def _is(value, kind) -> bool:
    if isinstance(kind, tuple):
        return isinstance(value, list) and all(_is(v, kind[1]) for v in value)
    if isinstance(value, bool) or kind is bool:
        return isinstance(value, bool) and kind is bool
    if kind is float:
        return isinstance(value, (int, float))
    return isinstance(value, kind)


def _describe(kind) -> str:
    if isinstance(kind, tuple):
        return f"a list of {_TYPES[kind[1]].split(' ', 1)[1]}s"
    return _TYPES[kind]
