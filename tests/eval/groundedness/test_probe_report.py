"""The probe on AttributionBench rows (rcattr.eval.groundedness.probe_report): out of fold, its penalty chosen
inside the fold, and the head-free features that transfer."""

from __future__ import annotations

import numpy as np
import pytest

from rcattr.eval.common.auroc import auroc
from rcattr.eval.groundedness import probe_report
from rcattr.eval.groundedness.claim_report import folds
from rcattr.eval.groundedness.probe_report import (
    QUANTILES,
    pooled_features,
    probe_probabilities,
    row_features,
    transfer_probabilities,
)
from rcattr.grounding.probe import ClaimFeatures


def _claims(n: int, seed: int, shape: tuple[int, int]) -> tuple[list[ClaimFeatures], np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    labels = (np.arange(n) // 2) % 2  # two claims a question, one label a question
    claims = []
    for label in labels:
        lookback = rng.uniform(0, 1, shape)
        lookback[-1] = 0.2 + 0.5 * label + rng.normal(0, 0.1, shape[1])  # the last layer tells
        claims.append(ClaimFeatures(lookback, rng.uniform(0, 1, shape), 0.5, -1.0))
    return claims, labels, [f"q{i // 2}" for i in range(n)]


def test_row_features_read_a_claim_row_joined_with_its_heads_row() -> None:
    row = {
        "support": 0.7,
        "logprob": -2.0,
        "head_shape": [2, 2],
        "head_lookback": [0.1, 0.2, 0.3, 0.4],
        "head_peak": [1, 0, 0, 1],
        "coverage": 0.8,
        "claims": [["date", False, 0.1], ["name", True, 0.9]],
    }
    features = row_features(row)
    assert features.lookback.tolist() == [[0.1, 0.2], [0.3, 0.4]] and features.peak[1, 1] == 1
    assert (features.support, features.logprob, features.coverage) == (0.7, -2.0, 0.8)
    assert features.unheld_number and not features.unheld_name


def test_each_folds_probe_and_its_penalty_see_only_the_folds_training_questions(monkeypatch) -> None:
    claims, labels, groups = _claims(60, 0, (3, 2))
    seen: list[set[int]] = []
    fit, position = probe_report.SupportProbe.fit, {id(claim): i for i, claim in enumerate(claims)}

    def spy(train, train_labels, model, c, train_groups, seed):
        seen.append({position[id(claim)] for claim in train})
        assert train_groups == [groups[position[id(claim)]] for claim in train]
        return fit(train, train_labels, model, c, train_groups, seed)

    monkeypatch.setattr(probe_report.SupportProbe, "fit", spy)
    splits = folds(labels, 0, groups)
    probabilities, chosen = probe_probabilities(claims, labels, splits, groups, seed=0)
    assert sum(chosen.values()) == len(splits) and set(chosen) <= {str(c) for c in probe_report.C_GRID}
    assert len(seen) == len(splits)  # the penalty's inner fits are the heads' level's alone
    for fitted, (train, test) in zip(seen, splits, strict=True):
        assert fitted == set(train.tolist())
        assert not {groups[i] for i in test} & {groups[i] for i in train}
    assert auroc(labels, probabilities) > 0.9  # the telling layer is found out of fold


def test_pooled_features_have_one_length_on_every_model_and_transfer() -> None:
    small, labels, _ = _claims(80, 1, (3, 2))
    large, other_labels, _ = _claims(80, 2, (5, 4))
    assert (
        pooled_features(small[0]).shape == pooled_features(large[0]).shape == (2 * (len(QUANTILES) + 1) + 5,)
    )
    lookback = small[0].lookback.ravel()
    assert pooled_features(small[0])[len(QUANTILES)] == pytest.approx(lookback.mean())
    assert auroc(other_labels, transfer_probabilities(small, labels, large)) > 0.8
