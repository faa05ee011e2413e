"""Files shipped with the package (DESIGN §4, "Shipped files"): the example models of the
repository's models/, their data (models/data/: the Gowalla users, friendships and CAR fit the
attack reads, Galton's families) and the report specs of reports/specs/.

They live at the repository root; ddpbayes/examples/ reaches them through two symbolic links
(`models` and `reports/specs`), and the build copies the files behind them into the wheel as
package data, so an installed ddpbayes holds them under the same relative paths (a spec's
`../../models/X.py` still names its model). `ROOT` is that folder, found with
`importlib.resources`: the checkout's in a checkout or an editable install, the installed
copy's otherwise.

`resolve` lets the commands the documentation shows (`ddpbayes audit models/household.py ...`,
`ddpbayes report reports/specs/X.toml ...`) run from any directory: a relative path in one of
the shipped folders, or a bare name, that names no file from the working directory is the
shipped file of that name. A file that exists from the working directory always wins.
`resolve_from` does the same for a spec's `model`, from the spec's folder: a spec anywhere may
name a shipped model (`model = "household"`), and a shipped spec copied out still finds its own.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

ROOT = Path(resources.files("ddpbayes").joinpath("examples"))  # a file-system install: files are read by path
MODELS = ("models", ".py")
SPECS = ("reports/specs", ".toml")


def path(relative: str) -> Path:
    """The shipped file at `relative` (a path under ROOT, e.g. "models/data/gowalla_fit.json")."""
    return ROOT / relative


def resolve(given: str | Path, kind: tuple[str, str]) -> Path:
    """`given` when it names an existing file or directory (or is absolute, or names none of
    the shipped ones); else the shipped file it names (`_name`)."""
    given = Path(given)
    if given.exists() or given.is_absolute():
        return given
    return _shipped(given, kind) or given


def resolve_from(base: Path, given: str, kind: tuple[str, str]) -> Path:
    """What a spec in the folder `base` means by `given` (its `model`): the file `base / given`
    when it exists, else the shipped file `given` names (`_name`: a shipped spec copied
    elsewhere still names its model as `../../models/NAME.py`), else `base / given`, resolved."""
    local = (base / given).resolve()
    if local.exists() or Path(given).is_absolute():
        return local
    found = _shipped(Path(given), kind)
    return local if found is None else found.resolve()


def _name(given: Path, kind: tuple[str, str]) -> str | None:
    """The shipped file name a relative path names, if it has the form of one: a bare `NAME`, or
    `FOLDER/NAME.SUFFIX` after any leading `..` (with (FOLDER, SUFFIX) = `kind`); else None."""
    folder, suffix = kind
    parts = given.parts
    if len(parts) == 1 and not given.suffix:
        return parts[0] + suffix
    while parts and parts[0] == "..":
        parts = parts[1:]
    if parts[:-1] == Path(folder).parts and given.suffix == suffix:
        return parts[-1]
    return None


def _shipped(given: Path, kind: tuple[str, str]) -> Path | None:
    """The shipped file `given` names (`_name`), if there is one."""
    name = _name(given, kind)
    found = None if name is None else ROOT / kind[0] / name
    return found if found is not None and found.is_file() else None


def names(kind: tuple[str, str]) -> list[str]:
    """The shipped files of a kind, by bare name (what `resolve` accepts)."""
    folder, suffix = kind
    return sorted(p.stem for p in (ROOT / folder).glob(f"*{suffix}") if p.is_file())
