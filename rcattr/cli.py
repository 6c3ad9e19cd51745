"""Command line: ``rcattr demo`` (or ``python -m rcattr demo``)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rcattr",
        description="Explain and compress what language models do with their context, from the statistics "
        "of raw attention logits (RCStat).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="answer a question over a few documents and show which document the answer came from",
        description="Answer a question over documents with the model, then score each document's share of "
        "the answer by relative contextualization on the top-k RC heads.",
    )
    demo.add_argument(
        "--model",
        help="an offline packaged model (SmolLM2-135M-Instruct, the default, or gemma-3-270m) or any "
        "transformers causal LM name or path",
    )
    demo.add_argument(
        "--document",
        action="append",
        metavar="TEXT",
        help="a context document (repeatable; default: three built-in documents)",
    )
    demo.add_argument("--question", help="the question (default: a built-in one)")
    demo.add_argument("--top-k", type=int, default=20, help="heads used for the document scores (default 20)")
    demo.add_argument("--max-new-tokens", type=int, default=48, help="answer length limit (default 48)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "demo":
        from rcattr.demo import EXAMPLE_DOCUMENTS, EXAMPLE_QUESTION, explain, render
        from rcattr.models import load_model

        documents = args.document or list(EXAMPLE_DOCUMENTS)
        question = args.question or EXAMPLE_QUESTION
        if args.top_k < 1:
            raise SystemExit(f"--top-k must be at least 1, got {args.top_k}")
        model, tokenizer = load_model(args.model)
        result = explain(
            model, tokenizer, documents, question, top_k=args.top_k, max_new_tokens=args.max_new_tokens
        )
        print(render(result, documents, question))
    return 0


if __name__ == "__main__":
    sys.exit(main())
