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
from pathlib import Path

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload(["ddpbayes.cli.main", "ddpbayes.symbolic", "pymc"])


def _program(argv: list[str], out: str, err: str, env: dict[str, str], cwd: str) -> None:
    """In the child: stdout and stderr to the files, the caller's environment and folder, then the program."""
    for fd, path in ((1, out), (2, err)):
        target = os.open(path, os.O_WRONLY)
        os.dup2(target, fd)
        os.close(target)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.argv = ["ddpbayes", *argv]
    from ddpbayes.cli.main import main

    main()  # ends the process: os._exit(code)


def run_cli(argv: list[str], timeout: float = 300) -> tuple[int, str, str]:
    """`ddpbayes argv` in a forked process: (exit code, stdout, stderr); AssertionError after `timeout` s."""
    with tempfile.TemporaryDirectory() as folder:
        out, err = Path(folder, "out"), Path(folder, "err")
        out.touch()
        err.touch()
        child = _CONTEXT.Process(target=_program, args=(list(argv), str(out), str(err), dict(os.environ),
                                                         os.getcwd()))
        child.start()
        child.join(timeout)
        if child.exitcode is None:
            child.kill()
            child.join()
            raise AssertionError(f"ddpbayes {' '.join(argv)[:200]} did not end within {timeout} s")
        return child.exitcode, out.read_text(), err.read_text()
