"""The compress-once protocol of the KV benchmark (`python -m rcattr.eval.kv --protocol once`): where users
compress. Each context ([`rcattr.eval.kv.contexts`][rcattr.eval.kv.contexts]) is prefilled and compressed once, without any
question; every question is then asked of a copy of that cache, the question itself kept whole (RCKVCache's
`chunks="prompt"`). As in the question-after-context protocol, the full cache's greedy answer g is
teacher-forced through every cache for the VER, and each cache's own greedy answer is scored by ROUGE and
answer match. A row is one (method, question); the rows of a context are written together, and the
prefill's time is divided by the full cache's prefill of the same context in the same process
(`prefill_cost`).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from typing import Any

import torch
from tqdm.auto import tqdm
from transformers import Cache

from rcattr.eval.kv.config import INSTRUCTIONS
from rcattr.eval.kv.contexts import KVContext, load_contexts
from rcattr.eval.kv.methods import FullCache, KVMethod
from rcattr.eval.kv.metrics import answer_match, rouge, value_error_rate
from rcattr.eval.kv.once_report import once_markdown, summarise_once
from rcattr.eval.kv.protocol import greedy_answer, teacher_forced
from rcattr.eval.kv.runner import KVRun
from rcattr.kvcache.context.prompt import SplitPrompt, split_prompt

__all__ = ["CompressOnce", "ONCE_PROTOCOL"]

ONCE_PROTOCOL = (
    "each context prefilled and compressed once without any question; every question asked of a copy of that "
    "cache, the question kept whole; the full cache's greedy answer g teacher-forced through every cache for "
    "VER; each cache's own greedy answer scored by ROUGE-1/ROUGE-L F1 and answer match"
)


class CompressOnce(KVRun):
    """The compress-once protocol over [`KVContext`][rcattr.eval.kv.contexts.KVContext] records: one prefill per
    (method, context), one row per (method, question) ([`KVRun`][rcattr.eval.kv.runner.KVRun]'s parameters)."""

    def load(self) -> Sequence[KVContext]:
        def count_tokens(text: str) -> int:
            return len(self.tokenizer.encode(text, add_special_tokens=False))  # type: ignore[attr-defined]

        config = self.config
        return load_contexts(
            config.dataset, count_tokens, config.context_tokens, config.limit, config.questions
        )

    @property
    def progress_label(self) -> str:
        return f"kv-once/{self.config.dataset}"

    def record_key(self, record: KVContext) -> str:
        return record.id

    def done(self) -> dict[tuple[str, str], dict[str, Any]]:
        """The (method label, context id) pairs whose rows are on disk (their last row)."""
        keys = [(method.label, record.id) for record in self.records for method in self.methods]
        return self.store.done(self.ROWS, keys, lambda row: (row["method"], row["context_id"]))

    def rows(self) -> list[dict[str, Any]]:
        contexts = {record.id for record in self.records}
        latest = {
            (row["method"], row["id"]): row
            for row in self.store.rows(self.ROWS)
            if row["context_id"] in contexts
        }
        return list(latest.values())

    def report(self) -> dict[str, Any]:
        """Write `results.json` and `results.md` from every row on disk; returns the results."""
        header = {**self._header(), "protocol": ONCE_PROTOCOL}
        results = summarise_once(self.rows(), [m.label for m in self.methods], header)
        self.store.write_report(results, once_markdown(results))
        return results

    def _prefill(self, method: KVMethod, context_ids: torch.Tensor) -> tuple[Cache, float]:
        start = time.perf_counter()
        cache = method.prefill(self.model, context_ids)
        return cache, time.perf_counter() - start

    def run_record(
        self, record: KVContext, methods: Sequence[KVMethod], progress: tqdm
    ) -> list[dict[str, Any]]:
        """The full cache's reference answers, then every method's rows on `record`'s questions."""
        instruction = INSTRUCTIONS[self.config.dataset]
        prompts = [
            split_prompt(self.tokenizer, q.context, f"{instruction} Question: {q.question}")
            for q in record.questions
        ]
        context_ids = prompts[0].context_ids
        full_cache, full_seconds = self._prefill(FullCache(), context_ids)
        tokens = self.config.answer_tokens
        references = []
        for prompt in prompts:
            answer = greedy_answer(self.model, copy.deepcopy(full_cache), prompt, tokens)
            references.append(
                (answer, teacher_forced(self.model, copy.deepcopy(full_cache), prompt, answer).heads)
            )
        rows = []
        for method in methods:
            progress.set_postfix_str(method.label)
            full = isinstance(method, FullCache)
            cache, seconds = (full_cache, full_seconds) if full else self._prefill(method, context_ids)
            compression = method.compression(self.model, cache, context_ids.shape[1])
            for question, prompt, (reference, reference_heads) in zip(
                record.questions, prompts, references, strict=True
            ):
                rows.append(
                    self._row(method, record, question, prompt, cache, reference, reference_heads)
                    | {
                        "compression_ratio": compression.ratio,
                        "bytes_ratio": compression.bytes_ratio,
                        "prefill_seconds": seconds,
                        "prefill_cost": seconds / full_seconds,
                    }
                )
            progress.update()
        return rows

    def _row(
        self,
        method: KVMethod,
        record: KVContext,
        question: Any,
        prompt: SplitPrompt,
        cache: Cache,
        reference: torch.Tensor,
        reference_heads: torch.Tensor,
    ) -> dict[str, Any]:
        """One question asked of a copy of `cache`: its answer, and `reference` teacher-forced for VER."""
        start = time.perf_counter()
        answer = greedy_answer(self.model, copy.deepcopy(cache), prompt, self.config.answer_tokens)
        seconds = time.perf_counter() - start
        heads = (
            reference_heads
            if isinstance(method, FullCache)
            else teacher_forced(self.model, copy.deepcopy(cache), prompt, reference).heads
        )
        text = self.tokenizer.decode(answer, skip_special_tokens=True).strip()  # type: ignore[attr-defined]
        return {
            "method": method.label,
            "name": method.name,
            "setting": method.setting,
            "id": question.id,
            "context_id": record.id,
            "answer": text,
            **rouge(text, question.answers),
            "match": answer_match(text, question.answers),
            "identical": bool(torch.equal(answer, reference)),
            "ver": value_error_rate(reference_heads, heads),
            "seconds": seconds,
            "context_tokens": prompt.n_context,
            "reference_tokens": int(reference.shape[0]),
        }
