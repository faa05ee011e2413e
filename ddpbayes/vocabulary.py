"""The names a user types — notions, engines, calibration recipes — importable without PyMC,
so that the command line parses (and rejects) its arguments in well under a second."""

NOTIONS = ("dp", "idp", "pdp", "ddp")
ENGINES = ("exact", "structured", "gaussian", "sampling")  # `auto` tries them in this order
CALIBRATION_METHODS = ("exact", "dpm", "group", "dp")
