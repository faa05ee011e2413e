"""How an audit runs: one frozen `RunSettings`, validated once, passed to every engine.

Like an OpenDP measurement states its domain and privacy measure, a run states every choice
that can change its numbers or its cost: the engine, the sampling route and its MCMC budget,
the seed, and the size limits (`limits`). The command line builds it with one helper
(`ddpbayes.cli.args.add_run_settings`); from Python, `audit(..., seed=1, draws=500)` or
`audit(..., settings=RunSettings(...))`. An unknown or invalid setting is one line (exit 2),
naming the flag, before any work starts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from ddpbayes.encoding import JsonDocument
from ddpbayes.errors import InputError
from ddpbayes.limits import DEFAULT_MAX_ADVERSARIES, DEFAULT_MAX_STATES, check_positive_int
from ddpbayes.vocabulary import ENGINES

SEED_LIMIT = 2**32  # seeds are 0 .. 2^32 - 1, as NumPy's and PyMC's legacy seeding accept
MIN_DRAWS = 8  # ArviZ's diagnostics and standard errors need a few draws per chain
METHODS = ("likelihood", "posterior")
SEARCHES = ("full", "greedy")  # pdp: every known set, or seed 003's greedy search (a lower bound)
EXECUTION = ("workers", "scheduler", "progress", "force", "role")  # how a run runs, not what it computes
ROLES = ("choose", "bound")  # the sampling engine's two independent sets of runs (issue #27)
DEFAULT_TOP_K = 3  # known sets kept per layer when --search greedy gives no --top-k

__all__ = ["RunSettings", "search_width"]


def search_width(search: str | None, top_k: int | None, pdp_greedy: int | None) -> int | None:
    """`RunSettings.pdp_greedy` for `--search full|greedy` with `--top-k K`, or `--pdp-greedy K`
    (the same search: give one spelling); None when none is given (the default, full).

    Parameters
    ----------
    search : str or None
        "full" or "greedy" (``--search``), or None.
    top_k : int or None
        Known sets the greedy search keeps per layer (``--top-k``; default 3), or None.
    pdp_greedy : int or None
        The same width spelled ``--pdp-greedy K``, or None.

    Returns
    -------
    int or None
        0 for a full search; the greedy search's width (`top_k`, default 3, or `pdp_greedy` as
        given); None when nothing is given.

    Raises
    ------
    InputError
        For an unknown search, ``--pdp-greedy`` given with ``--search`` or ``--top-k``, ``--top-k``
        without ``--search greedy``, or a ``--top-k`` that is not a positive integer.
    """
    if search is not None and search not in SEARCHES:
        raise InputError(f"unknown search '{search}' (use full or greedy)")
    if pdp_greedy is not None and (search is not None or top_k is not None):
        raise InputError("--pdp-greedy K is --search greedy --top-k K: give one of them")
    if top_k is not None and search != "greedy":
        raise InputError("--top-k sets how many known sets the greedy search keeps per layer: use it with "
                         "--search greedy")
    if search == "greedy":
        width = DEFAULT_TOP_K if top_k is None else top_k
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise InputError(f"--top-k must be a positive integer, got {top_k}")
        return width
    return 0 if search == "full" else pdp_greedy


@dataclass(frozen=True)
class RunSettings(JsonDocument):
    """Every setting of a run (DESIGN §2.3, §2.4); the defaults are the command line's.

    Parameters
    ----------
    engine : str, default "auto"
        auto, or one of `ddpbayes.vocabulary.ENGINES`.
    method : str, default "likelihood"
        Sampling: the likelihood route, or "posterior", the adversary's posterior odds (004 Thm. 1).
    seed : int, default 0
        Every random step derives from it; 0 to 2^32 - 1.
    draws : int, default 1000
        Sampling: draws per chain, at least 8.
    tune : int, default 1000
        Sampling: tuning steps per chain, >= 0.
    chains : int, default 2
        Sampling: chains per conditioning event.
    workers : int, default 0
        Processes for independent units (`parallel`); 0: DDPBAYES_WORKERS, else every core.
    scheduler : str or None, default None
        An existing Dask cluster (tcp://HOST:PORT); None: DDPBAYES_SCHEDULER, else an embedded one.
    max_runs : int, default 200
        Sampling: MCMC runs one call may plan.
    max_states : int, default 2^22
        Joint states, supports, kernels and output grids (`limits.DEFAULT_MAX_STATES`).
    max_adversaries : int, default 2^17
        Adversaries evaluated one by one (`limits.DEFAULT_MAX_ADVERSARIES`).
    pdp_greedy : int, default 0
        pdp: 0 searches every known set; k >= 1 is seed 003's greedy search, top k per layer
        (`search_width`).
    progress : bool, default False
        Progress lines on stderr.
    force : bool, default False
        Run adversaries an engine estimates past `limits.MAX_SECONDS` (a day).
    program_runs : int, default 100000
        Program engine: runs of the program per target value in each stage (search, certify).
    role : str, default "choose"
        Sampling, internal: the runs that choose a witness, or "bound", the fresh ones that bound it.

    Raises
    ------
    InputError
        Naming the flag of the first invalid setting (an unknown engine, method or role, or a value
        out of range).
    """

    engine: str = "auto"  # auto, or one of ddpbayes.vocabulary.ENGINES
    method: str = "likelihood"  # sampling: likelihood route, or the adversary's posterior odds (004 Thm. 1)
    seed: int = 0  # every random step derives from it
    draws: int = 1000  # sampling: draws per chain
    tune: int = 1000  # sampling: tuning steps per chain
    chains: int = 2  # sampling: chains per conditioning event
    workers: int = 0  # processes for independent units (`parallel`); 0: DDPBAYES_WORKERS, else every core
    scheduler: str | None = None  # an existing Dask cluster (tcp://HOST:PORT); None: DDPBAYES_SCHEDULER, else embedded
    max_runs: int = 200  # sampling: MCMC runs one call may plan
    max_states: int = DEFAULT_MAX_STATES  # joint states, supports, kernels, output grids
    max_adversaries: int = DEFAULT_MAX_ADVERSARIES  # adversaries evaluated one by one
    pdp_greedy: int = 0  # pdp: 0 searches every known set; k >= 1 seed 003's greedy search, top k per layer (`search_width`)
    progress: bool = False  # progress lines on stderr
    force: bool = False  # run adversaries an engine estimates past limits.MAX_SECONDS (a day)
    program_runs: int = 100_000  # program engine: runs of the program per target value in each stage (search, certify)
    role: str = "choose"  # sampling, internal: the runs that choose a witness, or the fresh ones that bound it

    def __post_init__(self):
        if self.engine not in ("auto", *ENGINES):
            raise InputError(f"unknown engine '{self.engine}' (use auto, {', '.join(ENGINES)})")
        if self.method not in METHODS:
            raise InputError(f"unknown method '{self.method}' (use likelihood or posterior)")
        if self.method == "posterior" and self.engine not in ("sampling", "auto"):
            raise InputError("--method posterior is the sampling engine's adversary route: use --engine sampling")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or not 0 <= self.seed < SEED_LIMIT:
            raise InputError(f"--seed must be an integer from 0 to {SEED_LIMIT - 1}, got {self.seed}")
        if check_positive_int(self.draws, "--draws") < MIN_DRAWS:
            raise InputError(f"--draws must be at least {MIN_DRAWS} (ArviZ's diagnostics and Monte Carlo standard "
                             f"errors need a few draws per chain), got {self.draws}")
        if isinstance(self.tune, bool) or not isinstance(self.tune, int) or self.tune < 0:
            raise InputError(f"--tune must be a non-negative integer, got {self.tune}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 0:
            raise InputError(f"--workers must be a positive integer, got {self.workers}")
        if self.scheduler is not None and (not isinstance(self.scheduler, str) or "://" not in self.scheduler):
            raise InputError(f"--scheduler must be a Dask scheduler address such as tcp://HOST:8786, got "
                             f"{self.scheduler!r}")
        if isinstance(self.pdp_greedy, bool) or not isinstance(self.pdp_greedy, int) or self.pdp_greedy < 0:
            raise InputError(f"--pdp-greedy must be a non-negative integer (0: every known set), got {self.pdp_greedy}")
        if not isinstance(self.force, bool):
            raise InputError(f"--force is a switch (True or False), got {self.force!r}")
        if self.role not in ROLES:
            raise InputError(f"unknown run role '{self.role}' (use {' or '.join(ROLES)})")
        for name in ("chains", "max_runs", "max_states", "max_adversaries", "program_runs"):
            check_positive_int(getattr(self, name), "--" + name.replace("_", "-"))

    @classmethod
    def of(cls, settings: RunSettings | None = None, **changes) -> RunSettings:
        """`settings` (or the defaults) with `changes`; a change of None keeps the value, and an
        unknown name is an InputError.

        Parameters
        ----------
        settings : RunSettings or None, default None
            The settings changed; None: the defaults.
        **changes
            Fields by name; a value of None keeps the field's.

        Returns
        -------
        RunSettings
            The changed settings (validated).

        Raises
        ------
        InputError
            For an unknown name or an invalid value.
        """
        names = [f.name for f in fields(cls)]
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise InputError(f"unknown setting '{unknown[0]}' (settings: {', '.join(names)})")
        changes = {k: v for k, v in changes.items() if v is not None}
        return replace(settings or cls(), **changes)

    def to_dict(self) -> dict:
        """The settings that can change a result: not where it ran, nor what was shown on the way
        (the same seed gives the same JSON whatever the workers).

        Returns
        -------
        dict
            The fields, without workers, scheduler, progress, force and role.
        """
        return {k: v for k, v in asdict(self).items() if k not in EXECUTION}
