"""The citation benchmark's command line, parsed before torch loads:

    python -m rcattr.eval.citations --out runs/citations

The run itself is [`rcattr.eval.citations.benchmark.CitationRun`][rcattr.eval.citations.benchmark.CitationRun].
"""

from __future__ import annotations

import argparse

from rcattr.eval.common.command import benchmark_parser, stored_main
from rcattr.eval.common.run_args import add_folder_arguments
from rcattr.eval.common.run_store import ShardedRun
from rcattr.options import positive_int

DATASETS = ("quotesum", "verigran")


def _parser() -> argparse.ArgumentParser:
    parser = benchmark_parser(
        "citations",
        "Citation benchmark: per answer sentence of the QuoteSum and Veri-Gran gold answers, the documents "
        "result.citations() cites against the gold labels. The rule (share of the best document, most "
        "sources, least context reliance) is chosen on the dev part (two questions in three) and checked "
        "on the held-back part; precision, recall and F1 with 95%% bootstrap intervals over records.",
    )
    add_folder_arguments(parser, default_out="runs/citations")
    parser.add_argument(
        "--datasets", nargs="+", choices=DATASETS, default=list(DATASETS), help="datasets (default: both)"
    )
    parser.add_argument("--limit", type=positive_int, default=None, help="first N records per dataset")
    parser.add_argument(
        "--max-tokens",
        type=positive_int,
        default=4096,
        help="skip records whose prompt and answer take more tokens (default 4096, as the attribution benchmark)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="the appended sentences' draw and the bootstrap (default 0)"
    )
    return parser


def _run(args: argparse.Namespace) -> ShardedRun:
    from rcattr.eval.citations.benchmark import CitationRun

    return CitationRun(args.out, args.datasets, args.limit, args.model, args.max_tokens, args.seed)


main = stored_main(_parser, _run)
