"""Write a directory atomically: build it in a temporary directory next to it, rename at the end.

A failure at any point removes the temporary directory and leaves the old directory (if any)
untouched. Replacing an existing directory is two renames (old aside, new in place) and the
old one is deleted last; only a directory that is empty or holds a previous report (its
marker file) is ever replaced, so `--out` cannot delete unrelated files.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from ddpbayes.errors import InputError


def write_directory(out: Path, marker: str, build: Callable[[Path], None]) -> None:
    """Call `build(tmp)` to fill a fresh directory, then move it to `out`."""
    out = Path(os.path.abspath(out))
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / marker).is_file():
        raise InputError(f"--out {out} is a non-empty directory without a previous report ({marker}); "
                         "refusing to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    try:
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp makes it private; a report is an ordinary directory
        build(tmp)
        _swap(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _swap(tmp: Path, out: Path) -> None:
    if not out.exists():
        os.rename(tmp, out)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
    os.rmdir(old)
    os.rename(out, old)
    try:
        os.rename(tmp, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)
