"""Decode-time eviction that also scores against the question's window (`rc_question` of the long-generation
benchmark): a measured loser (docs/benchmarks/kv-cache.md), kept with the benchmark so that its rows reproduce."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import torch

from rcattr.kvcache import DecodeEviction, LayerState

__all__ = ["QuestionState", "QuestionWindow"]


@dataclass
class QuestionState(LayerState):
    """A layer's state, with the window of the last chunk (the question, or the prompt's end).

    Attributes
    ----------
    question : torch.Tensor
        `[B, H, <= window, d]` the last chunk's last queries (empty before the prefill).
    question_start : int
        The sequence position of its first query.
    """

    question: torch.Tensor = field(default_factory=lambda: torch.empty(0))
    question_start: int = 0


@dataclass(frozen=True)
class QuestionWindow(DecodeEviction):
    """[`DecodeEviction`][rcattr.kvcache.policy.DecodeEviction] that scores against the last chunk's window as well as the
    last `window` generated tokens, and keeps both, so that what the question reads survives a long answer
    whatever the answer is about at the time."""

    windows: ClassVar[int] = 2

    def new_state(self) -> LayerState:
        return QuestionState()

    def observe(self, state: LayerState, query: torch.Tensor, seen: int, window: int) -> None:
        super().observe(state, query, seen, window)
        if query.shape[-2] > 1 and isinstance(state, QuestionState):  # a chunk: the prompt, the question
            state.question = query[:, :, -window:]
            state.question_start = seen - state.question.shape[-2]

    def window(self, state: LayerState, seen: int) -> tuple[torch.Tensor, torch.Tensor]:
        recent, positions = super().window(state, seen)
        if not isinstance(state, QuestionState) or not state.question.numel():
            return recent, positions
        older = state.question[:, :, : max(0, seen - recent.shape[-2] - state.question_start)]
        question = torch.arange(
            state.question_start, state.question_start + older.shape[-2], device=recent.device
        )
        return torch.cat([older, recent], dim=2), torch.cat([question, positions])
