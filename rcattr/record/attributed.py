"""What a result's scores refer to: the context's spans in their documents ([`AttributedContext`][rcattr.record.attributed.AttributedContext]), and
the answer's output units and tokens ([`AttributedAnswer`][rcattr.record.attributed.AttributedAnswer]), with its sentences' rows ([`SentenceRows`][rcattr.record.attributed.SentenceRows])."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from rcattr.text.documents import Document
from rcattr.text.segmentation import TextSpan


@dataclass(frozen=True)
class AttributedContext:
    """The context an answer is attributed to.

    Attributes
    ----------
    documents : list of Document
        The context's documents with their ids and metadata, as the input gave them.
    spans : list of TextSpan
        The context spans scored, in order; `span.source` indexes `documents` and the offsets its text.
    evidence : list of str or None
        The texts an answer's numbers, dates and names are checked against ([`rcattr.grounding.claims`][rcattr.grounding.claims]): the
        documents and the question, never the template's labels (`rcattr.text.prompting.Prompt.evidence`);
        None: the documents alone.
    """

    documents: Sequence[Document]
    spans: Sequence[TextSpan]
    evidence: Sequence[str] | None = None

    @classmethod
    def of_texts(
        cls, texts: Sequence[str], spans: Sequence[TextSpan], evidence: Sequence[str] | None = None
    ) -> AttributedContext:
        """The context of plain texts, one document each."""
        return cls([Document(text) for text in texts], spans, evidence)


@dataclass(frozen=True)
class SentenceRows:
    """Each answer sentence's scores, kept when the result's output units are coarser than its sentences (the
    whole answer, `output_granularity="answer"`), so that citations are per sentence all the same.

    Attributes
    ----------
    spans : list of TextSpan
        The answer's sentences.
    scores : Tensor, shape [n_sentences, n_spans]
        Their rows, as `token_attr`'s for output units.
    context_reliance : Tensor, shape [n_sentences], or None
        Their context reliance, as `unit_context_reliance`'s (None for baselines).
    """

    spans: list[TextSpan]
    scores: torch.Tensor
    context_reliance: torch.Tensor | None = None


@dataclass(frozen=True)
class AttributedAnswer:
    """The answer whose parts are attributed.

    Attributes
    ----------
    text : str
        The answer.
    units : list of TextSpan
        The output units scored (answer, sentences or tokens), offsets into `text`.
    tokens : list of TextSpan
        The answer's tokens, which the per-token signals follow.
    sentence_rows : SentenceRows or None
        With a whole-answer unit and several answer sentences, each sentence's rows from the same pass.
    """

    text: str
    units: Sequence[TextSpan]
    tokens: Sequence[TextSpan]
    sentence_rows: SentenceRows | None = None
