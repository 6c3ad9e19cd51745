"""The support probe (rcattr.grounding.probe): its features against brute force, both levels of the fit against
sklearn's, the operating cuts, the file, and the model check."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from rcattr.grounding.citation_rule import OPERATING_POINTS
from rcattr.grounding.probe import (
    SHIPPED,
    SupportProbe,
    claim_tokens,
    grouped_folds,
    model_identity,
    operating_cut,
    vetoed,
)
from rcattr.text.segmentation import TextSpan
from tests.helpers.claims import synthetic_claims


def test_claim_tokens_leave_out_markers_and_blanks() -> None:
    claim = "It sat [1]."
    bounds = [(0, 2), (2, 6), (6, 8), (8, 9), (9, 10), (10, 11)]  # "It", " sat", " [", "1", "]", "."
    tokens = [TextSpan(start, end, claim[start:end]) for start, end in bounds]
    assert claim_tokens(tokens, claim) == [0, 1, 5]
    assert claim_tokens(tokens, claim, 2, 11) == [1, 5]  # one sentence of an answer
    assert claim_tokens([TextSpan(0, 1, " ")], " ") == [0]  # nothing said: every token


def test_both_levels_are_sklearns_standardised_logistic_regressions() -> None:
    claims, labels = synthetic_claims(80, 0)
    groups = [str(i // 2) for i in range(80)]
    probe = SupportProbe.fit(claims, labels, "m", c=0.5, groups=groups, seed=3)
    x = np.stack([claim.heads_vector() for claim in claims])
    heads = make_pipeline(StandardScaler(), LogisticRegression(C=0.5, max_iter=5000)).fit(x, labels)
    assert probe.heads_log_odds(claims) == pytest.approx(heads.decision_function(x), abs=1e-6)
    out_of_fold = np.zeros(80)
    for train, test in grouped_folds(labels, groups, 3):
        fold = make_pipeline(StandardScaler(), LogisticRegression(C=0.5, max_iter=5000))
        out_of_fold[test] = fold.fit(x[train], labels[train]).decision_function(x[test])
    v = np.stack([claim.combined_vector(z) for claim, z in zip(claims, out_of_fold, strict=True)])
    combined = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=5000)).fit(v, labels)
    v_all = np.stack(
        [claim.combined_vector(z) for claim, z in zip(claims, probe.heads_log_odds(claims), strict=True)]
    )
    assert probe.probability(claims) == pytest.approx(combined.predict_proba(v_all)[:, 1], abs=1e-6)
    assert np.argmax(np.abs(probe.coefficients)) == 0  # the telling head
    assert set(probe.cuts) == set(OPERATING_POINTS)
    assert probe.cuts["lenient"] <= probe.cuts["balanced"] <= probe.cuts["strict"]


@given(
    st.lists(st.floats(0, 1, allow_nan=False), min_size=2, max_size=40),
    st.floats(0, 1),
    st.integers(0, 2**16),
)
def test_an_operating_cut_marks_at_most_its_share_of_attributable_claims(values, share, seed) -> None:
    labels = np.random.default_rng(seed).integers(0, 2, len(values))
    labels[0] = 1
    probabilities = np.asarray(values)
    cut = operating_cut(probabilities, labels, share)
    attributable = probabilities[labels == 1]
    assert np.mean(attributable < cut) <= share + 1e-9
    # the largest such cut: any attributable claim at or above it would push the marks over the share
    above = attributable[attributable > cut]
    if above.size:
        assert np.mean(attributable < above.min()) > share


def test_a_saved_probe_loads_the_same_and_an_old_one_is_refused(tmp_path) -> None:
    claims, labels = synthetic_claims(40, 1)
    probe = SupportProbe.fit(claims, labels, "m")
    probe.save(tmp_path / "probe.json")
    loaded = SupportProbe.load(tmp_path / "probe.json")
    assert loaded == probe
    assert np.array_equal(loaded.probability(claims), probe.probability(claims))
    old = {
        key: value
        for key, value in json.loads((tmp_path / "probe.json").read_text()).items()
        if key != "format"
    }
    (tmp_path / "old.json").write_text(json.dumps(old))
    with pytest.raises(ValueError, match="format 1; this release reads format 2"):
        SupportProbe.load(tmp_path / "old.json")


def test_bad_fits_and_other_models_are_refused() -> None:
    claims, labels = synthetic_claims(20, 2)
    with pytest.raises(ValueError, match="both classes"):
        SupportProbe.fit(claims, np.ones(20), "m")
    with pytest.raises(ValueError, match="20 claims but 19 labels"):
        SupportProbe.fit(claims, labels[:19], "m")
    other, _ = synthetic_claims(2, 3, shape=(3, 3))
    with pytest.raises(ValueError, match="different shapes"):
        SupportProbe.fit(claims[:18] + other, labels, "m")
    with pytest.raises(ValueError, match="too few questions"):
        SupportProbe.fit(claims, labels, "m", groups=["one question"] * 20)
    probe = SupportProbe.fit(claims, labels, "m")
    with pytest.raises(ValueError, match=r"this probe reads \(2, 3\)"):
        probe.probability(other)
    with pytest.raises(ValueError, match="no claims"):
        probe.probability([])
    with pytest.raises(ValueError, match="unknown operating point 'loose'"):
        probe.cut("loose")
    probe.check(("m", 2, 3))
    with pytest.raises(ValueError, match="fitted on m .2 layers x 3 heads., not on n"):
        probe.check(("n", 2, 3))


def _model(name: str, layers: int, heads: int) -> SimpleNamespace:
    text = SimpleNamespace(num_hidden_layers=layers, num_attention_heads=heads)
    return SimpleNamespace(
        config=SimpleNamespace(name_or_path=f"/somewhere/{name}", get_text_config=lambda: text)
    )


@pytest.mark.parametrize(
    ("name", "layers", "heads"),
    [("SmolLM2-135M-Instruct", 30, 9), ("gemma-3-270m", 18, 4), ("qwen2.5-coder-0.5b-instruct", 24, 14)],
)
def test_the_shipped_probes_go_only_to_the_model_they_were_fitted_on(name, layers, heads) -> None:
    assert name in SHIPPED
    probe = SupportProbe.shipped(_model(name, layers, heads))
    assert probe is not None and (probe.model, probe.layers, probe.heads) == (name, layers, heads)
    assert len(probe.coefficients) == 2 * layers * heads and len(probe.combined_coefficients) == 6
    assert (
        SupportProbe.shipped(_model(name.upper(), layers, heads)) is not None
    )  # the hub's case or a folder's
    assert SupportProbe.shipped(_model(name, layers, heads - 1)) is None  # the name alone is not enough
    assert SupportProbe.shipped(_model("other", layers, heads)) is None
    assert model_identity(_model(name, layers, heads)) == (name, layers, heads)


def test_the_verdicts_score_is_capped_by_support_or_coverage_and_vetoed_by_an_unheld_number() -> None:
    claims, _ = synthetic_claims(4, 5)
    capped = replace(claims[0], unheld_number=False, held_support=0.3, coverage=0.2)
    by_words = replace(claims[1], unheld_number=False, held_support=0.25, coverage=0.6)
    free = replace(claims[2], unheld_number=False, held_support=1.0, coverage=0.0)
    number = replace(claims[3], unheld_number=True, held_support=0.9, coverage=1.0)
    scores = vetoed(np.full(4, 0.8), [capped, by_words, free, number])
    assert scores.tolist() == [0.3, 0.6, 0.8, 0.0]
