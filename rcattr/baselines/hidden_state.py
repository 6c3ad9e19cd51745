"""Hidden-state similarity (Phukan et al. 2024, "Peering into the mind of language models").

The paper observes that an answer copies text from its context and that the LLM's hidden state of
a copied answer token is closest (cosine) to the hidden state of the context token it was copied
from. Each answer token is anchored to its most similar context token at one layer; a span's score
for an output unit is the similarity-weighted count of the unit's tokens anchored inside it.

Layer: the paper reads one intermediate layer and reports that middle layers work best; we default
to the middle layer `L // 2` (layer 15 of SmolLM2's 30) and expose `layer=` so the benchmark
can sweep it. `hidden_states[l]` is the output of layer `l` (`hidden_states[0]` is the
embedding output).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from rcattr.attribution.base import AttributionInput, Example, SpanAttributor
from rcattr.attribution.result import RCAttributionResult
from rcattr.attribution.spans import unit_sum
from rcattr.protocols import TokenizerLike


class HiddenStateAttributor(SpanAttributor):
    """Cosine similarity of answer and context hidden states at one layer, anchored per answer token.

    Parameters
    ----------
    layer : int, optional
        Which layer's output to compare, 1..L (default: the middle layer, L // 2).
    """

    name = "hidden_state"

    def __init__(self, model: PreTrainedModel, tokenizer: TokenizerLike, layer: int | None = None) -> None:
        super().__init__(model, tokenizer)
        n_layers = model.config.get_text_config().num_hidden_layers
        self.layer = n_layers // 2 if layer is None else layer
        if not 1 <= self.layer <= n_layers:
            raise ValueError(f"layer={self.layer} is out of range; the model has layers 1..{n_layers}")

    def explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        votes = anchor_votes(layer_output(self.model, example.ids, self.layer)[0], example)
        return example.result(votes.sum(0), unit_sum(votes, example.unit_ranges), self.name, inp)


class _Reached(Exception):
    """Raised by the hook on the layer read, to stop the forward there."""

    def __init__(self, hidden: torch.Tensor) -> None:
        super().__init__()
        self.hidden = hidden


def layer_output(model: PreTrainedModel, ids: torch.Tensor, layer: int) -> torch.Tensor:
    """`hidden_states[layer]` of `model(ids, output_hidden_states=True)`, `[B, S, D]`; the layers above
    `layer` are not run (the middle layer: half a forward). The last layer's (final norm applied) and a model
    whose decoder has no `layers` run the whole forward."""
    layers = getattr(model.get_decoder(), "layers", None)
    if layers is None or layer >= len(layers):
        return model(ids, output_hidden_states=True, logits_to_keep=1).hidden_states[layer]

    def stop(
        _module: torch.nn.Module, _args: object, output: torch.Tensor | tuple[torch.Tensor, ...]
    ) -> None:
        raise _Reached(output[0] if isinstance(output, tuple) else output)

    hook = layers[layer - 1].register_forward_hook(stop)
    try:
        model(ids, use_cache=False, logits_to_keep=1)
    except _Reached as reached:
        return reached.hidden
    finally:
        hook.remove()
    raise RuntimeError(f"the model's forward did not run its layer {layer}")


def anchor_votes(hidden: torch.Tensor, example: Example) -> torch.Tensor:
    """`[A, n_spans]`: each answer token's cosine similarity to its most similar context token,
    placed on the spans holding that token; `hidden [S, D]` is one layer's output."""
    hidden = F.normalize(hidden.float(), dim=-1)
    keys = sorted({position for r in example.context_ranges for position in r})
    similarity = hidden[example.answer_start :] @ hidden[keys].T  # [A, C]
    best, anchor = similarity.max(-1)
    column = {position: index for index, position in enumerate(keys)}
    membership = torch.zeros(len(keys), len(example.context_spans), device=hidden.device)  # [C, n_spans]
    for span, positions in enumerate(example.context_ranges):
        membership[[column[p] for p in positions], span] = 1.0
    return membership[anchor] * best.clamp_min(0)[:, None]
