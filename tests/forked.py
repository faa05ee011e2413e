"""The command line in a process of its own, forked from a server that imported ddpbayes, sympy and
PyMC once per test session: each call is a real process that ends as the program does (`main()`
reading sys.argv: exit handlers, flush, `os._exit(code)`), with its own stdout, stderr, environment,
working folder and a timeout, without paying Python's start and the imports (about 2 s of CPU each).

Not for what needs a fresh interpreter (which modules a command imports) or the installed script.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import tempfile
import time
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
    with Running(target, first, env) as run:
        return run.finish(timeout)


def run_cli(argv: list[str], timeout: float = 300) -> tuple[int, str, str]:
    """`ddpbayes argv` in a forked process: (exit code, stdout, stderr); AssertionError after `timeout` s."""
    return _fork(_program, list(argv), timeout, None)


def run_code(code: str, env: dict[str, str] | None = None, timeout: float = 300) -> tuple[int, str, str]:
    """`python -c code` in a forked process (environment `env`, default this one's): (exit code, stdout, stderr)."""
    return _fork(_code, code, timeout, env)


class Running:
    """`target(first, ...)` in a child of the fork server (`_program` or `_code`), its stdout and stderr to files, as a
    context manager that kills it on leaving: its stderr's first line, a signal, its end."""

    def __init__(self, target: Callable, first: object, env: dict[str, str] | None = None):
        self._folder = tempfile.TemporaryDirectory()
        self._out, self._err = Path(self._folder.name, "out"), Path(self._folder.name, "err")
        self._out.touch()
        self._err.touch()
        self._what = str(first)[:200]
        env = dict(os.environ) if env is None else env
        self.child = _CONTEXT.Process(target=target, args=(first, str(self._out), str(self._err), env, os.getcwd()))
        self.child.start()

    def __enter__(self) -> Running:
        return self

    def __exit__(self, *exc) -> None:
        self.child.kill()
        self.child.join()
        self._folder.cleanup()

    def first_line(self, timeout: float = 300) -> str:
        """The first whole line the program writes on stderr; AssertionError if it ends or `timeout` s pass first."""
        end = time.monotonic() + timeout
        while "\n" not in (text := self.stderr()):
            assert self.child.exitcode is None, f"ended with {self.child.exitcode} before a line: {text!r}"
            assert time.monotonic() < end, f"no line within {timeout} s"
            time.sleep(0.05)
        return text.split("\n", 1)[0] + "\n"

    def stderr(self) -> str:
        """What the program has written on stderr so far."""
        return self._err.read_text()

    def interrupt(self) -> None:
        """SIGINT, as Ctrl-C sends it to the program."""
        os.kill(self.child.pid, signal.SIGINT)

    def finish(self, timeout: float = 60) -> tuple[int, str, str]:
        """(exit code, stdout, stderr) once the program ends; AssertionError if it runs `timeout` s more."""
        self.child.join(timeout)
        assert self.child.exitcode is not None, f"{self._what} did not end within {timeout} s"
        return self.child.exitcode, self._out.read_text(), self._err.read_text()


def start_code(code: str) -> Running:
    """`python -c code` in a forked process (this one's environment and folder), left running: `Running`."""
    return Running(_code, code)
