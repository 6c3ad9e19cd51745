"""Top-k log-probability drop and LDS (rcattr.eval.attribution.faithfulness) on hand-made cases and a tiny model."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import rankdata

from rcattr.eval.attribution.faithfulness import (
    EMPTY_CONTEXT,
    ablate,
    ablation_masks,
    answer_log_probs,
    faithfulness,
    lds,
    log_prob_drop,
    top_k_masks,
)
from rcattr.text.prompting import ContextInput, render_prompt
from tests.helpers import tiny_model

CHUNKS = ["Paris is in France.", "The sky is blue today.", "Cats sleep a lot.", "Bob owns a red car."]
INP = ContextInput(CHUNKS, question="Where is Paris?")
ANSWER = "In France."


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    return tiny_model("llama")


def brute_force(model, tokenizer, inp: ContextInput, answer: str) -> float:
    """Sum of log p(answer token j | prompt, answer[:j]), one full forward per token."""
    prompt = render_prompt(tokenizer, inp)
    ids = list(tokenizer(prompt.text, add_special_tokens=prompt.add_special_tokens)["input_ids"])
    total = 0.0
    for token in tokenizer(answer, add_special_tokens=False)["input_ids"]:
        with torch.no_grad():
            logits = model(torch.tensor([ids])).logits[0, -1]
        total += float(logits.log_softmax(-1)[token])
        ids.append(token)
    return total


def test_all_keep_matches_brute_force(model, tokenizer) -> None:
    got = answer_log_probs(model, tokenizer, INP, ANSWER, torch.ones(1, len(CHUNKS), dtype=torch.bool))
    assert got.shape == (1,)
    assert got.item() == pytest.approx(brute_force(model, tokenizer, INP, ANSWER), abs=1e-4)


def test_removing_chunks_matches_smaller_context(model, tokenizer) -> None:
    keep = torch.tensor([[True, False, True, True], [False, False, True, False], [False] * 4])
    got = answer_log_probs(model, tokenizer, INP, ANSWER, keep)
    expected = [
        brute_force(
            model, tokenizer, ContextInput([CHUNKS[0], CHUNKS[2], CHUNKS[3]], "Where is Paris?"), ANSWER
        ),
        brute_force(model, tokenizer, ContextInput([CHUNKS[2]], "Where is Paris?"), ANSWER),
        brute_force(model, tokenizer, ContextInput(EMPTY_CONTEXT, "Where is Paris?"), ANSWER),
    ]
    assert got.tolist() == pytest.approx(expected, abs=1e-4)


def test_batching_does_not_change_values(model, tokenizer) -> None:
    keep = ablation_masks(len(CHUNKS), 7, seed=3)
    keep[0] = False  # the shortest prompt, padded the most
    one = answer_log_probs(model, tokenizer, INP, ANSWER, keep, batch_size=1)
    three = answer_log_probs(model, tokenizer, INP, ANSWER, keep, batch_size=3)
    assert one.dtype == torch.float64 and torch.isfinite(one).all()
    torch.testing.assert_close(three, one, atol=1e-4, rtol=0)


def test_answer_log_probs_rejects_bad_mask(model, tokenizer) -> None:
    with pytest.raises(ValueError, match="keep must be"):
        answer_log_probs(model, tokenizer, INP, ANSWER, torch.ones(2, 3, dtype=torch.bool))


def test_ablate_keeps_order_and_settings() -> None:
    inp = ContextInput(CHUNKS, question="q", instruction="I", chat_template=False)
    assert ablate(inp, [True] * 4) is inp
    small = ablate(inp, [False, True, False, True])
    assert small.chunks == [CHUNKS[1], CHUNKS[3]]
    assert (small.question, small.instruction, small.chat_template) == ("q", "I", False)
    assert ablate(inp, [False] * 4).context == EMPTY_CONTEXT


def test_lds_hand_made() -> None:
    scores = torch.tensor([3.0, 1.0, 2.0])
    masks = torch.tensor([[1, 0, 0], [0, 1, 0], [1, 1, 1], [0, 0, 1], [1, 0, 1]], dtype=torch.bool)
    predicted = masks.double() @ scores.double()
    assert lds(scores, masks, 2 * predicted + 1) == pytest.approx(1.0)
    assert lds(scores, masks, -predicted) == pytest.approx(-1.0)
    assert math.isnan(lds(scores, masks, torch.ones(5)))
    assert math.isnan(lds(torch.zeros(3), masks, predicted))


def test_top_k_masks_with_ties() -> None:
    scores = torch.tensor([0.5, 2.0, 0.5, 2.0, -1.0])
    masks = top_k_masks(scores, [0, 1, 2, 3, 5, 9])
    assert masks.dtype == torch.bool and masks.shape == (6, 5)
    assert masks.tolist() == [
        [True, True, True, True, True],
        [True, False, True, True, True],
        [True, False, True, False, True],
        [False, False, True, False, True],
        [False] * 5,
        [False] * 5,
    ]
    assert top_k_masks(scores, []).shape == (0, 5)
    with pytest.raises(ValueError):
        top_k_masks(scores, [-1])


def test_log_prob_drop() -> None:
    torch.testing.assert_close(log_prob_drop(-2.0, torch.tensor([-3.0, -2.5])), torch.tensor([1.0, 0.5]))


def test_ablation_masks() -> None:
    masks = ablation_masks(6, 10, seed=1)
    assert masks.dtype == torch.bool and masks.shape == (10, 6)
    assert torch.equal(masks, ablation_masks(6, 10, seed=1))
    assert not torch.equal(masks, ablation_masks(6, 10, seed=2))
    assert ablation_masks(50, 400, seed=0).float().mean().item() == pytest.approx(0.5, abs=0.02)
    assert ablation_masks(50, 400, keep_probability=0.2).float().mean().item() == pytest.approx(0.2, abs=0.02)


def test_faithfulness_on_tiny_model(model, tokenizer) -> None:
    scores = {"good": torch.tensor([4.0, 1.0, 2.0, 0.0]), "flat": torch.zeros(4)}
    out = faithfulness(model, tokenizer, INP, ANSWER, scores, ks=(1, 3, 4), n_samples=8, seed=0)
    assert set(out) == {"good", "flat"}
    for result in out.values():
        assert set(result) == {"drop@1", "drop@3", "drop@4", "lds"}
        assert math.isfinite(result["drop@1"]) and math.isfinite(result["drop@3"])
        assert math.isnan(result["drop@4"])
    assert math.isnan(out["flat"]["lds"]) and math.isfinite(out["good"]["lds"])

    keep = torch.cat([torch.ones(1, 4, dtype=torch.bool), top_k_masks(scores["good"], [1, 3])])
    full, *ablated = answer_log_probs(model, tokenizer, INP, ANSWER, keep).tolist()
    assert [out["good"]["drop@1"], out["good"]["drop@3"]] == pytest.approx(
        [full - a for a in ablated], abs=1e-4
    )
    masks = ablation_masks(4, 8, seed=0)
    actual = answer_log_probs(model, tokenizer, INP, ANSWER, masks)
    assert out["good"]["lds"] == pytest.approx(lds(scores["good"], masks, actual), abs=1e-6)


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 5),
    m=st.integers(2, 12),
    data=st.data(),
)
def test_lds_matches_rank_pearson(n: int, m: int, data: st.DataObject) -> None:
    floats = st.floats(-10, 10, allow_nan=False, width=32)
    scores = np.array(data.draw(st.lists(floats, min_size=n, max_size=n)), dtype=np.float64)
    masks = np.array(
        data.draw(st.lists(st.lists(st.booleans(), min_size=n, max_size=n), min_size=m, max_size=m))
    )
    actual = np.array(data.draw(st.lists(floats, min_size=m, max_size=m)), dtype=np.float64)
    predicted = np.array([sum(s for s, k in zip(scores, row, strict=True) if k) for row in masks])
    got = lds(torch.from_numpy(scores), torch.from_numpy(masks), torch.from_numpy(actual))
    if np.ptp(predicted) == 0 or np.ptp(actual) == 0:
        assert math.isnan(got)
    else:
        expected = np.corrcoef(rankdata(predicted), rankdata(actual))[0, 1]
        assert got == pytest.approx(expected, abs=1e-9)
