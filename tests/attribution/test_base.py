"""The interface every attributor shares (rcattr.attribution.base), on every baseline of a tiny random model."""

from __future__ import annotations

import warnings
from functools import partial

import pytest
import torch

from rcattr.attribution.result import RCAttributionResult
from rcattr.baselines import (
    BASELINES,
    BM25Attributor,
)
from rcattr.text.prompting import ContextInput
from tests.default_methods import ATTRIBUTORS, baseline
from tests.helpers.attribution import ANSWER, BRACED_DOCUMENTS, BRACED_INPUT, QUESTION


@pytest.mark.parametrize("name", sorted(BASELINES))
@pytest.mark.parametrize("granularity", ["chunk", "sentence"])
def test_every_baseline_shares_the_interface(llama, tokenizer, name: str, granularity: str) -> None:
    result = baseline(name, llama, tokenizer).attribute(
        BRACED_INPUT, ANSWER, granularity=granularity, output_granularity="sentence"
    )
    assert isinstance(result, RCAttributionResult)
    n_spans = 3 if granularity == "chunk" else 4
    assert result.seq_attr.shape == (n_spans,)
    assert result.token_attr is not None and result.token_attr.shape == (2, n_spans)
    assert torch.isfinite(result.token_attr).all()
    assert [span.text for span in result.output_spans] == ["It sat.", "Then it purred."]
    assert result.input_tokens == [span.text for span in result.context_spans]
    assert result.top(1)[0][0] in result.context_spans


BUILDERS = {**ATTRIBUTORS, **{name: partial(baseline, name) for name in BASELINES}}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_every_attributor_says_when_model_and_tokenizer_are_swapped(llama, tokenizer, name: str) -> None:
    with pytest.raises(
        TypeError, match=r"model and tokenizer look swapped: call \w+Attributor\(model, tokenizer\)"
    ):
        BUILDERS[name](tokenizer, llama)
    with pytest.raises(TypeError, match="tokenizer must be a Hugging Face tokenizer .*, got str"):
        BUILDERS[name](llama, "gpt2")


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_a_whole_answer_result_keeps_its_sentences_rows_for_citations(llama, tokenizer, name: str) -> None:
    result = baseline(name, llama, tokenizer).attribute(BRACED_INPUT, ANSWER, granularity="chunk")
    assert (
        result.token_attr is not None and result.token_attr.shape == (1, 3) and len(result.output_spans) == 1
    )
    rows = result.sentence_rows
    assert rows is not None and [span.text for span in rows.spans] == ["It sat.", "Then it purred."]
    assert rows.scores.shape == (2, 3) and torch.isfinite(rows.scores).all()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # per sentence: nothing cited together
        assert [citation.text for citation in result.citations()] == ["It sat.", "Then it purred."]


@pytest.mark.parametrize("name", sorted(BASELINES))
def test_an_empty_retrieved_chunk_is_a_document_that_scores_zero(llama, tokenizer, name: str) -> None:
    with pytest.warns(UserWarning, match="context chunk 1 is empty or only whitespace"):
        result = baseline(name, llama, tokenizer).attribute(
            ContextInput([BRACED_DOCUMENTS[0], " \n ", BRACED_DOCUMENTS[2]], QUESTION),
            ANSWER,
            granularity="chunk",
        )
    assert len(result.documents) == 3 and result.chunks[1] == ""
    assert float(result.seq_attr[1]) == 0.0 and result.token_attr is not None
    assert bool((result.token_attr[:, 1] == 0).all()) and torch.isfinite(result.seq_attr).all()


def test_baselines_reject_bad_input(llama, tokenizer) -> None:
    bm25 = BM25Attributor(llama, tokenizer)
    with pytest.raises(ValueError, match="empty"):
        bm25.attribute(ContextInput(["   "]), ANSWER)
    with pytest.raises(ValueError, match="target is empty"):
        bm25.attribute(BRACED_INPUT, "  ")
    with pytest.raises(ValueError, match="window"):
        bm25.attribute(BRACED_INPUT, "x" * 400)
