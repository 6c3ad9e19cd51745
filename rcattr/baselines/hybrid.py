"""Hybrid: RC attribution fused with BM25's lexical ranking (reciprocal rank fusion).

Not a one-pass explanation of the model any more: the lexical ranking knows nothing of what the
model attended to. Offered, and labelled `hybrid`, because a RAG user who wants the most likely
source of each answer span, rather than the model's own account, may prefer it.
"""

from __future__ import annotations

import torch
from transformers import PreTrainedModel

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.base import AttributionInput, Example, SpanAttributor
from rcattr.attribution.result import RCAttributionResult
from rcattr.attribution.spans import normalise
from rcattr.baselines.bm25 import BM25Attributor
from rcattr.protocols import TokenizerLike


def reciprocal_rank_fusion(*scores: torch.Tensor, offset: float = 60.0) -> torch.Tensor:
    """`sum_m 1 / (offset + rank_m)` over methods, ranks over the last dim (0 = best; ties by index).

    Parameters
    ----------
    *scores : Tensor, shape [..., n_spans]
        Each method's scores, higher is better.
    offset : float, default 60
        Cormack et al.'s constant: a larger one flattens the contribution of the top ranks.
    """
    fused = torch.zeros(scores[0].shape, dtype=torch.float64)
    for method in scores:
        order = torch.argsort(method.double(), dim=-1, descending=True, stable=True)
        ranks = torch.argsort(order, dim=-1, stable=True).double()
        fused += 1.0 / (offset + ranks)
    return fused


class HybridAttributor(SpanAttributor):
    """[`RCAttributor`][rcattr.attribution.attributor.RCAttributor]'s heads' vote (`lexical=False`: the fusion brings BM25 in itself) and
    [`BM25Attributor`][rcattr.baselines.bm25.BM25Attributor] fused by reciprocal rank per output unit; normalised over spans. One RC pass plus BM25. A fusion is not the
    model's own account: its results carry no RC signals (`result.rc` is None).

    Parameters
    ----------
    offset : float, default 60
        The fusion's rank offset.
    """

    name = "hybrid"

    def __init__(self, model: PreTrainedModel, tokenizer: TokenizerLike, offset: float = 60.0) -> None:
        super().__init__(model, tokenizer)
        self.rc = RCAttributor(model, tokenizer, lexical=False)
        self.bm25 = BM25Attributor(model, tokenizer)
        self.offset = offset

    def explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        rc = self.rc.explain(example, inp)
        lexical = self.bm25.explain(example, inp)
        assert rc.token_attr is not None and lexical.token_attr is not None
        seq_attr = reciprocal_rank_fusion(rc.seq_attr, lexical.seq_attr, offset=self.offset)
        token_attr = reciprocal_rank_fusion(_unit_rows(rc), _unit_rows(lexical), offset=self.offset)
        return example.result(
            normalise(seq_attr),
            normalise(token_attr),
            "hybrid: RC + BM25",
            inp,
        )


def _unit_rows(result: RCAttributionResult) -> torch.Tensor:
    """`[n_units, n_spans]`: the result's rows of every unit of its example, its sentences' included."""
    assert result.token_attr is not None  # always set by RCAttributionResult.__init__
    if result.sentence_rows is None:
        return result.token_attr
    return torch.cat([result.token_attr, result.sentence_rows.scores])
