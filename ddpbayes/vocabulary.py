"""The names a user types — notions, engines, calibration recipes, the noises `derive` knows —
so that the command line parses (and rejects) its arguments in well under a second."""

NOTIONS = ("dp", "idp", "pdp", "ddp")
ENGINES = ("exact", "structured", "gaussian", "sampling", "program")  # `auto` tries them in this order
PROGRAM = "program:"  # --mechanism program:FILE:NAME, a Python function audited as a black box (DESIGN §2.6)
LIBRARY = "py:"  # --mechanism py:MODULE:EXPRESSION, a library object or function built by Python (DESIGN §5.2)
CALIBRATION_METHODS = ("exact", "dpm", "group", "dp")
DERIVED_NOISES = ("laplace", "gaussian")  # the noises `ddpbayes derive` has closed forms for (symbolic/)
