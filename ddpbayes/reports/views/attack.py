"""What an attack report computes: the attack of an attack spec on its data (DESIGN §7)."""

from __future__ import annotations

import re
from collections.abc import Callable

from ddpbayes.attack.run import AttackResult, load_data, run_attack
from ddpbayes.errors import InputError
from ddpbayes.reports.input.attack_spec import INPUTS, AttackSpec
from ddpbayes.settings import RunSettings


def attack_result(spec: AttackSpec, say: Callable[[str], None], where: RunSettings) -> AttackResult:
    """Run the attack of `spec` (its units where `where` says; progress if `where.progress`). A
    setting the data rules out names its spec key."""
    say("loading the location data")
    data = load_data(*(spec.inputs[k] for k in INPUTS), grid=spec.settings.grid, where=where)  # memory-bounded
    try:
        spec.settings.check(data.users)
    except InputError as exc:
        named = re.sub(r"--([a-z-]+)", lambda m: f"key 'attack.{m.group(1).replace('-', '_')}'", str(exc))
        raise InputError(f"{spec.path}: {named}") from exc
    return run_attack(data, spec.settings, progress=where.progress, where=where)
