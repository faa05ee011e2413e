"""Seed 000's Example 1 (Liu, Chakraborty, Mittal, NDSS 2016): two dependent readings.

D_i ~ U[0, 1] and, with X ~ U[0, 1] independent, D_j = 0.5 D_i + 0.5 X; written here as
D_j | D_i ~ U[0.5 D_i, 0.5 D_i + 0.5]. Continuous and non-Gaussian: the sampling engine's case.

Expected, with Laplace(b) (derived in tests/test_sampling.py):
- sum D_i + D_j, target D_i: given D_i = t the sum is 1.5 t + 0.5 X, a location family in t,
  so the log-ratio is at most 1.5 (1 - 0)/b, attained as y -> ±inf: 1.5/b.
- difference D_i - D_j, target D_i: 0.5 t - 0.5 X: 0.5/b.
- sum, target D_j: given D_j = s, D_i ~ U[max(0, 2s - 1), min(1, 2s)] and the sum ranges from
  about 0 (s -> 0) to 2 (s -> 1): 2/b, approached as s tends to the ends of its range.
- dependence coefficient rho_ij = 0.5 for every b (000 Example 1; DESIGN §3.1).

Finding (DPM): 000 quotes the sum's dependent sensitivity as DS = 1 + rho_ij = 1.5, from the
change of D_i alone. Released with Lap(1.5 / eps), target D_j leaks 2 / b = 4/3 eps (above):
the paper's DPM exceeds eps under ddp and idp (N(i) = {j}, so ddp = idp). The other direction
has rho_ji = 1 (D_j near 0 or 1 pins D_i near 0 or 1; the sampling engine estimates 0.999998),
so DS_Q = max_i sum_j rho_ij dQ_j = 2 and DPM coincides with the group baseline L dQ / eps =
2 / eps, which meets eps exactly; `ddpbayes calibrate models/ddp_example1.py --query sum
--notion idp --epsilon 1` finds the exact scale 2, DPM 2 and group 2 (sampling engine).
"""

import pymc as pm

from ddpbayes import DependenceModel, Interval


def build() -> DependenceModel:
    with pm.Model() as m:
        d_i = pm.Uniform("d_i", 0.0, 1.0)
        pm.Uniform("d_j", 0.5 * d_i, 0.5 * d_i + 0.5)
    return DependenceModel(m, tuples=["d_i", "d_j"], domains={"d_i": Interval(0, 1), "d_j": Interval(0, 1)})
