"""The program engine (DESIGN §2.6): certified lower bounds for mechanisms known only as programs."""

from ddpbayes.engines.program.engine import ProgramEngine

__all__ = ["ProgramEngine"]
