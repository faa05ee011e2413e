"""Seed 002 §IV's inference attack on location data (`ddpbayes attack`, DESIGN §7).

release.py    the provider: K-means partition, the centroids' L1 sensitivity, the LPM
adversary.py  what each target's adversary knows: known sets, its cluster, the CAR conditional
posterior.py  the grid posterior (Eq. 6), the histogram (Eq. 8) and CAR priors, entropies
metrics.py    inference error (Eq. 10), leaked information (Eq. 11), Theorem 2's bound
run.py        the experiment: inputs, seeding, progress, rows

Its report (`--report DIR`) is `ddpbayes.reports.render.attack`: attack/ is below reports/.
"""
