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
    the shipped ones); else the shipped file it names: `FOLDER/NAME.SUFFIX` or a bare `NAME`,
    with (FOLDER, SUFFIX) = `kind` (MODELS or SPECS)."""
    given = Path(given)
    if given.exists() or given.is_absolute():
        return given
    folder, suffix = kind
    parts = given.parts
    if len(parts) == 1 and not given.suffix:
        name = parts[0] + suffix
    elif parts[:-1] == Path(folder).parts and given.suffix == suffix:
        name = parts[-1]
    else:
        return given
    shipped = ROOT / folder / name
    return shipped if shipped.is_file() else given


def names(kind: tuple[str, str]) -> list[str]:
    """The shipped files of a kind, by bare name (what `resolve` accepts)."""
    folder, suffix = kind
    return sorted(p.stem for p in (ROOT / folder).glob(f"*{suffix}") if p.is_file())
