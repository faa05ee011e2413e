"""Write a directory atomically: build it in a temporary directory next to it, rename at the end.

A failure at any point removes the temporary directory and leaves the old directory (if any)
untouched. Replacing an existing directory is two renames (old aside, new in place) and the
old one is deleted last; only a directory that is empty or holds a previous report (its
marker file) is ever replaced, so `--out` cannot delete unrelated files.

The temporary and set-aside directories are `.<name>.<pid>.<random>.tmp` and `.old`, named after
the process writing them: a process killed (SIGKILL) cannot remove its own, so every write first
sweeps those whose process no longer runs (restoring a set-aside report whose replacement never
landed).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from ddpbayes.errors import InputError


def write_directory(out: Path, marker: str, build: Callable[[Path], None], flag: str = "--out") -> None:
    """Call `build(tmp)` to fill a fresh directory, then move it to `out`; `flag` is the option that
    named `out`, for the messages (`check_target`)."""
    out = Path(os.path.abspath(out))
    _sweep(out)
    check_target(out, marker, flag)
    tmp = _make_tmp(out, flag)
    try:
        umask = os.umask(0)
        os.umask(umask)
        tmp.chmod(0o777 & ~umask)  # mkdtemp makes it private; a report is an ordinary directory
        build(tmp)
        _swap(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def check_target(out: str | Path, marker: str, flag: str = "--out") -> None:
    """Refuse, naming `flag` (the option the user gave: `--out`, `attack --report`), an `out` that
    is no directory, or a non-empty one without a previous report (its `marker` file); cheap, so a
    command checks it before its work too."""
    out = Path(os.path.abspath(out))
    if out.exists() and not out.is_dir():
        raise InputError(f"{flag} {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / marker).is_file():
        raise InputError(f"{flag} {out} is a non-empty directory without a previous report ({marker}); "
                         "refusing to replace it")


def _make_tmp(out: Path, flag: str) -> Path:
    """A fresh temporary directory beside `out` (creating its parents); InputError if it cannot be."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError as e:  # exist_ok, yet there: a file
        raise InputError(f"{flag} {out}: cannot create it: {e.filename} is not a directory") from None
    except OSError as e:
        raise InputError(f"{flag} {out}: cannot create it: {e.strerror or e}: {e.filename}") from None
    try:
        return Path(tempfile.mkdtemp(prefix=_prefix(out), suffix=".tmp", dir=out.parent))
    except OSError as e:
        raise InputError(f"{flag} {out}: cannot create it: cannot write in {out.parent}: {e.strerror or e}") from None


def _prefix(out: Path) -> str:
    return f".{out.name}.{os.getpid()}."


def _sweep(out: Path) -> None:
    """Remove the temporary directories beside `out` left by processes that no longer run; put a
    set-aside report back if `out` itself is missing."""
    pattern = re.compile(rf"\.{re.escape(out.name)}\.([1-9][0-9]{{0,8}})\.[a-z0-9_]{{8}}\.(tmp|old)")
    try:
        entries = list(os.scandir(out.parent))
    except OSError:  # no parent yet, or not a directory: nothing to sweep
        return
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or not entry.is_dir(follow_symlinks=False) or _running(int(match[1])):
            continue
        if match[2] == "old" and not out.exists():
            os.rename(entry.path, out)
        else:
            shutil.rmtree(entry.path, ignore_errors=True)


def _running(pid: int) -> bool:
    """Whether a process with this pid exists (ours to signal or not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's
        pass
    return True


def _swap(tmp: Path, out: Path) -> None:
    if not out.exists():
        os.rename(tmp, out)
        return
    old = Path(tempfile.mkdtemp(prefix=_prefix(out), suffix=".old", dir=out.parent))
    os.rmdir(old)
    os.rename(out, old)
    try:
        os.rename(tmp, out)
    except BaseException:
        os.rename(old, out)
        raise
    shutil.rmtree(old, ignore_errors=True)
