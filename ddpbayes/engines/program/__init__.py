"""The black-box audit of a program (issue #28 item 2; DESIGN §5.1): a certified lower bound on the
leakage of any sampler of outputs. `event` searches a distinguishing output event on one sample
(a histogram over discrete outputs, DP-Sniper's classifier-and-threshold over continuous ones),
`certify` bounds its probability ratio on a fresh sample with exact binomial (Clopper–Pearson)
intervals (`bounds`). Such a bound may FAIL a claim, never PASS one."""
