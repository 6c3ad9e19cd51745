"""Per-head span scores of one pass (rcattr.eval.attribution.per_head): only the heads scored can be combined."""

from __future__ import annotations

import pytest
import torch

from rcattr.attribution.attributor import RCAttributor
from rcattr.eval.attribution.per_head import HeadSpanScores, lever_pass
from rcattr.heads.selectors import TopHeads
from tests.helpers import char_tokenizer
from tests.helpers.attribution import ANSWER, INPUT

pytestmark = pytest.mark.transformers_line


def test_span_scores_of_heads_that_were_not_scored_are_refused(llama) -> None:
    tokenizer = char_tokenizer()
    attributor = RCAttributor(llama, tokenizer, TopHeads(2))
    example = attributor.prepare(INPUT, ANSWER)
    reducer = lever_pass(
        llama, tokenizer, example, {"attention": attributor.scorer}, "superiority", defer=True
    )
    reducer.score_heads(torch.tensor([[0, 1]]))
    scores = HeadSpanScores.of(reducer, example, attributor.n_heads)
    assert scores.scored is not None and scores.scored.sum() == 1
    scores.combine(torch.tensor([[0, 1]]), "attention")
    with pytest.raises(ValueError, match="computed for other heads"):
        scores.combine(torch.tensor([[0, 1], [1, 1]]), "attention")
    with pytest.raises(ValueError, match="computed for other heads"):
        scores.groundedness(torch.tensor([[1, 0]]))
    with pytest.raises(ValueError, match=r"head \(1, 1\) was not scored"):
        reducer.out.gather(reducer.out.context_rc, torch.tensor([[0, 1], [1, 1]]))
