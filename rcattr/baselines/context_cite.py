"""ContextCite (Cohen-Wang et al. 2024) through its own package, `context-cite`, on rcattr's spans.

ContextCite ablates random halves of the context's sources (64 masks), re-scores the answer under
each, and fits a LASSO surrogate per output unit; a source's weight is its score. rcattr feeds it the
example's own prompt and spans: a partitioner whose context is the rendered prompt (chat template
included) and whose sources are the context spans, the text between them kept as separators, and the
given answer's tokens as the response. The ablations, the logit-probabilities, their aggregation and
the solver are the package's, at its defaults (64 ablations, keep probability 0.5, LASSO alpha 0.01).

The package is an optional dependency: `pip install "rcattr[peers]"`.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any
from unittest import mock

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel

from rcattr.attribution.base import AttributionInput, Example, SpanAttributor
from rcattr.attribution.result import RCAttributionResult
from rcattr.baselines.peers import import_peer
from rcattr.baselines.perturbation import placed_spans
from rcattr.protocols import TokenizerLike


class ContextCiteAttributor(SpanAttributor):
    """ContextCite's LASSO surrogate over `num_ablations` random span ablations.

    Parameters
    ----------
    num_ablations : int, default 64
        Ablated contexts, one forward each (the package's default).
    batch_size : int, default 1
        Ablations per forward (the package's; above 1 the tokenizer must pad on the left).
    **citer_options
        Other arguments of `context_cite.ContextCiter` (`ablation_keep_prob`, `solver`).
    """

    name = "context_cite"

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: TokenizerLike,
        num_ablations: int = 64,
        batch_size: int = 1,
        **citer_options: Any,
    ) -> None:
        super().__init__(model, tokenizer)
        self.package = import_peer("context_cite")
        self.options = {"num_ablations": num_ablations, "batch_size": batch_size, **citer_options}

    def explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        citer = _citer(self.package, self.model, self.tokenizer, example, self.options)
        quiet = functools.partial(tqdm, disable=True)  # the package shows a bar per example's ablations
        with warnings.catch_warnings(), mock.patch.object(self.package.utils, "tqdm", quiet):
            # the package scores under torch.cuda.amp.autocast(), deprecated, and a no-op without CUDA
            warnings.filterwarnings("ignore", message=".*autocast.*")
            warnings.filterwarnings("ignore", message=".*CUDA is not available.*")
            seq_attr = citer._get_attributions_for_ids_range(0, example.n_answer)[0]
            token_attr = [
                citer._get_attributions_for_ids_range(r.start, r.stop)[0] for r in example.unit_ranges
            ]
        return example.result(
            torch.as_tensor(np.asarray(seq_attr)), torch.as_tensor(np.stack(token_attr)), self.name, inp
        )


def _citer(
    package: Any, model: PreTrainedModel, tokenizer: TokenizerLike, example: Example, options: dict
) -> Any:
    """A `ContextCiter` over `example`: its prompt, its spans as sources, its answer as the response."""
    partitioner = _span_partitioner(package, example)
    add_special_tokens = example.prompt.add_special_tokens
    response_ids = example.ids[0, example.answer_start :].tolist()

    class SpanCiter(package.ContextCiter):  # type: ignore[misc,name-defined]
        def _get_prompt_ids(self, mask: np.ndarray | None = None, return_prompt: bool = False) -> Any:
            prompt = self.partitioner.get_context(mask)
            ids = list(tokenizer(prompt, add_special_tokens=add_special_tokens)["input_ids"])
            return (ids, prompt) if return_prompt else ids

        @property
        def _response_ids(self) -> list[int]:
            return response_ids

    return SpanCiter(model, tokenizer, partitioner.context, query="", partitioner=partitioner, **options)


def _span_partitioner(package: Any, example: Example) -> Any:
    """A `BaseContextPartitioner` whose context is the prompt and whose sources are the context spans."""
    base = package.context_partitioner.BaseContextPartitioner
    text = example.prompt.text
    placed = placed_spans(example)
    order = [index for _, _, index in placed]  # span index of each placed source
    separators = [
        text[previous_end:start]
        for (_, previous_end, _), (start, _, _) in zip([(0, 0, 0), *placed], placed, strict=False)
    ]
    tail = text[placed[-1][1] :] if placed else text

    class SpanPartitioner(base):  # type: ignore[misc,valid-type]
        @property
        def num_sources(self) -> int:
            return len(placed)

        def split_context(self) -> None:
            """The sources are given."""

        def get_source(self, index: int) -> str:
            return example.context_spans[index].text

        def get_context(self, mask: np.ndarray | None = None) -> str:
            keep = np.ones(len(placed), dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
            pieces = [
                sep + (example.context_spans[i].text if keep[i] else "")
                for sep, i in zip(separators, order, strict=True)
            ]
            return "".join(pieces) + tail

    return SpanPartitioner(text)
