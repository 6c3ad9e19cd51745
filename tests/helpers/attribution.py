"""One context, question and answer the attribution tests explain, and the logits a tiny model gives them."""

from __future__ import annotations

import torch

from rcattr.runtime.capture import LogitCapture, LogitStore
from rcattr.text.prompting import ContextInput, render_prompt

DOCUMENTS = ["The cat sat. It purred.", "Dogs bark loudly.", "Birds fly south in May."]
QUESTION = "What did the cat do?"
ANSWER = "It sat. Then it purred."
INPUT = ContextInput(DOCUMENTS, QUESTION)
# the same with braces in a document, which a prompt template must escape (the perturbation baselines)
BRACED_DOCUMENTS = ["The cat sat. It purred.", "Dogs bark {loudly}.", "Birds fly south in May."]
BRACED_INPUT = ContextInput(BRACED_DOCUMENTS, QUESTION)


def answer_ids(tokenizer, answer: str) -> tuple[list[int], int, list[tuple[int, int]]]:
    """The ids of :data:`INPUT`'s prompt followed by ``answer``, where the answer starts, and the prompt's
    character offsets."""
    prompt = render_prompt(tokenizer, INPUT)
    encoded = tokenizer(prompt.text, add_special_tokens=False, return_offsets_mapping=True)
    ids = tokenizer(answer, add_special_tokens=False).input_ids
    return encoded.input_ids + ids, len(encoded.input_ids), encoded.offset_mapping


def captured_logits(model, text_ids: list[int], answer_start: int) -> LogitStore:
    """Every layer's float64 logits of the rows from ``answer_start`` on, in one forward of ``text_ids``."""
    store = LogitStore()
    with (
        torch.no_grad(),
        LogitCapture(model, store, query_positions=slice(answer_start, None), dtype=torch.float64),
    ):
        model(torch.tensor([text_ids]))
    return store
