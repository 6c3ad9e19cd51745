"""Answer-level signals and their AUROC table (rcattr.eval.groundedness.answer_level)."""

from __future__ import annotations

import random

import pytest
import torch

from rcattr.attribution.attributor import RCAttributor
from rcattr.attribution.head_statistics import token_signals
from rcattr.eval.groundedness.answer_level import ANSWER_SIGNALS, answer_signals, auroc_table
from rcattr.eval.groundedness.pairs import (
    Answering,
)
from rcattr.heads.selectors import TopHeads
from rcattr.text.prompting import ContextInput
from tests.helpers import char_tokenizer


def test_auroc_table_on_hand_made_cases():
    rows = []
    for i in range(6):
        for condition, separated in (("answerable", 1.0), ("unanswerable", 0.0)):
            row = dict.fromkeys(ANSWER_SIGNALS, 0.5)
            row.update(rc_context_heads=separated + i, logprob=-separated, lookback=0.3 + 0.1 * (i % 2))
            rows.append({"id": f"q{i}", "condition": condition, **row})
    rows.append({"id": "unpaired", "condition": "answerable", **dict.fromkeys(ANSWER_SIGNALS, 9.0)})
    table = auroc_table(rows, ("answerable", "unanswerable"), n_boot=200)
    assert list(table) == list(ANSWER_SIGNALS)
    assert table["rc_context_heads"]["questions"] == 6
    # answerable 1 + i beats unanswerable j when j <= i (21 of 36 pairs) and ties it when j = i + 1 (5)
    assert table["rc_context_heads"]["auroc"] == pytest.approx((21 + 0.5 * 5) / 36)
    assert table["logprob"]["auroc"] == 0.0  # always lower for the supported answer
    assert table["lookback"]["auroc"] == 0.5  # the same values in both conditions
    assert table["random"]["auroc"] == 0.5  # every value tied
    low, high = table["logprob"]["low"], table["logprob"]["high"]
    assert low == high == 0.0
    assert (
        table["rc_context_heads"]["low"]
        <= table["rc_context_heads"]["auroc"]
        <= table["rc_context_heads"]["high"]
    )
    # the conditions' order says which is positive
    assert auroc_table(rows, ("unanswerable", "answerable"), n_boot=20)["logprob"]["auroc"] == 1.0


@torch.no_grad()
def test_answer_signals_are_finite_and_bounded_and_the_result_s_own(llama):
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(3))
    answering = Answering("Cats sit. Dogs run.", "Who sits?")
    gen_args = {"max_new_tokens": 4, "do_sample": False}
    row = answer_signals(attributor, answering, gen_args, random.Random(0))
    assert set(ANSWER_SIGNALS) <= set(row) and isinstance(row["answer"], str)
    for name in set(ANSWER_SIGNALS) - {"logprob", "neg_entropy"}:
        assert 0.0 <= row[name] <= 1.0, name
    assert row["logprob"] <= 0.0 and row["neg_entropy"] <= 0.0
    # context reliance is the lookback ratio on the RC-selected heads, as the benchmark computes it
    inp = ContextInput(answering.context, answering.question)
    result = attributor.attribute(inp, target=row["answer"], granularity="sentence")
    example = attributor.prepare(inp, target=row["answer"], granularity="sentence")
    heads = result.head_selection.heads
    tokens = token_signals(attributor.model, example, heads, heads)
    assert row["context_reliance"] == pytest.approx(float(tokens["lookback_rc"].mean()), abs=1e-5)
