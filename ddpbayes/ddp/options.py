"""How the DDP tools run the engines: one record passed to every audit and engine call."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ddpbayes.settings import check_run_settings


@dataclass(frozen=True)
class RunOptions:
    """The engine to use (`auto` or a name) and the sampling engine's settings.

    The sampling engine caches its MCMC runs on the model per conditioning event and settings,
    so every scale probed by root-finding reuses the same draws (DESIGN §2.3)."""

    engine: str = "auto"
    seed: int | None = None
    draws: int | None = None
    tune: int | None = None
    chains: int | None = None
    max_states: int | None = None
    progress: bool = False

    def __post_init__(self):
        check_run_settings(seed=self.seed, draws=self.draws, tune=self.tune, chains=self.chains,
                           max_states=self.max_states)

    def audit_kwargs(self) -> dict:
        """Keyword arguments for `ddpbayes.audit`."""
        return asdict(self)

    def problem_options(self) -> dict:
        """`Problem.options` as `audit` builds them (likelihood route)."""
        out = {"seed": self.seed, "draws": self.draws, "tune": self.tune, "chains": self.chains,
               "progress": self.progress, "method": "likelihood"}
        if self.max_states is not None:
            out["max_states"] = self.max_states
        return out
