"""The names a user types — notions, engines, calibration recipes, the noises `derive` knows —
so that the command line parses (and rejects) its arguments in well under a second."""

NOTIONS = ("dp", "idp", "pdp", "ddp")
ENGINES = ("exact", "structured", "gaussian", "sampling")  # `auto` tries them in this order
CALIBRATION_METHODS = ("exact", "dpm", "group", "dp")
DERIVED_NOISES = ("laplace", "gaussian")  # the noises `ddpbayes derive` has closed forms for (symbolic/)
