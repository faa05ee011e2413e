"""What a report computes, from its spec (`reports.input`) with the public API (`ddpbayes.audit`).

collect.py      an audit spec's report: every notion's audit and the views below (`Collected`)
auditor.py      `audit` with the spec's settings, for any notion (a unit of work)
sweep.py        leakage against the noise level;  calibrated.py  `calibrate`'s scales on it
lattice.py      pdp's lattice of adversaries;  closed_form.py  sympy's Gaussian closed forms
information.py  seed 004's information measures;  profile.py  Gaussian noise ([profile])
composition.py  several releases audited jointly;  attack.py  the inference attack on location data
mechanisms.py   several mechanisms on several models against their nominal ε (issue #28)
"""
