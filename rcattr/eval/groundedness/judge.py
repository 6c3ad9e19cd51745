"""The model asked as a judge: the field's zero-shot groundedness check, one extra forward.

The references are laid out as the library lays out documents ([`rcattr.text.prompting.render_prompt`][rcattr.text.prompting.render_prompt], the
model's chat template where it has one), under an instruction to judge, and the question is whether they
support the claim. The judge's answer is its next-token distribution: the log-odds of "yes" against "no"
(each word's probability summed over its spellings: capitalised or not, with a leading space or not).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch

from rcattr.text.prompting import ContextInput

if TYPE_CHECKING:
    from rcattr.attribution.attributor import RCAttributor
    from rcattr.protocols import TokenizerLike

JUDGE_INSTRUCTION = "Read the documents and judge whether they support a claim."
JUDGE_QUESTION = "Is the following claim supported by the documents? Answer yes or no.\nClaim: {claim}"


def answer_ids(tokenizer: TokenizerLike) -> tuple[list[int], list[int]]:
    """The first token of each spelling of "yes" and of "no" (`yes`, `Yes`, `` yes``, `` Yes``), once
    each; a token both start with (a lone space) is neither's."""

    def first_tokens(word: str) -> set[int]:
        spellings = (word, word.capitalize(), " " + word, " " + word.capitalize())
        return {tokenizer(text, add_special_tokens=False)["input_ids"][0] for text in spellings}

    yes, no = first_tokens("yes"), first_tokens("no")
    return sorted(yes - no), sorted(no - yes)


@torch.no_grad()
def judge_log_odds(attributor: RCAttributor, references: Sequence[str], claim: str) -> float:
    """log P(yes) - log P(no) of the attributor's model asked whether `references` support `claim`."""
    inp = ContextInput(list(references), JUDGE_QUESTION.format(claim=claim), instruction=JUDGE_INSTRUCTION)
    example = attributor.prepare(inp, "yes", "chunk")
    prompt = example.ids[:, : example.answer_start]
    logits = attributor.model(prompt, use_cache=False, logits_to_keep=1).logits[0, -1].float()
    log_probs = torch.log_softmax(logits, -1)
    yes, no = answer_ids(attributor.tokenizer)
    return float(torch.logsumexp(log_probs[yes], 0) - torch.logsumexp(log_probs[no], 0))
