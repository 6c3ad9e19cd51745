"""The support probe on AttributionBench: its out-of-fold probabilities, and its transfer to other
models.

- [`probe_probabilities`][rcattr.eval.groundedness.probe_report.probe_probabilities]: each claim's probability of being attributable from a
  [`SupportProbe`][rcattr.grounding.probe.SupportProbe] fitted on the other folds (whole questions per fold), its
  penalty chosen on those folds alone (an inner question-grouped cross-validation over [`C_GRID`][rcattr.eval.groundedness.probe_report.C_GRID]), so
  the figure is what a user fitting on their own labelled claims would get on new questions;
- [`pooled_features`][rcattr.eval.groundedness.probe_report.pooled_features]: a claim's features without the heads' identities (quantiles over the heads of
  their lookback ratios and peaks, the support and the log-probability), the same length on every model, so a
  probe fitted on one model's claims can be applied to another's ([`transfer_probabilities`][rcattr.eval.groundedness.probe_report.transfer_probabilities]).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import log_loss
from sklearn.model_selection import StratifiedGroupKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from rcattr.grounding.probe import DEFAULT_C, ClaimFeatures, SupportProbe, heads_model

# larger C fit slowly: 8 s (C = 1) and 17 s (C = 10) a fit on SmolLM2's 1,195 claims, against 1 s at 0.01
C_GRID = (0.001, 0.003, 0.01, 0.03, 0.1)
INNER_FOLDS = 5
QUANTILES = (0.1, 0.25, 0.5, 0.75, 0.9)


def row_features(row: dict[str, Any]) -> ClaimFeatures:
    """The probe's features of one claim row joined with its heads row (`head_shape`, `head_lookback`,
    `head_peak`): its coverage and its claims (`[kind, held, support]`) beside the heads'."""
    shape = tuple(row["head_shape"])
    claims = row["claims"]
    return ClaimFeatures(
        np.asarray(row["head_lookback"], dtype=float).reshape(shape),
        np.asarray(row["head_peak"], dtype=float).reshape(shape),
        float(row["support"]),
        float(row["logprob"]),
        float(row["coverage"]),
        any(not held and kind != "name" for kind, held, _ in claims),
        any(not held and kind == "name" for kind, held, _ in claims),
        float(row.get("held_support", row["support"])),
    )


def best_c(claims: Sequence[ClaimFeatures], labels: np.ndarray, groups: Sequence[str], seed: int) -> float:
    """The heads' penalty: the `c` of [`C_GRID`][rcattr.eval.groundedness.probe_report.C_GRID] whose heads' level alone has the least mean log-loss
    over [`INNER_FOLDS`][rcattr.eval.groundedness.probe_report.INNER_FOLDS] question-grouped folds; the probe's default where there are too few questions or
    claims of a label to fold."""
    n_splits = min(INNER_FOLDS, len(set(groups)), int(np.bincount(labels).min()))
    if n_splits < 2:
        return DEFAULT_C
    splitter = StratifiedGroupKFold(n_splits=n_splits, shuffle=True, random_state=seed)
    splits = list(splitter.split(np.zeros(len(labels)), labels, groups))
    x = np.stack([claim.heads_vector() for claim in claims])
    scores = []
    for c in C_GRID:
        fold_scores = []
        for train, test in splits:
            heads = heads_model(x[train], labels[train], c)
            fold_scores.append(log_loss(labels[test], heads.predict_proba(x[test])[:, 1], labels=[0, 1]))
        scores.append(np.mean(fold_scores))
    return C_GRID[int(np.argmin(scores))]


def probe_probabilities(
    claims: Sequence[ClaimFeatures],
    labels: np.ndarray,
    splits: Sequence[tuple[np.ndarray, np.ndarray]],
    groups: Sequence[str],
    seed: int,
) -> tuple[np.ndarray, dict[str, int]]:
    """`[n]` each claim's out-of-fold probability over the outer `splits`, each fold's probe with the
    penalty [`best_c`][rcattr.eval.groundedness.probe_report.best_c] chose on its training claims, and how often each `c` was chosen."""
    probabilities = np.zeros(len(labels))
    chosen: Counter[str] = Counter()
    for train, test in splits:
        train_claims = [claims[i] for i in train]
        c = best_c(train_claims, labels[train], [groups[i] for i in train], seed)
        chosen[str(c)] += 1
        probe = SupportProbe.fit(train_claims, labels[train], "fold", c, [groups[i] for i in train], seed)
        probabilities[test] = probe.probability([claims[i] for i in test])
    return probabilities, dict(chosen)


def pooled_features(claim: ClaimFeatures) -> np.ndarray:
    """`[2 len(QUANTILES) + 7]`: the quantiles over the heads and the mean of the lookback ratios and of the
    peaks, and the claim's other features (`ClaimFeatures.combined_vector` without the heads' log-odds); no
    head's identity, so every model has the same."""
    parts = []
    for table in (claim.lookback, claim.peak):
        values = table.ravel()
        parts += [*np.quantile(values, QUANTILES), values.mean()]
    return np.concatenate([parts, claim.combined_vector(0.0)[1:]])


def transfer_probabilities(
    fitted_on: Sequence[ClaimFeatures],
    labels: np.ndarray,
    applied_to: Sequence[ClaimFeatures],
    c: float = 1.0,
) -> np.ndarray:
    """`[m]` the probabilities a probe on [`pooled_features`][rcattr.eval.groundedness.probe_report.pooled_features], fitted on one model's claims and
    `labels`, gives another model's claims `applied_to`."""
    model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=5000))
    model.fit(np.stack([pooled_features(claim) for claim in fitted_on]), labels)
    return model.predict_proba(np.stack([pooled_features(claim) for claim in applied_to]))[:, 1]
