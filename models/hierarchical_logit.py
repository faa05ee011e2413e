"""Binary records whose log-odds share a random effect of unknown spread (a hierarchical model).

s ~ HalfNormal(tau) is how much groups differ; r ~ Normal(0, s) is this group's effect on the
log-odds; given r the records are independent: X_k | r ~ Bernoulli(sigmoid(r)). Marginally the
records are exchangeable and positively dependent through r, and how strongly depends on s,
which the data also inform. This is the textbook hierarchical prior (Gelman's eight schools on
a logit scale), written as users write it: centred, r ~ Normal(0, s).

Two continuous latents, one of them a scale: the structured engine's quadrature over (s, r)
does not settle (the density of r given s is singular as s -> 0), so the sampling engine
answers it: NUTS over (s, r) only, with the records summed out exactly given each draw
(issue #27). Closed form for a test: writing r = s·u with s = |z| and z, u independent standard
normals, P(X = x) = E[Π_k sigmoid(zu)^x_k (1 - sigmoid(zu))^(1 - x_k)] over two standard normals
(tau = 1), a smooth integrand that tensor Gauss–Hermite rules settle to 1e-12
(tests/test_sampling_summed.py).
"""

import pymc as pm

from ddpbayes import DependenceModel


def build(n: int = 4, tau: float = 1.0) -> DependenceModel:
    with pm.Model() as m:
        s = pm.HalfNormal("s", tau)
        r = pm.Normal("r", 0.0, s)
        pm.Bernoulli("x", pm.math.sigmoid(r), shape=n)
    return DependenceModel(m, tuples="x")
