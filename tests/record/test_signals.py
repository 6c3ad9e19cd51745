"""RCSignals: the RC-only signals a result carries as ``result.rc``."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from rcattr.attribution.result import RCAttributionResult
from rcattr.record.attributed import AttributedAnswer, AttributedContext
from rcattr.record.signals import RCSignals
from rcattr.text.segmentation import TextSpan
from tests.helpers.results import rc_signals

ANSWER = "It is."


def _result(rc: RCSignals | None) -> RCAttributionResult:
    spans = [TextSpan(0, 4, "Doc."), TextSpan(0, 4, "Two.", source=1)]
    return RCAttributionResult(
        torch.tensor([0.25, 0.75]),
        torch.tensor([[0.25, 0.75]]),
        context=AttributedContext.of_texts(["Doc.", "Two."], spans),
        output=AttributedAnswer(
            ANSWER, [TextSpan(0, 6, ANSWER)], [TextSpan(0, 2, "It"), TextSpan(3, 6, "is.")]
        ),
        span_scorer="attention",
        rc=rc,
    )


def test_context_reliance_is_the_mean_lookback() -> None:
    signals = replace(rc_signals(2, 1), lookback=torch.tensor([0.2, 0.6]))
    assert signals.context_reliance == pytest.approx(0.4)
    assert _result(signals).context_reliance == pytest.approx(0.4)


def test_of_gives_an_rc_result_s_signals_and_names_a_baseline() -> None:
    signals = rc_signals(2, 1, support=[0.9, 0.1])
    assert RCSignals.of(_result(signals)) is signals
    with pytest.raises(ValueError, match="needs an RC result.*'attention' has no RC signals"):
        RCSignals.of(_result(None))


def test_the_result_reads_each_signal_from_rc_and_refuses_to_set_one() -> None:
    result = _result(rc_signals(2, 1, support=[0.9, 0.1]))
    assert result.token_support.tolist() == pytest.approx([0.9, 0.1])
    assert result.head_selection is result.rc.head_selection
    assert result.unsupported_tokens(0.5) == [1]
    with pytest.raises(AttributeError, match="result.rc = dataclasses.replace"):
        result.token_support = torch.zeros(2)
    baseline = _result(None)
    assert baseline.token_support is None and baseline.context_reliance is None
    assert baseline.unsupported_tokens() == [] and baseline.to_dict()["heads"] is None
