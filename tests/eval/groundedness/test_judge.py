"""The model asked as a judge (rcattr.eval.groundedness.judge): the log-odds of yes against no."""

from __future__ import annotations

import pytest
import torch

from rcattr.attribution.attributor import RCAttributor
from rcattr.eval.groundedness.judge import JUDGE_INSTRUCTION, JUDGE_QUESTION, answer_ids, judge_log_odds
from rcattr.text.prompting import ContextInput, render_prompt


def test_answer_ids_take_each_spelling_and_leave_out_a_shared_first_token(tokenizer) -> None:
    yes, no = answer_ids(tokenizer)
    assert yes == sorted(tokenizer.convert_tokens_to_ids(["y", "Y"]))
    assert no == sorted(tokenizer.convert_tokens_to_ids(["n", "N"]))  # " " starts both spellings: neither's


def test_judge_log_odds_are_the_next_token_odds_after_the_judges_prompt(llama, tokenizer) -> None:
    references, claim = ["The cat sat on the mat.", "Dogs bark."], "The cat sat."
    value = judge_log_odds(RCAttributor(llama, tokenizer), references, claim)
    prompt = render_prompt(
        tokenizer, ContextInput(references, JUDGE_QUESTION.format(claim=claim), instruction=JUDGE_INSTRUCTION)
    )
    assert prompt.text.endswith("Claim: The cat sat.\nassistant: ")  # the chat turn: the judge answers next
    ids = tokenizer(prompt.text, add_special_tokens=prompt.add_special_tokens, return_tensors="pt").input_ids
    with torch.no_grad():
        p = torch.softmax(llama(ids).logits[0, -1].double(), -1)
    yes, no = answer_ids(tokenizer)
    assert value == pytest.approx(float(torch.log(p[yes].sum() / p[no].sum())), abs=1e-4)
    assert value != pytest.approx(judge_log_odds(RCAttributor(llama, tokenizer), references, "Dogs fly."))
