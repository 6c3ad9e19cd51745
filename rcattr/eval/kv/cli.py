"""The KV-compression benchmark: RCKVCache against kvpress's presses on SQuAD v2 or QMSum.

    python -m rcattr.eval.kv --dataset squad --limit 20 --out runs/kv-squad

Tasks: SQuAD v2 dev (short paragraphs), QMSum val (1,024-token meeting excerpts), and `needle`: RULER-style
key-value needles at depths 0.1-0.9 of about 1k, 2k and 4k tokens of SQuAD prose, generated from a seed
(`rcattr.eval.kv.needle`; 60 prompts unless `--limit`), scored by whether the answer holds the value.

Protocol (the RCStat paper's, on kvpress's question-after-context pipeline): the context is compressed at
prefill; the question follows uncompressed; greedy decoding with the full cache gives the reference answer
g; each cache is then teacher-forced on g for the **value error rate** (VER: last layer, per head,
docs/design.md §3), and decodes greedily on its own for **ROUGE-1/ROUGE-L F1** against the gold answers and an **answer
match** (a gold answer, or the needle's value, standing in the answer as whole words). Compression is
measured on each cache after the prefill (entries evicted or masked, and bytes held). kvpress presses run
at each `--ratios` value; RCKVCache runs at each `--c` × `--window` and reaches its own ratio.

`--protocol once` (where users compress): each context (SQuAD v2 paragraphs of one article joined to
`--context-tokens`, a haystack with several needles, or one QMSum meeting around several queries' gold
turns) is compressed once without any question, and each of its `--questions` is asked of a copy of that
cache, the question kept whole; rows are (method, question), and `prefill × full` is the compressing
prefill's time over the full cache's (`rcattr.eval.kv.once`). `--rc-ratios` runs RCKVCache at set shares
(`RCKVCache(model, ratio=r)`) beside the presses' `--ratios`; the variants `max_pool` and `replay` (a replay
of the context as the window, `rcattr.kvcache.replay`) are the levers measured there.

Each (method, record) result is one line of `OUT/records.jsonl`, written as it goes, so an interrupted
run resumes where it stopped; `results.json`, `results.md` and the plots are rewritten at the end from
every line on disk. `--shard I/N` and `accelerate launch` split the records among processes, each
writing `records.shard-I-of-N.jsonl`; the report merges them. kvpress pins transformers < 5.3: the
presses run in `.venv-kvpress` (`make setup-kvpress`); RCKVCache alone runs in any rcattr environment.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from rcattr.eval.common.command import benchmark_parser, run_settings
from rcattr.eval.common.run_args import add_run_arguments, parse_methods, run_command
from rcattr.eval.kv.config import (
    DEFAULT_MAX_NEW_TOKENS,
    METHODS,
    PROTOCOLS,
    KVBenchmarkConfig,
)
from rcattr.eval.kv.contexts import DEFAULT_QUESTIONS
from rcattr.eval.kv.data import KV_DATASETS
from rcattr.eval.kv.variants import RC_VARIANT_WORDS
from rcattr.options import positive_int

# the module's docstring is the command's --help; the pieces: settings (kv_config), caches (kv_methods) and
# methods by name (kv_registry), the runner (kv_runner), the report (kv_results, kv_tables, kv_plots)
__all__ = ["main"]


def _list_of(kind: type) -> Callable[[str], tuple[Any, ...]]:
    """An argparse type for comma-separated values of `kind`."""

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
    parser = benchmark_parser("kv", __doc__ or "", as_written=True)
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
        f"changes to it joined by '+' from {', '.join(RC_VARIANT_WORDS)}, sinks=N, chunk=N (the context "
        "prefilled N tokens at a time, rcattr.kvcache.chunked_prefill) "
        f"(e.g. paper,value_norm,sinks=4+model_budget; default {','.join(defaults.rc_variants)})",
    )
    parser.add_argument(
        "--context-tokens",
        type=positive_int,
        default=defaults.context_tokens,
        help="QMSum: token budget of the meeting excerpt around the gold turns (default 1024)",
    )
    parser.add_argument(
        "--max-new-tokens", type=positive_int, help=f"answer length limit (default: {DEFAULT_MAX_NEW_TOKENS})"
    )
    parser.add_argument(
        "--protocol",
        choices=PROTOCOLS,
        default=defaults.protocol,
        help="question: each question right after its own context, compressed at prefill (the paper's); once: "
        "each context compressed once without any question, every question asked of a copy of that cache, "
        "the question kept whole (--context-tokens sets every context's length; default question)",
    )
    parser.add_argument(
        "--questions",
        type=positive_int,
        help="--protocol once: questions per context, spread over it (needles per needle context; default "
        f"{', '.join(f'{k} {v}' for k, v in DEFAULT_QUESTIONS.items())})",
    )
    parser.add_argument(
        "--rc-ratios",
        type=_list_of(float),
        default=defaults.rc_ratios,
        help="RCKVCache at these shares evicted too (RCKVCache(model, ratio=r)), each variant and window "
        "(e.g. 0.5,0.75; default none)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark as the command line `argv` says; returns the exit status."""
    args = _parser().parse_args(argv)
    config = run_settings(KVBenchmarkConfig, args, methods=parse_methods(args.methods, METHODS))
    from rcattr.eval.kv.methods import require_kvpress
    from rcattr.eval.kv.once import CompressOnce
    from rcattr.eval.kv.once_report import once_markdown
    from rcattr.eval.kv.registry import default_kv_methods
    from rcattr.eval.kv.runner import KVBenchmark
    from rcattr.eval.kv.tables import markdown_table

    methods = default_kv_methods()
    if any(methods[name].needs_kvpress for name in config.methods):
        require_kvpress()
    return run_command(
        args,
        config.model,
        lambda model, tokenizer, shard: (CompressOnce if config.protocol == "once" else KVBenchmark)(
            config, model, tokenizer, args.out, shard, methods=methods
        ),
        once_markdown if config.protocol == "once" else markdown_table,
    )
