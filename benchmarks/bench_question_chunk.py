"""What keeping the question whole changes (issue 72's default, ``EvictionPolicy(chunks="prompt")``) on the KV
benchmark's question-after-context protocol: RCKVCache at ``c`` (the default recipe) with the question compressed
as in rcattr 0.1 (``chunks="every"``) and kept whole, on the first ``--limit`` SQuAD v2 dev questions; VER against
the full cache and answer match, with paired bootstrap intervals (kept minus compressed).

    python benchmarks/bench_question_chunk.py --limit 30 --c 1.0
"""

from __future__ import annotations

import argparse
import copy

import torch
from transformers import DynamicCache

from rcattr.eval.common.metrics import paired_mean_difference
from rcattr.eval.kv.data import load_squad
from rcattr.eval.kv.methods import FullCache, RCMethod
from rcattr.eval.kv.metrics import answer_match, value_error_rate
from rcattr.eval.kv.protocol import greedy_answer, teacher_forced
from rcattr.eval.kv.variants import DEFAULT_RECIPE
from rcattr.kvcache.context.prompt import split_prompt
from rcattr.runtime.models import load_model


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--c", type=float, default=1.0)
    args = parser.parse_args()
    torch.set_grad_enabled(False)
    model, tokenizer = load_model()
    settings = {chunks: RCMethod(args.c, 16, DEFAULT_RECIPE, chunks=chunks) for chunks in ("every", "prompt")}
    ver: dict[str, list[float]] = {chunks: [] for chunks in settings}
    match: dict[str, list[float]] = {chunks: [] for chunks in settings}
    for record in load_squad(args.limit):
        prompt = split_prompt(
            tokenizer, record.context, f"Answer in a few words. Question: {record.question}"
        )
        full = FullCache().prefill(model, prompt.context_ids)
        assert isinstance(full, DynamicCache)
        reference = greedy_answer(model, copy.deepcopy(full), prompt, 32)
        heads = teacher_forced(model, full, prompt, reference).heads
        for chunks, method in settings.items():
            cache = method.prefill(model, prompt.context_ids)
            answer = greedy_answer(model, copy.deepcopy(cache), prompt, 32)
            ver[chunks].append(value_error_rate(heads, teacher_forced(model, cache, prompt, reference).heads))
            text = tokenizer.decode(answer, skip_special_tokens=True)
            match[chunks].append(float(answer_match(text, record.answers)))
    print(
        f"RCKVCache c={args.c:g} ({DEFAULT_RECIPE}), {args.limit} SQuAD v2 questions, question after the context"
    )
    print("| question | VER | answer match |\n|---|---:|---:|")
    for chunks in settings:
        name = "compressed (0.1)" if chunks == "every" else "kept whole (0.2)"
        print(
            f"| {name} | {sum(ver[chunks]) / len(ver[chunks]):.4f} | {sum(match[chunks]) / len(match[chunks]):.3f} |"
        )
    for metric, values in (("VER", ver), ("answer match", match)):
        value, low, high = paired_mean_difference(values["prompt"], values["every"])
        print(f"kept minus compressed, {metric}: {value:+.4f} [{low:+.4f}, {high:+.4f}]")


if __name__ == "__main__":
    main()
