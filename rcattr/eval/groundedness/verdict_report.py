"""The verdict on AttributionBench claims, out of fold (`rcattr.grounding.verdict`): how it tells attributable
claims from the others against plain lexical coverage, on questions and on whole sources it was not fitted on.

Every figure comes from stored rows (`rcattr.eval.groundedness.attributionbench`), no model:

- `nested_verdicts`: each claim's probability from a `SupportProbe` fitted on the other folds (whole questions per
  fold), and its marks at each operating point by that fold's own cuts with the held-number veto, so the cut is
  chosen on the training claims alone, never on the claims it marks;
- `signal_table`: AUROC of the verdict (the veto applied), the probe without it, the heads' level alone (the
  probe shipped before the verdict) and the baselines, each with its interval and its paired difference to
  coverage; the marks' macro-F1, caught and falsely marked with their intervals;
- `held_out_sources`: fitted on three sources, applied to the fourth;
- `learning_curve` and `stability`: the fit on a share of the training folds, and refits on bootstrap
  resamples of the questions (the combined level's coefficients, each held-out source's AUROC).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from rcattr.eval.common.auroc import auroc, auroc_table, paired_table
from rcattr.eval.groundedness.source_report import MEASURES
from rcattr.grounding.probe import (
    COMBINED,
    DEFAULT_C,
    OPERATING_POINTS,
    ClaimFeatures,
    SupportProbe,
    grouped_folds,
    vetoed,
)

FOLDS = 10
SHARES = (0.25, 0.5, 0.75, 1.0)


def nested_verdicts(
    claims: Sequence[ClaimFeatures],
    labels: np.ndarray,
    groups: Sequence[str],
    seed: int,
    c: float = DEFAULT_C,
) -> dict[str, np.ndarray]:
    """Out of fold, per claim: `probe` (the probability), `heads` (the heads' level's log-odds) and, per
    operating point, whether the fold's probe marks it (`marked_<point>`, the veto applied;
    `marked_balanced_without_veto`, the probability alone at the balanced cut)."""
    out = {"probe": np.zeros(len(claims)), "heads": np.zeros(len(claims))}
    out |= {f"marked_{point}": np.zeros(len(claims), dtype=bool) for point in OPERATING_POINTS}
    out["marked_balanced_without_veto"] = np.zeros(len(claims), dtype=bool)
    for train, test in tqdm(grouped_folds(labels, groups, seed, FOLDS), desc="folds", leave=False):
        probe = SupportProbe.fit(
            [claims[i] for i in train], labels[train], "fold", c, [groups[i] for i in train], seed
        )
        held_out = [claims[i] for i in test]
        probability = probe.probability(held_out)
        out["probe"][test], out["heads"][test] = probability, probe.heads_log_odds(held_out)
        for point in OPERATING_POINTS:
            out[f"marked_{point}"][test] = vetoed(probability, held_out) < probe.cut(point)
        out["marked_balanced_without_veto"][test] = probability < probe.cut("balanced")
    return out


def signal_table(
    values: dict[str, np.ndarray],
    marks: dict[str, np.ndarray],
    labels: np.ndarray,
    groups: Sequence[str],
    n_boot: int,
    seed: int,
) -> dict[str, dict[str, float]]:
    """Per signal of `values` (`coverage` among them), its AUROC with interval and paired difference to
    coverage's; per signal of `marks` (True: marked), each of `MEASURES` with its interval."""
    names, label_list = list(values), [int(label) for label in labels]
    items = [{name: float(values[name][i]) for name in names} for i in range(len(labels))]
    table: dict[str, dict[str, float]] = {
        name: dict(row)
        for name, row in auroc_table(items, label_list, "coverage", groups, n_boot, seed).items()
    }
    for name, marked in marks.items():
        attributable = [{name: float(not m)} for m in marked]
        for measure, score in MEASURES.items():
            row = paired_table(attributable, label_list, name, score, measure, groups, n_boot, seed)[name]
            table.setdefault(name, {}).update(
                {measure: row[measure], f"{measure}_low": row["low"], f"{measure}_high": row["high"]}
            )
    return table


def held_out_sources(
    claims: Sequence[ClaimFeatures],
    labels: np.ndarray,
    groups: Sequence[str],
    sources: Sequence[str],
    seed: int,
    c: float = DEFAULT_C,
) -> dict[str, dict[str, float]]:
    """Per source: the verdict fitted on the other sources' claims, its AUROC on this one's, its heads' level's
    alone and coverage's."""
    table = {}
    for source in tqdm(sorted(set(sources)), desc="held-out sources", leave=False):
        train = [i for i, s in enumerate(sources) if s != source]
        test = [i for i, s in enumerate(sources) if s == source]
        probe = SupportProbe.fit(
            [claims[i] for i in train], labels[train], "fold", c, [groups[i] for i in train], seed
        )
        held_out = [claims[i] for i in test]
        table[source] = {
            "claims": len(test),
            "verdict": auroc(labels[test], vetoed(probe.probability(held_out), held_out)),
            "heads": auroc(labels[test], probe.heads_log_odds(held_out)),
            "coverage": auroc(labels[test], [claims[i].coverage for i in test]),
        }
    return table


def learning_curve(
    claims: Sequence[ClaimFeatures],
    labels: np.ndarray,
    groups: Sequence[str],
    seed: int,
    c: float = DEFAULT_C,
) -> dict[str, float]:
    """Per share of `SHARES`: the out-of-fold AUROC of the verdict fitted on that share of each fold's training
    questions (drawn whole)."""
    rng = np.random.default_rng(seed)
    curve = {}
    folds = grouped_folds(labels, groups, seed, FOLDS)
    for share in tqdm(SHARES, desc="learning curve", leave=False):
        scores = np.zeros(len(claims))
        for train, test in folds:
            questions = sorted({groups[i] for i in train})
            kept = set(rng.choice(questions, max(2, round(share * len(questions))), replace=False).tolist())
            subset = np.array([i for i in train if groups[i] in kept])
            probe = SupportProbe.fit(
                [claims[i] for i in subset], labels[subset], "fold", c, [groups[i] for i in subset], seed
            )
            held_out = [claims[i] for i in test]
            scores[test] = vetoed(probe.probability(held_out), held_out)
        curve[f"{share:.2f}"] = auroc(labels, scores)
    return curve


def stability(
    claims: Sequence[ClaimFeatures],
    labels: np.ndarray,
    groups: Sequence[str],
    sources: Sequence[str],
    seed: int,
    n_refits: int = 10,
    c: float = DEFAULT_C,
) -> dict[str, Any]:
    """The verdict refitted `n_refits` times on bootstrap resamples of the questions: the mean and standard
    deviation of each combined coefficient (`COMBINED`) on all claims, and of each held-out source's AUROC
    (fitted on a resample of the other sources' questions)."""
    rng = np.random.default_rng(seed)
    members: dict[str, list[int]] = {}
    for index, group in enumerate(groups):
        members.setdefault(group, []).append(index)
    questions = list(members)

    def resample(pool: Sequence[str]) -> np.ndarray:
        return np.concatenate([members[q] for q in rng.choice(pool, len(pool))])

    coefficients: list[tuple[float, ...]] = []
    held: dict[str, list[float]] = {source: [] for source in sorted(set(sources))}
    for _ in tqdm(range(n_refits), desc="refits", leave=False):
        draw = resample(questions)
        fitted = _fit(claims, labels, groups, draw, seed, c)
        coefficients.append(fitted.combined_coefficients)
        for source in held:
            pool = sorted({groups[i] for i in range(len(claims)) if sources[i] != source})
            probe = _fit(claims, labels, groups, resample(pool), seed, c)
            test = [i for i in range(len(claims)) if sources[i] == source]
            held_out = [claims[i] for i in test]
            held[source].append(auroc(labels[test], vetoed(probe.probability(held_out), held_out)))
    array = np.asarray(coefficients)
    return {
        "coefficients": {
            name: {"mean": float(array[:, k].mean()), "sd": float(array[:, k].std())}
            for k, name in enumerate(COMBINED)
        },
        "held_out_auroc": {
            source: {"mean": float(np.mean(v)), "sd": float(np.std(v))} for source, v in held.items()
        },
        "refits": n_refits,
    }


def _fit(
    claims: Sequence[ClaimFeatures],
    labels: np.ndarray,
    groups: Sequence[str],
    draw: np.ndarray,
    seed: int,
    c: float,
) -> SupportProbe:
    # a question drawn twice keeps one group: its copies fall in one fold
    return SupportProbe.fit(
        [claims[i] for i in draw], labels[draw], "refit", c, [groups[i] for i in draw], seed
    )
