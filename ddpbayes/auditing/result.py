"""`AuditResult`: what an audit found, and its views — the CLI's JSON (`to_dict`/`to_json`), a
pandas DataFrame, a one-line repr and a notebook's HTML table (DESIGN §1)."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ddpbayes.encoding import jsonable, number
from ddpbayes.engines import AdversaryLeakage, Witness
from ddpbayes.formatting import abbreviated, fmt, witness_output
from ddpbayes.model.reference import provenance
from ddpbayes.notions import notion as named
from ddpbayes.notions.lattice import lattice_summary
from ddpbayes.problem import Problem
from ddpbayes.profiles import Profile

if TYPE_CHECKING:
    import pandas
    from matplotlib.axes import Axes

HTML_ROWS = 40  # targets an AuditResult's HTML table shows before it elides the middle


@dataclass(repr=False)
class AuditResult:
    """The leakage of one audit: the worst adversary of the notion (its value, witness, and for an
    estimate its 90% interval and MCMC diagnostics), the worst per target, the verdict against
    the claim, and what was asked (`problem`: model, query, mechanism and settings; its query and
    mechanism as given, with epsilon, go to JSON).

    In a notebook it shows itself as a one-line repr and an HTML table (`_repr_html_`, one row per
    audited target); `to_dict`/`to_json` are the CLI's `--format json` document, `to_dataframe`
    one row per audited target with its worst adversary's witness.

    Parameters
    ----------
    notion : str
        The notion's name.
    leakage : float
        The worst adversary's leakage (ε at δ for Gaussian noise; a lower bound for a greedy search).
    per_target : list of float or None
        The worst leakage per tuple; None for a tuple not audited.
    witness : Witness or None
        Where the worst leakage is reached: adversary, values t and t', output y.
    engine : str
        The engine that computed it.
    verdict : str or None
        "pass", "fail" or "inconclusive" against `claim`; None without a claim.
    claim : float or None
        The leakage claimed.
    seconds : float
        Wall time of the audit.
    ci : tuple of float or None, default None
        An estimate's 90% interval.
    reason : str or None, default None
        Why the leakage is what it is (e.g. infinite, or a lower bound).
    verdict_reason : str or None, default None
        Why the verdict is what it is, when it is not plain.
    diagnostics : dict or None, default None
        An estimate's MCMC diagnostics.
    lattice : list of AdversaryLeakage or None, default None
        Every pdp adversary, when asked for.
    dependence_sets : sequence of list of int or None, default None
        N(i) for each tuple, when the engine reports them (a `DependenceSets` computes each when first read).
    mechanism : dict, default {}
        The mechanism's parameters as given, with epsilon.
    query : str, default ""
        The query's spec.
    tuples : list of str, default []
        The tuples' names.
    notes : list of str, default []
        The engine's notes.
    problem : Problem or None, default None
        What was asked: model, query, mechanism and settings.
    composition : dict or None, default None
        Several releases: the joint leakage against Thms 3–4 (`composition.summary`).
    information : dict or None, default None
        004's KL/MI/CMI beside the leakage; None when not asked.
    information_reason : str or None, default None
        Why `information` is not available.
    profile : Profile or None, default None
        (ε, δ) mechanisms: the notion's privacy profile; `leakage` is ε at its δ.
    target_worst : dict[int, AdversaryLeakage] or None, default None
        Each target's worst adversary.
    """

    notion: str
    leakage: float
    per_target: list[float | None]
    witness: Witness | None
    engine: str
    verdict: str | None
    claim: float | None
    seconds: float
    ci: tuple[float, float] | None = None
    reason: str | None = None
    verdict_reason: str | None = None
    diagnostics: dict | None = None
    lattice: list[AdversaryLeakage] | None = None
    dependence_sets: Sequence[list[int]] | None = None
    mechanism: dict = field(default_factory=dict)
    query: str = ""
    tuples: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problem: Problem | None = field(default=None, compare=False)
    composition: dict | None = None  # several releases: the joint leakage against Thms 3–4 (`composition.summary`)
    information: dict | None = None  # 004's KL/MI/CMI beside the leakage (`information.audit`); None when not asked
    information_reason: str | None = None  # why `information` is not available
    profile: Profile | None = None  # (ε, δ) mechanisms: the notion's privacy profile; `leakage` is ε at its δ
    target_worst: dict[int, AdversaryLeakage] | None = field(default=None, compare=False)  # each target's worst

    @property
    def lower_bound(self) -> bool:
        """True when `leakage` is a lower bound on the notion, not its value: a greedy pdp search's,
        or a program's certified bound (DESIGN §2.6)."""
        return self.bound_kind is not None

    @property
    def bound_kind(self) -> str | None:
        """Why `leakage` is a lower bound: "greedy search", "certified for a program", or None."""
        if named(self.notion).lattice and self.problem is not None and self.problem.settings.pdp_greedy > 0:
            return "greedy search"
        black_box = self.problem is not None and self.problem.mechanism.black_box
        if black_box or (self.diagnostics or {}).get("lower_bound_only"):
            return "certified for a program"
        return None

    def to_dict(self) -> dict:
        """The audit as `ddpbayes audit --format json` prints it (numbers as `encoding.number`:
        inf and nan as strings).

        Returns
        -------
        dict
            The JSON document, as Python objects.
        """
        out = {
            "notion": self.notion,
            "leakage": number(self.leakage),
            "lower_bound": self.lower_bound,
            "per_target": [None if v is None else number(v) for v in self.per_target],
            "witness": None if self.witness is None else self.witness.to_dict(),
            "engine": self.engine,
            "verdict": self.verdict,
            "claim": self.claim,
            "ci": None if self.ci is None else [number(v) for v in self.ci],
            "seconds": round(self.seconds, 4),
            "reason": self.reason,
            "verdict_reason": self.verdict_reason,
            "diagnostics": self.diagnostics,
            "query": self.query,
            "mechanism": self.mechanism,
            "tuples": self.tuples,
            "notes": self.notes,
        }
        if self.profile is not None:  # delta, epsilon_at_delta, profile, zcdp_rho, gdp_mu (DESIGN §3.5)
            out.update(self.profile.to_dict(self.problem.mechanism.delta))
        if self.information is not None or self.information_reason is not None:
            out["information"] = self.information
            if self.information_reason is not None:
                out["information_reason"] = self.information_reason
        if self.composition is not None:
            out["composition"] = self.composition
        if self.problem is not None:
            out["model"] = provenance(self.problem.model)
            out["settings"] = self.problem.settings.to_dict()
            if self.problem.query.given is not None:  # an expr:/fn: query's --sensitivity
                out["sensitivity_given"] = self.problem.query.given
        if self.dependence_sets is not None:  # every tuple's: lazily computed sets are computed here
            out["dependence_sets"] = [list(s) for s in self.dependence_sets]
        if self.lattice is not None:
            out["lattice"] = [
                {"target": r.adversary.target, "known": sorted(r.adversary.known), "leakage": number(r.value)}
                for r in self.lattice
            ]
            out["lattice_summary"] = lattice_summary(self.lattice)
        return jsonable(out)

    def to_json(self) -> str:
        """`to_dict` as JSON text: exactly what `ddpbayes audit --format json` prints.

        Returns
        -------
        str
            Indented JSON.
        """
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)

    def to_dataframe(self) -> pandas.DataFrame:
        """A pandas DataFrame, one row per audited target: `target` (its index), `name`, `leakage`,
        `lower` and `upper` (an estimate's interval, else NaN), and its worst adversary's witness:
        `known` (tuple indices), `known_values`, `t`, `t_prime`, `y`. `attrs` holds notion, engine,
        lower_bound (a greedy search, or a program's certified bound), claim, verdict and delta
        (Gaussian noise: `leakage` is ε at that δ). Needs pandas: `pip install 'ddpbayes[dataframe]'`.

        Returns
        -------
        pandas.DataFrame
            One row per audited target.

        Raises
        ------
        ImportError
            If pandas is not installed.
        """
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("AuditResult.to_dataframe needs pandas: pip install 'ddpbayes[dataframe]' "
                              "(or pip install pandas)") from None
        rows = []
        for i, value in self._audited():
            worst = (self.target_worst or {}).get(i)
            w = None if worst is None else worst.witness
            ci = None if worst is None else worst.ci
            known = None if w is None else sorted(w.adversary.known)
            rows.append({
                "target": i, "name": self._name(i), "leakage": float(value),
                "lower": math.nan if ci is None else float(ci[0]), "upper": math.nan if ci is None else float(ci[1]),
                "known": known,
                "known_values": None if w is None or w.known_values is None else [_plain(w.known_values.get(k))
                                                                                   for k in known],
                "t": None if w is None else _plain(w.t), "t_prime": None if w is None else _plain(w.t_prime),
                "y": None if w is None or w.y is None else (float(w.y[0]) if len(w.y) == 1
                                                           else tuple(float(v) for v in w.y)),
            })
        columns = ["target", "name", "leakage", "lower", "upper", "known", "known_values", "t", "t_prime", "y"]
        frame = pd.DataFrame(rows, columns=columns)
        frame.attrs.update(notion=self.notion, engine=self.engine, lower_bound=self.lower_bound, claim=self.claim,
                           verdict=self.verdict, delta=self._delta())
        return frame

    def __repr__(self) -> str:
        """One line: notion, leakage (ε at δ for Gaussian noise; ≥ for a lower bound), interval,
        engine, verdict and claim, and the witness."""
        parts = [f"{self.notion} leakage{'>=' if self.lower_bound else '='}{fmt(self.leakage)}"]
        if self._delta() is not None:
            parts.append(f"(epsilon at delta={self._delta():g})")
        if self.lower_bound:
            parts.append(f"(a lower bound: {self.bound_kind})")
        if self.ci is not None:
            parts.append(f"ci=[{fmt(self.ci[0])}, {fmt(self.ci[1])}]")
        parts.append(f"engine={self.engine}")
        if self.claim is not None:
            parts.append(f"verdict={self.verdict} claim={fmt(self.claim)}")
        return f"AuditResult({' '.join(parts)}; witness: {self._witness_text(self.witness)})"

    def _repr_html_(self) -> str:
        """A small self-contained HTML table for Jupyter: a header line (notion, leakage, engine,
        verdict), then one row per audited target with its leakage, interval and witness (the first
        and last `HTML_ROWS // 2` when there are more; `to_dataframe` has them all)."""
        e = html.escape
        head = (f"<b>{e(self.notion)}</b> leakage {'&ge; ' if self.lower_bound else ''}{e(fmt(self.leakage))}"
                + (f" (epsilon at delta = {self._delta():g})" if self._delta() is not None else "")
                + (f" (a lower bound: {e(self.bound_kind)})" if self.lower_bound else "")
                + (f", interval [{e(fmt(self.ci[0]))}, {e(fmt(self.ci[1]))}]" if self.ci is not None else "")
                + f" &middot; engine {e(self.engine)}"
                + (f" &middot; verdict <b>{e(str(self.verdict))}</b> (claim {e(fmt(self.claim))})"
                   if self.claim is not None else "")
                + f" &middot; query {e(self.query)}, mechanism {e(self.mechanism_text())}")
        audited = self._audited()
        rows_shown = audited if len(audited) <= HTML_ROWS else [*audited[:HTML_ROWS // 2], None,
                                                            *audited[-(HTML_ROWS // 2):]]
        estimate = any(w.ci is not None for w in (self.target_worst or {}).values())
        leakage = ("leakage (lower bound)" if self.lower_bound
                   else "leakage (epsilon at delta)" if self._delta() is not None else "leakage")
        cells = ["target", "tuple", leakage, *(["interval"] if estimate else []), "witness"]
        rows = ["<tr>" + "".join(f"<th>{c}</th>" for c in cells) + "</tr>"]
        for item in rows_shown:
            if item is None:
                rows.append(f'<tr><td colspan="{len(cells)}">&hellip; {len(audited) - HTML_ROWS:,} more targets '
                            "(to_dataframe() has them all)</td></tr>")
                continue
            i, value = item
            worst = (self.target_worst or {}).get(i)
            ci = None if worst is None else worst.ci
            interval = ["" if ci is None else f"[{fmt(ci[0])}, {fmt(ci[1])}]"] if estimate else []
            witness = "" if worst is None else self._witness_text(worst.witness, worst)
            rows.append("<tr>" + "".join(f"<td>{e(c)}</td>" for c in (str(i), self._name(i), fmt(value),
                                                                      *interval, witness)) + "</tr>")
        notes = "".join(f"<p>{e(text)}</p>" for text in (self.reason, self.verdict_reason) if text)
        return (f'<div class="ddpbayes-audit"><p>AuditResult: {head}</p>{notes}'
                f"<table>{''.join(rows)}</table></div>")

    def mechanism_text(self) -> str:
        """The mechanism's parameters as given, `kind=laplace, scale=1.0, epsilon=1.0` (Gaussian
        noise: sigma, rho, epsilon and delta).

        Returns
        -------
        str
            ``key=value`` pairs joined by commas.
        """
        shown = ("kind", "sigma", "rho", "epsilon", "delta") if self.profile is not None else ("kind", "scale",
                                                                                             "epsilon")
        return ", ".join(f"{k}={v}" for k, v in self.mechanism.items() if k in shown)

    def plot(self, kind: str | None = None, ax: Axes | None = None) -> Axes:
        """A picture of the audit (`auditing.plots`): "targets", the worst leakage per target with
        the claim drawn (the default when several targets were audited), or "witness", the
        log-ratio r(y) = log L(y | t, x_K) - log L(y | t', x_K) over the output y for the worst
        adversary's witness, whose supremum is the leakage, with the leakage and the claim drawn.

        Parameters
        ----------
        kind : str or None, default None
            "targets" or "witness"; None: targets for several targets, else witness.
        ax : matplotlib.axes.Axes or None, default None
            Where to draw; None: a new figure.

        Returns
        -------
        matplotlib.axes.Axes
            The axes drawn on.

        Raises
        ------
        InputError
            For an unknown kind, or a witness curve the engine cannot draw (dp is model-free).
        """
        from ddpbayes.auditing import plots  # matplotlib: loaded when a picture is asked for

        return plots.plot(self, kind, ax)

    def _delta(self) -> float | None:
        """The δ at which `leakage` is ε (Gaussian noise: DESIGN §3.5), else None."""
        return None if self.profile is None or self.problem is None else self.problem.mechanism.delta

    def _audited(self) -> list[tuple[int, float]]:
        """(target, its worst leakage) for every audited target."""
        return [(i, v) for i, v in enumerate(self.per_target) if v is not None]

    def _name(self, k: int) -> str:
        """Tuple k's name (its index when the result names no tuples)."""
        return self.tuples[k] if k < len(self.tuples) else str(k)

    def _witness_text(self, w: Witness | None, record: AdversaryLeakage | None = None) -> str:
        """`target x0, known {x1=1}, t=1 t'=0, y=0.5` (long lists abbreviated; `witness_output` for y), of
        the worst adversary or of `record`, a target's worst."""
        if w is None:
            return "none"
        known = sorted(w.adversary.known)
        names = [self._name(k) for k in known]
        if w.known_values is not None:
            names = [f"{name}={fmt(w.known_values.get(k))}" for name, k in zip(names, known)]
        diagnostics = (self.diagnostics if record is None else record.diagnostics) or {}
        profile = self.profile if record is None else record.profile
        output = witness_output(w.y, diagnostics.get("event"), profile is not None)
        return (f"target {self._name(w.adversary.target)}, known {{{abbreviated(names)}}}, "
                f"t={fmt(w.t)} t'={fmt(w.t_prime)}, {output}")


def _plain(v: float | None) -> float | None:
    """A plain Python float (not np.float64), None kept."""
    return None if v is None else float(v)
