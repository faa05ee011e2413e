"""The attack's report (`ddpbayes attack --report DIR`, or an attack spec): the attack as a
self-contained report (index.html, report.md, results.json, figures/), written atomically like
`ddpbayes report`'s."""

from __future__ import annotations

from pathlib import Path

from ddpbayes.attack import worst
from ddpbayes.attack.metrics import THEOREM_2, car_line, error_percentiles, left_out_edges, theorem2_bound_bits
from ddpbayes.attack.run import AttackResult
from ddpbayes.encoding import jsonable
from ddpbayes.reports.render import attack_dependence as dependence
from ddpbayes.reports.render import attack_figures as figures
from ddpbayes.reports.render import attack_sections as sections
from ddpbayes.reports.render.atomic import write_directory
from ddpbayes.reports.render.document import Code, Document, Figure, Notes, Para, Section, Table
from ddpbayes.reports.render.pages import write_pages
from ddpbayes.reports.render.results import fmt, reproducibility

FORMAT = 1  # results.json layout version, under the key "ddpbayes_attack_report"
TITLE = "Friends and places: Liu et al. 2016's inference attack on noisy K-means centroids"
CDF_EPSILONS = (0.1, 1.0)  # seed 002 Fig. 5(a)


def write_report(results: list[AttackResult], out: str | Path, command: str, audit_users: int = 0,
                 flag: str = "--out") -> dict:
    """Write the report of `results` (one per region, the first shown in full) to `out` (replaced
    atomically; `flag` named it), with the exact audit of the same release under the CAR beside the
    attack (`worst`, for the us region) and, with `audit_users`, the near-friend model audited by the
    sampling engine for that many users; return results.json's content."""
    result = results[0]
    audited = None
    if result.meta["region"] == "us":
        users, seconds = worst.user_idp(result.data.points, result.data.pairs, result.data.fit,
                                        result.partition.labels, result.meta["sensitivity"])
        audited = {"seconds": seconds, "rows": worst.summary(users, list(result.meta["epsilons"]))}
    model = dependence.model_view(result, audit_users)
    doc = build_document(results, command, audited, model)
    data = {**results_json(results, command), "worst_case": audited, "dependence_model": model}

    write_directory(Path(out), "results.json", lambda tmp: write_pages(tmp, doc, data), flag)
    return data


def results_json(results: list[AttackResult], command: str) -> dict:
    def one(result: AttackResult) -> dict:
        return {**result.to_dict(),
                "error_percentiles_km": [{"n_prior": n, "epsilon": e, "adversary": a,
                                          "percentiles": error_percentiles(km)}
                                         for (n, e, a), km in result.errors.items()]}

    first = results[0]
    return jsonable({
        "ddpbayes_attack_report": FORMAT, "title": TITLE, "finding": finding(first), **one(first),
        "acceptance": sections.checks(first),
        "other_regions": [one(r) for r in results[1:]],
        "reproducibility": reproducibility(first.meta["seed"], command),
    })


def finding(result: AttackResult) -> str:
    """One line: at ε = 1 (or the middle ε), each adversary's mean error and leaked bits against the bound."""
    m = result.meta
    e, n = _shown_epsilon(m), m["n_priors"][0]
    ind, dep = (result.row(n, e, a) for a in ("independent", "dependent"))
    return (f"ε = {e:g}, {_knowledge(m, n)}: mean error {fmt(ind['mean_error_km'])} km without friendships, "
            f"{fmt(dep['mean_error_km'])} km with them (guessing the regional mean: "
            f"{fmt(m['regional_mean_guess']['mean_error_km'])} km); leaked information {fmt(ind['leaked_bits'])} and "
            f"{fmt(dep['leaked_bits'])} bits (Thm 2's bound {fmt(theorem2_bound_bits(e))} bits).")


def build_document(results: list[AttackResult] | AttackResult, command: str, audited: dict | None = None,
                   model: dict | None = None) -> Document:
    results = results if isinstance(results, list) else [results]
    result = results[0]
    m = result.meta
    cdf_eps = [e for e in CDF_EPSILONS if e in m["epsilons"]] or [m["epsilons"][0], m["epsilons"][-1]]
    shown = _shown_epsilon(m)
    return Document(TITLE, [finding(result), _lead(result)], [
        Section("What it shows", "summary", [Notes(_summary(result, model))]),
        Section("Does knowing the friendships help?", "acceptance", [sections.acceptance_table(result)]),
        sections.paper_section(results),
        Section("Inference error and leaked information", "results", [
            Figure("error_cdf.png", figures.error_cdf_figure(result, cdf_eps),
                   f"Fig. 5(a) as Liu et al. 2016 draw it: CDF of the inference error, {_knowledge(m, m['n_priors'][0])}, "
                   f"region {m['region']}.", "error CDF"),
            Figure("leaked_information.png", figures.leaked_figure(result),
                   "Fig. 5(b) as Liu et al. 2016 draw it: leaked information against ε (left) and the release's own "
                   "part (right, own prior's entropy minus the posterior's; for the independent adversary the same as "
                   "its leaked information). Theorem 2 bounds a DP adversary's leakage by ε in nats, drawn here in "
                   "bits (ε·log₂e).", "leaked information against epsilon"),
            Table(["ε", "adversary", "N_prior", "mean error (km)", "median error (km)", "Bayes error (km)",
                   "leaked (bits, Eq. 11)", "release only (bits)", "Thm 2 bound (bits)"],
                  [[f"{r['epsilon']:g}", r["adversary"], f"{r['n_prior']:,}", fmt(r["mean_error_km"]),
                    fmt(r["median_error_km"]), fmt(r["bayes_mean_error_km"]), fmt(r["leaked_bits"]),
                    fmt(r["release_bits"]), fmt(r["bound_bits"])] for r in result.rows],
                  "Leaked information is Liu et al. 2016's Eq. 11: the entropy of the histogram prior (Eq. 8) minus "
                  "that of the adversary's posterior, averaged over targets; release only: the adversary's own prior's "
                  f"entropy minus the posterior's. Thm 2 bound: ε nats, in bits. {THEOREM_2} "
                  + (f"The car rows: {car_line(result.rows)}. " if car_line(result.rows) else "")
                  + "Guessing the regional mean for every target errs by "
                  f"{fmt(m['regional_mean_guess']['mean_error_km'])} km on average "
                  f"(median {fmt(m['regional_mean_guess']['median_error_km'])} km)."),
        ]),
        sections.regions_section(results),
        *dependence.sections(model),
        Section("The release", "release", [
            Para(_release_text(result)),
            Figure("release.png", figures.release_figure(result, shown),
                   f"Users coloured by K-means cluster, the {m['k']} true centroids and those released at "
                   f"ε = {shown:g}.", "map of users, clusters and centroids"),
            Table(["ε", "Laplace scale b = Δ/ε"], [[f"{e:g}", fmt(m["scales"][str(e)])] for e in m["epsilons"]]),
        ]),
        Section("Who gains from friendships", "friends", [
            Table(["ε", "N_prior", "adversary", "mean error, users with located friends (km)",
                   "mean error, users without (km)"],
                  [[f"{r['epsilon']:g}", f"{r['n_prior']:,}", r["adversary"], fmt(r["mean_error_km_with_friends"]),
                    fmt(r["mean_error_km_without_friends"])] for r in result.rows],
                  f"{int(result.has_friends.sum()):,} of the {m['targets']:,} targets have a located friend; the "
                  "others' Eq. 9 prior is the histogram, their CAR prior the model's law for isolated users."),
        ]),
        *([_worst_section(result, audited)] if audited else []),
        Section("How the adversaries are built", "method", [Notes(_method_notes(result))]),
        Section("Reproduce", "reproduce", [
            Code(command),
            Para(f"The seed fixes the clustering, the noise, the target sample and the known sets; the same seed gives "
                 f"the same results.json except `seconds` (this run: {m['seconds']:.1f} s)."),
        ]),
    ])


def _worst_section(result: AttackResult, audited: dict) -> Section:
    """The exact worst case of the same release under the fitted CAR (issue 14 part 2)."""
    rows = [[f"{r['epsilon']:g}", f"{r['users_above']:,} of {r['users']:,} ({r['users_above'] / r['users']:.0%})",
             fmt(r["q50"]), fmt(r["q90"]), fmt(r["q99"]), fmt(r["q100"])] for r in audited["rows"]]
    return Section("The worst case for the same release", "audit", [
        Para("The same noisy centroids, audited exactly: under the fitted CAR the users' coordinates are jointly "
             "Gaussian, so each user's idp (an adversary who knows the model and no other user, DESIGN §2.2) is "
             "(hi - lo)/b · Σ_c |A_ci + Σ_j A_cj C_ji / C_ii| over the centroid outputs, summed over her two "
             f"coordinates; computed for every user with the gaussian engine's sparse path in {audited['seconds']:.1f} s. "
             "This is what the adversary who believes the model and knows no other user can learn at worst; the "
             "attack above measures two adversaries who know the others, on one noise draw."),
        Table(["ε", "users above ε", "median", "90th percentile", "99th percentile", "maximum"], rows,
              "Worst-case leakage (nats) of each user's whole record; classic DP promises ε. The model's α near 1 "
              "makes friends' positions move together far more than the data's (DESIGN §6), so this is the "
              "worst case under that model."),
    ])


def _shown_epsilon(m: dict) -> float:
    return 1.0 if 1.0 in m["epsilons"] else m["epsilons"][len(m["epsilons"]) // 2]


def _knowledge(m: dict, n_prior: int) -> str:
    return "every other user known" if n_prior == m["users"] - 1 else f"{n_prior:,} other users known"


def _summary(result: AttackResult, model: dict | None) -> list[str]:
    """The findings in numbers: the issue's comparisons, why they come out so, what the release and
    the partition leak."""
    m = result.meta
    n = m["users"] - 1
    e = _shown_epsilon(m)
    cs = sections.checks(result)
    w = sections.why(result)
    ind, dep, car = (result.row(n, e, a) for a in ("independent", "dependent", "car"))
    first, last = m["epsilons"][0], m["epsilons"][-1]
    top = max(result.rows, key=lambda r: r["release_bits"])
    near = m["near"]
    out = [
        (f"With every other user known, the friend-aware adversary (Eq. 9's prior from the near-friend model) leaks "
         f"more than the independent one at {sum(c['leaks_more'] for c in cs)} of {len(cs)} ε "
         f"({fmt(dep['leaked_bits'])} against {fmt(ind['leaked_bits'])} bits at ε = {e:g}), and its MAP cell errs "
         f"less at {sum(c['errs_less'] for c in cs)} of {len(cs)} ({fmt(dep['mean_error_km'])} against "
         f"{fmt(ind['mean_error_km'])} km). It errs less than guessing the regional mean "
         f"({fmt(m['regional_mean_guess']['mean_error_km'])} km) at {sum(c['beats_guess'] for c in cs)} of "
         f"{len(cs)} ε."),
    ]
    if w["friend_km"]:
        out.append(
            f"Why the friendships help so little here: friends live far apart. Their distances' 10th, 50th and 90th "
            f"percentiles are {', '.join(fmt(v) for v in w['friend_km'])} km against "
            f"{', '.join(fmt(v) for v in w['pair_km'])} km for any two users; {w['friends_within_50km']:.1%} of "
            f"friends live within 50 km of each other ({w['pairs_within_50km']:.1%} of all pairs). The fitted model "
            f"says a user lives near a friend with probability {fmt(1 - near['weights'][0], 3)} (kernel "
            f"{', '.join(fmt(s, 3) for s in near['sigma_km'])} km) and where people live otherwise.")
    out.append(
        f"Why every MAP errs more than the mean: Eq. 7 names the most probable cell, and the users live in distant "
        f"cities, so a wrong city costs thousands of km. The best single cell for everyone errs "
        f"{fmt(w['best_cell_km'])} km on average, the regional mean {fmt(m['regional_mean_guess']['mean_error_km'])} km; "
        f"the histogram's own MAP (ε = {first:g}: the busiest cell) errs "
        f"{fmt(result.row(n, first, 'independent')['mean_error_km'])} km. What the posteriors know shows in their "
        f"Bayes estimate (the cell of least expected distance): dependent {fmt(dep['bayes_mean_error_km'])} km, "
        f"independent {fmt(ind['bayes_mean_error_km'])} km at ε = {e:g}; at ε = {last:g}, "
        f"{fmt(result.row(n, last, 'dependent')['bayes_mean_error_km'])} and "
        f"{fmt(result.row(n, last, 'independent')['bayes_mean_error_km'])} km.")
    out.append(
        f"The CAR conditional as a prior (the previous dependent adversary) has entropy {fmt(car['prior_bits'])} bits "
        f"against the histogram's {fmt(ind['prior_bits'])}, so it \"leaks\" {fmt(car['leaked_bits'])} bits; its "
        f"MAP errs {fmt(car['mean_error_km'])} km because a normal prior peaks between cities, near the mean.")
    out.append(
        f"The release alone is worth at most {fmt(top['release_bits'])} bits on average to any adversary "
        f"({top['adversary']}, ε = {top['epsilon']:g}), where Theorem 2 allows {fmt(top['bound_bits'])} bits: the "
        f"noise scale is set by the smallest cluster (Δ = 2/{min(m['cluster_sizes'])}). The partition, which the "
        f"adversary is assumed to know, says far more: the mean of a target's cluster-mates errs "
        f"{fmt(m['cluster_mean_guess']['mean_error_km'])} km. A provider who publishes the partition leaks that before "
        f"any noise, outside what ε covers.")
    if model and model.get("heldout"):
        out.append(dependence.summary_line(model))
    return out


def _mean(values) -> float | None:
    return float(values.mean()) if len(values) else None


def _lead(result: AttackResult) -> str:
    m = result.meta
    cells = f"{m['grid']} × {m['grid']} cells" + (f" in each of its {len(m['boxes'])} boxes" if len(m["boxes"]) > 1
                                                  else "")
    return (f"Region {m['region']}: {m['users']:,} users ({m['inputs']['locations']}) and {m['located_edges']:,} "
            f"friendships between them ({m['inputs']['edges']}; {left_out_edges(m)}); the provider releases "
            f"{m['k']} K-means centroids with Laplace noise; {m['targets']:,} targets, each attacked on {cells} by "
            f"adversaries who know the others' positions (all, or N_prior of them) and, for the friend-aware ones, the "
            f"friendships and a fitted model ({m['inputs']['near']}; the CAR, {m['inputs']['fit']}).")


def _release_text(result: AttackResult) -> str:
    m = result.meta
    box = m["box"]
    return (f"Positions are normalised into the region's frame (latitude {box['lat'][0]:g} to {box['lat'][1]:g}, "
            f"longitude {box['lon'][0]:g} to {box['lon'][1]:g}). K-means (SciPy, k-means++, best of 10 starts) gives "
            f"clusters of {', '.join(f'{s:,}' for s in m['cluster_sizes'])} users. With the partition held fixed, "
            f"moving one user of cluster c anywhere in the frame moves only its centroid, by at most 2/n_c in L1: the "
            f"sensitivity is Δ = 2 / min n_c = {fmt(m['sensitivity'])}.")


def _method_notes(result: AttackResult) -> list[str]:
    car, near = result.meta["car"], result.meta["near"]
    scales = ", ".join(f"{fmt(s, 3)} km (w = {fmt(w, 3)})" for s, w in zip(near["sigma_km"], near["weights"][1:]))
    return [
        ("Posterior (Liu et al. 2016, Eq. 6): exp(−‖μ̃ − μ̂(d̂)‖₁/b) · prior(d̂) over the cells, μ̂(d̂) the "
         "centroids recomputed with the target at the cell's centre in its own cluster (the partition is held "
         "fixed, as the provider's K-means left it, and the adversary knows it); the other clusters' centroids do "
         "not depend on d̂ and cancel. The MAP cell is Eq. 7's estimate; the Bayes cell, beside it, minimises the "
         "posterior expected distance (Eq. 10's loss)."),
        "Independent adversary: the histogram of the known others' cells (Eq. 8); an empty cell has prior 0.",
        ("Dependent adversary (Eq. 9): the same histogram with each known other k weighted by weight(x_k) = w_0 + "
         "Σ_s w_s · mean over the target's known friends f of N(x_k; x_f, (σ_s² + h²) I) / Z_f,s, Z_f,s the same "
         "kernel's mean over the known others. This is exactly the cell mass of the fitted near-friend model "
         "(DESIGN §6.1): a user lives near a uniformly chosen friend with probability 1 − w_0, at scale "
         f"{scales}, and otherwise where people live (w_0 = {fmt(near['weights'][0], 3)}; the population a kernel "
         f"density with bandwidth h = {fmt(near['bandwidth_km'], 3)} km). Unknown friends carry no weight."),
        (f"CAR adversary: the fitted CAR model (α = {car['alpha']:.3g}, τ = {car['tau'][0]:.3g} for x, "
         f"{car['tau'][1]:.3g} for y) gives each coordinate of the target, given the others, a normal law centred at "
         "the regional mean plus α times its friends' mean's offset from it, with variance 1/(τ·degree) (1/τ without "
         "friends); its mass in each cell, normalised over the cells, is the prior."),
        ("Partial knowledge (N_prior below all): each target's adversary knows N_prior of the others, drawn at random "
         "per target. The unknown members of the target's cluster are integrated out as draws from its known members "
         "(their sum normal by the central limit theorem, convolved with the Laplace noise); the CAR conditional "
         "marginalises the unknown users exactly; the histograms count the known others only."),
        ("Leaked information (Eq. 11) takes H(D_i) from the histogram prior for every adversary, as Liu et al. 2016 "
         "state: what a friend-aware adversary's prior gains or loses against the histogram counts too. Theorem 2 "
         "(Liu et al. 2016) bounds a DP adversary's leaked information by ε, a log-likelihood ratio in nats: "
         "ε·log₂e bits."),
    ]
