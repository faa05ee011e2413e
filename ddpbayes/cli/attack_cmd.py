"""`ddpbayes attack`: seed 002 §IV's inference attack on K-means centroids released with Laplace
noise, on the shipped Gowalla users and friendships or the user's own CSVs (DESIGN §7)."""

from __future__ import annotations

import shlex
import sys

from ddpbayes.cli.args import FORMAT_HELP, add_workers, execution
from ddpbayes.errors import InputError

DEFAULT_EPSILONS = "0.1,0.5,1,2,3"


def register(sub) -> None:
    p = sub.add_parser(
        "attack",
        help="Liu et al. 2016's inference attack (NDSS, §IV): K-means centroids with Laplace noise, independent vs "
        "friend-aware adversaries",
        description="The provider clusters the users' positions with K-means and releases the K centroids with Laplace "
        "noise (scale = the centroid vector's L1 sensitivity / epsilon). For each target, an adversary who knows the "
        "others' positions computes its posterior over G x G cells of each box of the region, with a histogram prior "
        "(independent, Liu et al. 2016 Eq. 8), that histogram reweighted near the target's friends by the fitted "
        "near-friend model (dependent, Eq. 9) or the fitted CAR model's conditional (car). Prints the inference error "
        "(km, Eq. 10) and the leaked information (bits, Eq. 11) per epsilon and adversary.",
    )
    p.add_argument("--locations", default=None, metavar="CSV",
                   help="users: UserID,Latitude,Longitude (default: the shipped Gowalla US users)")
    p.add_argument("--edges", default=None, metavar="CSV",
                   help="friendships: Source,Destination (default: the shipped Gowalla US edges)")
    p.add_argument("--fit", default=None, metavar="JSON",
                   help="fitted CAR model: box, alpha, tau, mu (default: the shipped models/data/gowalla_fit.json)")
    p.add_argument("--near", default=None, metavar="JSON",
                   help="fitted near-friend model: weights, scales, bandwidth (default: the shipped "
                   "models/data/gowalla_near_fit.json)")
    p.add_argument("--region", default="us", choices=("us", "cities", "ny", "sf", "la"),
                   help="where targets live and the grid lies: the fit's box (us, default), Liu et al. 2016's three "
                   "cities each with its own G x G grid (cities), or one city (ny, sf, la); users outside are left out")
    p.add_argument("--k", type=int, default=8, help="K-means clusters (default 8, Liu et al. 2016's value)")
    p.add_argument("--epsilons", type=_epsilons, default=DEFAULT_EPSILONS,
                   help=f"comma-separated privacy budgets (default {DEFAULT_EPSILONS})")
    p.add_argument("--grid", type=int, default=20, help="G: the posterior's G x G cells per box (default 20)")
    p.add_argument("--n-prior", type=_n_priors, default="all", metavar="N[,N...]",
                   help="how many others each adversary knows, drawn per target; 'all' or a count, several "
                   "comma-separated (default all)")
    p.add_argument("--targets", type=int, default=None, metavar="M",
                   help="attack a seeded sample of M users (default all)")
    p.add_argument("--seed", type=int, default=0, help="seed for k-means, the noise and the samples (default 0)")
    p.add_argument("--format", choices=("text", "json"), default="text", help=FORMAT_HELP)
    p.add_argument("--report", default=None, metavar="DIR",
                   help="also write a report: DIR/index.html (self-contained), report.md, results.json, figures/")
    p.add_argument("--audit-users", type=int, default=0, metavar="M",
                   help="with --report and region us: also audit the near-friend model's leakage for a seeded sample "
                   "of M users with the sampling engine, beside the CAR's exact audit (minutes per user; default 0)")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    add_workers(p)
    p.set_defaults(run=run)


def _epsilons(text: str) -> tuple[float, ...]:
    try:
        return tuple(dict.fromkeys(float(v) for v in text.split(",")))  # repeats dropped
    except ValueError:
        raise InputError(f"expected comma-separated numbers, got '{text}'") from None


def _n_priors(text: str) -> tuple[int | None, ...]:
    try:
        return tuple(dict.fromkeys(None if v.strip() == "all" else int(v) for v in text.split(",")))
    except ValueError:
        raise InputError(f"expected 'all' or comma-separated counts, got '{text}'") from None


def run(args) -> int:
    from ddpbayes.attack.run import MAX_AUDIT_USERS, AttackSettings, load_data, run_attack

    settings = AttackSettings(k=args.k, epsilons=args.epsilons, grid=args.grid, n_prior=args.n_prior,
                              targets=args.targets, seed=args.seed, region=args.region)
    where = execution(args)
    if not 0 <= args.audit_users <= MAX_AUDIT_USERS:
        raise InputError(f"--audit-users must be an integer from 0 to {MAX_AUDIT_USERS}, got {args.audit_users}")
    if args.report:
        from ddpbayes.reports.render.atomic import check_target

        check_target(args.report, "results.json", "--report")  # before the attack's minutes of work
    data = load_data(args.locations, args.edges, args.fit, grid=settings.grid, where=where, near=args.near,
                     region_name=settings.region)
    result = run_attack(data, settings, progress=args.format == "text" or sys.stderr.isatty(), where=where)
    if args.report:
        from ddpbayes.reports.render.attack import write_report  # matplotlib: off the --help path

        write_report([result], args.report, command(args), args.audit_users, flag="--report")
    if args.format == "json":
        print(result.to_json())
    else:
        print(attack_text(result.to_dict()))
    return 0


def command(args) -> str:
    """The command that reproduces this run (inputs given explicitly, then every setting)."""
    words = ["ddpbayes", "attack"]
    for flag in ("locations", "edges", "fit", "near"):
        if getattr(args, flag):
            words += [f"--{flag}", getattr(args, flag)]
    words += ["--region", args.region, "--k", str(args.k), "--epsilons", ",".join(f"{e:g}" for e in args.epsilons), "--grid", str(args.grid),
              "--n-prior", ",".join("all" if n is None else str(n) for n in args.n_prior)]
    if args.targets is not None:
        words += ["--targets", str(args.targets)]
    if args.audit_users:
        words += ["--audit-users", str(args.audit_users)]
    words += ["--seed", str(args.seed), "--report", args.report]
    return shlex.join(words)


def attack_text(doc: dict) -> str:
    from ddpbayes.attack.metrics import THEOREM_2, car_line, left_out_edges

    box, guess, cluster = doc["box"], doc["regional_mean_guess"], doc["cluster_mean_guess"]
    lines = [
        (f"region {doc['region']}: users {doc['users']:,} (targets {doc['targets']:,}; {doc['outside_users']:,} "
         f"outside left out), frame lat {box['lat'][0]:g}..{box['lat'][1]:g} lon {box['lon'][0]:g}..{box['lon'][1]:g}"),
        f"friendships {doc['located_edges']:,} between these users; {left_out_edges(doc)}",
        (f"K-means K = {doc['k']}, cluster sizes {doc['cluster_sizes']}, L1 sensitivity {doc['sensitivity']:.4g}, "
         f"grid {doc['grid']} x {doc['grid']} per box ({doc['cells']:,} cells), seed {doc['seed']}"),
        "",
        (f"{'epsilon':>7}  {'adversary':<11}  {'n_prior':>7}  {'mean km':>8}  {'median km':>9}  {'Bayes km':>8}  "
         f"{'leaked bits':>11}  {'release bits':>12}  {'Thm 2 bound':>11}"),
    ]
    for r in doc["rows"]:
        bayes = "-" if r["bayes_mean_error_km"] is None else f"{r['bayes_mean_error_km']:.1f}"
        lines.append(f"{r['epsilon']:>7g}  {r['adversary']:<11}  {r['n_prior']:>7}  {r['mean_error_km']:>8.1f}  "
                     f"{r['median_error_km']:>9.1f}  {bayes:>8}  {r['leaked_bits']:>11.3f}  {r['release_bits']:>12.3f}  "
                     f"{r['bound_bits']:>11.3f}")
    lines += [
        "",
        ("leaked bits: H(histogram prior, Eq. 8) - H(posterior) (Liu et al. 2016, Eq. 11), the same prior for every "
         "adversary"),
        "release bits: H(own prior) - H(posterior), what the release alone tells the adversary",
        f"Thm 2 bound: epsilon nats, in bits. {THEOREM_2}",
        *([f"car: {car_line(doc['rows'])}"] if car_line(doc["rows"]) else []),
        "mean km: the MAP cell (Eq. 7, 10); Bayes km: the cell of least posterior expected distance",
        (f"guessing the others' mean position: mean error {guess['mean_error_km']:.1f} km, median "
         f"{guess['median_error_km']:.1f} km; the cluster's other members' mean: {cluster['mean_error_km']:.1f} km, "
         f"median {cluster['median_error_km']:.1f} km"),
        f"time {doc['seconds']:.1f} s",
    ]
    return "\n".join(lines)

