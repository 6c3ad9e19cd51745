"""An example's spans (rcattr.attribution.example): context and answer spans at each granularity, the attention sink."""

from __future__ import annotations

import pytest

from rcattr.attribution.example import answer_spans, given_spans, sink_before_context
from rcattr.baselines import RandomAttributor
from tests.helpers.attribution import ANSWER, DOCUMENTS, INPUT


@pytest.mark.parametrize(("granularity", "texts"), [("chunk", DOCUMENTS), ("sentence", None)])
def test_context_spans_cover_each_chunk_at_its_granularity(llama, tokenizer, granularity, texts) -> None:
    example = RandomAttributor(llama, tokenizer).prepare(INPUT, ANSWER, granularity)
    spans = [span.text for span in example.context_spans]
    assert spans == (texts or ["The cat sat.", "It purred.", "Dogs bark loudly.", "Birds fly south in May."])
    for span, tokens in zip(example.context_spans, example.context_ranges, strict=True):
        decoded = tokenizer.decode(example.ids[0, list(tokens)])
        assert decoded == span.text  # one character per token
    with pytest.raises(ValueError, match="unknown granularity 'word'"):
        RandomAttributor(llama, tokenizer).prepare(INPUT, ANSWER, "word")


def test_answer_spans_at_each_output_granularity() -> None:
    assert [span.text for span in answer_spans(ANSWER, None, "answer")] == [ANSWER]
    assert [span.text for span in answer_spans(ANSWER, None, "sentence")] == ["It sat.", "Then it purred."]
    assert [span.text for span in answer_spans(ANSWER, None, [(0, 2), (8, 12)])] == ["It", "Then"]
    with pytest.raises(ValueError, match="unknown output_granularity 'word'"):
        answer_spans(ANSWER, None, "word")
    with pytest.raises(ValueError, match="^output_granularity: "):
        given_spans(ANSWER, [(5, 100)], "output_granularity")


def test_a_context_at_the_first_position_gets_a_sink_in_front(tokenizer) -> None:
    ids, ranges = sink_before_context([7, 8, 9], [[0, 1], [2]], tokenizer)
    assert ids == [tokenizer.bos_token_id, 7, 8, 9] and ranges == [[1, 2], [3]]
    assert sink_before_context([7, 8, 9], [[1], [2]], tokenizer) == ([7, 8, 9], [[1], [2]])
