"""The keys of a spec's tables and their types, checked for every kind of spec (audit, composition,
attack, mechanisms), and `Problems`: every problem a spec has, found before any is reported
(issue #40 item 12), then reported together on one line naming the spec file and each key."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ddpbayes import shipped
from ddpbayes.errors import InputError

_TYPES = {bool: "true or false", int: "an integer", float: "a number", str: "a string", dict: "a table", list: "a list"}


class Problems:
    """The problems found in the spec at `path`: each check goes on after one fails (`add`, or
    `check` around a check that raises), and `raise_any` reports them all as one `InputError`:
    `SPEC: PROBLEM`, or `SPEC: N problems: P1; P2; ...`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.found: list[str] = []

    def add(self, message: str) -> None:
        """Record a problem (a leading `SPEC: ` is dropped: `raise_any` names the spec once)."""
        prefix = f"{self.path}: "
        self.found.append(message[len(prefix):] if message.startswith(prefix) else message)

    @contextmanager
    def check(self) -> Iterator[None]:
        """Run a check that raises `InputError` on its first problem: record it and go on."""
        try:
            yield
        except InputError as exc:
            self.add(str(exc))

    def raise_any(self) -> None:
        """Raise every problem recorded, on one line; nothing when there is none."""
        if len(self.found) == 1:
            raise InputError(f"{self.path}: {self.found[0]}")
        if self.found:
            raise InputError(f"{self.path}: {len(self.found)} problems: " + "; ".join(self.found))


def check_keys(table: dict, schema: dict, problems: Problems, prefix: str) -> dict:
    """Every key of `table` in `schema` (key -> (type, required)), every required one present, each
    of its type; each problem recorded in `problems`, naming the key. Returns the entries that passed
    (known and of their type), the ones the value checks may read."""
    unknown = [key for key in table if key not in schema]
    if unknown:
        names = ", ".join(f"'{prefix}{key}'" for key in unknown)
        problems.add(f"unknown key{'s' if len(unknown) > 1 else ''} {names} (allowed: {', '.join(schema)})")
    good = {}
    for key, (kind, required) in schema.items():
        if key not in table:
            if required:
                problems.add(f"missing key '{prefix}{key}'")
            continue
        value = table[key]
        if key == "target" and _is(value, int):
            table[key] = value = [value]
        if _is(value, kind):
            good[key] = value
        else:
            problems.add(f"key '{prefix}{key}' must be {_describe(kind)}, got {type(value).__name__} {value!r}")
    return good


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
