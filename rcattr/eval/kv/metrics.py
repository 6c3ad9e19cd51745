"""Quality of a compressed KV cache: value error rate (docs/design.md §3, paper Eq. 9) and ROUGE.

* [`value_error_rate`][rcattr.eval.kv.metrics.value_error_rate]: with the full cache's generation teacher-forced through both caches,
  the mean over heads and generated tokens of `‖v* − v̂‖₂ / ‖v*‖₂`, `v` the per-head attention output
  of the last layer (the input of its output projection). [`LastLayerHeadOutputs`][rcattr.eval.kv.metrics.LastLayerHeadOutputs] captures it.
* [`rouge`][rcattr.eval.kv.metrics.rouge]: ROUGE-1 and ROUGE-L F1 (Google's `rouge-score`, Porter stemming) of an answer against
  its gold answers, the best over the gold answers when there are several (SQuAD).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from types import TracebackType

import torch
from transformers import PreTrainedModel

ROUGE_TYPES = ("rouge1", "rougeL")


def value_error_rate(reference: torch.Tensor, compressed: torch.Tensor, eps: float = 1e-12) -> float:
    """Mean over tokens and heads of `‖reference − compressed‖₂ / ‖reference‖₂`.

    Parameters
    ----------
    reference, compressed : torch.Tensor
        `[tokens, heads, head_dim]` per-head attention outputs of the same tokens with the full and the
        compressed cache.
    """
    if reference.shape != compressed.shape:
        raise ValueError(f"head outputs of shapes {tuple(reference.shape)} and {tuple(compressed.shape)}")
    if reference.dim() != 3 or reference.shape[0] == 0:
        raise ValueError(f"want [tokens >= 1, heads, head_dim] head outputs, got {tuple(reference.shape)}")
    reference, compressed = reference.double(), compressed.double()
    error = torch.linalg.vector_norm(reference - compressed, dim=-1)
    return float((error / torch.linalg.vector_norm(reference, dim=-1).clamp_min(eps)).mean())


def _last_output_projection(model: PreTrainedModel) -> torch.nn.Module:
    layers = getattr(getattr(model, "model", None), "layers", None)
    projection = getattr(getattr(layers[-1], "self_attn", None), "o_proj", None) if layers else None
    if not isinstance(projection, torch.nn.Module):
        raise ValueError(
            f"{type(model).__name__}: no model.layers[-1].self_attn.o_proj to read the per-head attention "
            "output from (value error rate supports Llama-style decoder layers)"
        )
    return projection


class LastLayerHeadOutputs:
    """`with LastLayerHeadOutputs(model) as outputs: model(...)` then `outputs.heads`: `[B, q, H, d]`
    the last layer's per-head attention output (before its output projection), the query positions of
    every forward inside the block concatenated."""

    def __init__(self, model: PreTrainedModel) -> None:
        self.projection = _last_output_projection(model)
        text = model.config.get_text_config()
        self.n_heads = text.num_attention_heads
        self._handle: torch.utils.hooks.RemovableHandle | None = None
        self._captured: list[torch.Tensor] = []

    def _capture(self, module: torch.nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        hidden = args[0]
        self._captured.append(hidden.detach().reshape(*hidden.shape[:-1], self.n_heads, -1))

    def __enter__(self) -> LastLayerHeadOutputs:
        self._handle = self.projection.register_forward_pre_hook(self._capture)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._handle is not None:
            self._handle.remove()

    @property
    def heads(self) -> torch.Tensor:
        if not self._captured:
            raise RuntimeError("no forward pass ran inside the block")
        return torch.cat(self._captured, dim=1)


@lru_cache(maxsize=1)
def _scorer():  # type: ignore[no-untyped-def]
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)


def rouge(prediction: str, references: Sequence[str]) -> dict[str, float]:
    """ROUGE-1 and ROUGE-L F1 of `prediction`, each the best over `references`."""
    if not references:
        raise ValueError("no reference answer to score against")
    scores = [_scorer().score(reference, prediction) for reference in references]
    return {kind: max(score[kind].fmeasure for score in scores) for kind in ROUGE_TYPES}


def answer_match(prediction: str, references: Sequence[str]) -> float:
    """1.0 when a reference stands in `prediction` as whole words (case ignored; for a number, not
    inside a longer one), else 0.0: RULER's case-blind string match, held to whole words, for answers
    the model words its own way."""
    if not any(reference.strip() for reference in references):
        raise ValueError("no reference answer to match")
    return float(
        any(
            re.search(rf"(?<![^\W_]){re.escape(reference.strip())}(?![^\W_])", prediction, re.IGNORECASE)
            for reference in references
            if reference.strip()
        )
    )
