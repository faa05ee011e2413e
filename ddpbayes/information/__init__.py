"""Wu et al.'s information measures beside the leakage (004 Thms 2–3, Prop. 4; DESIGN §3.4)."""

from ddpbayes.information.measures import TargetMeasures, target_measures

__all__ = ["TargetMeasures", "target_measures"]
