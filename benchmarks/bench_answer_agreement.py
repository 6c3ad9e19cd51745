"""How often RCKVCache leaves the model's answer unchanged, as ``rcattr compress`` measures it, per ``c``.

For the first answerable question of each of the first ``--limit`` SQuAD v2 dev paragraphs, the
prompt (paragraph, then question, in the chat template; the whole prompt is compressed, as in
``rcattr compress``) is answered greedily with the full cache and with ``RCKVCache(model, c)``. Prints,
per ``c``: the share of prompt entries evicted, the share of answers identical token for token, and
the mean share of token positions that agree. This is how the command-line guide's ``rcattr compress`` example
chose its ``c``.

Usage::

    python benchmarks/bench_answer_agreement.py [--limit 30] [--c 0.1 0.2 0.3 0.5 1.0]
"""

from __future__ import annotations

import argparse
import statistics

from tqdm import tqdm

from rcattr import ContextInput, load_model
from rcattr.cli.compare import compare_generations
from rcattr.eval.kv.data import squad_paragraphs
from rcattr.kvcache import RCKVCache


def questions(limit: int) -> list[ContextInput]:
    """The first answerable question of each of the first ``limit`` paragraphs."""
    found = []
    for paragraph in squad_paragraphs():
        answerable = [qa for qa in paragraph["qas"] if not qa["is_impossible"]]
        if answerable:
            found.append(ContextInput(paragraph["context"], answerable[0]["question"]))
        if len(found) == limit:
            break
    return found


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit", type=int, default=30, help="questions (default 30)")
    parser.add_argument("--c", type=float, nargs="+", default=[0.1, 0.2, 0.3, 0.5, 1.0], help="thresholds")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    args = parser.parse_args()
    model, tokenizer = load_model()
    rows: dict[float, list[tuple[float, bool, float]]] = {c: [] for c in args.c}
    for inp in tqdm(questions(args.limit), desc="questions"):
        for c in args.c:
            cache = RCKVCache(model, c=c)
            compared = compare_generations(model, tokenizer, inp, cache, args.max_new_tokens)
            agreement = compared.agreement
            rows[c].append((cache.compression_ratio, agreement.first_difference is None, agreement.agreement))
    print(
        f"SmolLM2-135M-Instruct, {args.limit} SQuAD v2 questions, greedy, up to {args.max_new_tokens} tokens"
    )
    print("| c | prompt entries evicted | identical answers | token positions agreeing |")
    print("|---:|---:|---:|---:|")
    for c, found in rows.items():
        evicted, identical, agreeing = (statistics.mean(column) for column in zip(*found, strict=True))
        print(f"| {c:g} | {evicted:.1%} | {identical:.0%} | {agreeing:.0%} |")


if __name__ == "__main__":
    main()
