"""Run settings as the user gives them (flags or keyword arguments), checked in one place.

Each check names the flag, so a bad value is one line (exit 2) before any work starts.
"""

from __future__ import annotations

from ddpbayes.errors import InputError
from ddpbayes.limits import check_positive_int

SEED_LIMIT = 2**32  # seeds are 0 .. 2^32 - 1, as NumPy's and PyMC's legacy seeding accept
MIN_DRAWS = 8  # the estimate splits each chain's draws in halves; ArviZ needs 4 draws per chain in each


def check_run_settings(
    *,
    seed: int | None = None,
    draws: int | None = None,
    tune: int | None = None,
    chains: int | None = None,
    max_states: int | None = None,
    max_adversaries: int | None = None,
) -> None:
    """Raise InputError for the first value a run cannot use."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT):
        raise InputError(f"--seed must be an integer from 0 to {SEED_LIMIT - 1}, got {seed}")
    if draws is not None and (check_positive_int(draws, "--draws") < MIN_DRAWS):
        raise InputError(f"--draws must be at least {MIN_DRAWS} (the estimate splits each chain's draws in halves, "
                         f"and ArviZ's diagnostics need 4 draws per chain in each), got {draws}")
    if tune is not None and (isinstance(tune, bool) or not isinstance(tune, int) or tune < 0):
        raise InputError(f"--tune must be a non-negative integer, got {tune}")
    for flag, value in (("--chains", chains), ("--max-states", max_states), ("--max-adversaries", max_adversaries)):
        if value is not None:
            check_positive_int(value, flag)
