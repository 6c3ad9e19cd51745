"""The long-generation benchmark's runner (rcattr.eval.kv_long.runner): its token-by-token protocol and settings."""

from __future__ import annotations

import pytest
import torch

from rcattr.eval.kv_long.config import DecodeBudget, LongBenchmarkConfig
from rcattr.eval.kv_long.methods import (
    DecodingPressMethod,
    FullDecoding,
    long_methods,
)
from rcattr.eval.kv_long.runner import decode, divergence


def test_divergence_is_the_kl_and_the_top1_agreement() -> None:
    reference = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.1, 0.8]]).log()
    other = torch.tensor([[0.2, 0.7, 0.1], [0.1, 0.1, 0.8]]).log()
    kl, top1 = divergence(reference, other)
    want = torch.nn.functional.kl_div(other[0], reference[0], log_target=True, reduction="sum")
    torch.testing.assert_close(kl[0], want)
    assert float(kl[1]) == pytest.approx(0.0, abs=1e-7) and top1.tolist() == [0.0, 1.0]


def test_teacher_forcing_the_full_caches_answer_gives_its_own_distributions(model_and_prompt) -> None:
    model, prompt = model_and_prompt
    prefix = torch.tensor([40, 41, 42])
    budget = DecodeBudget(tokens=60, every=8)
    greedy = decode(model, FullDecoding().start(model, prompt.context_ids, budget), prompt, prefix, 12)
    forced = decode(
        model, FullDecoding().start(model, prompt.context_ids, budget), prompt, prefix, 12, greedy.tokens
    )
    assert greedy.tokens.shape == (12,) and torch.equal(forced.tokens, greedy.tokens)
    torch.testing.assert_close(forced.log_probs, greedy.log_probs, rtol=0, atol=1e-5)
    assert len(forced.nbytes) == 1 + 3 + 11  # after the question, each prefix token, each answer token fed
    assert forced.nbytes == sorted(forced.nbytes)  # a full cache only grows


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown task"):
        LongBenchmarkConfig("squad")
    with pytest.raises(ValueError, match="unknown method"):
        LongBenchmarkConfig("qmsum", methods=("rc", "h2o"))
    with pytest.raises(ValueError, match="token budget"):
        DecodeBudget(0, 32)
    with pytest.raises(ValueError, match="unknown scorer"):
        DecodingPressMethod("h2o")
    assert {"full", "rc", "rc_question", "rc_prefill_only", "kvpress_tova"} <= set(long_methods())
