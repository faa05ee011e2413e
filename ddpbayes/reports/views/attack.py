"""What an attack report computes: the attack of an attack spec on its data (DESIGN §7)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import replace

from ddpbayes.attack.run import AttackResult, load_data, run_attack
from ddpbayes.errors import InputError
from ddpbayes.reports.input.attack_spec import INPUTS, AttackSpec
from ddpbayes.settings import RunSettings


def attack_results(spec: AttackSpec, say: Callable[[str], None], where: RunSettings) -> list[AttackResult]:
    """Run the attack of `spec` in each of its regions (its units where `where` says; progress if
    `where.progress`); the regions after the first with every other user known only (their users may
    be fewer than a known-set size). A setting the data rules out names its spec key."""
    out = []
    for k, name in enumerate(spec.regions):
        say(f"loading the location data ({name})")
        settings = replace(spec.settings, region=name, **({"n_prior": (None,)} if k else {}))
        data = load_data(*(spec.inputs[k] for k in INPUTS[:3]), grid=settings.grid, where=where,  # memory-bounded
                         near=spec.inputs["near"], region_name=name)
        try:
            settings.check(data.users)
        except InputError as exc:
            named = re.sub(r"--([a-z-]+)", lambda m: f"key 'attack.{m.group(1).replace('-', '_')}'", str(exc))
            raise InputError(f"{spec.path}: region {name}: {named}") from exc
        out.append(run_attack(data, settings, progress=where.progress, where=where))
    return out
