"""What a run of the KV benchmark measures ([`KVBenchmarkConfig`][rcattr.eval.kv.config.KVBenchmarkConfig], saved as its `config.json`), and
the records of its task."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from rcattr.eval.kv.data import KV_DATASETS, KVRecord, load_qmsum, load_squad
from rcattr.eval.kv.needle import load_needle
from rcattr.eval.kv.presses import PRESSES
from rcattr.eval.kv.variants import DEFAULT_RECIPE, rc_options

if TYPE_CHECKING:
    from rcattr.protocols import TokenizerLike

# the built-in methods (`rcattr.eval.kv.registry.default_kv_methods`), named here without torch for the
# command line: RCKVCache, then every press
METHODS = ("rc", *PRESSES)
INSTRUCTIONS = {
    "squad": "Answer in a few words.",
    "qmsum": "Answer in a few sentences.",
    "needle": "Answer in a few words.",
}
DEFAULT_MAX_NEW_TOKENS = {"squad": 32, "qmsum": 64, "needle": 32}  # needle answers restate the question
QUALITY = {"squad": "rougeL", "qmsum": "rougeL", "needle": "match"}  # the task's answer-quality metric
RESUMABLE_CHANGES = ("methods", "ratios", "c", "window", "rc_variants", "limit", "rc_ratios")
PROTOCOLS = ("question", "once")
# the settings added since rcattr 0.1, left out of config.json where they hold these defaults
LATER_DEFAULTS: dict[str, Any] = {"protocol": "question", "questions": None, "rc_ratios": ()}
PROTOCOL = (
    "context compressed at prefill, question after it uncompressed (kvpress's pipeline); the full cache's "
    "greedy answer g teacher-forced through every cache for VER (last layer, per head, at the positions "
    "predicting g); each cache's own greedy answer scored by ROUGE-1/ROUGE-L F1 against the gold answers "
    "and by answer match (a gold answer standing in it as whole words)"
)


@dataclass(frozen=True)
class KVBenchmarkConfig:
    """What a run measures; a resumed run must have the same (but for [`RESUMABLE_CHANGES`][rcattr.eval.kv.config.RESUMABLE_CHANGES]).
    `methods` name methods of the registry the runner is given (default: the built-in ones)."""

    dataset: str
    methods: tuple[str, ...] = METHODS
    ratios: tuple[float, ...] = (0.4, 0.5, 0.6, 0.7, 0.8)
    c: tuple[float, ...] = (0.2, 0.7, 0.8, 1.0, 1.2, 1.3, 1.8)
    window: tuple[int, ...] = (8, 16)
    rc_variants: tuple[str, ...] = (DEFAULT_RECIPE,)
    limit: int | None = None
    context_tokens: int = 1024  # the QMSum excerpt's budget; with protocol "once", every context's
    max_new_tokens: int | None = None  # default per dataset
    model: str | None = None
    protocol: str = "question"  # or "once" (rcattr.eval.kv.once)
    questions: int | None = None  # protocol "once": questions per context (default DEFAULT_QUESTIONS)
    rc_ratios: tuple[float, ...] = ()  # RCKVCache at these shares evicted too (Ratio), beside every c

    def __post_init__(self) -> None:
        if self.dataset not in KV_DATASETS:
            raise ValueError(f"unknown dataset {self.dataset!r}; choose from {', '.join(KV_DATASETS)}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"unknown protocol {self.protocol!r}; choose from {', '.join(PROTOCOLS)}")
        if self.questions is not None and (self.protocol != "once" or self.questions < 1):
            raise ValueError("questions (per context, >= 1) goes with protocol 'once'")
        for ratio in (*self.ratios, *self.rc_ratios):
            if not 0.0 <= ratio < 1.0:
                raise ValueError(f"a compression ratio is in [0, 1), got {ratio}")
        for variant in self.rc_variants:
            rc_options(variant)

    def settings(self) -> dict[str, Any]:
        """What `config.json` records: every field, but the ones added since rcattr 0.1 where they hold their
        default (so the folders of earlier runs resume and render again)."""
        return {
            key: value
            for key, value in asdict(self).items()
            if key not in LATER_DEFAULTS or value != LATER_DEFAULTS[key]
        }

    @property
    def answer_tokens(self) -> int:
        return self.max_new_tokens or DEFAULT_MAX_NEW_TOKENS[self.dataset]


def load_records(config: KVBenchmarkConfig, tokenizer: TokenizerLike) -> list[KVRecord]:
    if config.dataset == "squad":
        return load_squad(config.limit)

    def count_tokens(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False))  # type: ignore[attr-defined]

    if config.dataset == "needle":
        return load_needle(count_tokens, config.limit)
    return load_qmsum(count_tokens, config.context_tokens, config.limit)
