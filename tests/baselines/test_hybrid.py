"""The hybrid baseline (rcattr.baselines.hybrid): RC and BM25 fused by reciprocal rank."""

from __future__ import annotations

import torch

from rcattr.attribution.attributor import RCAttributor
from rcattr.baselines import (
    BM25Attributor,
    HybridAttributor,
)
from rcattr.baselines.hybrid import reciprocal_rank_fusion
from tests.helpers.attribution import ANSWER, BRACED_INPUT


def test_reciprocal_rank_fusion() -> None:
    first = torch.tensor([[0.9, 0.1, 0.5]])  # ranks 0, 2, 1
    second = torch.tensor([[0.0, 3.0, 2.0]])  # ranks 2, 0, 1
    fused = reciprocal_rank_fusion(first, second, offset=1.0)
    torch.testing.assert_close(
        fused, torch.tensor([[1 + 1 / 3, 1 / 3 + 1, 1 / 2 + 1 / 2]], dtype=torch.float64)
    )
    assert reciprocal_rank_fusion(torch.tensor([1.0, 1.0])).tolist() == [1 / 60, 1 / 61]  # ties by index


def test_hybrid_fuses_rc_and_bm25_ranks(llama, tokenizer) -> None:
    hybrid = HybridAttributor(llama, tokenizer).attribute(
        BRACED_INPUT, ANSWER, granularity="chunk", output_granularity="sentence"
    )
    rc = RCAttributor(llama, tokenizer).attribute(
        BRACED_INPUT, ANSWER, granularity="chunk", output_granularity="sentence"
    )
    bm25 = BM25Attributor(llama, tokenizer).attribute(
        BRACED_INPUT, ANSWER, granularity="chunk", output_granularity="sentence"
    )
    assert rc.token_attr is not None and bm25.token_attr is not None
    expected = reciprocal_rank_fusion(rc.token_attr, bm25.token_attr)
    torch.testing.assert_close(hybrid.token_attr, (expected / expected.sum(-1, keepdim=True)).float())
    assert hybrid.span_scorer == "hybrid: RC + BM25"
