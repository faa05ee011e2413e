"""A privacy notion is a set of adversaries A(i, K) over the one quantity leak(i, K) (DESIGN §1).

| notion | adversaries                                            | source           | module |
| dp     | K = all others, x_{-i} over the product of the domains  | model-free       | `dp`   |
| idp    | K = {} for every target                                | 004 Def. 3       | `idp`  |
| pdp    | every K for every target (the WHG lattice)             | 003 Def. 2       | `pdp`  |
| ddp    | K = the tuples outside the target's dependence set     | 000 Def. 3–4     | `ddp`  |

Callers ask a `Notion` what it needs (`model_free`, `needs_dependence_sets`, `lattice`,
`weakest`), which options it takes (`check_known`, `check_lattice`, `check_search`) and for its
adversaries; no notion's name is compared outside this package. A new notion is a `Notion`
subclass in its own module, `register`ed there and imported by `ddpbayes.notions`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ddpbayes.engines import AdversaryLeakage, Engine
from ddpbayes.errors import InputError
from ddpbayes.problem import Adversary, Problem
from ddpbayes.vocabulary import NOTIONS


class Notion:
    """One notion: its adversaries, how many they are, what computing them needs, and the
    options of `audit` it takes (the base refuses those only pdp takes)."""

    name: str
    source: str
    model_free: bool = False  # dp: the mechanism's leakage at the query's sensitivity, no engine, no model
    needs_dependence_sets: bool = False  # ddp: K is the complement of the target's dependence set
    lattice: bool = False  # pdp: every K (the WHG lattice; never listed), searched greedily on request
    weakest: bool = False  # idp: the one adversary knowing nothing (004 Thm. 1: posterior odds / prior odds)

    def adversaries(self, n: int, targets: Sequence[int], known: Sequence[int] | None = None,
                    dependence_sets: Sequence[frozenset[int]] | None = None) -> Iterator[Adversary]:
        """The adversaries the notion takes the supremum over, one at a time.

        Parameters
        ----------
        n : int
            The number of tuples.
        targets : sequence of int
            The target tuples i.
        known : sequence of int or None, default None
            pdp's fixed known set (``--known``); None for every other notion.
        dependence_sets : sequence of frozenset of int or None, default None
            N(i) for every tuple, for a notion that `needs_dependence_sets` (ddp).

        Yields
        ------
        Adversary
            Each adversary A(i, K).

        Raises
        ------
        InputError
            When the notion defines no adversary set (here always: each notion defines its own).
        """
        raise InputError(f"notion '{self.name}' has no adversary set")

    def adversary_count(self, n: int, targets: Sequence[int], known: Sequence[int] | None = None) -> int:
        """How many adversaries `adversaries` yields.

        Parameters
        ----------
        n : int
            The number of tuples.
        targets : sequence of int
            The target tuples i.
        known : sequence of int or None, default None
            pdp's fixed known set (``--known``); None for every other notion.

        Returns
        -------
        int
            The number of adversaries (here one per target).
        """
        return len(targets)

    def known_set_count(self, n: int, targets: Sequence[int], known: Sequence[int] | None = None) -> int:
        """At most how many distinct known sets those adversaries have (engines share work within one).

        Parameters
        ----------
        n : int
            The number of tuples.
        targets : sequence of int
            The target tuples i.
        known : sequence of int or None, default None
            pdp's fixed known set (``--known``); None for every other notion.

        Returns
        -------
        int
            An upper bound on the distinct known sets (here the adversary count).
        """
        return self.adversary_count(n, targets, known)

    def leakage(self, problem: Problem, targets: Sequence[int], pairs: object = None) -> list[AdversaryLeakage]:
        """A model-free notion's adversaries' leakages, without an engine (dp).

        Parameters
        ----------
        problem : Problem
            The audit problem.
        targets : sequence of int
            The target tuples i.
        pairs : str, path, sequence or None, default None
            dp of a program: the neighbouring databases to certify on (``--pairs``); None: searched.

        Returns
        -------
        list of AdversaryLeakage
            One per target.

        Raises
        ------
        InputError
            When the notion is not model-free (here always).
        """
        raise InputError(f"notion '{self.name}' is not model-free: its leakage needs an engine")

    def dependence_sets(self, engine: Engine, problem: Problem) -> list[frozenset[int]] | None:
        """The dependence sets the adversaries are built from (ddp), by `engine`; None when not needed.

        Parameters
        ----------
        engine : Engine
            The engine that finds the dependence sets.
        problem : Problem
            The audit problem.

        Returns
        -------
        list of frozenset of int or None
            N(i) for every tuple, or None when the notion does not need them (here None).
        """
        return None

    def searched(self, engine: Engine, problem: Problem, targets: Sequence[int], known: Sequence[int] | None,
                 keep: bool) -> list[AdversaryLeakage] | None:
        """Each target's worst adversary found by `engine` without listing the adversaries (pdp's
        lattice search), or None: they are evaluated one by one (`keep`: every result is wanted).

        Parameters
        ----------
        engine : Engine
            The engine that searches.
        problem : Problem
            The audit problem.
        targets : sequence of int
            The target tuples i.
        known : sequence of int or None
            pdp's fixed known set (``--known``), or None.
        keep : bool
            Every adversary's result is wanted (e.g. ``--lattice``), not only each target's worst.

        Returns
        -------
        list of AdversaryLeakage or None
            Each target's worst adversary, or None when the adversaries are evaluated one by one (here None).
        """
        return None

    def check_known(self, known: Sequence[int] | None) -> None:
        """--known fixes pdp's adversary; every other notion fixes its own.

        Parameters
        ----------
        known : sequence of int or None
            The ``--known`` set, or None when not given.

        Raises
        ------
        InputError
            When `known` is given to a notion other than pdp.
        """
        if known is not None:
            raise InputError(f"--known fixes the adversary of pdp; {self.name} fixes its own (use --notion pdp)")

    def check_pairs(self, pairs: object, black_box: bool) -> None:
        """--pairs gives the neighbouring databases of a program's classic dp.

        Parameters
        ----------
        pairs : str, path, sequence or None
            The ``--pairs`` file (or list), or None when not given.
        black_box : bool
            Whether the mechanism is a program (its law unknown).

        Raises
        ------
        InputError
            When `pairs` is given to a notion other than dp, or for a mechanism whose law is known.
        """
        if pairs is not None:
            raise InputError(f"--pairs gives the neighbouring databases of classic dp: use it with --notion dp, not "
                             f"{self.name}")

    def check_lattice(self, lattice: bool) -> None:
        """--lattice lists pdp's adversaries.

        Parameters
        ----------
        lattice : bool
            Whether ``--lattice`` was given.

        Raises
        ------
        InputError
            When `lattice` is asked of a notion other than pdp.
        """
        if lattice:
            raise InputError("--lattice lists the pdp adversaries: use it with --notion pdp")

    def check_search(self, top_k: int, known: Sequence[int] | None, lattice: bool) -> None:
        """--search greedy (`top_k` > 0) searches pdp's known sets.

        Parameters
        ----------
        top_k : int
            The greedy search's width; 0 when no search is asked.
        known : sequence of int or None
            The ``--known`` set, or None when not given.
        lattice : bool
            Whether ``--lattice`` was given.

        Raises
        ------
        InputError
            When a search (`top_k` > 0) is asked of a notion other than pdp.
        """
        if top_k:
            raise InputError(f"--search greedy (--pdp-greedy) searches the pdp lattice: use it with --notion pdp, "
                             f"not {self.name}")

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"notion({self.name!r})"


REGISTRY: dict[str, Notion] = {}  # name -> the notion, in the order `ddpbayes.notions` imports their modules


def register(one: Notion) -> Notion:
    """Add a notion to `REGISTRY` (its module does, once) and return it."""
    REGISTRY[one.name] = one
    return one


def notion(which: str | Notion) -> Notion:
    """The notion named `which` (a `Notion` is returned as it is); an unknown name is refused.

    Parameters
    ----------
    which : str or Notion
        A notion's name (``dp``, ``idp``, ``pdp``, ``ddp``) or a notion.

    Returns
    -------
    Notion
        The registered notion.

    Raises
    ------
    InputError
        When `which` names no registered notion.

    Examples
    --------
    >>> notion("ddp").name
    'ddp'
    """
    if isinstance(which, Notion):
        return which
    if not isinstance(which, str) or which not in REGISTRY:
        raise InputError(f"unknown notion '{which}' (use {', '.join(NOTIONS)})")
    return REGISTRY[which]
