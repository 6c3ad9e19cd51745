"""The KV-compression benchmark: RCKVCache against kvpress's presses on SQuAD v2 or QMSum.

    python -m rcattr.eval.kv --dataset squad --limit 20 --out runs/kv-squad

Tasks: SQuAD v2 dev (short paragraphs), QMSum val (1,024-token meeting excerpts), and ``needle``: RULER-style
key-value needles at depths 0.1-0.9 of about 1k, 2k and 4k tokens of SQuAD prose, generated from a seed
(``rcattr.eval.needle``; 60 prompts unless ``--limit``), scored by whether the answer holds the value.

Protocol (the RCStat paper's, on kvpress's question-after-context pipeline): the context is compressed at
prefill; the question follows uncompressed; greedy decoding with the full cache gives the reference answer
g; each cache is then teacher-forced on g for the **value error rate** (VER: last layer, per head,
docs/design.md §3), and decodes greedily on its own for **ROUGE-1/ROUGE-L F1** against the gold answers and an **answer
match** (a gold answer, or the needle's value, standing in the answer as whole words). Compression is
measured on each cache after the prefill (entries evicted or masked, and bytes held). kvpress presses run
at each ``--ratios`` value; RCKVCache runs at each ``--c`` × ``--window`` and reaches its own ratio.

Each (method, record) result is one line of ``OUT/records.jsonl``, written as it goes, so an interrupted
run resumes where it stopped; ``results.json``, ``results.md`` and the plots are rewritten at the end from
every line on disk. ``--shard I/N`` and ``accelerate launch`` split the records among processes, each
writing ``records.shard-I-of-N.jsonl``; the report merges them. kvpress pins transformers < 5.3: the
presses run in ``.venv-kvpress`` (``make setup-kvpress``); RCKVCache alone runs in any rcattr environment.
"""

from __future__ import annotations

import argparse
import copy
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from tqdm.auto import tqdm
from transformers import Cache, PreTrainedModel

from rcattr._typing import TokenizerLike
from rcattr.eval.datasets import DATA_HELP
from rcattr.eval.kv_data import KV_DATASETS, KVRecord, load_qmsum, load_squad
from rcattr.eval.kv_methods import (
    DEFAULT_RECIPE,
    PRESSES,
    RC_VARIANT_WORDS,
    Compression,
    FullCache,
    KVMethod,
    PressMethod,
    RCMethod,
    import_kvpress,
    rc_options,
)
from rcattr.eval.kv_metrics import answer_match, rouge, value_error_rate
from rcattr.eval.kv_protocol import SplitPrompt, greedy_answer, split_prompt, teacher_forced
from rcattr.eval.kv_report import markdown_table, plot_frontiers, plot_head_compression, summarise
from rcattr.eval.needle import load_needle
from rcattr.eval.runs import add_run_arguments, check_methods, claim_run_folder, load_run_model, parse_methods
from rcattr.eval.sharding import Processes, Shard, read_rows, run_sharded
from rcattr.kvcache import RCKVCache

METHODS = ("rc", *PRESSES)
INSTRUCTIONS = {
    "squad": "Answer in a few words.",
    "qmsum": "Answer in a few sentences.",
    "needle": "Answer in a few words.",
}
DEFAULT_MAX_NEW_TOKENS = {"squad": 32, "qmsum": 64, "needle": 32}  # needle answers restate the question
QUALITY = {"squad": "rougeL", "qmsum": "rougeL", "needle": "match"}  # the task's answer-quality metric
RESUMABLE_CHANGES = ("methods", "ratios", "c", "window", "rc_variants", "limit")  # may differ when resuming
PROTOCOL = (
    "context compressed at prefill, question after it uncompressed (kvpress's pipeline); the full cache's "
    "greedy answer g teacher-forced through every cache for VER (last layer, per head, at the positions "
    "predicting g); each cache's own greedy answer scored by ROUGE-1/ROUGE-L F1 against the gold answers "
    "and by answer match (a gold answer standing in it as whole words)"
)


@dataclass(frozen=True)
class KVBenchmarkConfig:
    """What a run measures; a resumed run must have the same (but for :data:`RESUMABLE_CHANGES`)."""

    dataset: str
    methods: tuple[str, ...] = METHODS
    ratios: tuple[float, ...] = (0.4, 0.5, 0.6, 0.7, 0.8)
    c: tuple[float, ...] = (0.2, 0.7, 0.8, 1.0, 1.2, 1.3, 1.8)
    window: tuple[int, ...] = (8, 16)
    rc_variants: tuple[str, ...] = (DEFAULT_RECIPE,)
    limit: int | None = None
    context_tokens: int = 1024  # the QMSum excerpt's budget
    max_new_tokens: int | None = None  # default per dataset
    model: str | None = None

    def __post_init__(self) -> None:
        if self.dataset not in KV_DATASETS:
            raise ValueError(f"unknown dataset {self.dataset!r}; choose from {', '.join(KV_DATASETS)}")
        check_methods(self.methods, METHODS)
        for variant in self.rc_variants:
            rc_options(variant)

    @property
    def answer_tokens(self) -> int:
        return self.max_new_tokens or DEFAULT_MAX_NEW_TOKENS[self.dataset]

    def kv_methods(self) -> list[KVMethod]:
        """The full-cache reference, then every method at every setting."""
        methods: list[KVMethod] = [FullCache()]
        for name in self.methods:
            if name == "rc":
                methods += [
                    RCMethod(c, window, variant)
                    for variant in self.rc_variants
                    for window in self.window
                    for c in self.c
                ]
            else:
                methods += [PressMethod(name, ratio) for ratio in self.ratios]
        return methods


def load_records(config: KVBenchmarkConfig, tokenizer: TokenizerLike) -> list[KVRecord]:
    if config.dataset == "squad":
        return load_squad(config.limit)

    def count_tokens(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False))  # type: ignore[attr-defined]

    if config.dataset == "needle":
        return load_needle(count_tokens, config.limit)
    return load_qmsum(count_tokens, config.context_tokens, config.limit)


@dataclass(frozen=True)
class _Measured:
    """One method on one record: its cache after answering, a copy from before, the answer ``[T]``."""

    cache: Cache
    forced: Cache
    answer: torch.Tensor
    compression: Compression
    seconds: float


class KVBenchmark:
    """Runs every method of ``config`` on every record (or on ``shard`` of the records), appending one line
    per (method, record) to a file in ``out``."""

    def __init__(
        self,
        config: KVBenchmarkConfig,
        model: PreTrainedModel,
        tokenizer: TokenizerLike,
        out: str | Path,
        shard: Shard | None = None,
    ) -> None:
        self.config, self.model, self.tokenizer = config, model, tokenizer
        self.shard = shard or Shard()
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        claim_run_folder(self.out, asdict(self.config), RESUMABLE_CHANGES)
        self.records = load_records(config, tokenizer)
        self.methods = config.kv_methods()

    def done(self) -> dict[tuple[str, str], dict[str, Any]]:
        """Every result of this run on disk (every shard's), by (method label, record id), in the order of
        the records and then of the methods."""
        rows = {(row["method"], row["id"]): row for row in read_rows(self.out, "records")}
        keys = [(method.label, record.id) for record in self.records for method in self.methods]
        return {key: rows[key] for key in keys if key in rows}

    def _todo(self, records: Sequence[KVRecord]) -> list[list[KVMethod]]:
        done = self.done()
        return [[m for m in self.methods if (m.label, r.id) not in done] for r in records]

    def missing(self) -> int:
        """How many (method, record) runs are not on disk yet (all shards)."""
        return sum(map(len, self._todo(self.records)))

    def run(self) -> dict[str, Any]:
        """Run what is not on disk yet, then write ``results.json``, ``results.md`` and the plots."""
        self.compute()
        return self.report()

    def compute(self) -> None:
        """Run this shard's records that are not on disk yet."""
        records = self.shard.take(self.records)
        todo = self._todo(records)
        if not any(todo):
            return
        progress = tqdm(
            total=sum(map(len, todo)), desc=f"kv/{self.config.dataset}{self.shard.label}", unit="run"
        )
        with open(self.shard.path(self.out, "records"), "a") as sink, progress, torch.no_grad():
            for record, methods in zip(records, todo, strict=True):
                if methods:
                    for row in self._run_record(record, methods, progress):
                        sink.write(json.dumps(row) + "\n")
                        sink.flush()

    def report(self) -> dict[str, Any]:
        """Write ``results.json``, ``results.md`` and the plots from every row on disk; returns the results."""
        labels = [m.label for m in self.methods]
        rows = list(self.done().values())
        results = summarise(rows, labels, self._header())
        (self.out / "results.json").write_text(json.dumps(results, indent=2))
        (self.out / "results.md").write_text(markdown_table(results))
        plot_frontiers(results, self.out / "frontier.png")
        if any(row.get("head_compression") for row in rows):
            plot_head_compression(results, rows, self.out / "head_compression.png")
        return results

    def _header(self) -> dict[str, Any]:
        return {
            "config": asdict(self.config),
            "model": self.model.config.name_or_path,
            "protocol": PROTOCOL,
            "question_format": f"{INSTRUCTIONS[self.config.dataset]} Question: {{question}}",
            "max_new_tokens": self.config.answer_tokens,
            "quality": QUALITY[self.config.dataset],
        }

    def _measure(self, method: KVMethod, prompt: SplitPrompt) -> _Measured:
        """Prefill ``method``'s cache with the context, then answer greedily; timed together."""
        start = time.perf_counter()
        cache = method.prefill(self.model, prompt.context_ids)
        prefill_seconds = time.perf_counter() - start
        compression = method.compression(self.model, cache, prompt.n_context)
        forced = copy.deepcopy(cache)  # the teacher-forced pass starts from the same compressed context
        start = time.perf_counter()
        answer = greedy_answer(self.model, cache, prompt, self.config.answer_tokens)
        return _Measured(cache, forced, answer, compression, prefill_seconds + time.perf_counter() - start)

    def _run_record(
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
    (E[Z] of the context tokens against the window, the quantity its threshold is ``c`` times)."""
    compression, score = [], []
    for eviction in cache.evictions:
        if eviction is None:
            continue
        scores = eviction.scores[0]  # [Hkv, n]: inf for the window, nan for padding
        finite = torch.isfinite(scores)
        score.append((scores.nan_to_num(0.0, 0.0, 0.0).sum(-1) / finite.sum(-1).clamp_min(1)).tolist())
        compression.append(eviction.compression_ratio[0].tolist())
    return {"head_compression": compression, "head_score": score}


def _list_of(kind: type) -> Callable[[str], tuple[Any, ...]]:
    """An argparse type for comma-separated values of ``kind``."""

    def parse(text: str) -> tuple[Any, ...]:
        try:
            return tuple(kind(item) for item in text.split(",") if item.strip())
        except ValueError as error:
            raise argparse.ArgumentTypeError(
                f"want comma-separated {kind.__name__}s, got {text!r}"
            ) from error

    return parse


def _parser() -> argparse.ArgumentParser:
    defaults = KVBenchmarkConfig("squad")
    parser = argparse.ArgumentParser(
        prog="python -m rcattr.eval.kv",
        description=__doc__,
        epilog=DATA_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--dataset", required=True, choices=KV_DATASETS)
    add_run_arguments(parser, METHODS)
    for name, kind, help in (
        ("--ratios", float, "press compression ratios"),
        ("--c", float, "RCKVCache thresholds"),
        ("--window", int, "RCKVCache windows"),
    ):
        default = getattr(defaults, name[2:])
        parser.add_argument(
            name,
            type=_list_of(kind),
            default=default,
            help=f"{help} (default {','.join(map(str, default))})",
        )
    parser.add_argument(
        "--rc-variants",
        type=_list_of(str),
        default=defaults.rc_variants,
        help="RCKVCache scoring variants, each run at every --c and --window: 'paper' (the paper's recipe), or "
        f"changes to it joined by '+' from {', '.join(RC_VARIANT_WORDS)}, sinks=N "
        f"(e.g. paper,value_norm,sinks=4+model_budget; default {','.join(defaults.rc_variants)})",
    )
    parser.add_argument(
        "--context-tokens",
        type=int,
        default=defaults.context_tokens,
        help="QMSum: token budget of the meeting excerpt around the gold turns (default 1024)",
    )
    parser.add_argument(
        "--max-new-tokens", type=int, help=f"answer length limit (default: {DEFAULT_MAX_NEW_TOKENS})"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        config = KVBenchmarkConfig(
            dataset=args.dataset,
            methods=parse_methods(args.methods, METHODS),
            ratios=args.ratios,
            c=args.c,
            window=args.window,
            rc_variants=args.rc_variants,
            limit=args.limit,
            context_tokens=args.context_tokens,
            max_new_tokens=args.max_new_tokens,
            model=args.model,
        )
    except ValueError as error:
        raise SystemExit(str(error)) from error
    if any(name in PRESSES for name in config.methods):
        try:
            import_kvpress()  # fail before loading anything when the presses cannot run here
        except ImportError as error:
            raise SystemExit(str(error)) from error
    processes = Processes.start(args.shard)
    model, tokenizer = load_run_model(config.model, args.device_map, processes)
    results = run_sharded(
        KVBenchmark(config, model, tokenizer, args.out, processes.shard), processes, args.report_only
    )
    if results is not None:
        print(markdown_table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
