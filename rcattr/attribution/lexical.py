"""BM25 between each output unit's text and each context span (bm25s, Lucene's variant): the lexical
evidence of [`BM25Attributor`][rcattr.baselines.bm25.BM25Attributor] and of [`rcattr.attribution.fusion`][rcattr.attribution.fusion]."""

from __future__ import annotations

import re

import torch

from rcattr.attribution.base import Example

_WORD = re.compile(r"\w+")


def bm25_terms(text: str) -> list[str]:
    """Lower-cased word tokens (`\\w+`), the terms BM25 matches on."""
    return _WORD.findall(text.lower())


def bm25_scores(example: Example) -> tuple[torch.Tensor, torch.Tensor]:
    """BM25 of the example's answer `[n_spans]` and of each output unit `[n_outputs, n_spans]` against
    its context spans (float64, raw scores)."""
    import bm25s  # only when asked for: RCAttributor imports this module, most of its calls need no BM25

    corpus = [bm25_terms(span.text) for span in example.context_spans]
    if not any(corpus):
        raise ValueError("BM25 needs context spans with words in them; every span is empty")
    index = bm25s.BM25(method="lucene")
    index.index(corpus, show_progress=False)

    def scores(text: str) -> torch.Tensor:
        terms = bm25_terms(text)  # a text of no word (a punctuation token) matches no span: 0 everywhere
        return (
            torch.as_tensor(index.get_scores(terms), dtype=torch.float64)
            if terms
            else torch.zeros(len(corpus), dtype=torch.float64)
        )

    token_attr = torch.stack([scores(unit.text) for unit in example.output_spans])
    return scores(example.answer), token_attr
