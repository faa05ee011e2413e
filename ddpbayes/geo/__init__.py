"""Users' places and friendships (issue 14, seed 002 §IV): CSV readers, the normalising box and
great-circle distances (`data`), and the CAR model of positions on the friendship graph with
its PyMC fit (`car`)."""

from ddpbayes.geo.car import CarFit, adjacency, car_precision, conditional, joint_precision, load_fit, save_fit
from ddpbayes.geo.data import US_BOX, Box, Edges, Locations, box_of, haversine_km, read_edges, read_locations

__all__ = ["US_BOX", "Box", "CarFit", "Edges", "Locations", "adjacency", "box_of", "car_precision", "conditional",
           "haversine_km", "joint_precision", "load_fit", "read_edges", "read_locations", "save_fit"]
