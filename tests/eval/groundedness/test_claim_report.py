"""The AttributionBench tables (rcattr.eval.groundedness.claim_report): cut-offs, folds, the combiner."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from sklearn.metrics import f1_score

from rcattr.eval.groundedness import claim_report as claim_report_module
from rcattr.eval.groundedness.claim_report import (
    best_cut,
    claim_report,
    cross_validated_predictions,
    folds,
    macro_f1,
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=30))
def test_macro_f1_equals_sklearns(items) -> None:
    labels, predictions = np.array([y for y, _ in items]), np.array([p for _, p in items])
    assert macro_f1(labels, predictions) == pytest.approx(f1_score(labels, predictions, average="macro"))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.booleans()), min_size=2, max_size=25))
def test_best_cut_is_the_best_threshold_by_brute_force(items) -> None:
    values = np.array([v for v, _ in items], dtype=float)
    labels = np.array([int(y) for _, y in items])
    cut, f1 = best_cut(values, labels)
    brute = max(macro_f1(labels, (values >= t).astype(int)) for t in range(0, 8))
    assert f1 == pytest.approx(brute) and macro_f1(labels, (values >= cut).astype(int)) == pytest.approx(f1)


def test_a_cross_validated_cut_never_sees_the_fold_it_predicts(monkeypatch) -> None:
    # the other folds cut at 0.7 (their lowest attributable value); the predicted fold's own attributable
    # claims sit at 0.5, where a cut that saw them would fall, and so are predicted unattributable
    labels = np.array([0, 0, 0, 1, 1, 1, 0, 1, 1])
    values = np.array([0.1, 0.2, 0.3, 0.7, 0.8, 0.9, 0.1, 0.5, 0.5])
    test = np.array([6, 7, 8])
    splits = [(np.arange(6), test), (np.array([0, 1, 3, 4, 6, 7, 8]), np.array([2, 5]))]
    monkeypatch.setattr(claim_report_module, "folds", lambda labels, seed, groups=None: splits)
    predictions = cross_validated_predictions(values, labels, seed=0)
    assert predictions[test].tolist() == [0, 0, 0]
    flipped = labels.copy()
    flipped[test] = 1 - flipped[test]  # the predicted fold's labels only: its predictions must not move
    assert (cross_validated_predictions(values, flipped, seed=0)[test] == predictions[test]).all()


def test_a_signal_equal_to_the_label_is_cut_perfectly_on_every_fold() -> None:
    labels = np.array([0, 1] * 20)
    assert (cross_validated_predictions(labels.astype(float), labels, seed=1) == labels).all()


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 7), min_size=24, max_size=60), st.integers(0, 3))
def test_grouped_folds_keep_each_question_in_one_fold_and_test_every_claim_once(questions, seed) -> None:
    assume(len(set(questions)) >= 2)
    labels = np.array([i % 2 for i in range(len(questions))])
    groups = [f"q{q}" for q in questions]
    splits = folds(labels, seed, groups)
    tested = np.concatenate([test for _, test in splits])
    assert sorted(tested.tolist()) == list(range(len(labels)))
    for train, test in splits:
        assert not {groups[i] for i in train} & {groups[i] for i in test}


def test_claim_folds_split_a_question_and_question_folds_do_not() -> None:
    labels = np.array([0, 1] * 20)
    questions = [f"q{i // 4}" for i in range(40)]

    def split_a_question(splits) -> bool:
        return any({questions[i] for i in train} & {questions[i] for i in test} for train, test in splits)

    assert split_a_question(folds(labels, 0))  # what the older rows get, and grouping prevents
    assert not split_a_question(folds(labels, 0, questions))


def synthetic_rows(n: int = 40) -> list[dict]:
    rng = random.Random(0)
    rows = []
    for i in range(n):
        label = i % 2
        support = min(1.0, max(0.0, 0.35 + 0.3 * label + rng.uniform(-0.25, 0.25)))
        rows.append(
            {
                "id": f"c{i}",
                "source": "A" if i < n // 2 else "B",
                "label": label,
                "support": support,
                "status": "supported" if support >= 0.5 else "weak",
                "coverage": rng.random(),
                "judge": rng.uniform(-2, 2),
                "logprob": rng.uniform(-3, 0),
                "neg_entropy": -rng.random(),
                "lookback": rng.random(),
                "claims": [],
                "log_odds": [0.0, -5.0],
                "token_logprob": [0.0, -1.0],
                "words": [[label, [1]]],
                "seconds": {"attribute": 1.2, "statistics": 1.1, "coverage": 0.0, "judge": 0.9}
                | ({"forward": 1.0} if i % 8 == 0 else {}),
            }
        )
    return rows


def test_the_report_scores_every_signal_counts_the_skipped_and_costs_in_forwards() -> None:
    rows = [*synthetic_rows(), {"id": "x", "source": "A", "label": 1, "skipped": "the prompt ... window"}]
    results, text = claim_report(rows, seed=0, n_boot=50)
    assert results["claims"] == 40 and results["skipped"] == {"A": 1}
    assert results["auroc"]["heads_coverage"]["auroc"] == 1.0  # the words' surface form is the label here
    assert results["auroc"]["support"]["minus_support"] == 0.0
    against = results["auroc_against"]["coverage"]["support"]
    assert against["minus_coverage"] == pytest.approx(
        results["auroc"]["support"]["auroc"] - results["auroc"]["coverage"]["auroc"]
    )
    assert "| signal | AUROC | 95% interval | minus support (paired 95%) | minus coverage" in text
    marks = results["marks"]
    assert marks["support"]["caught"] == pytest.approx(
        np.mean([row["status"] != "supported" for row in rows[:40] if row["label"] == 0])
    )
    assert "macro_f1" not in marks["logprob"] and marks["heads_coverage"]["cv_macro_f1"] == 1.0
    assert set(results["per_source"]) == {"A", "B"} and results["per_source"]["A"]["claims"] == 20
    assert results["cost"]["support"] == pytest.approx(1.2) and results["cost"]["support_judge"] == 2.1
    assert 0 <= results["auroc"]["combined"]["auroc"] <= 1 and results["combiners"]["combined"]["folds"] == 10
    assert set(results["combiners"]["combined_one_pass"]["coefficients"]) == {
        "support",
        "content_words",
        "heads_coverage",
        "fused_coverage",
        "coverage",
        "logprob",
    }
    assert (
        "AttributionBench: 40 claims (20 attributable, 20 not), skipped beyond the model's window: 1 A"
        in text
    )
    assert claim_report(rows[:5], seed=0, n_boot=50)[0] == {"claims": 5, "skipped": {}}
    assert results["folds_by"] == "claim" and "draws hold single claims (the rows do not say" in text


def test_rows_that_say_their_question_are_folded_by_question() -> None:
    rows = [row | {"question": f"q{i // 4}"} for i, row in enumerate(synthetic_rows())]
    results, text = claim_report(rows, seed=0, n_boot=50)
    assert results["folds_by"] == "question" and "draws hold whole questions" in text
    assert results["combiners"]["combined"]["folds"] == 10  # 10 questions, one a fold
    one_question = [row | {"question": "q"} for row in synthetic_rows()]
    assert claim_report(one_question, seed=0, n_boot=50)[0] == {"claims": 40, "skipped": {}}


def test_bootstrap_draws_resample_whole_questions() -> None:
    plain = claim_report(synthetic_rows(), seed=0, n_boot=200)[0]["auroc"]["support"]
    # a question per claim draws exactly what the claims draw; four claims a question draws otherwise
    alone = [row | {"question": row["id"]} for row in synthetic_rows()]
    grouped = [row | {"question": f"q{i // 4}"} for i, row in enumerate(synthetic_rows())]
    one_each = claim_report(alone, seed=0, n_boot=200)[0]["auroc"]["support"]
    by_four = claim_report(grouped, seed=0, n_boot=200)[0]["auroc"]["support"]
    assert (one_each["low"], one_each["high"]) == (plain["low"], plain["high"])
    assert by_four["auroc"] == plain["auroc"] and (by_four["low"], by_four["high"]) != (
        plain["low"],
        plain["high"],
    )
