"""The commands: `explain` (and `demo`), `heads` and `compress`, each given its parsed arguments and input
(`ask` and `serve` take none: their own modules)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal

from rcattr.cli.inputs import CommandError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from rcattr.attribution.attributor import RCAttributor
    from rcattr.attribution.result import RCAttributionResult
    from rcattr.grounding.citations import Citation
    from rcattr.kvcache import EvictionPolicy
    from rcattr.protocols import TokenizerLike
    from rcattr.text.prompting import ContextInput


def attributor_of(args: argparse.Namespace) -> RCAttributor:
    """The attributor the model options ask for (`--model`, `--top-k`, `--paper`, `--lexical`,
    `--probe`, and `--device` where the command has it)."""
    from rcattr.attribution.attributor import RCAttributor
    from rcattr.grounding.probe import SupportProbe
    from rcattr.heads.selectors import heads_for
    from rcattr.runtime.models import load_model

    model, tokenizer = load_model(args.model, verbose=args.verbose, device=getattr(args, "device", "cpu"))
    probe: SupportProbe | Literal["shipped"] = (
        SupportProbe.load(args.probe) if getattr(args, "probe", None) else "shipped"
    )
    if args.paper:  # the paper's attention scorer reads each unit's own rows
        top_k = 20 if args.top_k == "outliers" else args.top_k
        lexical = bool(args.lexical)  # the paper's recipe has none unless asked
        return RCAttributor.paper(model, tokenizer, heads=heads_for(top_k), lexical=lexical, probe=probe)
    return RCAttributor(model, tokenizer, heads_for(args.top_k), lexical=args.lexical, probe=probe)


def report(result: RCAttributionResult, top: int) -> str:
    """The answer and, for each of its parts, the `top` context spans it came from; then the answer's
    context reliance and its tokens the context does not support."""
    from rcattr.grounding.support import SUPPORT_MEANING, SUPPORT_THRESHOLD, support_text
    from rcattr.viz.cited_answer import cited_answer

    citations = result.citations()
    lines = [f"Answer: {cited_answer(result, citations)}", ""]
    several = len(result.chunks) > 1
    for unit, span in enumerate(result.output_spans):
        lines.append(f"{span.text!r}")
        for rank, (source, score) in enumerate(result.top(top, output=unit), start=1):
            where = f"[doc {source.source + 1}] " if several else ""
            text = source.text if len(source.text) <= 90 else source.text[:87] + "..."
            lines.append(f"  {rank}. {score:6.1%}  {where}{text}")
    if result.context_reliance is not None:
        lines += [
            "",
            f"Context reliance: {result.context_reliance:.2f} (lookback ratio on the selected heads: attention "
            "to the context against attention to the answer itself, 0 to 1)",
        ]
    reach = None if result.head_selection is None else result.head_selection.reach_note()
    if reach is not None:
        lines += ["", f"Heads: {reach}."]
    lines += _vouching(citations)
    unsupported = result.unsupported_tokens()
    if unsupported and result.token_support is not None:
        support = result.token_support.tolist()
        listed = ", ".join(
            f"{result.answer_tokens[i].text.strip()!r} ({support_text(support[i])})" for i in unsupported[:8]
        )
        more = f" and {len(unsupported) - 8} more" if len(unsupported) > 8 else ""
        lines += [
            "",
            f"Not supported by the context (token support < {support_text(SUPPORT_THRESHOLD)}: {SUPPORT_MEANING}): "
            f"{listed}{more}",
        ]
    return "\n".join(lines)


def _vouching(citations: list[Citation]) -> list[str]:
    """The report's lines on the sentences their verdict marks, each with why (`Citation.verdict`)."""
    marked = [c for c in citations if c.status in ("partial", "weak", "unsupported")]
    if not marked:
        return []
    lines = [
        "",
        "Sentences their verdict marks (the support probe where one fits the model, else token support; weak: "
        "still cited; partial: its held part cited, its unheld claims tagged; unsupported: nothing cited):",
    ]
    for citation in marked:
        text = citation.text if len(citation.text) <= 90 else citation.text[:87] + "..."
        support = citation.held_support if citation.partly_held else citation.support
        why = citation.verdict.reason if citation.verdict is not None else f"support {support:.2f}"
        unheld = ", ".join(repr(claim.text) for claim in citation.unheld_claims)
        listed = f"; not in the documents: {unheld}" if unheld and "not in the documents" not in why else ""
        lines.append(f"  {citation.status} ({why}): {text!r}{listed}")
    return lines


def _explain(args: argparse.Namespace, inp: ContextInput) -> int:
    from rcattr.viz import save_html, shade_context

    attributor = attributor_of(args)
    result = attributor.attribute(
        inp,
        getattr(args, "answer", None),
        granularity=args.granularity,
        output_granularity=args.output_granularity,
        gen_args={"max_new_tokens": args.max_new_tokens},
    )
    color = {"auto": sys.stdout.isatty() and not os.environ.get("NO_COLOR"), "always": True, "never": False}
    if color[args.color]:
        print(shade_context(result, color=True), end="\n\n")
    print(report(result, args.top))
    if args.html:
        print(f"\nHTML report: {save_html(result, args.html)}")
    return 0


def _heads(args: argparse.Namespace, inp: ContextInput) -> int:
    from rcattr.record.signals import RCSignals
    from rcattr.viz import save_head_heatmap

    attributor = attributor_of(args)
    result = attributor.attribute(
        inp, args.answer, granularity="chunk", gen_args={"max_new_tokens": args.max_new_tokens}
    )
    path = save_head_heatmap(result, args.out)
    signals = RCSignals.of(result)
    selection = signals.head_selection
    best = ", ".join(f"L{layer}.H{head}" for layer, head in selection.as_pairs()[:10])
    print(
        f"Answer: {result.answer}\n{selection.describe(signals.lexical_share)}.\n"
        f"Top heads ({selection.kind}): {best}\nHeat map: {path}"
    )
    return 0


def _compress(args: argparse.Namespace, inp: ContextInput) -> int:
    from rcattr.kvcache import EvictionPolicy
    from rcattr.runtime.models import load_model

    if args.budget is not None and args.prefill_chunk is not None:
        raise CommandError(
            "--prefill-chunk cuts each chunk on its own, which a --budget of the whole cache cannot; use --c or --ratio"
        )
    model, tokenizer = load_model(args.model, verbose=args.verbose)
    # --c, --ratio and --budget exclude each other
    policy = EvictionPolicy.of_sizes(args.c, args.ratio, args.budget, args.decode_every)
    if inp.question or args.save is None:  # --save without a question only compresses and saves
        _compare(args, model, tokenizer, inp, policy)
    if args.save is not None:
        from rcattr.cli.ask_command import describe
        from rcattr.kvcache import compress_context

        documents = [document.text for document in inp.documents]
        context = compress_context(
            model, tokenizer, documents, policy=policy, window=args.window, chunk_size=args.prefill_chunk
        )
        folder = context.save(args.save)
        print(
            f"{describe(context)}\nSaved to {folder}: answer from it with rcattr ask {folder} --question ..."
        )
    return 0


def _compare(
    args: argparse.Namespace,
    model: PreTrainedModel,
    tokenizer: TokenizerLike,
    inp: ContextInput,
    policy: EvictionPolicy,
) -> None:
    """Answer with the full cache and with RCKVCache, and print both, where they diverge and the bytes held."""
    from rcattr.cli.compare import compare_generations
    from rcattr.kvcache import RCKVCache
    from rcattr.viz import save_head_heatmap

    cache = RCKVCache(model, window=args.window, policy=policy)
    compared = compare_generations(model, tokenizer, inp, cache, args.max_new_tokens, args.prefill_chunk)
    full, compressed = (
        str(tokenizer.decode(ids, skip_special_tokens=True)).strip()
        for ids in (compared.full, compared.compressed)
    )
    layers = f"{len(cache.rc_layers)} of {len(cache.layers)} layers"
    print(f"Prompt: {compared.prompt_tokens} tokens\nFull cache: {full}\nRCKVCache:  {compressed}\n")
    agreement = compared.agreement
    if agreement.first_difference is None:
        print(f"The two answers are identical ({agreement.length} tokens).")
    else:
        index = agreement.first_difference
        common = str(tokenizer.decode(compared.full[:index], skip_special_tokens=True)).strip()
        where = f"after {'…' * (len(common) > 40) + common[-40:]!r}" if common else "from the first token"
        print(
            f"The answers diverge at token {index + 1} ({where}); {agreement.agreement:.0%} of "
            f"{agreement.length} token positions agree. Lower --c or --ratio, or raise --budget, to evict less."
        )
    print(
        f"Evicted {cache.compression_ratio:.1%} of the prompt's KV entries ({layers}); the cache holds "
        f"{cache.nbytes() / 2**20:.2f} MiB against {cache.full_nbytes() / 2**20:.2f} MiB for the full cache"
    )
    if args.heatmap:
        title = f"share of each key head's prompt evicted ({cache.compression_ratio:.0%} overall)"
        path = save_head_heatmap(
            cache.head_compression_ratio[:, 0], args.heatmap, title=title, label="evicted"
        )
        print(f"Heat map: {path}")


COMMANDS: dict[str, Callable[[argparse.Namespace, ContextInput], int]] = {
    "explain": _explain,
    "demo": _explain,
    "heads": _heads,
    "compress": _compress,
}
