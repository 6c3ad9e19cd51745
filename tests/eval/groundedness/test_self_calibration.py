"""Claims a model makes for itself and the cut-off they give (rcattr.eval.groundedness.self_calibration)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rcattr.attribution.attributor import RCAttributor
from rcattr.eval.groundedness.attributionbench import ClaimRecord
from rcattr.eval.groundedness.self_calibration import MIN_WORDS, made_claims, made_row, self_cut
from rcattr.text.prompting import ContextInput


def _records() -> list[ClaimRecord]:
    long = "The old mill by the river ground wheat for the whole valley."
    return [
        ClaimRecord(
            f"c{i}",
            f"Question {i // 2}?",
            f"Claim {i}.",
            (f"Short {i}.", long + f" It had {i} stones."),
            i % 2 == 0,
            "X",
        )
        for i in range(8)
    ] + [ClaimRecord("bare", "Question 9?", "Claim bare.", ("Too short.",), True, "X")]


def test_negatives_read_another_questions_references_and_positives_copy_a_long_own_sentence() -> None:
    records = _records()
    made = made_claims(records, seed=0)
    assert made == made_claims(records, seed=0) and made != made_claims(records, seed=1)
    by_id = {record.id: record for record in records}
    kinds = [key.rsplit(":", 1)[1] for key, _, _ in made]
    assert (
        kinds.count("negative") == len(records) and kinds.count("positive") == len(records) - 1
    )  # bare has none
    for key, inputs, answer in made:
        record = by_id[key.rsplit(":", 1)[0]]
        if key.endswith("negative"):
            owner = next(r for r in records if list(r.references) == inputs.chunks)
            assert answer == record.claim and owner.question != record.question
        else:
            assert list(record.references) == inputs.chunks and len(answer.split()) >= MIN_WORDS
            assert any(answer in reference for reference in record.references)


@given(
    st.lists(st.floats(0, 1), min_size=1, max_size=12),
    st.lists(st.floats(0, 1), min_size=1, max_size=12),
)
def test_the_self_cut_has_the_most_youden_j(negatives, positives) -> None:
    rows = [{"kind": "negative", "support": v} for v in negatives] + [
        {"kind": "positive", "support": v} for v in positives
    ]
    cut = self_cut(rows + [{"kind": "positive", "skipped": "too long"}])
    negatives, positives = np.array(negatives), np.array(positives)

    def youden(t: float) -> float:
        return (positives >= t).mean() - (negatives >= t).mean()

    best = max(youden(t) for t in [*negatives, *positives, np.inf])
    assert cut is not None and youden(cut) == best


def test_no_cut_without_both_kinds() -> None:
    assert self_cut([{"kind": "negative", "support": 0.2}]) is None


def test_a_made_row_is_the_librarys_support_or_skipped(llama, tokenizer) -> None:
    attributor = RCAttributor(llama, tokenizer)
    inputs = ContextInput(["The cat sat on the mat."], "What did the cat do?")
    row = made_row(attributor, "c:positive", inputs, "The cat sat.")
    support = min(c.support for c in attributor.attribute(inputs, target="The cat sat.").citations())
    assert row == {"id": "c:positive", "kind": "positive", "support": support}
    long = made_row(attributor, "c:negative", ContextInput(["The cat sat. " * 40], "Q?"), "The cat sat.")
    assert "window" in long["skipped"] and long["kind"] == "negative"
