"""Issue #25, bad input round two: every oversized input is refused, in one line naming the limit
and the flag, before its memory is allocated (DESIGN §2.4).

A refusal "before allocating" is proved by running the case with this process's address space
bounded (RLIMIT_AS) to what it already uses plus a few hundred MB: the old code died there with a
MemoryError while it built the table it was about to refuse; the new code never builds it.
"""

from __future__ import annotations

import json
import math
import resource
import signal
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from bruteforce import coordinate_grid, household_joint, laplace_log_kernel, leak_grid, states

from ddpbayes import InputError, audit, load_model
from ddpbayes.engines.exact import engine as exact_engine
from ddpbayes.limits import count_text

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
    assert f"{count_text(4**14)} grid points" in message


@pytest.mark.parametrize("outputs", [10, 30])
def test_many_expression_outputs(household, outputs):
    """expr:x0;x1;... with 10 or 30 outputs on household n = 4: 4^outputs grid points."""
    spec = "expr:" + ";".join(f"x{k % 4}" for k in range(outputs))
    message = _refused(household(4), spec, "laplace", "idp", scale=1.0, targets=[0])
    assert "output grid" in message and f"{count_text(4**outputs)} grid points" in message


@pytest.mark.parametrize(("releases", "noise"), [(12, "laplace"), (20, "laplace"), (50, "laplace"), (12, "geometric"),
                                                 (50, "geometric")])
def test_many_count_releases(household, releases, noise):
    """k releases of the count of household n = 4: each coordinate's grid is the 5 counts and both
    limits, 7^k points (geometric noise: the same breakpoints)."""
    from ddpbayes.composition import compose

    model = household(4)
    query, mechanism = compose([f"count:{noise}:1"] * releases, model)
    message = _refused(model, query, mechanism, "idp", targets=[0])
    assert "output grid" in message and f"{count_text(7**releases)} grid points" in message


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
    from ddpbayes.reports.input import load_spec

    spec = tmp_path / "deep.toml"
    spec.write_text(f"x = {nested}\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"deep\.toml: arrays or tables nested too deeply .*recursion limit"):
        load_spec(spec)


# ----------------------------------------------------------------------------- centroids:FILE


def test_centroids_of_a_device_are_refused_unread():
    """centroids:/dev/zero read until 5.4 GB (one endless line): a file that is not regular is refused unread."""
    from ddpbayes.queries import parse_query

    with bounded_memory(), pytest.raises(InputError, match=r"the assignment '/dev/zero' is not a regular file"):
        parse_query("centroids:/dev/zero")


def test_an_oversized_assignment_is_refused_unread(tmp_path, monkeypatch):
    """A file above the stated size limit is refused by its size, before a row is read."""
    from ddpbayes.queries import centroids, parse_query

    path = tmp_path / "big.csv"
    path.write_text("cluster\n" + "0\n" * 100, encoding="utf-8")
    size = path.stat().st_size
    monkeypatch.setattr(centroids, "MAX_ASSIGNMENT_BYTES", size - 1)
    monkeypatch.setattr(centroids.csv, "DictReader", None)  # reading would fail loudly
    with pytest.raises(InputError, match=rf"has {size:,} bytes, over the limit of {size - 1:,} for an assignment file"):
        parse_query(f"centroids:{path}")


def test_the_centroid_matrix_is_bounded(tmp_path):
    """u users in u clusters, one coordinate: a u x u matrix, refused above --max-states before it is built."""
    from ddpbayes.limits import state_limit
    from ddpbayes.queries import parse_query

    path = tmp_path / "distinct.csv"
    path.write_text("cluster\n" + "".join(f"{k}\n" for k in range(100)), encoding="utf-8")
    query = parse_query(f"centroids:{path}")
    with state_limit(100 * 100 - 1), pytest.raises(InputError, match=r"centroid matrix .* has 10,000 cells"):
        query.matrix(100)
    assert query.matrix(100).shape == (100, 100)


# ----------------------------------------------------------------------------- a lattice that would run for years


@contextmanager
def within(seconds: int) -> Iterator[None]:
    """Fail the block (TimeoutError) when it runs longer than `seconds`: the old code ran on."""

    def ring(signum, frame):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, ring)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_lattice_of_years_is_refused_with_its_time(household):
    """household n = 40, pdp --lattice with --max-adversaries 10^14: 40 x 2^39 adversaries pass the
    limit, but at the structured engine's estimate (over 5 ms each) they take over 10^11 s: refused at
    once, naming the time, the day limit and --force (the old code ran with no end in sight)."""
    with within(120), pytest.raises(InputError) as refusal:
        audit(household(40), "count", "laplace", "pdp", scale=1.0, lattice=True, max_adversaries=10**14,
              information=None)
    message = str(refusal.value)
    assert f"{40 * 2**39:,} adversaries" in message
    assert "over the limit of 24.0 h (--force runs it anyway)" in message and " days" in message


def test_force_runs_past_the_time_limit(household, monkeypatch):
    """With the day limit lowered below household n = 4's 32 pdp adversaries (exact: about 1 ms
    each), the lattice is refused; force runs it, with the same result as without the limit."""
    from ddpbayes.auditing import cost as auditing

    kw = dict(scale=1.0, lattice=True, engine="exact", information=None)
    expected = audit(household(4), "count", "laplace", "pdp", **kw)
    monkeypatch.setattr(auditing, "MAX_SECONDS", 1e-3)
    refusal = r"pdp lattice has 32 adversaries \(4 targets x 2\^3 known sets\): at roughly .*\(--force runs it anyway\)"
    with pytest.raises(InputError, match=refusal):
        audit(household(4), "count", "laplace", "pdp", **kw)
    forced = audit(household(4), "count", "laplace", "pdp", force=True, **kw)
    assert forced.leakage == expected.leakage and forced.per_target == expected.per_target


def test_force_on_the_command_line(models_dir, monkeypatch, capsys):
    """--force is a run setting: exit 2 with one line without it, 0 with it."""
    from ddpbayes.auditing import cost as auditing
    from ddpbayes.cli.main import main

    monkeypatch.setattr(auditing, "MAX_SECONDS", 1e-3)
    base = ["audit", str(models_dir / "household.py"), "--query", "count", "--mechanism", "laplace", "--scale", "1",
            "--notion", "pdp", "--engine", "exact", "--information", "none", "--format", "json"]
    assert main(base) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--force runs it anyway" in err
    assert main([*base, "--force"]) == 0
    assert json.loads(capsys.readouterr().out)["notion"] == "pdp"


def test_lattice_results_that_cannot_fit_are_refused_even_forced(household, monkeypatch):
    """--lattice keeps about 700 + 60 (n - 1) bytes per adversary: 32 x 880 bytes on household n = 4
    are refused when the machine has less, naming --max-adversaries, whatever --force says."""
    from ddpbayes import limits

    monkeypatch.setattr(limits, "available_memory", lambda: 20_000)
    monkeypatch.setattr(limits, "FITS_ANYWHERE", 0)
    refusal = (r"--lattice's 32 kept results would need about 27\.5 KiB, more than this machine's available memory "
               r"\(19\.5 KiB\), whatever --max-adversaries allows")
    with pytest.raises(InputError, match=refusal):
        audit(household(4), "count", "laplace", "pdp", scale=1.0, lattice=True, engine="exact", force=True,
              information=None)


# ----------------------------------------------------------------------------- attack --locations BIG.csv


def _locations(tmp_path, users: int, bad_line: int | None = None):
    """A locations CSV of `users` users in the continental US; `bad_line` holds a latitude of 999."""
    lines = ["UserID,Latitude,Longitude"]
    for k in range(users):
        lines.append(f"{k},{999 if k + 2 == bad_line else 40.0 + k * 1e-4},-100.0")
    path = tmp_path / "locations.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_locations_from_a_device_are_refused_unread():
    from ddpbayes.geo.data import read_locations

    with bounded_memory(), pytest.raises(InputError, match=r"^/dev/zero is not a regular file"):
        read_locations("/dev/zero")


def test_locations_stop_streaming_once_they_cannot_fit(tmp_path, monkeypatch):
    """At 1,000 bytes a user and 6,000 bytes available, reading stops at the first look past 6
    users (every 4 rows: at 8 users), before the bad row on line 20 is reached."""
    from ddpbayes import limits
    from ddpbayes.geo import data

    monkeypatch.setattr(limits, "available_memory", lambda: 6_000)
    monkeypatch.setattr(limits, "FITS_ANYWHERE", 0)
    monkeypatch.setattr(data, "CHECK_EVERY", 4)
    path = _locations(tmp_path, 30, bad_line=20)
    with pytest.raises(InputError, match=r"the table for the 8 users read by line 9 would need about 7\.81 KiB, more "
                                         r"than this machine's available memory \(5\.86 KiB\): attack fewer users"):
        data.read_locations(path, 1000, "the table")
    assert len(data.read_locations(_locations(tmp_path, 5), 1000, "the table")) == 5


def test_attack_refuses_users_times_cells_beyond_memory(tmp_path, monkeypatch, capsys):
    """ddpbayes attack: 10 users at --grid 50 take 10 x 12 x 256 = 30,720 bytes (the masks of a block of
    min(256, 2^20 // 2,500) targets, 12 bytes a user each; no users x cells table since #40.18), one
    worker: refused with 30,000 bytes available, in one line naming the users."""
    from ddpbayes import limits
    from ddpbayes.cli.main import main

    monkeypatch.setattr(limits, "available_memory", lambda: 30_000)
    monkeypatch.setattr(limits, "FITS_ANYWHERE", 0)
    path = _locations(tmp_path, 10)
    assert main(["attack", "--locations", str(path), "--grid", "50", "--workers", "1", "--format", "json"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"for its 10 users would need about {10 * 12 * 256 / 1024:.3g} KiB" in err
    assert "attack fewer users" in err


# ----------------------------------------------------------------------------- counts past a float and past 4,300 digits


def test_counts_of_thousands_of_digits_are_stated():
    """A pdp lattice of 2^19999 adversaries and its time: past a float (count x seconds would
    overflow) and past Python's 4,300-digit string conversion, still one line with a power of ten."""
    from ddpbayes.auditing.cost import time_text as _time_text
    from ddpbayes.limits import byte_text

    count = 2**19999
    digits = 19999 * math.log10(2)  # log10 of the count: 6,020.3
    mantissa, exponent = 10 ** (digits % 1), math.floor(digits)
    assert count_text(count) == f"about {mantissa:.3g}e+{exponent}"
    assert _time_text(count, 1e-3) == f"{mantissa:.3g}e+{exponent - 3} s"  # a millisecond each
    assert byte_text(count) == f"{count_text(count >> 60)} EiB"
    assert byte_text(1023) == "1023 bytes" and byte_text(300 << 10) == "300 KiB" and byte_text(3 << 50) == "3 PiB"


def test_a_vector_grid_of_thousands_of_digits_is_one_line(household):
    """expr: with 8,000 outputs on household n = 4: 4^8000 grid points (4,817 digits), refused in one line."""
    spec = "expr:" + ";".join(f"x{k % 4}" for k in range(8000))
    message = _refused(household(4), spec, "laplace", "idp", scale=1.0, targets=[0])
    assert "output grid" in message and "e+4816 grid points" in message


def test_attack_report_spec_refuses_users_times_cells_beyond_memory(tmp_path, monkeypatch, capsys):
    """The same bound when the attack comes from a report spec's `[attack]` table (it read its
    locations without it): 10 users at grid 50 need 30,720 bytes on one worker (as above)."""
    from ddpbayes import limits
    from ddpbayes.cli.main import main

    monkeypatch.setattr(limits, "available_memory", lambda: 30_000)
    monkeypatch.setattr(limits, "FITS_ANYWHERE", 0)
    _locations(tmp_path, 10)
    spec = tmp_path / "attack.toml"
    spec.write_text('[attack]\ngrid = 50\nlocations = "locations.csv"\n', encoding="utf-8")
    assert main(["report", str(spec), "--out", str(tmp_path / "out"), "--workers", "1"]) == 2
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("error:")] == [err.strip().splitlines()[-1]]
    assert f"for its 10 users would need about {10 * 12 * 256 / 1024:.3g} KiB" in err
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------- other input files: devices and sizes


@pytest.mark.parametrize("argv, message", [
    (["audit", "/dev/zero", "--query", "count", "--mechanism", "laplace", "--scale", "1", "--notion", "idp"],
     "error: model file '/dev/zero' is not a regular file (a device or a pipe is not read)"),
    (["report", "/dev/zero", "--out", "OUT"], "error: spec file '/dev/zero' is not a regular file"),
    (["attack", "--edges", "/dev/zero", "--targets", "5"],
     "error: --edges /dev/zero is not a regular file (a device or a folder is not read)"),
], ids=["model", "spec", "edges"])
def test_devices_are_refused_unread(argv, message, tmp_path, capsys):
    """A device named as an input file was read until memory ran out, or called missing."""
    from ddpbayes.cli.main import main

    argv = [str(tmp_path / "out") if a == "OUT" else a for a in argv]
    with bounded_memory():
        assert main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [message]


def test_oversized_model_and_spec_files_are_refused_unread(tmp_path, capsys):
    """Sizes are read from the file system, not by reading: a sparse 17 MiB model file and a
    2 MiB spec are refused at once with the limits (16 MiB, 1 MiB)."""
    from ddpbayes.cli.main import main

    model, spec = tmp_path / "big.py", tmp_path / "big.toml"
    with open(model, "wb") as f:
        f.truncate(17 * 2**20)
    with open(spec, "wb") as f:
        f.truncate(2 * 2**20)
    assert main(["audit", str(model), "--query", "count", "--mechanism", "laplace", "--scale", "1",
                 "--notion", "idp"]) == 2
    assert main(["report", str(spec), "--out", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"error: model file '{model}' has 17,825,792 bytes, over the 16,777,216 a model file may have "
        "(keep data in files the model reads)",
        f"error: spec file '{spec}' has 2,097,152 bytes, over the 1,048,576 a spec may have"]
    assert not (tmp_path / "out").exists()
