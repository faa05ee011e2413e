"""Reading a spec file: refused unread when it is no regular file or too large, parsed as TOML,
and checked as the kind of spec its keys say (DESIGN §4)."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from ddpbayes import shipped
from ddpbayes.errors import InputError
from ddpbayes.reports.input.attack_spec import AttackSpec, load_attack_spec
from ddpbayes.reports.input.composition_spec import CompositionSpec, load_composition_spec
from ddpbayes.reports.input.fitted_spec import FittedSpec, load_fitted_spec
from ddpbayes.reports.input.mechanisms_spec import MechanismsSpec, load_mechanisms_spec
from ddpbayes.reports.input.spec import Spec, audit_spec

MAX_SPEC_BYTES = 2**20  # a spec larger than this is refused before it is read (the shipped ones are under 2 KiB)


def load_spec(path: str | Path) -> Spec | CompositionSpec | AttackSpec | MechanismsSpec | FittedSpec:
    """Read and validate the spec at `path` (every value that can be checked without the model); a
    spec with `releases` is a composition spec (`composition_spec`), one with `[attack]` the attack's
    (`attack_spec`), one with `[[case]]` tables several mechanisms on several models (`mechanisms_spec`). A
    `reports/specs/NAME.toml` or bare `NAME` naming no file from the working directory is the
    shipped spec NAME (`shipped.resolve`, DESIGN §4).

    Parameters
    ----------
    path : str or Path
        The TOML spec, or a shipped spec's name.

    Returns
    -------
    Spec, CompositionSpec, AttackSpec, MechanismsSpec or FittedSpec
        The validated spec.

    Raises
    ------
    InputError
        If the file is missing, not a regular file, too large or not valid TOML, or a key or value
        is wrong (naming the spec file and the key).
    """
    path = shipped.resolve(path, shipped.SPECS)
    if not path.is_file():
        raise InputError(f"spec file '{path}' " + ("is a directory" if path.is_dir() else
                                                   "is not a regular file" if path.exists() else "does not exist"))
    if path.stat().st_size > MAX_SPEC_BYTES:
        raise InputError(f"spec file '{path}' has {path.stat().st_size:,} bytes, over the {MAX_SPEC_BYTES:,} a "
                         "spec may have")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid TOML: {exc}") from None
    except RecursionError:  # tomllib recurses once per level of nesting
        raise InputError(f"{path}: arrays or tables nested too deeply for the TOML reader (Python's recursion limit, "
                         f"{sys.getrecursionlimit():,} frames)") from None
    if "releases" in raw:  # several releases audited jointly: a composition report
        return load_composition_spec(raw, path)
    if "attack" in raw:  # the inference attack on location data: an attack report
        return load_attack_spec(raw, path)
    if "fit" in raw:  # a model fitted from a data table, audited three ways (DESIGN §9.6)
        return load_fitted_spec(raw, path)
    if "case" in raw:  # several mechanisms on several models against their nominal epsilon
        return load_mechanisms_spec(raw, path)
    return audit_spec(raw, path)
