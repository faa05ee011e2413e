"""What a report is asked: its spec, read and checked before anything runs (`load.load_spec`).

spec.py              an audit spec (one model, query and mechanism; `Spec`)
profile_spec.py      its optional `[profile]` table (Gaussian noise)
composition_spec.py  several releases audited jointly (`CompositionSpec`)
attack_spec.py       the inference attack on location data (`AttackSpec`)
mechanisms_spec.py   several mechanisms on several models against their nominal ε (`MechanismsSpec`)
fitted_spec.py       a model fitted from a data table, audited three ways (`FittedSpec`)
keys.py              the keys and types every spec table is checked against
"""

from ddpbayes.reports.input.attack_spec import AttackSpec
from ddpbayes.reports.input.composition_spec import CompositionSpec
from ddpbayes.reports.input.fitted_spec import FittedSpec
from ddpbayes.reports.input.load import load_spec
from ddpbayes.reports.input.mechanisms_spec import MechanismsSpec
from ddpbayes.reports.input.spec import Spec

__all__ = ["AttackSpec", "CompositionSpec", "FittedSpec", "MechanismsSpec", "Spec", "load_spec"]
