"""A claim checked by teacher-forcing it (rcattr.attribution.claim_checks): the probe's features from the
attribution's own pass against a second forward, and the claim's verdict against its citations'."""

from __future__ import annotations

import numpy as np
import pytest

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.claim_checks import claim_features, claim_verdict
from rcattr.attribution.head_statistics import token_statistics
from rcattr.grounding.probe import SupportProbe, claim_tokens, model_identity
from rcattr.text.prompting import ContextInput
from tests.helpers.claims import synthetic_claims


def test_claim_features_come_from_the_attributions_own_pass(llama, tokenizer) -> None:
    claims, labels = synthetic_claims(20, 4, shape=model_identity(llama)[1:])
    probe = SupportProbe.fit(claims, labels, model_identity(llama)[0])
    attributor = RCAttributor(llama, tokenizer, probe=probe)
    inputs, claim = (
        ContextInput(["The cat sat on the mat in 1971."], "What did the cat do?"),
        "The cat sat in 1974 [1].",
    )
    features = claim_features(attributor, inputs, claim)
    example = attributor.prepare(inputs, claim, "sentence")
    statistics = token_statistics(llama, example)  # a second forward, the brute force
    tokens = claim_tokens(example.answer_tokens, claim)
    assert features.lookback.shape == statistics.lookback.shape[:2]
    assert np.allclose(features.peak, statistics.peak[..., tokens].double().mean(-1).numpy())
    assert np.allclose(
        features.lookback, statistics.lookback[..., tokens].double().mean(-1).numpy(), atol=1e-6
    )
    support = min(c.support for c in attributor.attribute(inputs, target=claim).citations())
    assert features.support == pytest.approx(support) and 0 <= features.support <= 1
    assert features.logprob == pytest.approx(float(statistics.logprob[tokens[1:]].double().mean()), abs=1e-5)
    assert features.unheld_number and not features.unheld_name
    assert features.coverage == pytest.approx(2 / 3)  # cat and sat held, 1974 not


def test_a_claims_verdict_is_its_citations(llama, tokenizer) -> None:
    inputs = ContextInput(["The cat sat on the mat in 1971. The dog ran."], "What did the cat do?")
    claim = "The cat sat on the mat. It sat there in 1974."
    for probe in (None, "fitted"):
        if probe == "fitted":
            claims, labels = synthetic_claims(30, 0, shape=model_identity(llama)[1:])
            probe = SupportProbe.fit(claims, labels, model_identity(llama)[0])
        attributor = RCAttributor(llama, tokenizer, probe=probe)
        verdicts = [c.verdict for c in attributor.attribute(inputs, target=claim).citations()]
        verdict = claim_verdict(attributor, inputs, claim)
        assert verdict.marked and verdicts[1].marked  # type: ignore[union-attr]  # the changed year
        assert verdict.reason == next(v.reason for v in verdicts if v.marked)  # type: ignore[union-attr]
        assert "not in the documents: '1974'" in verdicts[1].reason  # type: ignore[union-attr]
        assert verdict.by == ("support" if probe is None else "probe")
        assert verdict.attributable == pytest.approx(min(v.attributable for v in verdicts))  # type: ignore[union-attr]
