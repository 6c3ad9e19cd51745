"""The per-token signals of one attributed answer ([`RCSignals`][rcattr.record.signals.RCSignals]), measured from its pass
apart from the vote: groundedness and lookback on the heads that voted, token support on its own heads."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from rcattr.attribution.base import Example
from rcattr.attribution.reduction import Reducer
from rcattr.attribution.spans import lookback_rows, unit_sum
from rcattr.grounding.support import support_heads, support_log_odds
from rcattr.heads.scores import peak_rows
from rcattr.heads.selection import HeadSelection
from rcattr.record.signals import RCSignals
from rcattr.runtime.capture import raw_logits

if TYPE_CHECKING:
    from rcattr.grounding.probe import SupportProbe

__all__ = ["every_head_rows", "token_signals"]


def token_signals(
    example: Example,
    reducer: Reducer,
    selection: HeadSelection,
    notes: tuple[str, ...] = (),
    lexical_share: float | None = None,
    probe: SupportProbe | None = None,
    keep_head_rows: bool = False,
) -> RCSignals:
    """The signals of `example`'s answer tokens from its `reducer`'s pass.

    `groundedness` and `lookback` are read on the heads of `selection` (those that voted); token support
    on [`support_heads`][rcattr.grounding.support.support_heads], the 20 best heads by the same head scores whatever rule chose the
    voters (their per-row statistics are computed here where the vote did not compute them). `notes` are what the
    attributor warned of for this result, `lexical_share` what its vote says BM25 filled, `probe` the support
    probe the citations' verdicts read; with `keep_head_rows`, every head's lookback ratio and peak at each
    answer token are kept for it (`every_head_rows`), from the same pass.
    """
    out, heads = reducer.out, selection.heads
    reducer.score_heads(heads)  # a no-op after the vote, which scored them
    context = out.gather(out.context_rc, heads).sum(0)
    groundedness = context / (context + out.gather(out.self_rc, heads).sum(0)).clamp_min(1e-30)
    lookback = out.gather(out.lookback, heads).mean(0).float().cpu()
    peak_heads = support_heads(selection.scores)
    reducer.score_heads(peak_heads)  # the ones not selected
    peak = out.gather(out.context_peak, peak_heads)  # [k, A]
    assert out.token_logprob is not None  # set by the pass
    n_self = torch.tensor([out.self_size[layer] for layer in peak_heads[:, 0].tolist()])
    head_lookback, head_peak = every_head_rows(reducer) if keep_head_rows else (None, None)
    return RCSignals(
        groundedness=groundedness.float().cpu(),
        lookback=lookback,
        unit_context_reliance=unit_sum(lookback, example.unit_ranges)
        / torch.tensor([len(rows) for rows in example.unit_ranges]),
        token_logprob=out.token_logprob.float().cpu(),
        token_peak=peak.mean(0).float().cpu(),
        token_support=torch.sigmoid(support_log_odds(out.token_logprob, peak, n_self)).float().cpu(),
        head_selection=selection,
        notes=notes,
        support_heads=peak_heads.cpu(),
        lexical_share=lexical_share,
        probe=probe,
        head_lookback=head_lookback,
        head_peak=head_peak,
    )


def every_head_rows(reducer: Reducer) -> tuple[torch.Tensor, torch.Tensor]:
    """`[L, H, A]` every head's lookback ratio and P(max X > Y) at each answer row after a deferred pass, from
    the queries and keys it kept (`rcattr.attribution.spans.lookback_rows`, `rcattr.heads.scores.peak_rows`):
    the support probe's per-head features (`rcattr.grounding.probe`) without a second forward. Float32, CPU."""
    lookback, peak = [], []
    keys, start = reducer.layout.context_keys, reducer.layout.answer_start
    for layer in sorted(reducer.steps):
        step = reducer.steps[layer]
        assert step.query is not None and step.key is not None  # kept by a deferred pass
        heads = torch.arange(step.query.shape[1], device=step.query.device)
        group = step.query.shape[1] // step.key.shape[1]
        dtype = torch.promote_types(step.query.dtype, torch.float32)
        logits = raw_logits(step.query, step.key[:, heads // group], dtype=dtype)[0]
        visible = step.visible[0]
        lookback.append(lookback_rows(logits, visible, step.scaling, step.softcap, keys, start).float().cpu())
        peak.append(peak_rows(logits, visible, keys, start)[0].float().cpu())
    return torch.stack(lookback), torch.stack(peak)
