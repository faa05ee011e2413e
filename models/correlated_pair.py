"""Li et al. 2019's two-tuple database with positive, negative or no correlation (their Example 1, Table II).

Two binary tuples with joint table P(X_0 = r, X_1 = c) = table[r][c]: X_0 ~ Bernoulli(p10 + p11),
X_1 | X_0 ~ Bernoulli(P(X_1 = 1 | X_0)). Seed 003 compares such tables (its Table II) with
a sum query and Laplace(b = 1); the extraction lost the table's numbers, so the defaults
here are ours: with `strength` s (the Pearson correlation's magnitude, uniform marginals)

    positive  [[(1+s)/4, (1-s)/4], [(1-s)/4, (1+s)/4]]    corr = +s   (s = 0.6: [[.4, .1], [.1, .4]])
    negative  [[(1-s)/4, (1+s)/4], [(1+s)/4, (1-s)/4]]    corr = -s   (s = 0.6: [[.1, .4], [.4, .1]])
    none      [[.25, .25], [.25, .25]]                    corr = 0    (strength ignored)

or any `table=[[p00, p01], [p10, p11]]`. On the command line quote strings:
`-p correlation="'negative'"`, `-p table="[[0.3, 0.2], [0.1, 0.4]]"`.

Expected, sum (= count) with Laplace(b), target X_0 (X_1 is symmetric for these tables).
Write a_t = P(X_1 = 1 | X_0 = t) and E = e^{1/b}.
- idp (K = {}): L(y | t) = (1 - a_t) e^{-|y-t|/b} + a_t e^{-|y-t-1|/b}. The query takes 0, 1, 2;
  for y <= 0 (y >= 2) every |y - q| is q - y (y - q), so the ratio is constant there and
  equals its y -> -inf (+inf) limit; the only other breakpoint is y = 1. Hence
      idp = max |log R|,  R in { E (1 - a_1 + a_1 E) / (1 - a_0 + a_0 E)       (y >= 2),
                                 E (1 - a_0 + a_0 / E) / (1 - a_1 + a_1 / E)    (y <= 0),
                                 (a_0 + (1 - a_0) / E) / (1 - a_1 + a_1 / E) }  (y = 1).
  For a symmetric table (p00 = p11, p01 = p10), a_1 = c and a_0 = 1 - c with c = p00 + p11 =
  P(X_1 = X_0); the first two coincide, the third is 1, and
      idp = 1/b + log((1 - c + c E) / (c + (1 - c) E)).
  b = 1: positive (c = 0.8) 1 + log((0.2 + 0.8 e) / (0.8 + 0.2 e)) = 1 + log(2.37463 / 1.34366)
  = 1 + 0.56945 = 1.56945; negative (c = 0.2) 1 - 0.56945 = 0.43055; none (c = 0.5) 1.
  The formula grows with c: from 0 (c = 0, perfectly negative, 004's pair) through 1/b
  (independent) to 2/b (c = 1, perfectly positive, 004 Example 2's 2 eps) — 003 Example 3:
  stronger positive correlation leaks more, stronger negative correlation less.
- pdp with K = {1} (the adversary knows x_1 = s): nothing is unknown, L(y | t, s) =
  e^{-|y-t-s|/b}, and the ratio reaches e^{1/b} for y >= 1 + s. Every entry of the three tables
  is positive, so both t remain possible: pdp{1} = 1/b = 1 for all three (= dp).
- pdp over the lattice is max(idp, 1/b): 1.56945 (K = {}), 1 (K = {1}), 1 (either).

Seed 003's qualitative finding (§I Example 1, §V after Thm. 3): with positive correlation the
weakest adversary leaks most (1.569 > 1); with negative correlation knowing the other tuple
leaks more (1 > 0.431); with independent tuples prior knowledge has no effect (1 = 1, Thm. 1).
"""

import numpy as np
import pymc as pm

from ddpbayes import DependenceModel


def default_table(correlation: str = "positive", strength: float = 0.6) -> list[list[float]]:
    if not 0.0 <= strength <= 1.0:
        raise ValueError(f"strength must be in [0, 1], got {strength}")
    s = strength
    if correlation == "positive":
        return [[(1 + s) / 4, (1 - s) / 4], [(1 - s) / 4, (1 + s) / 4]]
    if correlation == "negative":
        return [[(1 - s) / 4, (1 + s) / 4], [(1 + s) / 4, (1 - s) / 4]]
    if correlation == "none":
        return [[0.25, 0.25], [0.25, 0.25]]
    raise ValueError(f"correlation must be 'positive', 'negative' or 'none', got {correlation!r}")


def build(
    correlation: str = "positive", strength: float = 0.6, table: list[list[float]] | None = None
) -> DependenceModel:
    t = np.asarray(default_table(correlation, strength) if table is None else table, dtype=float)
    if t.shape != (2, 2) or np.any(t < 0) or not np.isclose(t.sum(), 1.0):
        raise ValueError(f"table must be [[p00, p01], [p10, p11]] of non-negative numbers summing to 1, got {table}")
    p_x0 = t[1].sum()
    # P(X_1 = 1 | X_0 = r); a row of zero mass is never conditioned on, any value will do.
    p1_given = [t[r, 1] / t[r].sum() if t[r].sum() > 0 else 0.5 for r in (0, 1)]
    with pm.Model() as m:
        x0 = pm.Bernoulli("x0", p_x0)
        pm.Bernoulli("x1", pm.math.switch(x0, p1_given[1], p1_given[0]))
    return DependenceModel(m, tuples=["x0", "x1"])
