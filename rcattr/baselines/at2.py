"""AT2 (Cohen-Wang et al. 2025, "Learning to Attribute with Attention") through its own package, `at2`.

AT2 scores a source by the attention the answer pays it, summed over heads with weights *learned* from
ablations: a linear score estimator trained so that its scores predict how much removing random halves
of the sources changes the answer. rcattr gives the package its prompt, spans and answer through one
task class ([`context_task`][rcattr.baselines.at2.context_task], the package's `AttributionTask` interface): the context spans are
the sources, the answer's tokens the target. The features (attention weights recomputed from the hidden
states), the estimator, its training loop and its scores are the package's.

* [`AT2Attributor`][rcattr.baselines.at2.AT2Attributor] scores examples with a trained estimator (a file the package saved, or one in
  memory).
* [`train_estimator`][rcattr.baselines.at2.train_estimator] trains one with the package's `AT2Trainer` on contexts and questions you
  give: the model answers them itself, then each example is ablated `num_masks` times.

The package is an optional dependency: `pip install "rcattr[peers]"`.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import BatchEncoding, PreTrainedModel

from rcattr.attribution.base import AttributionInput, Example, SpanAttributor, SpanSpec
from rcattr.attribution.result import RCAttributionResult
from rcattr.baselines.peers import import_peer
from rcattr.protocols import TokenizerLike
from rcattr.text.prompting import ContextInput, render_prompt

# model types whose attention the package recomputes (at2.attribution.attention); Gemma 3's path calls a
# rotary embedding transformers 5 no longer has
SUPPORTED_MODEL_TYPES = ("llama", "qwen2", "phi3")
GENERATE_KWARGS = {
    "max_new_tokens": 64,
    "do_sample": False,
    "top_p": None,
    "top_k": None,
    "temperature": None,
}


def feature_extractor(model: PreTrainedModel) -> Any:
    """The package's attention feature extractor for `model` (one feature per layer and head)."""
    model_type = model.config.get_text_config().model_type
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(
            f"AT2's package recomputes attention for {', '.join(SUPPORTED_MODEL_TYPES)} models, not {model_type!r}"
        )
    at2 = import_peer("at2")
    layers, heads = at2.attribution.attention.get_attentions_shape(model)
    return at2.AT2FeatureExtractor(layers, heads, model_type=model_type)


def padded_tokenizer(tokenizer: TokenizerLike) -> TokenizerLike:
    """A copy of `tokenizer` padding on the left with a pad token (the package's collator pads)."""
    padded: Any = copy.deepcopy(tokenizer)
    padded.padding_side = "left"
    if padded.pad_token is None:
        padded.pad_token = padded.eos_token
    return padded


@functools.cache
def _task_class() -> type:
    at2 = import_peer("at2")

    class ContextTask(at2.tasks.AttributionTask):  # type: ignore[misc,name-defined]
        """The package's task over rcattr's prompt for `inp`: context spans at `granularity` are the
        sources, the answer (`example`'s, or the one the package generates) the target."""

        def __init__(
            self,
            model: PreTrainedModel,
            tokenizer: TokenizerLike,
            inp: ContextInput,
            granularity: SpanSpec = "sentence",
            example: Example | None = None,
        ) -> None:
            super().__init__(model, tokenizer, generate_kwargs=GENERATE_KWARGS)
            self.inp, self.granularity, self._example = inp, granularity, example
            self._empty = False  # the package generated an empty answer: the target is empty
            if (
                example is not None
            ):  # the answer is given: the package reads its hidden states, not a generation
                self._cache["text"] = self.input_text + example.answer

        @property
        def input_text(self) -> str:
            return render_prompt(self.tokenizer, self.inp).text

        @property
        def example(self) -> Example:
            """The prepared example; after the package's generation, its answer without special tokens
            (an empty answer keeps a placeholder for the prompt's layout and gets an empty target)."""
            if self._example is None:
                generated = self._cache["text"][len(self.input_text) :]
                ids = self.tokenizer(generated, add_special_tokens=False)["input_ids"]
                answer = str(self.tokenizer.decode(ids, skip_special_tokens=True)).strip()
                self._empty = not answer
                self._example = _layout(self.model, self.tokenizer).prepare(
                    self.inp, answer or ".", self.granularity
                )
            return self._example

        @property
        def _end(self) -> int:
            example = self.example
            return example.answer_start if self._empty else example.ids.shape[1]

        def get_tokens(self, return_tensors: str | None = None) -> BatchEncoding:
            ids = self.example.ids[0, : self._end].cpu()
            if return_tensors == "pt":
                return BatchEncoding({"input_ids": ids[None], "attention_mask": torch.ones_like(ids)[None]})
            return BatchEncoding({"input_ids": ids.tolist(), "attention_mask": [1] * len(ids)})

        def _get_source_token_ranges(self) -> list[tuple[int, int]]:
            return [(r[0], r[-1] + 1) for r in self.example.context_ranges]

        @property
        def target_token_range(self) -> tuple[int, int]:
            return self.example.answer_start, self._end

    return ContextTask


def context_task(
    model: PreTrainedModel,
    tokenizer: TokenizerLike,
    inp: ContextInput,
    granularity: SpanSpec = "sentence",
    example: Example | None = None,
) -> Any:
    """The package's `AttributionTask` for `inp` (see the module's docstring)."""
    return _task_class()(model, tokenizer, inp, granularity, example)


def _layout(model: PreTrainedModel, tokenizer: TokenizerLike) -> SpanAttributor:
    from rcattr.baselines.random import RandomAttributor  # any SpanAttributor lays out the example

    return RandomAttributor(model, tokenizer)


class AT2Attributor(SpanAttributor):
    """AT2's learned head weights over the attention of the answer's tokens to each span.

    Parameters
    ----------
    estimator : str, Path or the package's LinearScoreEstimator
        A trained score estimator ([`train_estimator`][rcattr.baselines.at2.train_estimator]), or the file the package saved it to.
    """

    name = "at2"

    def __init__(self, model: PreTrainedModel, tokenizer: TokenizerLike, estimator: Any) -> None:
        super().__init__(model, tokenizer)
        at2 = import_peer("at2")
        feature_extractor(model)  # refuses an architecture the package cannot read
        if isinstance(estimator, (str, Path)):
            estimator = at2.AT2ScoreEstimator.load(Path(estimator), device=model.device)
        self.estimator = estimator
        self.at2 = at2

    def explain(self, example: Example, inp: AttributionInput) -> RCAttributionResult:
        if not isinstance(inp, (ContextInput, str)):
            raise TypeError("AT2Attributor takes a ContextInput or a string context")
        task = context_task(
            self.model, self.tokenizer, ContextInput(inp) if isinstance(inp, str) else inp, example=example
        )
        attributor = self.at2.AT2Attributor(task, self.estimator)
        seq_attr = attributor.get_attribution_scores(token_start=0, token_end=example.n_answer)
        token_attr = np.stack(
            [
                attributor.get_attribution_scores(token_start=r.start, token_end=r.stop)
                for r in example.unit_ranges
            ]
        )
        return example.result(torch.as_tensor(seq_attr), torch.as_tensor(token_attr), self.name, inp)


def train_estimator(
    model: PreTrainedModel,
    tokenizer: TokenizerLike,
    inputs: Sequence[ContextInput],
    save_path: str | Path,
    *,
    sizes: Sequence[int] | None = None,
    num_masks: int = 32,
    granularity: SpanSpec = "sentence",
    num_iterations: int = 1000,
    batch_size: int = 8,
    seed: int = 0,
) -> dict[int, Any]:
    """Train AT2 score estimators with the package's trainer: one per training size in `sizes`.

    The model answers each input (greedy, at most 64 tokens); each example is then ablated `num_masks`
    times (sources masked out of attention, the package's ablation) and its attention features saved
    under `save_path`, which a later call resumes; `batch_size` ablations share a forward. The estimator for size `n` learns from the first
    `n` examples with an answer and is saved to `save_path/estimators/n{n}/score_estimator.pt`.

    Returns
    -------
    dict
        Training size -> the trained `LinearScoreEstimator`.
    """
    at2 = import_peer("at2")
    from datasets import Dataset

    sizes = [len(inputs)] if sizes is None else sorted(sizes)
    if not inputs or sizes[-1] > len(inputs) or sizes[0] < 1:
        raise ValueError(f"training sizes {list(sizes)} need between 1 and {len(inputs)} inputs")
    padded = padded_tokenizer(tokenizer)
    rows = Dataset.from_list([{"index": index} for index in range(len(inputs))])
    trainer = at2.AT2Trainer(
        save_path=Path(save_path),
        dataset=rows,
        model=model,
        tokenizer=padded,
        task_from_example=lambda row, model, tokenizer: context_task(
            model, tokenizer, inputs[row["index"]], granularity
        ),
        feature_extractor=feature_extractor(model),
        split_target_by=None,  # the whole answer is one target (the package's sentence split needs nltk data)
        num_masks=num_masks,
    )
    trainer.generate(batch_size=1)
    trainer.compute_features_and_outputs(
        batch_size=batch_size
    )  # an example's ablations, batch_size at a time
    answered = [i for i in range(len(inputs)) if trainer.task_datas[i]["num_targets"] > 0]
    estimators = {}
    for size in sizes:
        np.random.seed(seed)  # the package samples its batches with numpy's global generator
        torch.manual_seed(seed)
        train = answered[:size]
        estimators[size] = trainer.train(
            num_iterations=num_iterations,
            batch_size=min(512, len(train)),
            train_indices=train,
            device=str(model.device),
            save_name=f"n{size}",
        )
    return estimators
