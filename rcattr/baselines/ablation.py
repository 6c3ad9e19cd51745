"""Leave-one-span-out ablation through captum: the perturbation reference.

Each context span is removed in turn (replaced by the empty string) and the teacher-forced
log-probability of every answer token is measured again: one forward per span plus one for the
full prompt (``LLMAttribution(FeatureAblation)`` with ``forward_in_tokens=False``). ContextCite
and the other surrogate methods approximate exactly these effects with fewer passes.
"""

from __future__ import annotations

from captum.attr import FeatureAblation, LLMAttribution, TextTemplateInput, TextTokenInput
from transformers import PreTrainedModel

from rcattr._typing import TokenizerLike
from rcattr.base import AttributionInput, Example, SpanAttributor, unit_sum
from rcattr.result import RCAttributionResult


def span_template(example: Example) -> TextTemplateInput:
    """The prompt as a captum template whose values are the context spans (in span order).

    Raises ValueError when spans overlap: a character cannot be removed with two spans.
    """
    prompt = example.prompt
    placed = sorted(
        (prompt.chunk_starts[span.source] + span.start, prompt.chunk_starts[span.source] + span.end, index)
        for index, span in enumerate(example.context_spans)
    )
    pieces, cursor = [], 0
    for start, end, index in placed:
        if start < cursor:
            raise ValueError("ablation needs non-overlapping context spans")
        pieces.append(_escape(prompt.text[cursor:start]) + f"{{{index}}}")
        cursor = end
    pieces.append(_escape(prompt.text[cursor:]))
    values = [span.text for span in example.context_spans]
    return TextTemplateInput("".join(pieces), values=values, baselines=[""] * len(values))


def _escape(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


class AblationAttributor(SpanAttributor):
    """Log-probability drop of the answer when each span is removed (captum ``FeatureAblation``).

    A span's score for an output unit is the drop in the summed log-probability of the unit's
    tokens; scores are signed (a span whose removal helps the answer scores below 0). captum
    tokenizes the prompt itself, with the tokenizer's special tokens.

    Parameters
    ----------
    batch : int, default 1
        Ablations evaluated per forward pass (captum's ``perturbations_per_eval``).
    """

    name = "ablation"

    def __init__(self, model: PreTrainedModel, tokenizer: TokenizerLike, batch: int = 1) -> None:
        super().__init__(model, tokenizer)
        self.batch = batch
        self.captum = LLMAttribution(FeatureAblation(model), tokenizer)

    def _explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        captum_input = inp if isinstance(inp, (TextTemplateInput, TextTokenInput)) else span_template(example)
        attribution = self.captum.attribute(
            captum_input,
            target=example.ids[0, example.answer_start :].cpu(),
            forward_in_tokens=False,
            perturbations_per_eval=self.batch,
        )
        per_token = attribution.token_attr.float()  # [A, n_spans]
        return example.result(attribution.seq_attr, unit_sum(per_token, example.unit_ranges), self.name, inp)
