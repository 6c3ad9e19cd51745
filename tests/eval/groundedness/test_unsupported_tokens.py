"""The unsupported-tokens benchmark: token labels, the pooled token AUROC, the signals on a tiny model."""

from __future__ import annotations

import random

import pytest
import torch

from rcattr.attribution.attributor import RCAttributor
from rcattr.eval.attribution.method import context_input
from rcattr.eval.common.datasets import BenchmarkRecord, GoldSpan
from rcattr.eval.groundedness.answer_edits import Edit, EditedAnswer
from rcattr.eval.groundedness.unsupported_tokens import (
    TOKEN_SIGNALS,
    edited_token_kinds,
    token_auroc_table,
    token_rows,
)
from rcattr.grounding.support import SUPPORT_LOG_ODDS_THRESHOLD
from rcattr.heads.selectors import TopHeads
from tests.helpers import char_tokenizer

RECORD = BenchmarkRecord(
    "r", "Who?", ["Ann met Bob in 1990."], "Ann met Bob in 1990.", [GoldSpan(0, 19, "", 0)]
)
EDITED = EditedAnswer(
    RECORD,
    "Ann met Zed in 1987.",
    [Edit("entity", 8, 11, "Bob", "Zed"), Edit("date", 15, 19, "1990", "1987")],
)


def test_tokens_overlapping_an_edit_take_its_kind():
    tokens = [(0, 3), (3, 7), (7, 9), (9, 11), (11, 14), (14, 17), (17, 19), (19, 20)]
    assert edited_token_kinds(EDITED, tokens) == ["", "", "entity", "entity", "", "date", "date", ""]


def _row(kinds: list[str], tokens: list[str] | None = None, **signals: list[float]) -> dict:
    return {
        "kinds": kinds,
        "tokens": tokens or ["w"] * len(kinds),
        **{name: signals.get(name, [0.5] * len(kinds)) for name in TOKEN_SIGNALS},
    }


def test_token_auroc_table_on_hand_made_cases():
    rows = [
        _row(
            ["", "entity", "", "date"],
            neg_logprob=[0.0, 1.0, 0.0, 1.0],  # perfect
            rc_groundedness=[1.0, 0.0, 1.0, 0.0],  # reversed
            rc_peak=[0.1, 0.9, 0.5, 0.2],  # the date token ranks below one untouched token
        ),
        _row(
            ["", "", "number"],
            neg_logprob=[0.2, 0.3, 0.9],
            rc_groundedness=[0.9, 0.8, 0.1],
            rc_peak=[0.3, 0.1, 0.8],
        ),
    ]
    table = token_auroc_table(rows, n_boot=100)
    assert table["neg_logprob"]["auroc"] == 1.0 and table["neg_logprob"]["low"] == 1.0
    assert table["rc_groundedness"]["auroc"] == 0.0
    assert table["lookback"]["auroc"] == 0.5  # all tied
    # 4 untouched tokens (0.1, 0.5, 0.3, 0.1) against 3 edited (0.9, 0.2, 0.8): 10 of 12 pairs won
    assert table["rc_peak"]["auroc"] == pytest.approx(10 / 12)
    assert table["rc_peak"]["auroc_date"] == pytest.approx(2 / 4)  # 0.2 beats the two 0.1s only
    assert table["rc_peak"]["auroc_entity"] == table["rc_peak"]["auroc_number"] == 1.0
    assert table["rc_peak"]["minus_neg_logprob"] == pytest.approx(10 / 12 - 1)
    assert table["neg_logprob"]["difference_low"] == table["neg_logprob"]["difference_high"] == 0.0
    assert table["rc_peak"]["records"] == 2 and table["rc_peak"]["edited_tokens"] == 3
    assert table["rc_peak"]["tokens"] == 7


def test_the_flag_rates_are_those_of_the_results_cut_off_over_non_blank_tokens():
    cut = -SUPPORT_LOG_ODDS_THRESHOLD  # the signal is minus the support log-odds
    rows = [
        _row(
            ["", "", "", "date", "date"],
            [" ", "a", "b", "1", "9"],
            token_support=[cut + 1, cut + 1, cut - 1, cut + 1, cut - 1],
        ),
        _row(["", "entity"], ["c", "Zed"], token_support=[cut - 0.5, cut + 0.01]),
    ]
    table = token_auroc_table(rows, n_boot=20)["token_support"]
    # untouched non-blank: a (flagged), b, c; edited: 1 (caught), 9, Zed (caught); the blank one is left out
    assert table["flagged_untouched"] == pytest.approx(1 / 3) and table["caught_edited"] == pytest.approx(
        2 / 3
    )


@torch.no_grad()
def test_token_rows_score_every_answer_token(llama):
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(3))
    row = token_rows(attributor, EDITED, random.Random(0))
    n = len(EDITED.answer)  # one token per character
    assert row["tokens"] == list(EDITED.answer)
    assert row["kinds"] == [""] * 8 + ["entity"] * 3 + [""] * 4 + ["date"] * 4 + [""]
    for name in TOKEN_SIGNALS:
        assert len(row[name]) == n, name
    for name in (
        "rc_peak_support",
        "rc_groundedness",
        "rc_peak",
        "rc_peak_selected",
        "lookback",
        "lookback_rc",
        "random",
    ):
        assert all(0.0 <= v <= 1.0 for v in row[name]), name
    assert all(v >= 0 for v in row["neg_logprob"]) and all(v >= 0 for v in row["entropy"])
    result = attributor.attribute(context_input(RECORD), target=EDITED.answer, granularity="sentence")
    expected = (1 - result.groundedness.double()).tolist()
    assert row["rc_groundedness"] == pytest.approx(expected, abs=1e-6)
    # the result's token signals are the benchmark's, from its own pass (peak superiority: brute force tested)
    assert row["rc_peak_support"] == pytest.approx((1 - result.token_peak.double()).tolist(), abs=1e-6)
    assert row["neg_logprob"] == pytest.approx((-result.token_logprob.double()).tolist(), abs=1e-5)
    support = torch.sigmoid(-torch.tensor(row["token_support"], dtype=torch.float64))
    torch.testing.assert_close(support, result.token_support.double(), atol=1e-5, rtol=1e-4)
