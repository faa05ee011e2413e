"""Shared fixtures: the shipped models, built once per test session (PyMC compiles each model
the first time an engine enumerates it; the enumerated joint is cached on the model)."""

from __future__ import annotations

import gc
import os
import sys
import warnings
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
MODELS = ROOT / "models"
sys.path.insert(0, str(TESTS))  # `import bruteforce` from every test module

warnings.filterwarnings("ignore", category=FutureWarning)
# Units of work run in the test's process unless a test asks for Dask workers (tests/test_parallel.py):
# no test pays an embedded cluster's start by accident. Subprocesses inherit it.
os.environ.setdefault("DDPBAYES_WORKERS", "1")


def pytest_collection_finish(session) -> None:
    """What the session holds once the tests are collected (PyMC, sympy, the test modules: hundreds of thousands of
    objects) lives until it ends: out of the cyclic collector's full passes (`gc.freeze`), which otherwise
    walk it again and again (32 s of the default run at load 5; DESIGN §5). `main([...])` leaves a
    caller's freeze as it is (DESIGN §2.4). What the tests build and keep (session fixtures' models) still
    fills the oldest generation: a full pass after 100 middle ones rather than 10 (19 -> 4 passes, 2.2 -> 1.0 s
    on four sampling modules at load 2.5-3.6; DESIGN §5)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(700, 10, 100)


@pytest.fixture(scope="session")
def models_dir() -> Path:
    return MODELS


@pytest.fixture(scope="session")
def contagious():
    """contagious_family.build(k=k), one model per k, shared across the session."""
    import ddpbayes

    cache = {}

    def get(k: int = 2, p: float = 0.1):
        if (k, p) not in cache:
            cache[(k, p)] = ddpbayes.load_model(MODELS / "contagious_family.py", {"k": k, "p": p})
        return cache[(k, p)]

    return get


@pytest.fixture(scope="session")
def household():
    """household.build(**params), one model per parameter set, shared across the session."""
    import ddpbayes

    cache = {}

    def get(**params):
        key = tuple(sorted(params.items()))
        if key not in cache:
            cache[key] = ddpbayes.load_model(MODELS / "household.py", params)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def markov4():
    """x0 ~ Bern(0.5), x_t ~ Bern(0.9 if x_{t-1} else 0.2), t = 1..3 (numpy joint: bruteforce.markov_joint)."""
    import pymc as pm

    from ddpbayes import DependenceModel

    with pm.Model() as m:
        prev = pm.Bernoulli("x0", 0.5)
        for t in range(1, 4):
            prev = pm.Bernoulli(f"x{t}", pm.math.switch(prev, 0.9, 0.2))
    return DependenceModel(m, tuples=[f"x{t}" for t in range(4)])
