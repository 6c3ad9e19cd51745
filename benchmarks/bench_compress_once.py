"""Compress a context once, then ask it several questions from copies of the compressed cache.

Each context is consecutive paragraphs of one SQuAD v2 dev article, joined with blank lines, up to
``--context-tokens`` tokens; it gets ``--questions`` answerable questions from different paragraphs (the
first, ..., the last paragraph's first answerable question). The prompt is the KV benchmark's
(:func:`rcattr.kvcache.context.prompt.split_prompt`: one user turn of the chat template, the context, then "Answer
in a few words. Question: ..."), cut after the context: every method answers the same ids, the context
prefix then the question suffix. Every answer is greedy, up to ``--max-new-tokens`` tokens, batch size 1:

* ``full``: ``model.generate`` with transformers' ``DynamicCache`` on the whole prompt (the reference);
* ``full_once``: a ``DynamicCache`` prefilled with the context alone, deep-copied per question (prefix reuse
  without compression: it separates what the reuse saves from what the compression changes);
* ``with_question``: ``RCKVCache(model, c)`` on the whole prompt, the question in it when it compresses
  (the KV benchmark's protocol);
* ``once``: ``RCKVCache(model, c)`` prefilled with the context alone (one forward, compressed before any
  question is known), then per question ``copy.deepcopy(cache)`` and ``model.generate`` on the whole prompt
  with the copy, which feeds only the uncached question tokens (a multi-token chunk, which the copy
  compresses too; the context's kept entries stay).

Prints, per ``c``, the share of prompt entries evicted, the share of answers identical to the full
cache's token for token, the share with a gold answer in them (whole words, case ignored:
:func:`rcattr.eval.kv.metrics.answer_match`) and the seconds per question; then the cost of compressing
once (prefill, deepcopy, answer from the copy) against ``full``'s seconds per question, measured in the
same run, and the bytes the compressed context holds against the full cache's. The per-question rows
go to ``--out`` as JSON.

Usage::

    python benchmarks/bench_compress_once.py [--contexts 10] [--questions 3] [--context-tokens 2400] \\
        [--c 1.0 0.5] [--max-new-tokens 32] [--out docs/records/compress_once/rows.json]
    python benchmarks/bench_compress_once.py --report docs/records/compress_once/rows.json  # print again
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm
from transformers import DynamicCache, PreTrainedModel
from transformers.cache_utils import Cache

from rcattr import load_model
from rcattr.eval.common.metrics import paired_difference
from rcattr.eval.kv.config import INSTRUCTIONS
from rcattr.eval.kv.data import squad_articles
from rcattr.eval.kv.metrics import answer_match
from rcattr.kvcache import RCKVCache, cache_argument
from rcattr.kvcache.context.prompt import split_prompt
from rcattr.protocols import TokenizerLike


@dataclass(frozen=True)
class Question:
    """A question about a context, its gold answers, and the paragraph of the context it comes from."""

    id: str
    question: str
    answers: tuple[str, ...]
    paragraph: int


@dataclass(frozen=True)
class Context:
    """Consecutive paragraphs of one article and questions from different ones of them."""

    title: str
    text: str
    paragraphs: int
    questions: list[Question]


def spread(count: int, paragraphs: int) -> list[int]:
    """``count`` paragraph indices spread from the first to the last of ``paragraphs``."""
    if count == 1:
        return [0]
    return [round(i * (paragraphs - 1) / (count - 1)) for i in range(count)]


def build_contexts(
    tokenizer: TokenizerLike, count: int, questions: int, context_tokens: int
) -> list[Context]:
    """The first ``count`` articles whose leading paragraphs fill at least 90% of ``context_tokens``: the most
    leading paragraphs that fit, and ``questions`` questions, the first answerable one of paragraphs spread
    over them (the nearest unused paragraph with one, where the chosen one has none)."""

    def tokens(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False))  # type: ignore[attr-defined]

    contexts = []
    for article in squad_articles():
        taken: list[dict[str, Any]] = []
        for paragraph in article["paragraphs"]:
            if tokens("\n\n".join(p["context"] for p in [*taken, paragraph])) > context_tokens:
                break
            taken.append(paragraph)
        text = "\n\n".join(p["context"] for p in taken)
        if len(taken) < questions or tokens(text) < 0.9 * context_tokens:
            continue
        answerable = [[qa for qa in p["qas"] if not qa["is_impossible"]] for p in taken]
        chosen: list[Question] = []
        for target in spread(questions, len(taken)):
            used = {q.paragraph for q in chosen}
            nearest = sorted(range(len(taken)), key=lambda i: (abs(i - target), i))
            index = next((i for i in nearest if answerable[i] and i not in used), None)
            if index is None:
                break
            qa = answerable[index][0]
            golds = tuple(dict.fromkeys(a["text"].strip() for a in qa["answers"]))
            chosen.append(Question(qa["id"], qa["question"], golds, index))
        if len(chosen) < questions:
            continue
        contexts.append(
            Context(article["title"], text, len(taken), sorted(chosen, key=lambda q: q.paragraph))
        )
        if len(contexts) == count:
            break
    if len(contexts) < count:
        raise ValueError(f"only {len(contexts)} SQuAD v2 dev articles fill {context_tokens} tokens")
    return contexts


@dataclass(frozen=True)
class Seconds:
    """Wall-clock seconds, and the CPU seconds of this process (every thread) over the same time: the CPU
    time stays near the work done when other processes share the cores, the wall time does not."""

    wall: float
    cpu: float

    def __add__(self, other: Seconds) -> Seconds:
        return Seconds(self.wall + other.wall, self.cpu + other.cpu)


def timed(action: Callable[[], Any]) -> tuple[Any, Seconds]:
    """``action()`` and the seconds it took."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = action()
    return result, Seconds(time.perf_counter() - wall, time.process_time() - cpu)


@torch.no_grad()
def answer(model: PreTrainedModel, ids: torch.Tensor, cache: Cache, max_new_tokens: int) -> list[int]:
    """Greedy answer ids of the prompt ``ids [1, n]`` with ``cache`` (which may already hold a prefix of it)."""
    out = model.generate(  # type: ignore[operator]  # transformers types generate as a Tensor
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        **cache_argument(model, cache),
        max_new_tokens=max_new_tokens,
        do_sample=False,
        pad_token_id=model.generation_config.eos_token_id,
    )
    return out[0, ids.shape[1] :].tolist()  # type: ignore[no-any-return]


@torch.no_grad()
def prefill(model: PreTrainedModel, ids: torch.Tensor, cache: Cache) -> Cache:
    """``cache`` after one forward of the context ``ids [1, n]`` (logits of the last token only)."""
    model(ids, **cache_argument(model, cache), logits_to_keep=1)
    return cache


def compress_context(model: PreTrainedModel, ids: torch.Tensor, c: float) -> RCKVCache:
    """A new ``RCKVCache(model, c)`` holding the context ``ids [1, n]``, compressed before any question."""
    cache = RCKVCache(model, c=c)
    prefill(model, ids, cache)
    return cache


def run_context(
    model: PreTrainedModel,
    tokenizer: TokenizerLike,
    context: Context,
    cs: list[float],
    max_new_tokens: int,
    progress: tqdm,
) -> dict[str, Any]:
    """Every method on every question of ``context``; the context's costs and its per-question rows."""
    instruction = INSTRUCTIONS["squad"]
    prompts = [
        split_prompt(tokenizer, context.text, f"{instruction} Question: {q.question}")
        for q in context.questions
    ]
    prefix = prompts[0].context_ids
    n = prefix.shape[1]
    if any(not torch.equal(p.context_ids, prefix) for p in prompts):
        raise RuntimeError("the context's prefix ids differ between its questions")
    full_ids = [torch.cat([prefix, p.question_ids], dim=1) for p in prompts]
    rendered = [
        tokenizer.apply_chat_template(  # type: ignore[attr-defined]
            [{"role": "user", "content": f"{context.text}\n\n{instruction} Question: {q.question}"}],
            add_generation_prompt=True,
            tokenize=False,
        )
        for q in context.questions
    ]
    same_as_whole = [
        tokenizer.encode(text, add_special_tokens=False) == ids[0].tolist()  # type: ignore[attr-defined]
        for text, ids in zip(rendered, full_ids, strict=True)
    ]

    rows: list[dict[str, Any]] = [
        {
            "title": context.title,
            "id": q.id,
            "paragraph": q.paragraph,
            "question": q.question,
            "gold": list(q.answers),
            "prompt_tokens": int(ids.shape[1]),
            "prefix_plus_suffix_is_whole_tokenization": same,
            "methods": {},
        }
        for q, ids, same in zip(context.questions, full_ids, same_as_whole, strict=True)
    ]

    def record(row: dict[str, Any], name: str, ids: list[int], seconds: Seconds, **extra: Any) -> None:
        text = tokenizer.decode(ids, skip_special_tokens=True).strip()  # type: ignore[attr-defined]
        reference = row["methods"].get("full", {}).get("ids", ids)
        row["methods"][name] = {
            "answer": text,
            "ids": ids,
            "identical": ids == reference,
            "gold_match": bool(answer_match(text, row["gold"])),
            "seconds": asdict(seconds),
            **extra,
        }

    progress.set_postfix_str("full")
    for row, ids in zip(rows, full_ids, strict=True):
        generated, seconds = timed(
            partial(answer, model, ids, DynamicCache(config=model.config), max_new_tokens)
        )
        record(row, "full", generated, seconds)

    progress.set_postfix_str("full_once")
    base, prefill_seconds = timed(partial(prefill, model, prefix, DynamicCache(config=model.config)))
    costs: dict[str, Any] = {"full_once": {"prefill_seconds": asdict(prefill_seconds), "copy_seconds": []}}
    for row, ids in zip(rows, full_ids, strict=True):
        copied, copy_seconds = timed(partial(copy.deepcopy, base))
        generated, seconds = timed(partial(answer, model, ids, copied, max_new_tokens))
        costs["full_once"]["copy_seconds"].append(asdict(copy_seconds))
        record(row, "full_once", generated, seconds, copy_seconds=asdict(copy_seconds))
    del base

    for c in cs:
        progress.set_postfix_str(f"with_question c={c:g}")
        for row, ids in zip(rows, full_ids, strict=True):

            def compressed(ids: torch.Tensor, c: float) -> tuple[list[int], RCKVCache]:
                cache = RCKVCache(model, c=c)
                return answer(model, ids, cache, max_new_tokens), cache

            (generated, cache), seconds = timed(partial(compressed, ids, c))
            record(
                row,
                f"with_question c={c:g}",
                generated,
                seconds,
                evicted=cache.compression_ratio,
                nbytes=cache.nbytes(),
                full_nbytes=cache.full_nbytes(),
            )
            cache.close()

        progress.set_postfix_str(f"once c={c:g}")
        # the cache is created inside the timing, as with_question's is
        once, prefill_seconds = timed(partial(compress_context, model, prefix, c))
        if once.get_seq_length() != n:
            raise RuntimeError(f"the compressed cache says {once.get_seq_length()} tokens seen, not {n}")
        cost = {
            "prefill_seconds": asdict(prefill_seconds),
            "copy_seconds": [],
            "evicted": once.compression_ratio,
            "nbytes": once.nbytes(),
            "full_nbytes": once.full_nbytes(),
        }
        for row, ids in zip(rows, full_ids, strict=True):
            copied, copy_seconds = timed(partial(copy.deepcopy, once))
            generated, seconds = timed(partial(answer, model, ids, copied, max_new_tokens))
            cost["copy_seconds"].append(asdict(copy_seconds))
            record(
                row,
                f"once c={c:g}",
                generated,
                seconds,
                copy_seconds=asdict(copy_seconds),
                evicted=cost["evicted"],
                evicted_with_question=copied.compression_ratio,  # the question chunk compressed too
                nbytes=copied.nbytes(),
                full_nbytes=copied.full_nbytes(),
            )
            copied.close()
        once.close()
        costs[f"once c={c:g}"] = cost
    progress.update()
    return {
        "title": context.title,
        "context_tokens": n,
        "paragraphs": context.paragraphs,
        "costs": costs,
        "rows": rows,
    }


def warm_up(model: PreTrainedModel, tokenizer: TokenizerLike) -> None:
    """One short generation with each cache, untimed (first calls pay one-off costs)."""
    ids = torch.tensor([tokenizer.encode("The quick brown fox jumps over the lazy dog. " * 8)])  # type: ignore[attr-defined]
    answer(model, ids, DynamicCache(config=model.config), 4)
    with RCKVCache(model, c=1.0) as cache:
        answer(model, ids, cache, 4)


def report(contexts: list[dict[str, Any]], settings: dict[str, Any]) -> None:
    """The markdown table per ``c``, the paired differences and the cost lines, in wall-clock and in CPU seconds
    (``settings``: the run's ``args``, ``threads`` and ``model``, as saved)."""
    cs: list[float] = settings["c"]
    rows = [row for context in contexts for row in context["rows"]]
    lengths = [context["context_tokens"] for context in contexts]
    print(
        f"\n{settings['model']}, {len(contexts)} SQuAD v2 dev contexts x {settings['questions']} questions, context "
        f"{min(lengths)}-{max(lengths)} tokens (mean {statistics.mean(lengths):.0f}), greedy, up to "
        f"{settings['max_new_tokens']} tokens, batch 1, {settings['threads']} CPU threads"
    )

    def hits(method: str, field: str) -> list[list[bool]]:
        """Per context, its questions' ``field`` under ``method``: the unit the bootstrap resamples."""
        return [[bool(row["methods"][method][field]) for row in context["rows"]] for context in contexts]

    def mean(method: str, field: str) -> float:
        return statistics.mean(float(row["methods"][method][field]) for row in rows)

    def per_question(method: str, clock: str, copy_included: bool = True) -> float:
        """Mean seconds answering, plus the deepcopy where the method answers from a copy."""
        found = [row["methods"][method] for row in rows]
        copied = [m["copy_seconds"][clock] if copy_included and "copy_seconds" in m else 0.0 for m in found]
        return statistics.mean(m["seconds"][clock] + extra for m, extra in zip(found, copied, strict=True))

    def of_costs(method: str, field: str, clock: str) -> float:
        values = [context["costs"][method][field] for context in contexts]
        flat = [v for value in values for v in (value if isinstance(value, list) else [value])]
        return statistics.mean(v[clock] for v in flat)

    def both(pair: list[float], full: list[float]) -> str:
        (wall, cpu), (full_wall, full_cpu) = pair, full
        return f"{wall:.3f} s / {cpu:.3f} s = {wall / full_wall:.2f}x / {cpu / full_cpu:.2f}x"

    full = [per_question("full", "wall"), per_question("full", "cpu")]
    for c in cs:
        print(f"\n### c = {c:g}\n")
        print(
            "| method | evicted | answers identical to full cache | gold answer in answer | seconds per question "
            "| CPU seconds per question |"
        )
        print("|---|---:|---:|---:|---:|---:|")
        for method in ("full", "full_once", f"with_question c={c:g}", f"once c={c:g}"):
            evicted = f"{mean(method, 'evicted'):.1%}" if "c=" in method else "0%"
            print(
                f"| {method} | {evicted} | {mean(method, 'identical'):.0%} | {mean(method, 'gold_match'):.0%} "
                f"| {per_question(method, 'wall'):.3f} | {per_question(method, 'cpu'):.3f} |"
            )
        name = f"once c={c:g}"
        print(
            "\nPaired differences, percentage points, with 95% bootstrap intervals (the contexts resampled, "
            "their questions together):"
        )
        for field, label in (("identical", "answers identical to full cache"), ("gold_match", "gold answer")):
            for method, reference in ((name, f"with_question c={c:g}"), (name, "full")):
                if field == "identical" and reference == "full":
                    continue  # full is its own reference: 100% by definition
                difference, low, high = paired_difference(hits(method, field), hits(reference, field))
                print(
                    f"- {label}: {method} - {reference}: {100 * difference:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"
                )
        prefill = [of_costs(name, "prefill_seconds", clock) for clock in ("wall", "cpu")]
        copied = [of_costs(name, "copy_seconds", clock) for clock in ("wall", "cpu")]
        answered = [per_question(name, clock, copy_included=False) for clock in ("wall", "cpu")]
        k = settings["questions"]
        amortised = [(p + k * (cp + a)) / k for p, cp, a in zip(prefill, copied, answered, strict=True)]
        with_question = [per_question(f"with_question c={c:g}", clock) for clock in ("wall", "cpu")]
        once = [context["costs"][name] for context in contexts]
        held = statistics.mean(cost["nbytes"] / cost["full_nbytes"] for cost in once)
        after = statistics.mean(
            row["methods"][name]["nbytes"] / row["methods"][name]["full_nbytes"] for row in rows
        )
        print(
            f"\nCost, c={c:g}: means, wall / CPU, as multiples of full's seconds per question in the same run "
            f"({full[0]:.3f} s / {full[1]:.3f} s):\n"
            f"- compressing prefill of the context (once): {both(prefill, full)}\n"
            f"- deepcopy of the compressed cache: {both(copied, full)}\n"
            f"- answer from the copy (question chunk + generation): {both(answered, full)}\n"
            f"- per question over {k} questions, (prefill + {k} x (copy + answer)) / {k}: {both(amortised, full)}\n"
            f"- with_question, per question: {both(with_question, full)}\n"
            f"- bytes held by the compressed context: {held:.1%} of the full cache's "
            f"({statistics.mean(cost['nbytes'] for cost in once) / 2**20:.1f} MiB vs "
            f"{statistics.mean(cost['full_nbytes'] for cost in once) / 2**20:.1f} MiB); by a copy after its answer: "
            f"{after:.1%} of its full cache's"
        )
    prefill = [of_costs("full_once", "prefill_seconds", clock) for clock in ("wall", "cpu")]
    copied = [of_costs("full_once", "copy_seconds", clock) for clock in ("wall", "cpu")]
    answered = [per_question("full_once", clock, copy_included=False) for clock in ("wall", "cpu")]
    print(
        f"\nfull_once (DynamicCache, the context prefilled once, nothing evicted), wall / CPU: prefill "
        f"{both(prefill, full)}; deepcopy {both(copied, full)}; answer from the copy {both(answered, full)}"
    )


def save(path: Path, model: PreTrainedModel, args: argparse.Namespace, results: list[dict[str, Any]]) -> None:
    """The per-question rows (and each context's costs) as compact JSON; rewritten after every context."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "model": model.config.name_or_path,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "report"},
        "threads": torch.get_num_threads(),
        "question_format": f"{INSTRUCTIONS['squad']} Question: {{question}}",
        "complete": len(results) == args.contexts,
        "contexts": results,
    }
    path.write_text(json.dumps(payload, separators=(",", ":")))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--contexts", type=int, default=10, help="contexts, one per article (default 10)")
    parser.add_argument("--questions", type=int, default=3, help="questions per context (default 3)")
    parser.add_argument(
        "--context-tokens", type=int, default=2400, help="context length budget (default 2400)"
    )
    parser.add_argument("--c", type=float, nargs="+", default=[1.0, 0.5], help="thresholds (default 1.0 0.5)")
    parser.add_argument("--max-new-tokens", type=int, default=32)
    parser.add_argument(
        "--out",
        type=Path,
        default=Path("docs/records/compress_once/rows.json"),
        help="per-question rows (JSON)",
    )
    parser.add_argument(
        "--report", type=Path, help="print the tables of a saved rows file instead of running"
    )
    args = parser.parse_args()
    if args.report is not None:
        saved = json.loads(args.report.read_text())
        report(saved["contexts"], {**saved["args"], "threads": saved["threads"], "model": saved["model"]})
        return
    model, tokenizer = load_model()
    contexts = build_contexts(tokenizer, args.contexts, args.questions, args.context_tokens)
    warm_up(model, tokenizer)
    results = []
    with tqdm(total=len(contexts), desc="contexts") as progress:
        for context in contexts:
            results.append(run_context(model, tokenizer, context, args.c, args.max_new_tokens, progress))
            save(args.out, model, args, results)
    report(results, {**vars(args), "threads": torch.get_num_threads(), "model": model.config.name_or_path})
    print(f"\nrows: {args.out}")


if __name__ == "__main__":
    main()
