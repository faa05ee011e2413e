"""What an audit would cost, refused before any adversary is evaluated (DESIGN §2.4): more
adversaries than --max-adversaries, more time than MAX_SECONDS (a day) unless --force, more
memory than --lattice may hold."""

from __future__ import annotations

from ddpbayes.engines import Engine
from ddpbayes.errors import InputError
from ddpbayes.limits import MAX_SECONDS, byte_text, check_memory, count_text
from ddpbayes.notions import Notion
from ddpbayes.problem import Problem
from ddpbayes.progress import duration


def check_adversaries(engine: Engine, problem: Problem, notion: Notion, targets: list[int], known: list[int] | None,
                      count: int, limit: int, lattice: bool) -> None:
    """Before any adversary is evaluated (DESIGN §2.4), refuse: more than `limit`, saying what they
    would cost and, with --lattice, the memory it would hold; more than the engine estimates it can
    evaluate in MAX_SECONDS (a day) unless --force; --lattice results that would not fit in memory."""
    n = problem.model.n
    if count > len(targets):
        what = (f"the {notion} lattice has {count_text(count)} adversaries ({len(targets)} targets x 2^{n - 1} known "
                "sets)")
        advice = ("fix the adversary's knowledge with --known, restrict --target, search it greedily with "
                  "--search greedy (Li et al. 2019; a lower bound), or use the gaussian engine's lattice search for "
                  "Gaussian models")
    else:
        what = f"the {notion} audit has {count_text(count)} adversaries (one per target)"
        advice = "restrict --target"
    memory = count * (700 + 60 * (n - 1))
    held = f", and --lattice would hold about {byte_text(memory)}" if lattice else ""
    known_sets = notion.known_set_count(n, targets, known)
    if count > limit:
        refuse(engine, problem, what, count, limit, advice, held, known_sets)
    each = _each(engine, problem, count, known_sets)
    if each is not None and count > MAX_SECONDS / each and not problem.settings.force:
        raise InputError(f"{what}: at roughly {each * 1e3:.3g} ms each the {engine.name} engine would take about "
                         f"{time_text(count, each)}, over the limit of {duration(MAX_SECONDS)} (--force runs it "
                         f"anyway){held}; {advice}")
    if lattice:
        check_memory(memory, f"--lattice's {count_text(count)} kept results", flag="--max-adversaries")


def refuse(engine: Engine, problem: Problem, what: str, count: int, limit: int, advice: str, held: str = "",
           known_sets: int | None = None) -> None:
    """The one-line refusal of `count` adversaries over `limit`, with the engine's own estimate of the time
    (`known_sets`: at most how many distinct known sets they have, `count` when not given)."""
    each = _each(engine, problem, count, count if known_sets is None else known_sets)
    cost = "" if each is None else f"; at roughly {each * 1e3:.3g} ms each it would take about " + time_text(count, each)
    raise InputError(f"{what}, over the limit of {count_text(limit)} (raise --max-adversaries){cost}{held}; "
                     f"{advice}")


def _each(engine: Engine, problem: Problem, count: int, known_sets: int) -> float | None:
    """Seconds an adversary, the engine's estimate for all `count` of them averaged (work shared within a known
    set spread over its adversaries); a count past a float's range at the engine's cost of one alone."""
    if count.bit_length() > 1000:
        return engine.seconds_per_adversary(problem)
    total = engine.seconds(problem, count, min(known_sets, count))
    return None if total is None else total / count


def time_text(count: int, each: float) -> str:
    """`count` adversaries at `each` seconds as a duration; a count past a float's range in
    seconds as a power of ten (a lattice of 2^20000 adversaries)."""
    if count.bit_length() < 1000:
        return duration(count * each)
    return f"{count_text(count * round(each * 1e9) // 10**9).removeprefix('about ')} s"
