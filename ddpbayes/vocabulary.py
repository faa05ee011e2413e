"""The names a user types — notions, engines, calibration recipes — importable without PyMC,
so that the command line parses (and rejects) its arguments in well under a second."""

NOTIONS = ("dp", "idp", "pdp", "ddp")
ENGINES = ("exact", "gaussian", "sampling", "structured")  # `auto` tries them in this order (structured: opt-in for now)
CALIBRATION_METHODS = ("exact", "dpm", "group", "dp")
