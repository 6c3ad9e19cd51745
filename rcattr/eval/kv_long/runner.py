"""The long-generation benchmark's protocol and runner.

Protocol: each cache prefills the context (compressed to the budget), reads the question, then is fed one
token at a time, as in generation, so that decode-time eviction runs where it would: first the record's
answer prefix (teacher-forced), then

* **teacher-forced** on the full cache's greedy answer g: at every token of g, the KL divergence
  KL(p_full ‖ p_cache) of the next-token distributions and whether their top-1 tokens agree, and the bytes
  the cache holds after each step (its peak, and its course);
* **greedy** on its own: the answer, scored by ROUGE-L F1 against the gold answer (QMSum) or by whether the
  needle's value stands in it (needle), and its decoding speed (answer tokens per second, evictions included).

[`LongGenerationBenchmark`][rcattr.eval.kv_long.runner.LongGenerationBenchmark] writes one line per (method, record) to `OUT/records.jsonl` and resumes
from it; [`report`][rcattr.eval.kv_long.runner.LongGenerationBenchmark.report] writes the table, `results.json` and the plot.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm
from transformers import PreTrainedModel

from rcattr.eval.common.run_store import MethodRecordRun
from rcattr.eval.common.sharding import Shard
from rcattr.eval.kv.metrics import answer_match, rouge
from rcattr.eval.kv.protocol import feed, stop_ids
from rcattr.eval.kv_long.config import RESUMABLE_CHANGES, LongBenchmarkConfig
from rcattr.eval.kv_long.data import LongRecord, load_needle_prefixed, load_qmsum_general
from rcattr.eval.kv_long.methods import Decoder, LongMethod, long_methods
from rcattr.eval.kv_long.report import BYTES_EVERY, plot_bytes_held, summarise_long, table_long
from rcattr.kvcache import cache_nbytes
from rcattr.kvcache.context.prompt import SplitPrompt, split_prompt
from rcattr.protocols import TokenizerLike

INSTRUCTION = {"qmsum": "Answer in detail.", "needle": "Answer in a few words."}


@dataclass(frozen=True)
class Decoded:
    """One cache's answer `[T]` with the next-token log-probabilities `[T, vocab]` before each of its
    tokens, the bytes held after every step from the question on, and the seconds the answer took."""

    tokens: torch.Tensor
    log_probs: torch.Tensor
    nbytes: list[int]
    seconds: float


@torch.no_grad()
def decode(
    model: PreTrainedModel,
    decoder: Decoder,
    prompt: SplitPrompt,
    prefix: torch.Tensor,
    max_new_tokens: int,
    forced: torch.Tensor | None = None,
) -> Decoded:
    """Question, then `prefix [P]` and the answer one token at a time through `decoder`'s cache: greedy
    until a stop token or `max_new_tokens`, or `forced [T]` (teacher-forced)."""
    cache, position = decoder.cache, prompt.n_context
    with decoder.decoding():
        logits = feed(model, cache, prompt.question_ids, position)[-1]
        position += prompt.question_ids.shape[1]
        nbytes = [cache_nbytes(cache)]
        for token in prefix.tolist():
            logits = feed(model, cache, torch.tensor([[token]]), position)[-1]
            position += 1
            nbytes.append(cache_nbytes(cache))
        stop, limit = stop_ids(model), max_new_tokens if forced is None else forced.shape[0]
        tokens: list[int] = []
        log_probs = []
        start = time.perf_counter()
        while True:
            log_probs.append(logits.float().log_softmax(-1))
            tokens.append(int(logits.argmax()) if forced is None else int(forced[len(tokens)]))
            if len(tokens) == limit or (forced is None and tokens[-1] in stop):
                break
            logits = feed(model, cache, torch.tensor([tokens[-1:]]), position)[-1]
            position += 1
            nbytes.append(cache_nbytes(cache))
        seconds = time.perf_counter() - start
    return Decoded(torch.tensor(tokens), torch.stack(log_probs), nbytes, seconds)


def divergence(reference: torch.Tensor, log_probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`[T]` KL(reference ‖ cache) in nats and `[T]` top-1 agreement of `[T, vocab]` log-probabilities."""
    kl = (reference.exp() * (reference - log_probs)).sum(-1).clamp_min(0.0)
    return kl, (reference.argmax(-1) == log_probs.argmax(-1)).float()


class LongGenerationBenchmark(MethodRecordRun):
    """Runs every method of `config` on every record of its task (or `shard` of them), one line per
    (method, record) in `out/records.jsonl`.

    Parameters
    ----------
    config : LongBenchmarkConfig
        What the run measures.
    model, tokenizer
        The model whose cache is compressed, and its tokenizer.
    out : str or Path
        The run folder; a run already there is resumed (its settings must match `config`).
    shard : Shard, optional
        The records this process runs. Default: all of them.
    """

    def __init__(
        self,
        config: LongBenchmarkConfig,
        model: PreTrainedModel,
        tokenizer: TokenizerLike,
        out: str | Path,
        shard: Shard | None = None,
    ) -> None:
        super().__init__(out, asdict(config), RESUMABLE_CHANGES, shard=shard)
        self.config, self.model, self.tokenizer = config, model, tokenizer
        self.methods: list[LongMethod] = [
            long_methods()[name] for name in dict.fromkeys(("full", *config.methods))
        ]
        self.records = self._load()

    def _count_tokens(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))  # type: ignore[attr-defined]

    def _load(self) -> list[LongRecord]:
        if self.config.task == "qmsum":
            return load_qmsum_general(self._count_tokens, self.config.context_tokens, self.config.limit)
        return load_needle_prefixed(self._count_tokens, self.config.limit, self.config.prefix_tokens)

    @property
    def progress_label(self) -> str:
        return f"kv-long/{self.config.task}"

    def record_key(self, record: LongRecord) -> str:
        return record.record.id

    def report(self) -> dict[str, Any]:
        rows = list(self.done().values())
        results = summarise_long(rows, [m.label for m in self.methods], self._header())
        self.store.write_report(results, table_long(results))
        plot_bytes_held(results, self.out / "bytes_held.png")
        return results

    def _header(self) -> dict[str, Any]:
        budget = self.config.budget
        return {
            "config": asdict(self.config),
            "model": self.model.config.name_or_path,
            "max_new_tokens": self.config.answer_tokens,
            "quality": "rougeL" if self.config.task == "qmsum" else "match",
            "budget": f"{budget.tokens} entries per key head, evicting every {budget.every} tokens",
        }

    def run_record(
        self, item: LongRecord, methods: Sequence[LongMethod], progress: tqdm
    ) -> list[dict[str, Any]]:
        """The full cache's greedy answer (the reference), then each method's rows."""
        record, config, model = item.record, self.config, self.model
        prompt = split_prompt(
            self.tokenizer, record.context, f"{INSTRUCTION[config.task]} Question: {record.question}"
        )
        prefix = torch.tensor(self.tokenizer.encode(item.prefix, add_special_tokens=False), dtype=torch.long)  # type: ignore[attr-defined]

        def start(method: LongMethod) -> Decoder:
            return method.start(model, prompt.context_ids, config.budget)

        full = decode(model, start(long_methods()["full"]), prompt, prefix, config.answer_tokens)
        rows = []
        for method in methods:
            progress.set_postfix_str(method.label)
            if method.name == "full":
                forced, greedy = full, full
            else:
                forced = decode(model, start(method), prompt, prefix, config.answer_tokens, full.tokens)
                greedy = decode(model, start(method), prompt, prefix, config.answer_tokens)
            kl, top1 = divergence(full.log_probs, forced.log_probs)
            text = self.tokenizer.decode(greedy.tokens, skip_special_tokens=True).strip()  # type: ignore[attr-defined]
            quality = (
                rouge(text, record.answers)["rougeL"]
                if config.task == "qmsum"
                else answer_match(text, record.answers)
            )
            rows.append(
                {
                    "method": method.label,
                    "id": record.id,
                    "answer": text,
                    "quality": quality,
                    "kl": float(kl.mean()),
                    "top1": float(top1.mean()),
                    "peak_bytes": max(forced.nbytes),
                    "full_peak_bytes": max(full.nbytes),
                    "nbytes": forced.nbytes[::BYTES_EVERY],
                    "tokens_per_second": greedy.tokens.shape[0] / greedy.seconds,
                    "answer_tokens": int(greedy.tokens.shape[0]),
                    "reference_tokens": int(full.tokens.shape[0]),
                    "prefix_tokens": int(prefix.shape[0]),
                    "context_tokens": prompt.n_context,
                }
            )
            progress.update()
        return rows
