"""A prompt cut where its context ends: the part compressed once (the chat template's opening and the context)
and the part asked of it afterwards (a question, and the template's assistant opening)."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from rcattr.protocols import TokenizerLike

__all__ = ["SplitPrompt", "split_prompt"]


@dataclass(frozen=True)
class SplitPrompt:
    """`context_ids [1, n]` (compressed at prefill) and `question_ids [1, m]` (asked after it)."""

    context_ids: torch.Tensor
    question_ids: torch.Tensor

    @property
    def n_context(self) -> int:
        """Tokens of the context part."""
        return self.context_ids.shape[1]


def split_prompt(
    tokenizer: TokenizerLike, context: str, question: str, *, system: str | None = None
) -> SplitPrompt:
    """Render `context` then `question` in one user turn of the chat template (after a `system` turn when
    given), cut between the two: what comes before the cut does not depend on the question.

    Without a chat template the context follows the BOS token (and `system` and a blank line), and the question
    ends with a newline.
    """
    if not context.strip():
        raise ValueError("the context to compress is empty")
    if getattr(tokenizer, "chat_template", None) is None:
        opening = (getattr(tokenizer, "bos_token", None) or "") + (f"{system}\n\n" if system else "")
        head, tail = opening + context, f"\n\n{question}\n"
    else:
        separator = "\x00" * 3  # no template writes this; the user turn is cut where it stands
        messages = [{"role": "system", "content": system}] if system else []
        rendered = tokenizer.apply_chat_template(
            [*messages, {"role": "user", "content": f"{context}{separator}\n\n{question}"}],
            add_generation_prompt=True,
            tokenize=False,
        )
        head, tail = rendered.split(separator)
    encode = tokenizer.encode  # type: ignore[attr-defined]
    return SplitPrompt(
        torch.tensor([encode(head, add_special_tokens=False)]),
        torch.tensor([encode(tail, add_special_tokens=False)]),
    )
