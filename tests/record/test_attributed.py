"""AttributedContext and AttributedAnswer: what a result's scores refer to."""

from __future__ import annotations

import pytest
import torch

from rcattr.attribution.result import RCAttributionResult
from rcattr.record.attributed import AttributedAnswer, AttributedContext
from rcattr.text.documents import Document
from rcattr.text.segmentation import TextSpan


def test_of_texts_makes_one_document_per_text() -> None:
    spans = [TextSpan(0, 3, "One"), TextSpan(0, 3, "Two", source=1)]
    context = AttributedContext.of_texts(["One", "Two"], spans, evidence=["One", "Two", "?"])
    assert context.documents == [Document("One"), Document("Two")]
    assert list(context.spans) == spans and list(context.evidence or []) == ["One", "Two", "?"]


def test_a_result_takes_its_texts_offsets_and_documents_from_them() -> None:
    documents = [Document("Alpha beta.", {"title": "A"}, id="a"), Document("Gamma.")]
    spans = [TextSpan(0, 11, "Alpha beta."), TextSpan(0, 6, "Gamma.", source=1)]
    answer = AttributedAnswer(
        "Beta.", [TextSpan(0, 5, "Beta.")], [TextSpan(0, 4, "Beta"), TextSpan(4, 5, ".")]
    )
    result = RCAttributionResult(
        torch.tensor([0.9, 0.1]),
        torch.tensor([[0.9, 0.1]]),
        context=AttributedContext(documents, spans),
        output=answer,
        span_scorer="bm25",
    )
    assert result.chunks == ["Alpha beta.", "Gamma."] and result.documents == documents
    assert result.input_tokens == ["Alpha beta.", "Gamma."] and result.output_tokens == ["Beta."]
    assert result.answer == "Beta." and [t.text for t in result.answer_tokens] == ["Beta", "."]
    assert result.evidence is None and result.sentence_rows is None and result.rc is None
    assert result.document_scores().tolist() == pytest.approx([0.9, 0.1])
