"""The built-in methods of the attribution benchmark, in the registry [`default_methods`][rcattr.eval.attribution.methods.default_methods] builds.

* `rc`: [`RCAttributor`][rcattr.attribution.attributor.RCAttributor] with its defaults; `rc_paper`: the paper's recipe;
* `sweep`: one RC pass per record for every recipe of the ablation and the top-k / bottom-k curve
  ([`SweepMethod`][rcattr.eval.attribution.sweep.SweepMethod]); `heads`: the same for the head-selection rules
  of [`rcattr.eval.attribution.selection_rules`][rcattr.eval.attribution.selection_rules];
* the baselines of [`rcattr.baselines`][rcattr.baselines]: `attention`, `hidden_state`, `ig`, `bm25`, `ablation`,
  `random` and `hybrid`;
* the field's own tools, run when named: captum's `shapley` (Shapley value sampling) and `kernel_shap`
  at 64 forwards, `context_cite` (the `context-cite` package) and `at2` (the `at2` package, with the
  estimator trained for the model, `--at2-estimator`);
* `documents`, run when named: the default at sentence granularity, its sentences' scores added up per
  document in several ways ([`rcattr.eval.attribution.document_scores`][rcattr.eval.attribution.document_scores]).

Add a method of your own to a registry with [`add`][rcattr.eval.common.registry.MethodRegistry.add], e.g. a
[`SpanAttributorMethod`][rcattr.eval.attribution.method.SpanAttributorMethod], and give the registry to the runner.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from transformers import PreTrainedModel

from rcattr.attribution.attributor import RCAttributor
from rcattr.baselines import (
    AblationAttributor,
    AttentionAttributor,
    BM25Attributor,
    ContextCiteAttributor,
    HiddenStateAttributor,
    HybridAttributor,
    IntegratedGradientsAttributor,
    KernelShapAttributor,
    RandomAttributor,
    ShapleySamplingAttributor,
)
from rcattr.baselines.at2 import AT2Attributor
from rcattr.eval.attribution.document_scores import DocumentScoresMethod
from rcattr.eval.attribution.method import AttributionMethod, SpanAttributorMethod
from rcattr.eval.attribution.recipes import selection_ablation
from rcattr.eval.attribution.sweep import CURVE_SCORERS, SweepMethod
from rcattr.eval.common.registry import MethodRegistry
from rcattr.heads.selectors import heads_for
from rcattr.protocols import TokenizerLike

if TYPE_CHECKING:
    from rcattr.eval.attribution.config import BenchmarkConfig

AttributionMethods = MethodRegistry[AttributionMethod[Any]]
RUN_FILES = ("faithfulness", "peak_memory")  # the other row files of a run folder: no method takes their name


def rc_attributor(model: PreTrainedModel, tokenizer: TokenizerLike, config: BenchmarkConfig) -> RCAttributor:
    """The default RCAttributor at `config.top_k` heads (at most the model's)."""
    text = model.config.get_text_config()
    top_k = config.top_k
    if isinstance(top_k, int):
        top_k = min(top_k, text.num_hidden_layers * text.num_attention_heads)
    return RCAttributor(model, tokenizer, heads_for(top_k))


def at2_attributor(
    model: PreTrainedModel, tokenizer: TokenizerLike, config: BenchmarkConfig
) -> AT2Attributor:
    """AT2 with the score estimator `config.at2_estimator` (trained for the run's model)."""
    if config.at2_estimator is None:
        raise ValueError(
            "at2 needs a score estimator trained for the model: --at2-estimator FILE (train one with "
            "python -m rcattr.eval.attribution.at2_training)"
        )
    return AT2Attributor(model, tokenizer, config.at2_estimator)


def default_methods() -> AttributionMethods:
    """A new registry of the built-in methods, to which more may be added."""
    return MethodRegistry(
        [
            SpanAttributorMethod("rc", rc_attributor),
            SpanAttributorMethod(
                "rc_paper", lambda model, tokenizer, config: RCAttributor.paper(model, tokenizer)
            ),
            SweepMethod(rc_attributor),
            SweepMethod(
                rc_attributor, "heads", selection_ablation, {"attention": CURVE_SCORERS["attention"]}
            ),
            SpanAttributorMethod(
                "attention", lambda model, tokenizer, config: AttentionAttributor(model, tokenizer)
            ),
            SpanAttributorMethod(
                "hidden_state",
                lambda model, tokenizer, config: HiddenStateAttributor(
                    model, tokenizer, layer=config.hidden_state_layer
                ),
            ),
            SpanAttributorMethod(
                "ig",
                lambda model, tokenizer, config: IntegratedGradientsAttributor(
                    model, tokenizer, n_steps=config.ig_steps
                ),
            ),
            SpanAttributorMethod("bm25", lambda model, tokenizer, config: BM25Attributor(model, tokenizer)),
            SpanAttributorMethod(
                "ablation", lambda model, tokenizer, config: AblationAttributor(model, tokenizer)
            ),
            SpanAttributorMethod(
                "random", lambda model, tokenizer, config: RandomAttributor(model, tokenizer)
            ),
            SpanAttributorMethod(
                "hybrid", lambda model, tokenizer, config: HybridAttributor(model, tokenizer)
            ),
            SpanAttributorMethod(
                "shapley", lambda model, tokenizer, config: ShapleySamplingAttributor(model, tokenizer)
            ),
            SpanAttributorMethod(
                "kernel_shap", lambda model, tokenizer, config: KernelShapAttributor(model, tokenizer)
            ),
            SpanAttributorMethod(
                "context_cite", lambda model, tokenizer, config: ContextCiteAttributor(model, tokenizer)
            ),
            SpanAttributorMethod("at2", at2_attributor),
            DocumentScoresMethod(rc_attributor),
        ],
        reserved=RUN_FILES,
    )
