"""`ddpbayes fit`: fit a dependence template to a data table and write its model file (DESIGN §9)."""

from __future__ import annotations

import json
import sys

from ddpbayes.cli.args import FORMAT_HELP

TEMPLATES = ("clustered", "gaussian", "chain", "graph")  # DESIGN §9's templates (a template's name, not a noise kind)
NOT_CONVERGED = 4  # ran, but the fit cannot be trusted: nothing written (as an inconclusive audit)


def register(sub) -> None:
    p = sub.add_parser(
        "fit",
        help="fit a dependence model to a data table (PyMC) and write a model file that audit reads",
        description="Fit a template with PyMC's NUTS, check convergence (R-hat <= 1.01, bulk ESS >= 400, no "
        "divergences) and whether the data support the dependence (posterior predictive checks, LOO), and write "
        "MODEL.py with MODEL.fit.json and MODEL.posterior.nc beside it; a fit that fails its convergence checks "
        "writes nothing (exit 4) unless --force.",
    )
    p.add_argument("data", help="the table: a CSV file (or Parquet with pyarrow installed), one record per row")
    p.add_argument("--template", choices=TEMPLATES, required=True,
                   help="clustered: binary (or categorical) records in clusters, a logit with a cluster random "
                   "effect; gaussian: a "
                   "continuous column in groups, a normal model with a group random effect; chain: per-individual "
                   "sequences of a categorical state, Markov chains with a shared Dirichlet prior; graph: a position per "
                   "node of an edge list (friends' places), the near-friend or the CAR model")
    p.add_argument("--cluster", default="", metavar="COL[,COL]",
                   help="clustered: the column naming each row's cluster (several: their values together name it)")
    p.add_argument("--outcome", default=None, metavar="COL",
                   help="clustered: the column of the records: binary (0/1), or 3 to 20 levels (text or integers, "
                   "sorted, the first the reference: a baseline-category logit with an effect per level)")
    p.add_argument("--ordered", action="store_true",
                   help="clustered: the outcome's levels are ordered: a cumulative logit with one effect per cluster")
    p.add_argument("--coords", default="", metavar="X,Y",
                   help="clustered: two numeric columns, each cluster's place: adds a spatial Gaussian process between "
                   "the clusters (exact up to 100 clusters, HSGP above; its length scale in the columns' units)")
    p.add_argument("--group", default="", metavar="COL[,COL]", help="gaussian: the column naming each row's group")
    p.add_argument("--columns", default="", metavar="COL[,COL]",
                   help="gaussian: the continuous column, or several fitted jointly (each row a vector; the "
                   "records are its cells); graph: latitude,longitude (degrees)")
    p.add_argument("--domain", default=None, type=_domain, metavar="LOW,HIGH",
                   help="gaussian: every value's declared range (default: the data's range)")
    p.add_argument("--id", default=None, metavar="COL",
                   help="chain: the column naming each row's individual; graph: the column naming each node")
    p.add_argument("--time", default=None, metavar="COL",
                   help="chain: the numeric column ordering an individual's rows")
    p.add_argument("--state", default=None, metavar="COL", help="chain: the categorical state: the records")
    p.add_argument("--regimes", default=None, type=int, metavar="R",
                   help="chain: R >= 2 hidden regimes, each with its own transition matrix (a Markov-switching "
                   "chain; default: none)")
    p.add_argument("--edges", default=None, metavar="EDGES.csv",
                   help="graph: the edge table, one undirected edge per row (an end naming no node is refused)")
    p.add_argument("--ends", default="", metavar="COL,COL",
                   help="graph: the edge table's two node columns (default: its first two)")
    p.add_argument("--model", default=None, choices=("near", "car"),
                   help="graph: near (default; near a neighbour or where people live, a pseudo-likelihood) or car "
                   "(a proper CAR per coordinate)")
    p.add_argument("--box", default=None, type=_box, metavar="LAT0,LAT1,LON0,LON1",
                   help="graph: the box positions are normalised in (default: the nodes' bounding box + 0.5 degrees)")
    p.add_argument("--drop-unknown", action="store_true",
                   help="graph: drop the edges naming a node not in the table (counted) instead of refusing them")
    p.add_argument("--covariates", default="", metavar="A,B",
                   help="numeric columns in the linear predictor (standardised); gaussian: also a text column of "
                   "two values (coded 0/1)")
    p.add_argument("--out", default=None, metavar="MODEL.py", help="the model file to write (default: none)")
    p.add_argument("--seed", type=int, default=0, help="NUTS's seed (default 0; same seed, same JSON)")
    p.add_argument("--draws", type=int, default=1000, help="draws per chain (default 1000)")
    p.add_argument("--tune", type=int, default=1000, help="tuning steps per chain (default 1000)")
    p.add_argument("--chains", type=int, default=4, help="chains (default 4)")
    p.add_argument("--force", action="store_true", help="write the model even when the convergence checks fail")
    p.add_argument("--max-rows", type=int, default=None, metavar="N",
                   help="refuse a table of more rows before reading it whole (default one million)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.add_argument("--format", choices=("text", "json"), default="text", help=FORMAT_HELP)
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.set_defaults(run=run)


def run(args) -> int:
    from ddpbayes.fitting import fit
    from ddpbayes.fitting.table import DEFAULT_MAX_ROWS

    result = fit(args.data, args.template, cluster=args.cluster, outcome=args.outcome, covariates=args.covariates,
                 coords=args.coords, group=args.group, columns=args.columns, domain=args.domain,
                 id=args.id, time=args.time, state=args.state, regimes=args.regimes, edges=args.edges, ends=args.ends,
                 model=args.model, box=args.box, drop_unknown=args.drop_unknown, ordered=args.ordered,
                 out=args.out, seed=args.seed, draws=args.draws,
                 tune=args.tune, chains=args.chains, force=args.force,
                 max_rows=DEFAULT_MAX_ROWS if args.max_rows is None else args.max_rows, progress=not args.quiet)
    doc = result.to_dict()
    print(json.dumps(doc, indent=2) if args.format == "json" else fit_text(doc))
    if not result.converged:
        failures = "; ".join(doc["diagnostics"]["failures"])
        written = f"written anyway (--force): {doc['model']}" if doc["model"] else "nothing written (--force writes it)"
        print(f"error: the fit did not converge: {failures}; {written}", file=sys.stderr)
        return NOT_CONVERGED
    return 0


def _domain(text: str) -> tuple[float, float]:
    """LOW,HIGH as two numbers (their order is checked with the data)."""
    import argparse

    parts = text.split(",")
    try:
        low, high = (float(v) for v in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LOW,HIGH (two numbers), got '{text}'") from None
    return low, high


def _box(text: str) -> tuple[float, ...]:
    """LAT_MIN,LAT_MAX,LON_MIN,LON_MAX as four numbers (checked with the data)."""
    import argparse

    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        values = ()
    if len(values) != 4:
        raise argparse.ArgumentTypeError(f"expected LAT_MIN,LAT_MAX,LON_MIN,LON_MAX (four numbers), got '{text}'")
    return values


def _table_line(doc: dict) -> str:
    """What was fitted, in one line."""
    data = doc["data"]
    if "edges_file" in data:
        return (f"graph fit ({data['graph_model']} model) of {data['file']} and {data['edges_file']}: "
                f"{data['nodes']:,} nodes, {data['edges']:,} edges, {data['nodes_with_edges']:,} nodes with one")
    line = (f"{_name(doc)} fit of {data['file']}: {data['rows']:,} rows in {data['clusters']:,} clusters "
            f"({','.join(data['cluster'])}), outcome {data['outcome']}")
    if "levels" not in data:
        return line
    order = "in this order" if data["link"] == "cumulative logit" else f"the reference {data['reference']}"
    return (f"{line}\n{data['link']}: {len(data['levels'])} levels {', '.join(data['levels'])} (sorted; "
            f"{order}); record values 0 to {len(data['levels']) - 1} index them")


def fit_text(doc: dict) -> str:
    """The fit for people: parameters, convergence, the checks, what was written."""
    data, diag, checks = doc["data"], doc["diagnostics"], doc["checks"]
    width = max(16, *(len(name) + 1 for name in doc["parameters"]))  # several columns' names are long
    lines = [_table_line(doc), "",
             f"{'parameter':<{width}}{'mean':>9}{'sd':>9}   {'94% HDI':<20}{'R-hat':>7}{'bulk ESS':>10}"]
    for name, p in doc["parameters"].items():
        d = diag["parameters"][name]
        hdi = f"[{fmt(p['hdi'][0])}, {fmt(p['hdi'][1])}]"
        lines.append(f"{name:<{width}}{fmt(p['mean']):>9}{fmt(p['sd']):>9}   {hdi:<20}{d['rhat']:>7.3f}{d['ess_bulk']:>10.0f}")
    state = "ok" if diag["ok"] else "FAILED (" + "; ".join(diag["failures"]) + ")"
    lines += ["", f"convergence: {state}; worst R-hat {diag['worst_rhat']['value']:.3f} "
              f"({diag['worst_rhat']['parameter']}), lowest bulk ESS {diag['worst_ess_bulk']['value']:.0f} "
              f"({diag['worst_ess_bulk']['parameter']}), {diag['divergences']} divergences", "",
              f"does the data support the dependence? (posterior predictive, {checks['draws']:,} draws; "
              "p = P(replicated >= data))"]
    for key, label in (("icc", "intra-cluster correlation"), ("cluster_total_sd", "SD of cluster totals"),
                       ("stay_share", "share of transitions staying"), ("longest_run", "mean longest run"),
                       ("neighbour_correlation", "neighbours' correlation"),
                       ("friends_within_km", f"share of edges within {checks.get('near_km', 0):g} km")):
        if key not in checks:
            continue
        c = checks[key]
        lines.append(f"  {label}: data {fmt(c['data'])}; {_name(doc)} {_replicated(c)}; "
                     f"without dependence {_replicated(c['independent'])}")
    joint = [(f"intra-group correlation of {name}", c) for name, c in checks.get("column_icc", {}).items()]
    joint += [(f"within-row correlation {name}", c) for name, c in checks.get("row_correlation", {}).items()]
    for label, c in joint:  # gaussian on several columns
        lines.append(f"  {label}: data {fmt(c['data'])}; {doc['template']} {_replicated(c)}; "
                     f"without dependence {_replicated(c['independent'])}")
    for level, block in checks.get("levels", {}).items():
        for key, label in (("icc", "intra-cluster correlation"), ("cluster_total_sd", "SD of cluster totals")):
            c = block[key]
            lines.append(f"  level {level}, {label}: data {fmt(c['data'])}; {doc['template']} {_replicated(c)}; "
                         f"without dependence {_replicated(c['independent'])}")
    if "morans_i" in checks:
        from ddpbayes.fitting.spatial import NEIGHBOURS

        c = checks["morans_i"]
        lines.append(f"  Moran's I of the clusters' residual rates ({NEIGHBOURS} nearest neighbours): "
                     f"data {fmt(c['data'])}; with the field {_replicated(c)}; "
                     f"without it {_replicated(c['without_field'])}")
    if "window_stay_variance" in checks:
        c = checks["window_stay_variance"]
        lines.append(f"  variance of the stay share across windows of {c['window']} transitions: "
                     f"data {fmt(c['data'])}; "
                     f"regimes {_replicated(c)}; one chain per individual {_replicated(c['chain'])}")
    loo = checks["loo"]
    lines.append(f"  LOO elpd: {_name(doc)} {loo['elpd']:.1f} (se {loo['se']:.1f}), without dependence "
                 f"{loo['elpd_independent']:.1f} (se {loo['se_independent']:.1f}); difference {loo['elpd_diff']:.1f} "
                 f"(se {loo['se_diff']:.1f}); Pareto k max {loo['pareto_k_max']:.2f}")
    lines.append(f"  supported: {'yes' if checks['dependence_supported'] else 'no'}")
    if "loo_regimes" in checks:
        r = checks["loo_regimes"]
        lines.append(f"  LOO (one individual left out) against the chain without regimes: difference "
                     f"{r['elpd_diff']:.1f} (se {r['se_diff']:.1f}); Pareto k max {r['pareto_k_max']:.2f}")
        lines.append(f"  regimes supported (window variance without them p < 0.01, LOO by 2 se): "
                     f"{'yes' if checks['regimes_supported'] else 'no'}")
    if "loo_spatial" in checks:
        s = checks["loo_spatial"]
        supported = "yes" if checks["spatial_supported"] else "no"
        lines.append(f"  LOO against the clustered template without the spatial field: difference "
                     f"{s['elpd_diff']:.1f} (se {s['se_diff']:.1f})")
        v = checks["loo_cluster"]
        trust = "" if v["reliable"] else (f"; NOT reliable: Pareto k over 0.7 for {v['pareto_k_over_0_7']} of "
                                           f"{v['clusters']} clusters with the field, "
                                           f"{v['pareto_k_over_0_7_without_field']} without")
        lines.append(f"  leave-one-cluster-out LOO against it: difference {v['elpd_diff']:.1f} "
                     f"(se {v['se_diff']:.1f}), Pareto k max {v['pareto_k_max']:.2f}{trust}")
        lines.append(f"  spatial field supported (Moran's I without it, p < 0.01): {supported}")
        lines.append(f"  (the GP's length scale is in {data['spatial']['units']}; {data['spatial']['approximation']})")
    lines += ["", f"model: {doc['model']} (posterior: {doc['posterior']})" if doc["model"] else "model: not written"]
    return "\n".join(lines)


def _name(doc: dict) -> str:
    """The template's name, a chain's hidden regimes said."""
    regimes = doc["data"].get("regimes")
    return f"{doc['template']} with {regimes} regimes" if regimes else doc["template"]


def fmt(value: float) -> str:
    """Three significant digits: a fit's numbers are no more precise."""
    return f"{value:.3g}"


def _replicated(block: dict) -> str:
    r = block["replicated"]
    return f"{fmt(r['mean'])} [{fmt(r['hdi'][0])}, {fmt(r['hdi'][1])}] p = {block['p_value']:.3f}"
