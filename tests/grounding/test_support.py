"""Token support and context reliance (rcattr.grounding.support, the result's per-token signals): exact against brute force
over the model's own logits and attention, on tiny random models."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from rcattr.attribution.attributor import RCAttributor
from rcattr.grounding.support import (
    SUPPORT_HEADS,
    SUPPORT_LOG_ODDS_THRESHOLD,
    SUPPORT_THRESHOLD,
    smoothed_peak,
    support_heads,
    support_log_odds,
    support_text,
)
from rcattr.heads.selectors import TopHeads
from rcattr.runtime.capture import LogitCapture, LogitStore
from rcattr.text.prompting import ContextInput
from tests.helpers import ARCHITECTURES, char_tokenizer, tiny_model

INPUT = ContextInput(["The cat sat. It purred.", "Dogs bark loudly."], "What did the cat do?")
ANSWER = "It sat. Dogs bark."


def test_the_cut_off_is_odds_of_one_to_three():
    assert SUPPORT_THRESHOLD == 0.25 and SUPPORT_LOG_ODDS_THRESHOLD == pytest.approx(math.log(1 / 3))


def test_support_heads_are_the_best_twenty_or_every_head():
    scores = torch.arange(60.0).reshape(6, 10)
    heads = support_heads(scores)
    assert len(heads) == SUPPORT_HEADS == 20
    assert sorted(int(scores[layer, head]) for layer, head in heads.tolist()) == list(range(40, 60))
    assert len(support_heads(torch.rand(2, 3))) == 6


@given(
    st.lists(st.integers(0, 10), min_size=2, max_size=6),
    st.floats(-30, 0, allow_nan=False),
)
def test_support_log_odds_adds_the_log_probability_but_the_first_and_the_log_odds_of_the_mean_peak(
    counts, log_prob
):
    size = 10
    peak = torch.tensor(counts, dtype=torch.float64)[:, None] / size  # [k, 1]: counts of 10
    n_self = torch.full((len(counts),), size)
    smoothed = [(c + 0.5) / (size + 1) for c in counts]
    assert smoothed_peak(peak, n_self)[:, 0].tolist() == pytest.approx(smoothed)
    mean = sum(smoothed) / len(smoothed)
    expected = log_prob + math.log(mean / (1 - mean))
    both = support_log_odds(torch.tensor([-7.0, log_prob], dtype=torch.float64), peak.repeat(1, 2), n_self)
    # the first answer token's log-probability is left out
    assert both.tolist() == pytest.approx([expected - log_prob, expected])


@pytest.mark.parametrize(
    ("value", "digits", "text"),
    [(0.2499, 2, "0.24"), (0.25, 2, "0.25"), (0.1239, 3, "0.123"), (1.0, 2, "1.00")],
)
def test_support_text_rounds_down_so_a_flagged_value_never_reads_as_the_cut_off(value, digits, text):
    assert support_text(value, digits) == text


def _stored(model, ids: torch.Tensor, start: int) -> LogitStore:
    store = LogitStore()
    with torch.no_grad(), LogitCapture(model, store, query_positions=slice(start, None), dtype=torch.float64):
        model(ids)
    return store


@torch.no_grad()
@pytest.mark.parametrize("arch", ARCHITECTURES)
@pytest.mark.filterwarnings("ignore:no selected head sees the context")
def test_token_signals_equal_brute_force(arch: str) -> None:
    """token_logprob from a plain forward's log-softmax; token_peak and token_support from the stored logits of
    the 20 best heads; lookback from the eager attention of the selected heads."""
    model = tiny_model(arch)
    attributor = RCAttributor(model, char_tokenizer(), TopHeads(3))
    result = attributor.attribute(INPUT, ANSWER, granularity="sentence")
    example = attributor.prepare(INPUT, ANSWER)
    ids, start = example.ids, example.answer_start
    n = ids.shape[1] - start
    log_probs = torch.log_softmax(model(ids).logits[0].double(), -1)
    expected_logprob = log_probs[torch.arange(start - 1, ids.shape[1] - 1), ids[0, start:]]
    torch.testing.assert_close(result.token_logprob.double(), expected_logprob, atol=1e-5, rtol=1e-5)

    context = sorted({t for r in example.context_ranges for t in r})
    store = _stored(model, ids, start)
    heads = support_heads(result.head_selection.scores)
    peaks, counts, sizes = [], [], []
    for layer, head in heads.tolist():
        [(logits, step)] = store.steps[layer]
        rows, visible = logits[0, head], step.visible[0]
        y = [float(rows[r, k]) for r in range(n) for k in range(start, start + n) if visible[r, k]]
        row_peaks = []
        for r in range(n):
            seen = [float(rows[r, k]) for k in context if visible[r, k]]
            row_peaks.append(sum(v < max(seen) for v in y) if seen else 0)
        counts.append(row_peaks)
        sizes.append(len(y))
        peaks.append([c / len(y) for c in row_peaks])
    torch.testing.assert_close(
        result.token_peak.double(), torch.tensor(peaks, dtype=torch.float64).mean(0), atol=1e-6, rtol=0
    )
    smoothed = torch.tensor(
        [[(c + 0.5) / (s + 1) for c in row] for row, s in zip(counts, sizes, strict=True)]
    )
    odds = torch.cat([torch.zeros(1), expected_logprob[1:]]) + torch.logit(smoothed.double().mean(0))
    torch.testing.assert_close(result.token_support.double(), torch.sigmoid(odds), atol=1e-5, rtol=1e-4)

    eager = copy.deepcopy(model)
    eager.set_attn_implementation("eager")
    attentions = eager(ids, output_attentions=True).attentions  # per layer [1, H, S, S]
    ratios = []
    for layer, head in result.head_selection.as_pairs():
        attention = attentions[layer][0, head, start:]  # [A, S]
        on_context = attention[:, context].mean(-1)
        visible = store.steps[layer][0][1].visible[0]  # the model's mask: causal, sliding windows
        seen = visible[:, start:].sum(-1).float()
        on_answer = attention[:, start:].sum(-1) / seen
        ratios.append(on_context / (on_context + on_answer))
    torch.testing.assert_close(result.lookback, torch.stack(ratios).mean(0).float(), atol=1e-5, rtol=1e-4)
    assert result.context_reliance == pytest.approx(float(torch.stack(ratios).mean()), abs=1e-5)


@torch.no_grad()
def test_scoring_more_heads_later_adds_them_to_the_tables() -> None:
    """score_heads twice (the selection, then token support's heads) equals scoring their union once."""
    model = tiny_model("llama")
    attributor = RCAttributor(model, char_tokenizer(), TopHeads(2))
    example = attributor.prepare(INPUT, ANSWER, "sentence", "sentence")
    scorers = {attributor.scorer_name: attributor.scorer}
    first, second = torch.tensor([[0, 1], [1, 0]]), torch.tensor([[1, 0], [1, 2], [0, 3]])
    twice = attributor.run_pass(example, scorers)
    twice.score_heads(first)
    twice.score_heads(second)
    once = attributor.run_pass(example, scorers)
    once.score_heads(torch.cat([first, second]))
    every = torch.tensor([[0, 1], [1, 0], [1, 2], [0, 3]])
    for name in ("context_rc", "self_rc", "context_peak", "lookback"):
        got, expected = getattr(twice.out, name), getattr(once.out, name)
        torch.testing.assert_close(twice.out.gather(got, every), once.out.gather(expected, every))
    for table in ("answer_scores", "unit_scores"):
        got, expected = getattr(twice.out, table)["attention"], getattr(once.out, table)["attention"]
        torch.testing.assert_close(twice.out.gather(got, every), once.out.gather(expected, every))
    assert sorted(len(heads) for heads in twice.out.scored.values()) == [2, 2]
