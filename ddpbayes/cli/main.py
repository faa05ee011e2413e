"""`ddpbayes` entry point: parse arguments, run a command, map errors to exit codes.

Exit codes: 0 ran (and passed, or no claim), 1 ran and the claim fails, 2 bad input,
3 an internal error (a bug: rerun with --debug for the traceback), 4 ran but an estimate
could not settle the claim (inconclusive; `fit`: the fit did not converge, nothing written), 130 interrupted
(Ctrl-C), 141 stdout closed (`| head`), 143 terminated (SIGTERM). Bare `ddpbayes` (no command) prints the usage on
stderr and exits 2.
Parsing the arguments imports no PyMC: `--help` and argument errors answer at once.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import importlib.metadata
import os
import re
import sys
import warnings
from typing import NoReturn

from ddpbayes import progress
from ddpbayes.cli.signals import Terminated, held, install_sigterm, sigterm_raises
from ddpbayes.errors import InputError


# A value that starts with a minus sign and a digit (`--weights -1,2`, `--mean -.5,1`, `--delta -1e-3`)
# is a value, never an option: argparse's own pattern takes only a lone number ("-1", "-0.5").
_NEGATIVE_NUMBER = re.compile(r"^-\.?\d")


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_NUMBER

    def error(self, message: str):  # one line, exit 2, as for every bad input
        raise InputError(f"{self.prog}: {message}")


def version() -> str:
    """The installed distribution's version, or the package's own when it is not installed."""
    try:
        return importlib.metadata.version("ddpbayes")
    except importlib.metadata.PackageNotFoundError:
        from ddpbayes import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    from ddpbayes.cli import (attack_cmd, audit_cmd, calibrate_cmd, derive_cmd, fit_cmd, mechanisms_cmd, models_cmd,
                              report_cmd, rho_cmd)

    parser = _Parser(prog="ddpbayes", description="Verify privacy mechanisms on dependent data (DDP, PDP, IDP).")
    parser.add_argument("-V", "--version", action="version", version=f"ddpbayes {version()}",
                        help="print the version and exit")
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser,  # none: the usage (`_main`)
                                help="the command to run (ddpbayes COMMAND --help describes its flags)")
    audit_cmd.register(sub)
    derive_cmd.register(sub)
    rho_cmd.register(sub)
    calibrate_cmd.register(sub)
    report_cmd.register(sub)
    attack_cmd.register(sub)
    mechanisms_cmd.register(sub)
    models_cmd.register(sub)
    fit_cmd.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line `argv` (default: the program's own) and return its exit code; as the
    program itself, end the process there (`_end`); called from Python, give the caller's SIGTERM
    handler back."""
    if argv is None:
        install_sigterm()
        _end(_main(None))
    with sigterm_raises():
        return _main(argv)


def _end(code: int) -> NoReturn:
    """The program's end after its last line: the exit handlers run (temporary folders, Dask, logging)
    and the output is flushed, then `os._exit` skips Python's teardown of PyMC's modules and of what
    `load_model_of` froze, which is work for nothing (as after a signal: `_signalled`)."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe or stream: nothing left to say
            pass
    os._exit(code)


def _main(argv: list[str] | None) -> int:
    argv_given, argv = argv, list(sys.argv[1:] if argv is None else argv)
    frozen = gc.get_freeze_count()  # the caller's own: `load_model_of` then freezes nothing, nor is it undone here
    debug = "--debug" in argv
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*could not link to a BLAS.*")
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:  # bare `ddpbayes`: what it can do, and exit 2 as for any missing argument
            print(parser.format_help(), file=sys.stderr, end="")
            return 2
        try:
            return args.run(args)
        finally:
            _stop_workers()  # before the last line, so that nothing follows it
            if argv_given is not None and not frozen:  # main([...]) from Python: what `load_model_of` froze is
                gc.unfreeze()  # collectable again
    except InputError as exc:
        if debug:
            raise
        print("error: " + " ".join(str(exc).split()), file=sys.stderr)
        return 2
    except Terminated:
        return _signalled("terminated", 143, program=argv_given is None)
    except KeyboardInterrupt:
        return _signalled("interrupted", 130, program=argv_given is None)
    except BrokenPipeError:  # the reader went away (`| head`): nothing left to say
        sys.stderr.close()
        return 141
    except Exception as exc:  # a bug, not bad input: one line unless --debug
        if debug:
            raise
        first = (str(exc).splitlines() or [""])[0]
        print(f"internal error: {type(exc).__name__}: {first} (rerun with --debug for the traceback)", file=sys.stderr)
        return 3


def _signalled(word: str, code: int, program: bool) -> int:
    """The last line after SIGINT or SIGTERM (the work already stopped by `_stop_workers`). As
    the program itself (not `main([...])` called from Python), the process then ends at once:
    the exit handlers run, but not Python's teardown of PyMC's and Dask's modules, which takes
    seconds on a busy machine (2.2 s measured at load 7 on 2 cores), and a stop must be quick."""
    with held():
        if program:
            atexit._run_exitfuncs()
        print(word, file=sys.stderr, flush=True)
        if program:
            try:
                sys.stdout.flush()
            except OSError:  # a closed pipe: nothing left to say
                pass
            os._exit(code)
    return code


def _stop_workers() -> None:
    """End the command's work before its last line (DESIGN §2.4): progress lines stopped, the
    embedded Dask cluster stopped if this command started one (none was: nothing imported) and
    its scratch folder removed, a second Ctrl-C or SIGTERM meanwhile ignored (the cleanup takes
    well under a second, and cut short it would print a traceback)."""
    with held():
        progress.close_all()
        parallel = sys.modules.get("ddpbayes.parallel.cluster")
        if parallel is not None:
            parallel.close_clusters()


if __name__ == "__main__":
    sys.exit(main())
