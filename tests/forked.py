"""The command line in a process of its own, forked from a server that imported ddpbayes, sympy and
PyMC once per test session: each call is a real process that ends as the program does (`main()`
reading sys.argv: exit handlers, flush, `os._exit(code)`), with its own stdout, stderr, environment,
working folder and a timeout, without paying Python's start and the imports (about 2 s of CPU each).

Not for what needs a fresh interpreter (which modules a command imports) or the installed script.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["ddpbayes.cli.main", "ddpbayes.symbolic", "pymc"])


def _program(argv: list[str], out: str, err: str, env: dict[str, str], cwd: str) -> None:
    """In the child: stdout and stderr to the files, the caller's environment and folder, then the program."""
    _redirect(out, err, env, cwd)
    sys.argv = ["ddpbayes", *argv]
    from ddpbayes.cli.main import main

    main()  # ends the process: os._exit(code)


def _code(code: str, out: str, err: str, env: dict[str, str], cwd: str) -> None:
    """In the child: as `_program`, but `code` run as a script (an exception: its traceback, exit 1)."""
    _redirect(out, err, env, cwd)
    exec(compile(code, "<forked>", "exec"), {"__name__": "__main__"})


def _redirect(out: str, err: str, env: dict[str, str], cwd: str) -> None:
    """stdout and stderr to the files `out` and `err`; the environment `env`; the folder `cwd`."""
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY)
        os.dup2(target, fd)
        os.close(target)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)


def _fork(target: Callable, first: object, timeout: float, env: dict[str, str] | None) -> tuple[int, str, str]:
    """`target(first, ...)` in a child of the fork server: (exit code, stdout, stderr), or AssertionError."""
    with tempfile.TemporaryDirectory() as folder:
        out, err = Path(folder, "out"), Path(folder, "err")
        out.touch()
        err.touch()
        env = dict(os.environ) if env is None else env
        child = _CONTEXT.Process(target=target, args=(first, str(out), str(err), env, os.getcwd()))
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise AssertionError(f"{str(first)[:200]} did not end within {timeout} s")
        return child.exitcode, out.read_text(), err.read_text()


def run_cli(argv: list[str], timeout: float = 300) -> tuple[int, str, str]:
    """`ddpbayes argv` in a forked process: (exit code, stdout, stderr); AssertionError after `timeout` s."""
    return _fork(_program, list(argv), timeout, None)


def run_code(code: str, env: dict[str, str] | None = None, timeout: float = 300) -> tuple[int, str, str]:
    """`python -c code` in a forked process (environment `env`, default this one's): (exit code, stdout, stderr)."""
    return _fork(_code, code, timeout, env)
