"""A `Notion` per notion (DESIGN §1 "Layers"): looked up by name or passed as itself, each says
what it needs and which of audit's options it takes; an audit under a Notion is the audit
under its name."""

from __future__ import annotations

import pytest

from ddpbayes import audit
from ddpbayes.errors import InputError
from ddpbayes.notions import DDP, DP, IDP, NOTIONS, PDP, REGISTRY, notion


def test_one_notion_per_name_in_the_users_order():
    assert tuple(REGISTRY) == NOTIONS and list(REGISTRY.values()) == [DP, IDP, PDP, DDP]
    assert all(notion(name) is REGISTRY[name] and notion(REGISTRY[name]) is REGISTRY[name] for name in NOTIONS)
    assert [n for n in REGISTRY.values() if n.model_free] == [DP]
    assert [n for n in REGISTRY.values() if n.weakest] == [IDP]
    assert [n for n in REGISTRY.values() if n.lattice] == [PDP]
    assert [n for n in REGISTRY.values() if n.needs_dependence_sets] == [DDP]
    with pytest.raises(InputError, match=r"unknown notion 'xdp' \(use dp, idp, pdp, ddp\)"):
        notion("xdp")


def test_adversaries_and_their_count():
    assert [(a.target, sorted(a.known)) for a in IDP.adversaries(3, [0, 2])] == [(0, []), (2, [])]
    assert [sorted(a.known) for a in DP.adversaries(3, [1])] == [[0, 2]]
    assert [sorted(a.known) for a in DDP.adversaries(3, [0], dependence_sets=[frozenset({1})] * 3)] == [[2]]
    lattice = list(PDP.adversaries(3, [0, 1]))
    assert len(lattice) == PDP.adversary_count(3, [0, 1]) == 8
    assert PDP.adversary_count(3, [0, 1], known=[2]) == IDP.adversary_count(3, [0, 1]) == 2


def test_only_pdp_takes_known_lattice_and_search():
    PDP.check_known([1]), PDP.check_lattice(True), PDP.check_search(3, None, False)
    with pytest.raises(InputError, match="--known fixes the adversary of pdp; idp fixes its own"):
        IDP.check_known([1])
    with pytest.raises(InputError, match="--lattice lists the pdp adversaries"):
        DDP.check_lattice(True)
    with pytest.raises(InputError, match="use it with --notion pdp, not dp"):
        DP.check_search(3, None, False)
    with pytest.raises(InputError, match="--known fixes one"):
        PDP.check_search(3, [1], False)


def test_an_audit_under_a_notion_is_the_audit_under_its_name(household):
    model = household(n=4)
    for one in (IDP, PDP, DP):
        by_object = audit(model, "count", "laplace", one, scale=1.0, information=None)
        by_name = audit(model, "count", "laplace", one.name, scale=1.0, information=None)
        assert by_object.notion == one.name
        assert (by_object.leakage, by_object.per_target, by_object.witness) == (
            by_name.leakage, by_name.per_target, by_name.witness)


def test_ddp_known_sets_are_the_complements_and_shared_within_a_component():
    """Known set of A(i) = every tuple outside N(i) ∪ {i}, written out here; targets of one
    component (same N(i) ∪ {i}) share one frozenset object (the Gowalla audit's memory, issue #29)."""
    components = [[0, 3, 5], [1], [2, 4], [6]]
    n = 7
    dep = [None] * n
    for comp in components:
        for i in comp:
            dep[i] = frozenset(j for j in comp if j != i)
    advs = list(DDP.adversaries(n, list(range(n)), dependence_sets=dep))
    for adv in advs:
        assert adv.known == {j for j in range(n) if j != adv.target and j not in dep[adv.target]}
    for comp in components:
        assert len({id(advs[i].known) for i in comp}) == 1
    assert len({id(a.known) for a in advs}) == len(components)
