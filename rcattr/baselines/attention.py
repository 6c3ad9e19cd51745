"""Mean post-softmax attention over all heads and layers: the standard attention baseline."""

from __future__ import annotations

from transformers import PreTrainedModel

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.reduction import Reducer, Reduction
from rcattr.attribution.scorers import AttentionScorer
from rcattr.heads.selection import HeadSelection
from rcattr.heads.selectors import TopHeads
from rcattr.protocols import TokenizerLike


class AttentionAttributor(RCAttributor):
    """Attention mass from the answer rows to each span, averaged over every head of every layer.

    This is [`paper`][rcattr.attribution.attributor.RCAttributor.paper]'s attention scorer (each unit's own rows, heads
    summed by mass) without head selection, so the difference between the two measures what RC
    head selection adds.
    """

    name = "attention"
    result_label = "attention, all heads"  # not the default RCAttributor's "attention" (over its top-k heads)

    def __init__(self, model: PreTrainedModel, tokenizer: TokenizerLike) -> None:
        super().__init__(
            model, tokenizer, TopHeads(1.0), AttentionScorer(continuation=0.0), votes="mass", lexical=False
        )

    def select_heads(self, reducer: Reducer) -> HeadSelection:
        """Every head, those whose sliding window does not reach the context too: the field's baseline."""
        return self.heads.select(Reduction.stack(reducer.out.head_scores[self.head_score]))
