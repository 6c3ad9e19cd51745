"""The KV benchmark's runner: [`KVBenchmark`][rcattr.eval.kv.runner.KVBenchmark] runs every cache of a config on every record, one line
per (cache setting, record) in its run folder, then writes the report from every line there."""

from __future__ import annotations

import copy
import time
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm
from transformers import Cache, PreTrainedModel

from rcattr.eval.common.run_store import MethodRecordRun
from rcattr.eval.common.sharding import Shard
from rcattr.eval.kv.config import (
    INSTRUCTIONS,
    PROTOCOL,
    QUALITY,
    RESUMABLE_CHANGES,
    KVBenchmarkConfig,
    load_records,
)
from rcattr.eval.kv.data import KVRecord
from rcattr.eval.kv.methods import Compression, FullCache, KVMethod
from rcattr.eval.kv.metrics import answer_match, rouge, value_error_rate
from rcattr.eval.kv.plots import plot_frontiers, plot_head_compression
from rcattr.eval.kv.protocol import greedy_answer, teacher_forced
from rcattr.eval.kv.registry import KVMethods, kv_methods
from rcattr.eval.kv.results import summarise
from rcattr.eval.kv.tables import markdown_table
from rcattr.kvcache import RCKVCache
from rcattr.kvcache.context.prompt import SplitPrompt, split_prompt
from rcattr.protocols import TokenizerLike


@dataclass(frozen=True)
class _Measured:
    """One method on one record: its cache after answering, a copy from before, the answer `[T]`."""

    cache: Cache
    forced: Cache
    answer: torch.Tensor
    compression: Compression
    seconds: float


class KVRun(MethodRecordRun):
    """What the KV benchmark's protocols share: every method of `config` on every record (or on `shard` of
    the records), one line per (method setting, record or question) in `out/records.jsonl`
    ([`RunStore`][rcattr.eval.common.run_store.RunStore]). Subclasses load the records and run one.

    Parameters
    ----------
    config : KVBenchmarkConfig
        What the run measures; `config.methods` name methods of `methods`.
    model, tokenizer
        The model whose cache is compressed, and its tokenizer.
    out : str or Path
        The run folder; a run already there is resumed (its settings must match `config`).
    shard : Shard, optional
        The records this process runs. Default: all of them.
    methods : MethodRegistry, optional
        The methods the run may use, by name. Default: [`default_kv_methods`][rcattr.eval.kv.registry.default_kv_methods].
    """

    def __init__(
        self,
        config: KVBenchmarkConfig,
        model: PreTrainedModel,
        tokenizer: TokenizerLike,
        out: str | Path,
        shard: Shard | None = None,
        *,
        methods: KVMethods | None = None,
    ) -> None:
        chosen = kv_methods(config, methods)  # unknown methods: refused before the folder is claimed
        super().__init__(out, config.settings(), RESUMABLE_CHANGES, shard=shard)
        self.config, self.model, self.tokenizer = config, model, tokenizer
        self.records = self.load()
        self.methods = chosen

    @abstractmethod
    def load(self) -> Sequence[Any]:
        """The records the run goes over (what [`run_record`][rcattr.eval.kv.runner.KVRun.run_record] takes)."""

    def _header(self) -> dict[str, Any]:
        return {
            "config": self.config.settings(),
            "model": self.model.config.name_or_path,
            "protocol": PROTOCOL,
            "question_format": f"{INSTRUCTIONS[self.config.dataset]} Question: {{question}}",
            "max_new_tokens": self.config.answer_tokens,
            "quality": QUALITY[self.config.dataset],
        }


class KVBenchmark(KVRun):
    """The question-after-context protocol ([`PROTOCOL`][rcattr.eval.kv.config.PROTOCOL]): one line per (method
    setting, record), each record's context compressed with its question after it ([`KVRun`][rcattr.eval.kv.runner.KVRun]'s
    parameters)."""

    def load(self) -> Sequence[KVRecord]:
        return load_records(self.config, self.tokenizer)

    @property
    def progress_label(self) -> str:
        return f"kv/{self.config.dataset}"

    def record_key(self, record: KVRecord) -> str:
        return record.id

    def report(self) -> dict[str, Any]:
        """Write `results.json`, `results.md` and the plots from every row on disk; returns the results."""
        labels = [m.label for m in self.methods]
        rows = list(self.done().values())
        results = summarise(rows, labels, self._header())
        self.store.write_report(results, markdown_table(results))
        plot_frontiers(results, self.out / "frontier.png")
        if any(row.get("head_compression") for row in rows):
            plot_head_compression(results, rows, self.out / "head_compression.png")
        return results

    def _measure(self, method: KVMethod, prompt: SplitPrompt) -> _Measured:
        """Prefill `method`'s cache with the context, then answer greedily; timed together."""
        start = time.perf_counter()
        cache = method.prefill(self.model, prompt.context_ids)
        prefill_seconds = time.perf_counter() - start
        compression = method.compression(self.model, cache, prompt.n_context)
        forced = copy.deepcopy(cache)  # the teacher-forced pass starts from the same compressed context
        start = time.perf_counter()
        answer = greedy_answer(self.model, cache, prompt, self.config.answer_tokens)
        return _Measured(cache, forced, answer, compression, prefill_seconds + time.perf_counter() - start)

    def run_record(
        self, record: KVRecord, methods: Sequence[KVMethod], progress: tqdm
    ) -> list[dict[str, Any]]:
        """The reference answer and head outputs of the full cache, then each method's row."""
        prompt = split_prompt(
            self.tokenizer, record.context, f"{INSTRUCTIONS[self.config.dataset]} Question: {record.question}"
        )
        full = self._measure(FullCache(), prompt)  # its answer is the reference g, and it is the "full" row
        reference_heads = teacher_forced(self.model, full.forced, prompt, full.answer).heads
        rows = []
        for method in methods:
            progress.set_postfix_str(method.label)
            measured = full if isinstance(method, FullCache) else self._measure(method, prompt)
            heads = (
                reference_heads
                if measured is full
                else teacher_forced(self.model, measured.forced, prompt, full.answer).heads
            )
            text = self.tokenizer.decode(measured.answer, skip_special_tokens=True).strip()  # type: ignore[attr-defined]
            row: dict[str, Any] = {
                "method": method.label,
                "name": method.name,
                "setting": method.setting,
                "id": record.id,
                "answer": text,
                **rouge(text, record.answers),
                "match": answer_match(text, record.answers),
                "ver": value_error_rate(reference_heads, heads),
                "compression_ratio": measured.compression.ratio,
                "bytes_ratio": measured.compression.bytes_ratio,
                "seconds": measured.seconds,
                "context_tokens": prompt.n_context,
                "reference_tokens": int(full.answer.shape[0]),
            }
            if isinstance(measured.cache, RCKVCache):
                row.update(_head_statistics(measured.cache))
            rows.append(row)
            progress.update()
        return rows


def _head_statistics(cache: RCKVCache) -> dict[str, list[list[float]]]:
    """Per evicting layer and key head: the share of the context evicted, and the head's mean RC score
    (E[Z] of the context tokens against the window, the quantity its threshold is `c` times)."""
    compression, score = [], []
    for eviction in cache.evictions:
        if eviction is None:
            continue
        scores = eviction.scores[0]  # [Hkv, n]: inf for the window, nan for padding
        finite = torch.isfinite(scores)
        score.append((scores.nan_to_num(0.0, 0.0, 0.0).sum(-1) / finite.sum(-1).clamp_min(1)).tolist())
        compression.append(eviction.compression_ratio[0].tolist())
    return {"head_compression": compression, "head_score": score}
