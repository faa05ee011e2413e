"""Classic DP of a program (issue #43 item 1; DESIGN §2.6): a certified lower bound on

    sup over neighbouring databases x, x' (one record changed within the declared domains)
    and output events E of log P[M(q(x)) in E] / P[M(q(x')) in E].

Classic DP has no model law: the records are the pair's databases themselves (no dependence, no
draws of records), so the program runs on the two fixed answer vectors q(x) and q(x'). The pairs
are given (`read_pairs`: `--pairs FILE`) or searched over the domains (`searched_pairs`); either
way, per target, the candidate pairs share the search sample by successive halving
(`certify.certify_best`: the search sample is the pilot that chooses the pair and its event) and
only the chosen (pair, event) is counted on fresh draws, at 1 - (1 - CONFIDENCE) / m for the m
targets certified (Bonferroni over the checks: a choice made on draws independent of the check
sample costs the certificate nothing)."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ddpbayes.engines.base import AdversaryLeakage, Witness
from ddpbayes.engines.program.certify import certify_best
from ddpbayes.errors import InputError
from ddpbayes.model.domains import Domain, Finite
from ddpbayes.problem import Adversary, Problem
from ddpbayes.progress import Progress

CONFIDENCE = 0.95  # of the audit's certified lower bound, all targets together
MAX_PAIRS = 64  # pairs per target: more given are refused, searched ones beyond it dropped
SEARCHED_BASES = 8  # searched: the others' values x_{-i}: all at the low end, all at the high end, and random ones
ALL_PAIRS_UP_TO = 6  # searched: a finite target domain this small gives every pair of its values; else its ends
MAX_PAIRS_BYTES = 16 * 2**20  # a --pairs file larger than this is refused before it is read


@dataclass(frozen=True)
class Pair:
    """Two neighbouring databases: x and x_prime (n,) differ in record `target` only."""

    x: tuple[float, ...]
    x_prime: tuple[float, ...]

    @property
    def target(self) -> int:
        return int(np.flatnonzero(np.asarray(self.x) != np.asarray(self.x_prime))[0])


# ---------------------------------------------------------------------------------------------- the pairs

def read_pairs(given: str | Path | Sequence, domains: Sequence[Domain]) -> list[Pair]:
    """The pairs of `--pairs`: a JSON file (or the list itself) of [x, x'] pairs, each x a list of the n
    records' values in the model's tuple order, x and x' differing in exactly one record, every value in
    its tuple's declared domain. One line of bad input otherwise."""
    raw = _load(given) if isinstance(given, (str, Path)) else given
    if not isinstance(raw, (list, tuple)) or not raw:
        raise InputError("--pairs: a non-empty JSON list of [x, x'] pairs of databases, each x a list of the "
                         f"{len(domains)} records' values")
    return [_pair(p, j, domains) for j, p in enumerate(raw)]


def _load(path: str | Path) -> object:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"--pairs file '{path}' not found, or not a regular file")
    size = path.stat().st_size
    if size > MAX_PAIRS_BYTES:
        raise InputError(f"--pairs file '{path}' has {size:,} bytes, over the {MAX_PAIRS_BYTES:,} read")
    try:
        return json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"--pairs file '{path}' is not JSON: {' '.join(str(e).split())}") from None


def _pair(p: object, j: int, domains: Sequence[Domain]) -> Pair:
    n = len(domains)
    if not isinstance(p, (list, tuple)) or len(p) != 2:
        raise InputError(f"--pairs: pair {j} is not [x, x'] (two databases)")
    xs = []
    for db in p:
        try:
            x = np.asarray(db, dtype=float)
        except (TypeError, ValueError):
            raise InputError(f"--pairs: pair {j} holds a database that is not a list of numbers") from None
        if x.shape != (n,) or not np.all(np.isfinite(x)):
            raise InputError(f"--pairs: pair {j}'s databases must be lists of {n} finite numbers (one per record), "
                             f"got shape {x.shape}")
        bad = [k for k in range(n) if not _within(x[k], domains[k])]
        if bad:
            raise InputError(f"--pairs: pair {j} gives record {bad[0]} the value {x[bad[0]]:g}, outside its domain "
                             f"{domains[bad[0]]}")
        xs.append(x)
    changed = np.flatnonzero(xs[0] != xs[1])
    if len(changed) != 1:
        raise InputError(f"--pairs: pair {j} changes {len(changed)} records; neighbouring databases differ in exactly "
                         "one")
    return Pair(tuple(map(float, xs[0])), tuple(map(float, xs[1])))


def _within(v: float, domain: Domain) -> bool:
    return v in domain.values if isinstance(domain, Finite) else domain.lo <= v <= domain.hi


def searched_pairs(domains: Sequence[Domain], target: int, rng: np.random.Generator) -> list[Pair]:
    """Candidate pairs for `target` from the domains: the others' values all at their low ends, all at
    their high ends, and SEARCHED_BASES - 2 drawn uniformly (a finite domain's values, an interval's
    points); the target's values: every pair of a finite domain of at most ALL_PAIRS_UP_TO values, else
    its two ends. An unbounded domain is refused (give --pairs)."""
    for k, d in enumerate(domains):
        if not isinstance(d, Finite) and not d.bounded:
            raise InputError(f"classic dp of a program searches databases within the declared domains: tuple {k}'s "
                             f"domain {d} is unbounded (bound it in the model, or give --pairs)")
    lo = np.array([d.lo for d in domains])
    hi = np.array([d.hi for d in domains])
    bases = [lo, hi] + [np.array([_uniform(d, rng) for d in domains]) for _ in range(SEARCHED_BASES - 2)]
    dom = domains[target]
    values = dom.values if isinstance(dom, Finite) and len(dom.values) <= ALL_PAIRS_UP_TO else (dom.lo, dom.hi)
    out = []
    for base in bases:
        for a in range(len(values)):
            for b in range(a + 1, len(values)):
                x, x_prime = base.copy(), base.copy()
                x[target], x_prime[target] = values[a], values[b]
                out.append(Pair(tuple(map(float, x)), tuple(map(float, x_prime))))
    return out


def _uniform(domain: Domain, rng: np.random.Generator) -> float:
    if isinstance(domain, Finite):
        return float(domain.values[rng.integers(len(domain.values))])
    return float(rng.uniform(domain.lo, domain.hi))


def distinct(problem: Problem, pairs: list[Pair]) -> list[tuple[Pair, np.ndarray, np.ndarray]]:
    """The pairs whose answers differ, one per unordered pair of answer vectors (what the program sees),
    in order, MAX_PAIRS at most: (pair, q(x), q(x'))."""
    if not pairs:
        return []
    x = np.array([p.x for p in pairs] + [p.x_prime for p in pairs])
    with np.errstate(over="ignore", invalid="ignore"):
        q = np.asarray(problem.query.values(x), dtype=float).reshape(len(x), -1)
    if not np.all(np.isfinite(q)):
        raise InputError("the query's values are not finite on some database of the pairs")
    out, seen = [], set()
    for j, p in enumerate(pairs):
        a, b = q[j], q[len(pairs) + j]
        key = frozenset((a.tobytes(), b.tobytes()))
        if len(key) == 1 or key in seen:
            continue
        seen.add(key)
        out.append((p, a, b))
    return out[:MAX_PAIRS]


# ---------------------------------------------------------------------------------------------- the certificates

def classic_leakage(problem: Problem, targets: Sequence[int], given: str | Path | Sequence | None
                    ) -> list[AdversaryLeakage]:
    """One certified lower bound per target (`certify_best` over its candidate pairs), each at
    1 - (1 - CONFIDENCE) / m for the m targets."""
    domains = problem.model.domains
    settings = problem.settings
    if given is not None:
        pairs = read_pairs(given, domains)
        outside = sorted({p.target for p in pairs} - set(targets))
        if outside:
            raise InputError(f"--pairs: a pair changes record {outside[0]}, which is not a --target")
        targets = sorted({p.target for p in pairs})
        by_target = {i: [p for p in pairs if p.target == i] for i in targets}
        crowded = [i for i in targets if len(by_target[i]) > MAX_PAIRS]
        if crowded:
            raise InputError(f"--pairs: {len(by_target[crowded[0]])} pairs change record {crowded[0]}; at most "
                             f"{MAX_PAIRS} per record (each takes a share of the search runs)")
    else:
        by_target = {i: searched_pairs(domains, i, np.random.default_rng([settings.seed, 43, i])) for i in targets}
    m = len(targets)
    level = 1 - (1 - CONFIDENCE) / m
    runs = settings.program_runs
    with Progress("certifying the program (classic dp)", 4 * runs * m, "runs", enabled=settings.progress,
                  slow_only=True) as bar:
        return [_certified(problem, i, distinct(problem, by_target[i]), level, m, given is not None, bar)
                for i in targets]


def _certified(problem: Problem, i: int, pairs: list, level: float, m: int, given: bool,
               bar: Progress) -> AdversaryLeakage:
    n, runs, mech = problem.model.n, problem.settings.program_runs, problem.mechanism
    adv = Adversary(i, frozenset(range(n)) - {i})
    how = "given (--pairs)" if given else "searched over the domains"
    if not pairs:
        bar.advance(4 * runs)
        return AdversaryLeakage(adv, 0.0, Witness(adv, None, None, None, None), ci=(0.0, math.inf),
                                reason=f"the query's answers are the same on both databases of every pair {how}: "
                                       "the program cannot tell them apart there (a lower bound of 0)",
                                diagnostics={"ok": True, "lower_bound_only": True, "pairs_tried": 0})
    if runs < 2 * len(pairs):
        raise InputError(f"--program-runs {runs:,} is below 2 per candidate pair ({len(pairs)} for record {i})")

    def draw(answers: np.ndarray):
        return lambda k, gen: mech.sample(np.broadcast_to(answers, (k, len(answers))), gen)

    rng = np.random.default_rng([problem.settings.seed, 43, i, len(pairs)])
    cert = certify_best([(draw(a), draw(b)) for _, a, b in pairs], n_search=runs, n_check=runs, confidence=level,
                        rng=rng, workers=1, progress=bar, aligned=getattr(mech, "aligned", False))
    pair, q_a, q_b = pairs[cert.pair]
    x, x_prime = np.array(pair.x), np.array(pair.x_prime)
    k_a, k_b, checked = cert.counts
    n_a, n_b = cert.runs
    joint = cert.joint  # (both, only x, only x')
    if cert.direction != "a":  # the event is likelier on x' than on x: name the pair the way it leaks
        x, x_prime, q_a, q_b, k_a, k_b, n_a, n_b = x_prime, x, q_b, q_a, k_b, k_a, n_b, n_a
        joint = joint and (joint[0], joint[2], joint[1])
    witness = Witness(adv, {k: float(x[k]) for k in range(n) if k != i}, float(x[i]), float(x_prime[i]), None)
    reason = (f"certified lower bound at {level:.4g} confidence ({CONFIDENCE:g} over the {m} targets, Bonferroni): "
              f"the event {cert.event.describe()} had {k_a:,} of {n_a:,} fresh runs on x (record {i} = {x[i]:g}, "
              f"answers {_vector(q_a)}) and {k_b:,} of {n_b:,} on x' (record {i} = {x_prime[i]:g}, answers "
              f"{_vector(q_b)}) ({_counted(cert, checked)}); the pair and the event chosen among {len(pairs)} "
              f"pairs {how} on {cert.n_search:,} other runs per database; classic dp has no model law: the records "
              "are the pair's databases themselves (no dependence)")
    diagnostics = {"ok": True, "lower_bound_only": True, "program_runs": 4 * runs, "estimate": cert.estimate,
                   "event": cert.event.describe(), "confidence": level, "counts": [k_a, k_b, checked],
                   "check": cert.design.describe(), "joint": list(joint) if joint else None,
                   "pairs_tried": len(pairs), "answers": [q_a.tolist(), q_b.tolist()]}
    return AdversaryLeakage(adv, cert.eps_lcb, witness, ci=(cert.eps_lcb, math.inf), reason=reason,
                            diagnostics=diagnostics, score=cert.eps_lcb)


def _counted(cert, checked: int) -> str:
    """How the check's runs were made and bounded (`paired.Design`)."""
    if not cert.design.coupled:
        return f"runs Poisson of mean {checked:,}; Clopper–Pearson on the share of the hits"
    both = cert.joint[0]
    return (f"{checked:,} runs a database from shared generators, the program's randomness aligned; {both:,} runs hit "
            "on both: Clopper–Pearson on the share hit on both and on the discordant runs' split")


def _vector(q: np.ndarray) -> str:
    shown = ", ".join(f"{v:g}" for v in q[:6]) + (", ..." if len(q) > 6 else "")
    return shown if len(q) == 1 else f"({shown})"
