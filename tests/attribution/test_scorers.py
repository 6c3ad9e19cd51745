"""The attention span scorer against brute force and against the model's own attention; a scorer of one's own."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.scorers import AttentionScorer
from rcattr.attribution.spans import SpanBlock, SpanIndex
from rcattr.heads.selectors import TopHeads
from rcattr.runtime.capture import CaptureStep, LogitCapture
from rcattr.text.prompting import ContextInput
from tests.helpers import char_tokenizer, tiny_model
from tests.helpers.blocks import CONTEXT_KEYS, SPAN_TOKENS, answer_block, span_block
from tests.reference.spans import brute_mass


def test_attention_scorer_is_the_mean_softmax_mass() -> None:
    block = span_block()
    scores = AttentionScorer().score(block)
    for unit in range(2):
        for head in range(3):
            masses = torch.zeros(2, dtype=torch.float64)
            for row in range(2):
                logits = block.logits[unit, head, row] * 0.5
                weights = torch.softmax(logits.masked_fill(~block.visible[unit, row], float("-inf")), -1)
                for span, tokens in enumerate(SPAN_TOKENS):
                    masses[span] += weights[CONTEXT_KEYS[tokens]].sum() / 2
            torch.testing.assert_close(scores[unit, head], masses)


def test_softcap_is_applied() -> None:
    plain = span_block()
    capped = dataclasses.replace(plain, softcap=1.0)
    assert not torch.allclose(AttentionScorer().score(plain), AttentionScorer().score(capped))


@pytest.mark.parametrize("arch", ["llama", "gemma3", "qwen2"])
def test_attention_scorer_matches_the_models_eager_attention(arch: str) -> None:
    """Scaling (Gemma's query_pre_attn_scalar), windows and GQA: mass equals output_attentions."""
    model = tiny_model(arch, attn_implementation="eager")
    ids = torch.randint(3, 120, (1, 12))
    blocks: dict[int, SpanBlock] = {}

    def keep(logits: torch.Tensor, step: CaptureStep) -> None:
        visible = step.visible[0][None]
        blocks[step.layer_idx] = SpanBlock(
            logits[0][None],
            visible,
            torch.arange(12),
            torch.arange(8, 12),
            SpanIndex.from_ranges([[k] for k in range(12)]),
            step.scaling,
            step.softcap,
        )

    with LogitCapture(model, keep, query_positions=slice(8, None)):
        attentions = model(ids, output_attentions=True).attentions
    for layer, block in blocks.items():
        expected = attentions[layer][0, :, 8:].mean(1)  # [H, keys]: mean over the 4 rows
        torch.testing.assert_close(AttentionScorer().score(block)[0], expected, atol=1e-5, rtol=1e-4)


def test_a_custom_scorer_plugs_in() -> None:
    class FirstToken(AttentionScorer):
        def score(self, block: SpanBlock) -> torch.Tensor:
            scores = torch.zeros(block.n_units, block.logits.shape[1], block.spans.n_spans)
            scores[..., 0] = 1.0
            return scores

    model = tiny_model("llama")
    result = RCAttributor(model, char_tokenizer(), TopHeads(2), span_scorer=FirstToken()).attribute(
        ContextInput(["aa", "bb"], "q"), target="ab", granularity="chunk"
    )
    assert result.seq_attr.tolist() == [1.0, 0.0]


def test_attention_scorer_weights_rows() -> None:
    block, weights = answer_block()
    tokens = brute_mass(block, weights)
    expected = torch.stack([tokens[..., [0, 1]].sum(-1), tokens[..., [1, 2]].sum(-1)], dim=-1)
    torch.testing.assert_close(AttentionScorer(continuation=0.5).score(block), expected)
    with pytest.raises(ValueError, match="continuation=1.0"):
        AttentionScorer(continuation=1.0)
