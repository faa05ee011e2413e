"""Issue #25, bad input round two: every oversized input is refused, in one line naming the limit
and the flag, before its memory is allocated (DESIGN §2.4).

A refusal "before allocating" is proved by running the case with this process's address space
bounded (RLIMIT_AS) to what it already uses plus a few hundred MB: the old code died there with a
MemoryError while it built the table it was about to refuse; the new code never builds it.
"""

from __future__ import annotations

import resource
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from bruteforce import coordinate_grid, household_joint, laplace_log_kernel, leak_grid, states

from ddpbayes import InputError, audit, load_model
from ddpbayes.engines.exact import engine as exact_engine

HEADROOM = 512 << 20  # bytes of address space a refused case may take beyond what the process holds


def _address_space() -> int:
    """This process's mapped address space (VmSize), in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmSize in /proc/self/status")


@contextmanager
def bounded_memory(headroom: int = HEADROOM) -> Iterator[None]:
    """Run the block with the address space bounded to its current size plus `headroom`."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (_address_space() + headroom, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture(scope="module")
def household(models_dir):
    """household.build(n) per n, built once."""
    cache = {}

    def get(n: int):
        if n not in cache:
            cache[n] = load_model(models_dir / "household.py", {"n": n})
        return cache[n]

    return get


# ----------------------------------------------------------------------------- the exact engine's output grid


def _refused(model, query, mechanism, notion, **kw) -> str:
    """The one-line refusal of an audit run under bounded memory (a MemoryError fails the test)."""
    with bounded_memory(), pytest.raises(InputError) as refusal:
        audit(model, query, mechanism, notion, information=None, engine="exact", **kw)
    message = str(refusal.value)
    assert "\n" not in message
    return message


def test_identity_grid_is_counted_not_listed(household):
    """household n = 14, identity, idp on tuple 0: 2^14 rows x 4^14 grid points (each coordinate's
    two values and both limits) = 2^42 cells. The old engine listed the 4^14 grid points first
    (5.3 GB, MemoryError)."""
    message = _refused(household(14), "identity", "laplace", "idp", scale=1.0, targets=[0])
    assert "output grid" in message and "--max-states" in message
    assert f"{4**14:,} grid points" in message


@pytest.mark.parametrize("outputs", [10, 30])
def test_many_expression_outputs(household, outputs):
    """expr:x0;x1;... with 10 or 30 outputs on household n = 4: 4^outputs grid points."""
    spec = "expr:" + ";".join(f"x{k % 4}" for k in range(outputs))
    message = _refused(household(4), spec, "laplace", "idp", scale=1.0, targets=[0])
    assert "output grid" in message and f"{4**outputs:,} grid points" in message


@pytest.mark.parametrize(("releases", "noise"), [(12, "laplace"), (20, "laplace"), (50, "laplace"), (12, "geometric"),
                                                 (50, "geometric")])
def test_many_count_releases(household, releases, noise):
    """k releases of the count of household n = 4: each coordinate's grid is the 5 counts and both
    limits, 7^k points (geometric noise: the same breakpoints)."""
    from ddpbayes.composition import compose

    model = household(4)
    query, mechanism = compose([f"count:{noise}:1"] * releases, model)
    message = _refused(model, query, mechanism, "idp", targets=[0])
    assert "output grid" in message and f"{7**releases:,} grid points" in message


def test_a_group_larger_than_a_chunk_splits_its_grid(household, monkeypatch):
    """The grid is evaluated in slices when one known-value group exceeds a chunk: identity on
    household n = 4 with chunks of 8 elements, against the enumerated joint on a product grid."""
    monkeypatch.setattr(exact_engine, "_CHUNK", 8)
    x, p = states(household_joint(4), [[0, 1]] * 4)
    grid = coordinate_grid(x)
    for notion, known in (("idp", ()), ("pdp", (2,))):
        kw = {"known": list(known)} if known else {}
        result = audit(household(4), "identity", "laplace", notion, scale=0.7, engine="exact", information=None, **kw)
        expected = [leak_grid(x, p, x, laplace_log_kernel(0.7), grid, i, known)[0] for i in range(4) if i not in known]
        assert [v for v in result.per_target if v is not None] == pytest.approx(expected, rel=1e-10)


# ----------------------------------------------------------------------------- the machine's memory, whatever the limit


def test_a_raised_state_limit_still_meets_the_machine(household):
    """household n = 40 with --max-states 10^20: 2^41 joint states (40 members and the latent) pass
    the limit, but at 8 (4 + 2 n) = 672 bytes a state they would need 1.29 PiB: refused, naming the
    machine's memory and --max-states, instead of trying to allocate 16 TiB."""
    message = _refused(household(40), "count", "laplace", "idp", scale=1.0, targets=[0], max_states=10**20)
    assert "available memory" in message and "--max-states" in message
    assert f"{2**41:,} states" in message and f"{2**41 * 672 / 2**50:.3g} PiB" in message


def test_the_memory_bound_reads_the_machine(models_dir, monkeypatch):
    """With 300 KiB available, household n = 10's 2^11 states at 8 (4 + 2 n) = 192 bytes each
    (384 KiB) are refused under the default limit too."""
    from ddpbayes import limits

    monkeypatch.setattr(limits, "available_memory", lambda: 300 << 10)
    monkeypatch.setattr(limits, "FITS_ANYWHERE", 0)
    model = load_model(models_dir / "household.py", {"n": 10})
    with pytest.raises(InputError, match=r"384 KiB, more than this machine's available memory \(300 KiB\)"):
        audit(model, "count", "laplace", "idp", scale=1.0, targets=[0], engine="exact", information=None)


# ----------------------------------------------------------------------------- report specs nested 5,000 deep


@pytest.mark.parametrize("nested", ["[" * 5000 + "]" * 5000, "{a = " * 5000 + "1" + "}" * 5000])
def test_a_deeply_nested_spec_is_one_line(tmp_path, nested):
    """Arrays or inline tables nested 5,000 deep: tomllib recurses once per level; the old code
    ended in a RecursionError (exit 3)."""
    from ddpbayes.reports.spec import load_spec

    spec = tmp_path / "deep.toml"
    spec.write_text(f"x = {nested}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"deep\.toml: arrays or tables nested too deeply .*recursion limit"):
        load_spec(spec)
