"""The per-token signals (rcattr.grounding.token_signals): read on the selected heads, token support on its own heads."""

from __future__ import annotations

import torch

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.head_statistics import token_statistics
from rcattr.attribution.reduction import forward_batch
from rcattr.attribution.token_signals import every_head_rows, token_signals
from rcattr.grounding.support import support_heads
from rcattr.heads.selectors import FixedHeads
from tests.helpers import char_tokenizer
from tests.helpers.attribution import ANSWER, INPUT


def test_support_is_read_on_its_own_twenty_heads_whatever_heads_vote(llama) -> None:
    attributor = RCAttributor(llama, char_tokenizer(), FixedHeads([(0, 1), (2, 3)]))
    result = attributor.attribute(INPUT, ANSWER)
    rc = result.rc
    assert rc is not None and rc.support_heads is not None
    assert rc.support_heads.tolist() == support_heads(rc.head_selection.scores).tolist()
    assert len(rc.support_heads) == 12  # every head of the tiny model (3 x 4), the 20 best of a larger one
    assert rc.head_selection.as_pairs() == [(0, 1), (2, 3)]


def test_the_signals_step_gives_the_results_signals(llama) -> None:
    attributor = RCAttributor(llama, char_tokenizer(), FixedHeads([(1, 0), (2, 2)]))
    example = attributor.prepare(INPUT, ANSWER, "chunk", "sentence")
    reducer = attributor.run_pass(example, {attributor.scorer_name: attributor.scorer})
    selection = attributor.select_heads(reducer)
    signals = token_signals(example, reducer, selection)
    result = attributor.attribute(INPUT, ANSWER, granularity="chunk", output_granularity="sentence")
    for name in ("groundedness", "lookback", "token_peak", "token_support", "unit_context_reliance"):
        torch.testing.assert_close(getattr(signals, name), getattr(result.rc, name))
    out = reducer.out
    context = out.gather(out.context_rc, selection.heads).sum(0)
    own = out.gather(out.self_rc, selection.heads).sum(0)
    torch.testing.assert_close(signals.groundedness, (context / (context + own)).float().cpu())


@torch.no_grad()
def test_every_heads_rows_equal_a_second_forwards_in_one_pass_and_in_a_batch(llama) -> None:
    attributor = RCAttributor(llama, char_tokenizer())
    example = attributor.prepare(INPUT, ANSWER, "chunk", "sentence")
    lookback, peak = every_head_rows(
        attributor.run_pass(example, {attributor.scorer_name: attributor.scorer})
    )
    brute = token_statistics(llama, example)  # its own forward, reducing the captured logits
    torch.testing.assert_close(lookback, brute.lookback.float(), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(peak, brute.peak.float())
    other = attributor.prepare(INPUT, ANSWER[:7], "chunk", "sentence")
    reducers = [attributor._reducer(e, {attributor.scorer_name: attributor.scorer}) for e in (other, example)]
    forward_batch(llama, [other, example], reducers)
    batched_lookback, batched_peak = every_head_rows(reducers[1])
    torch.testing.assert_close(batched_lookback, lookback, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(batched_peak, peak)
