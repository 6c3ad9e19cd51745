"""`rcattr ask`: questions answered from a context that `rcattr compress --save` compressed and saved."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rcattr.cli.inputs import CommandError

if TYPE_CHECKING:
    from rcattr.kvcache import CompressedContext


def ask(args: argparse.Namespace) -> int:
    """Load the model and the saved context, and print each question's answer."""
    from rcattr.kvcache import CompressedContext
    from rcattr.runtime.models import load_model

    if not Path(args.saved).is_dir():
        raise CommandError(f"{args.saved}: no such folder (save one with rcattr compress --save FOLDER)")
    model, tokenizer = load_model(args.model, verbose=args.verbose)
    with CompressedContext.load(args.saved, model, tokenizer) as context:
        print(describe(context), end="\n\n")
        for question in args.question:
            print(f"Q: {question}\nA: {context.generate(question, args.max_new_tokens).strip()}\n")
    return 0


def describe(context: CompressedContext) -> str:
    """One line: the context's tokens, the share evicted and the bytes held against a full cache's."""
    return (
        f"Context: {context.n_tokens} tokens, {context.compression_ratio:.1%} of its KV entries evicted; the cache "
        f"holds {context.nbytes() / 2**20:.2f} MiB against {context.full_nbytes() / 2**20:.2f} MiB for the full cache"
    )
