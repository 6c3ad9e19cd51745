"""The model's own answers (rcattr.runtime.generation): the window, the options, greedy answers of a batch."""

from __future__ import annotations

import warnings

import pytest

from rcattr.attribution.attributor import RCAttributor
from rcattr.baselines import RandomAttributor
from rcattr.heads.selectors import TopHeads
from rcattr.runtime.generation import DEFAULT_GEN_ARGS, generation_options, greedy_answers, model_window
from rcattr.text.prompting import ContextInput
from tests.helpers import char_tokenizer

pytestmark = pytest.mark.transformers_line


def test_the_window_is_the_models_max_positions(llama) -> None:
    assert model_window(llama) == llama.config.max_position_embeddings == 256


def test_options_update_the_defaults_and_refuse_several_answers(llama) -> None:
    assert generation_options(llama, None) == DEFAULT_GEN_ARGS
    assert generation_options(llama, {"max_new_tokens": 3})["max_new_tokens"] == 3
    with pytest.raises(ValueError, match="num_return_sequences=2"):
        generation_options(llama, {"num_return_sequences": 2})


def test_greedy_answers_of_a_left_padded_batch_are_each_prompts_own(llama, tokenizer) -> None:
    prompts = [tokenizer("Paris is in").input_ids, tokenizer("A cat").input_ids]
    options = {"max_new_tokens": 4, "min_new_tokens": 4}
    together, cache = greedy_answers(llama, tokenizer, prompts, options, keep_cache=False)
    alone = [
        greedy_answers(llama, tokenizer, [prompt], options, keep_cache=False)[0][0] for prompt in prompts
    ]
    assert cache is None and together == alone
    _, kept = greedy_answers(llama, tokenizer, prompts[:1], options, keep_cache=True)
    assert kept is not None and kept.get_seq_length() > len(prompts[0])


def test_generation_is_capped_to_the_room_left_in_the_window(llama) -> None:
    attributor = RCAttributor(llama, char_tokenizer(), TopHeads(4))
    with pytest.warns(UserWarning, match="max_new_tokens=128 lowered to"):
        result = attributor.attribute(ContextInput(["y" * 150]), gen_args={"min_new_tokens": 1})
    assert result.answer


def test_asking_a_model_without_a_chat_template_for_its_answer_notes_it_may_be_a_base_model(llama) -> None:
    attributor = RandomAttributor(llama, char_tokenizer(chat=False))
    options = {"max_new_tokens": 2, "min_new_tokens": 1}
    with pytest.warns(UserWarning, match="no chat template, so the model is likely a base") as noted:
        attributor.attribute(ContextInput(["A cat sat."], "Who sat?"), gen_args=options)
    assert [warning.filename for warning in noted] == [__file__]  # at the caller, once
    with pytest.warns(UserWarning, match="pass target= to explain a given answer") as noted:
        attributor.attribute_many(
            ["A cat sat.", "A dog ran."], [None, "It ran."], gen_args=options, progress=False
        )
    assert [warning.filename for warning in noted] == [__file__]


def test_no_note_for_a_given_answer_or_a_chat_model(llama) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RandomAttributor(llama, char_tokenizer(chat=False)).attribute("A cat sat.", "It sat.")
        RandomAttributor(llama, char_tokenizer(chat=False)).attribute_many(
            ["A cat sat."], ["It sat."], progress=False
        )
        chat = RandomAttributor(llama, char_tokenizer())
        chat.attribute("A cat sat.", gen_args={"max_new_tokens": 2, "min_new_tokens": 1})
