"""The support probe (rcattr.grounding.probe): its features against brute force, the fit against sklearn's, the
file, and the model check."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from rcattr.attribution.attributor import RCAttributor
from rcattr.grounding.head_statistics import token_statistics
from rcattr.grounding.probe import (
    SHIPPED,
    ClaimFeatures,
    SupportProbe,
    claim_features,
    claim_tokens,
    claim_verdict,
    model_identity,
)
from rcattr.text.prompting import ContextInput
from rcattr.text.segmentation import TextSpan


def _features(n: int, seed: int, shape: tuple[int, int] = (2, 3)) -> tuple[list[ClaimFeatures], np.ndarray]:
    """``n`` claims whose first head's lookback tells their label, the rest noise."""
    rng = np.random.default_rng(seed)
    labels = np.arange(n) % 2
    claims = []
    for label in labels:
        lookback = rng.uniform(0, 1, shape)
        lookback[0, 0] = 0.3 + 0.4 * label + rng.normal(0, 0.1)
        claims.append(ClaimFeatures(lookback, rng.uniform(0, 1, shape), float(rng.uniform(0.01, 0.99)), -1.0))
    return claims, labels


def test_claim_tokens_leave_out_markers_and_blanks() -> None:
    claim = "It sat [1]."
    bounds = [(0, 2), (2, 6), (6, 8), (8, 9), (9, 10), (10, 11)]  # "It", " sat", " [", "1", "]", "."
    tokens = [TextSpan(start, end, claim[start:end]) for start, end in bounds]
    assert claim_tokens(tokens, claim) == [0, 1, 5]
    assert claim_tokens([TextSpan(0, 1, " ")], " ") == [0]  # nothing said: every token


def test_the_probe_is_sklearns_standardised_logistic_regression() -> None:
    claims, labels = _features(80, 0)
    probe = SupportProbe.fit(claims, labels, "m", c=0.5)
    x = np.stack([claim.vector() for claim in claims])
    reference = make_pipeline(StandardScaler(), LogisticRegression(C=0.5, max_iter=5000)).fit(x, labels)
    assert probe.probability(claims) == pytest.approx(reference.predict_proba(x)[:, 1], abs=1e-6)
    assert x.shape[1] == 2 * 6 + 2 and np.argmax(np.abs(probe.coefficients)) == 0  # the telling head


def test_a_saved_probe_loads_the_same(tmp_path) -> None:
    claims, labels = _features(40, 1)
    probe = SupportProbe.fit(claims, labels, "m")
    probe.save(tmp_path / "probe.json")
    loaded = SupportProbe.load(tmp_path / "probe.json")
    assert loaded == probe
    assert np.array_equal(loaded.probability(claims), probe.probability(claims))


def test_bad_fits_and_other_models_are_refused() -> None:
    claims, labels = _features(20, 2)
    with pytest.raises(ValueError, match="both classes"):
        SupportProbe.fit(claims, np.ones(20), "m")
    with pytest.raises(ValueError, match="20 claims but 19 labels"):
        SupportProbe.fit(claims, labels[:19], "m")
    other, _ = _features(2, 3, shape=(3, 3))
    with pytest.raises(ValueError, match="different shapes"):
        SupportProbe.fit(claims[:18] + other, labels, "m")
    probe = SupportProbe.fit(claims, labels, "m")
    with pytest.raises(ValueError, match=r"this probe reads \(2, 3\)"):
        probe.probability(other)
    with pytest.raises(ValueError, match="no claims"):
        probe.probability([])
    probe.check(("m", 2, 3))
    with pytest.raises(ValueError, match="fitted on m .2 layers x 3 heads., not on n"):
        probe.check(("n", 2, 3))


def _model(name: str, layers: int, heads: int) -> SimpleNamespace:
    text = SimpleNamespace(num_hidden_layers=layers, num_attention_heads=heads)
    return SimpleNamespace(
        config=SimpleNamespace(name_or_path=f"/somewhere/{name}", get_text_config=lambda: text)
    )


def test_the_shipped_probe_goes_only_to_the_model_it_was_fitted_on() -> None:
    (name,) = SHIPPED
    probe = SupportProbe.shipped(_model(name, 30, 9))
    assert probe is not None and (probe.model, probe.layers, probe.heads) == (name, 30, 9)
    assert len(probe.coefficients) == 2 * 30 * 9 + 2
    assert SupportProbe.shipped(_model(name, 30, 8)) is None  # the name alone is not enough
    assert SupportProbe.shipped(_model("other", 30, 9)) is None
    assert model_identity(_model(name, 30, 9)) == (name, 30, 9)


def test_claim_features_are_the_head_means_over_the_claims_tokens(llama, tokenizer) -> None:
    attributor = RCAttributor(llama, tokenizer)
    inputs, claim = ContextInput(["The cat sat on the mat."], "What did the cat do?"), "The cat sat [1]."
    features = claim_features(attributor, inputs, claim)
    example = attributor.prepare(inputs, claim, "sentence")
    statistics = token_statistics(llama, example)
    tokens = claim_tokens(example.answer_tokens, claim)
    assert features.lookback.shape == statistics.lookback.shape[:2]
    brute = statistics.peak[..., tokens].double().mean(-1).numpy()
    assert np.allclose(features.peak, brute) and 0 <= features.support <= 1
    support = min(c.support for c in attributor.attribute(inputs, target=claim).citations())
    assert features.support == pytest.approx(support)
    assert features.logprob == pytest.approx(float(statistics.logprob[tokens[1:]].double().mean()))


def test_a_verdict_uses_the_probe_of_the_model_else_the_support(llama, tokenizer) -> None:
    attributor = RCAttributor(llama, tokenizer)
    inputs, claim = ContextInput(["The cat sat on the mat."], "What did the cat do?"), "The cat sat."
    plain = claim_verdict(attributor, inputs, claim)  # no probe shipped for the tiny model
    citations = attributor.attribute(inputs, target=claim).citations()
    assert plain.by == "support" and plain.attributable == pytest.approx(min(c.support for c in citations))
    assert plain.marked == any(c.status != "supported" for c in citations)
    features = claim_features(attributor, inputs, claim)
    name, layers, heads = model_identity(llama)
    claims = [features, ClaimFeatures(features.lookback * 0, features.peak * 0, 0.1, -9.0)]
    probe = SupportProbe.fit(claims, [1, 0], name, c=10.0)
    verdict = claim_verdict(attributor, inputs, claim, probe)
    assert verdict.by == "probe" and verdict.attributable == pytest.approx(
        float(probe.probability([features])[0])
    )
    assert verdict.marked == (verdict.attributable < 0.5)
    other = SupportProbe.fit(claims, [1, 0], "another-model", c=10.0)
    with pytest.raises(ValueError, match="not on"):
        claim_verdict(attributor, inputs, claim, other)
