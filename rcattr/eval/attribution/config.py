"""What a run of the attribution benchmark measures: [`BenchmarkConfig`][rcattr.eval.attribution.config.BenchmarkConfig], saved as its `config.json`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rcattr.eval.attribution.long_context import LongContext

if TYPE_CHECKING:
    from rcattr.options import TopK

# the built-in methods (`rcattr.eval.attribution.methods.default_methods`), in the order of the results;
# named here, without torch, for the command line
METHODS = (
    "rc",
    "rc_paper",
    "sweep",
    "heads",
    "attention",
    "hidden_state",
    "ig",
    "bm25",
    "ablation",
    "random",
    "hybrid",
    "shapley",
    "kernel_shap",
    "context_cite",
    "at2",
    "documents",
)
# run when named: the heads' default and paper rows repeat the sweep's; the peers cost 64 forwards a record
# (AT2 one, with an estimator trained for the model); documents' sentence-score sums are for the length benchmark
OPTIONAL_METHODS = ("heads", "shapley", "kernel_shap", "context_cite", "at2", "documents")
RUN_BY_DEFAULT = tuple(name for name in METHODS if name not in OPTIONAL_METHODS)

DEFAULT_METHOD_LIMITS = {"ig": 5, "ablation": 50}  # records; IG costs n_answer_tokens x n_steps passes
RESUMABLE_CHANGES = (
    "methods",
    "limit",
    "method_limits",
    "faithfulness",
    "at2_estimator",
    "batch_size",  # speed only: the rows are the same
)  # may differ when resuming
PROTOCOL = (
    "gold answer teacher-forced; context = the numbered sources and the question (chat template); "
    "one output unit per gold span; prediction = source of the top-scoring context span"
)


@dataclass(frozen=True)
class BenchmarkConfig:
    """What a run measures; a resumed run must have the same (but for [`RESUMABLE_CHANGES`][rcattr.eval.attribution.config.RESUMABLE_CHANGES])."""

    dataset: str
    split: str = "dev"
    methods: tuple[str, ...] = RUN_BY_DEFAULT
    limit: int | None = None
    method_limits: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_METHOD_LIMITS))
    top_k: TopK = "outliers"
    granularity: str = "chunk"
    max_tokens: int | None = 4096
    model: str | None = None
    hidden_state_layer: int | None = None
    ig_steps: int = 16
    faithfulness: int = 0
    lds_samples: int = 32
    at2_estimator: str | None = None  # the at2 method's score estimator file (rcattr.baselines.at2)
    batch_size: int = 1  # records attributed together (SpanAttributor.attribute_many); 1: one at a time
    long_context: LongContext | None = None  # each record hidden among distractors (long_context)
    skip: int | None = None  # the file's first N lines left out (before `limit`): a part held out of a run

    def lines(self) -> int | None:
        """How many of the file's first lines are read (`skip` + `limit`; None: all)."""
        return None if self.limit is None else (self.skip or 0) + self.limit

    def records_for(self, method: str) -> int | None:
        """How many records `method` runs on (the expensive ones may run on fewer)."""
        own = self.method_limits.get(method)
        if own is None:
            return self.limit
        return own if self.limit is None else min(self.limit, own)
