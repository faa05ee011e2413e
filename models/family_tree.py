"""A family tree of a binary heritable trait: grandparents -> parents -> children.

X_k = 1 if member k has the trait (say, carries a predisposition to a heritable condition; the
model works at the level of the trait, not of genotypes). The founders — the founding couple and
everyone who marries into the family — have it independently with probability `p_founder`. A
child of a couple has it with probability p_child[j], where j in {0, 1, 2} is how many of its
two parents have it (by default 0.25, 0.5, 0.75: two carriers pass it on three times in four).
Each child's law is `pm.math.switch` on its parents with these Python floats, all exact in
float32, so PyTensor builds the terms in float32: the engines must evaluate them in float64
(DESIGN §2.1, `in_float64`). Seed 000 names genetic relationships among the sources of
dependence between tuples (000 §V), and seed 004 §1 motivates dependent records with a family
sharing a contagious disease (contagious_family.py); here the family shares a trait through
imperfect inheritance from two parents.

Shape: generation 0 is the founding couple; every couple has `children` children; every child of
a generation before the last marries a spouse from outside (a founder), and the two found a
couple of the next generation; the last generation has no spouses. Members are numbered
generation by generation, each child followed by its spouse. Between the first and the last,
generation g has 2·children^g members; the last has children^(generations - 1). So 5
generations of 3 children per couple make 161 members, and 7 of 2 make 190. The default tree (3
generations, 2 children per couple, 10 members):

    0 g0_0 ── 1 g0_1                           grandparents (the founding couple)
         ├── 2 g1_0 ── 3 g1_0_spouse           parent and the spouse who married in
         │        ├── 6 g2_0                   children (grandchildren of 0 and 1)
         │        └── 7 g2_1
         └── 4 g1_1 ── 5 g1_1_spouse
                  ├── 8 g2_2
                  └── 9 g2_3

Every member depends on its blood relatives; founders are independent of each other, and a
spouse of every member but its own descendants, which makes ddp differ from idp: 000's
adversary of a spouse knows every member but the spouse's children.

Expected, for the count with Laplace(b) (--epsilon eps gives b = 1/eps):
- p_child = (p, p, p): no inheritance, the members are independent: every notion gives 1/b
  (003 Thm. 1). generations = 1 is the founding couple alone: 1/b too.
- Defaults (b = 1), by brute force in plain numpy (the joint over the 1024 configurations as
  the product of the founders' and children's probabilities, the mixture of Laplace densities of
  the count given X_i = t and x_K, the log-ratio maximised on the breakpoints y = 0..10 and both
  tails y -> +-inf): idp = 1.61747 for a grandparent (0, 1), 2.08005 for a parent (2, 4),
  1.43451 for a spouse (3, 5) and 1.70530 for a child (6..9): a parent, tied to its parents
  and its children, leaks most. ddp = 1.77528 for a grandparent (K = the other grandparent and
  both spouses), 2.15002 for a parent (K = both spouses), 1.52548 for a spouse (K = everyone but
  its children), 1.70613 for a child (K = the other line's spouse): here ddp >= idp for every
  member. The pdp lattice's maximum is the ddp adversary of a parent, 2.15002; knowing every
  other member gives dp = 1/b.
"""

from __future__ import annotations

from collections.abc import Sequence

import pymc as pm

from ddpbayes import DependenceModel


def build(
    generations: int = 3,
    children: int = 2,
    p_founder: float = 0.25,
    p_child: Sequence[float] = (0.25, 0.5, 0.75),
) -> DependenceModel:
    """One Bernoulli per member, parents before children; every member is a tuple."""
    if generations < 1:
        raise ValueError(f"generations must be at least 1, got {generations}")
    if children < 1:
        raise ValueError(f"children must be at least 1 per couple, got {children}")
    if len(p_child) != 3:
        raise ValueError(f"p_child must give P(trait) for 0, 1 and 2 parents with it, got {p_child}")
    p_founder, p_child = float(p_founder), tuple(float(p) for p in p_child)
    for name, p in (("p_founder", p_founder), *((f"p_child[{j}]", p) for j, p in enumerate(p_child))):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} must be a probability, got {p}")
    members = family(generations, children)
    with pm.Model() as m:
        rv: dict = {}
        for name, parents in members:
            p = p_founder if parents is None else _inherited(rv[parents[0]], rv[parents[1]], p_child)
            rv[name] = pm.Bernoulli(name, p)
    return DependenceModel(m, tuples=[name for name, _ in members])


def family(generations: int, children: int) -> list[tuple[str, tuple[str, str] | None]]:
    """Every member in tuple order, as (name, its two parents, or None for a founder)."""
    members: list[tuple[str, tuple[str, str] | None]] = [("g0_0", None), ("g0_1", None)]
    couples = [("g0_0", "g0_1")]
    for g in range(1, generations):
        born = [(f"g{g}_{j}", couple) for j, couple in enumerate(c for c in couples for _ in range(children))]
        couples = []
        for name, parents in born:
            members.append((name, parents))
            if g < generations - 1:
                members.append((f"{name}_spouse", None))
                couples.append((name, f"{name}_spouse"))
    return members


def _inherited(a, b, p_child: tuple[float, float, float]):
    """P(child has the trait) = p_child[a + b], as switches on the parents' traits a and b."""
    return pm.math.switch(a, pm.math.switch(b, p_child[2], p_child[1]), pm.math.switch(b, p_child[1], p_child[0]))
