"""Cost of RCAttributor.attribute() against one plain forward, and against captum's FeatureAblation.

The example is real text: the context concatenates SQuAD v2 dev contexts (``data/squad_v2``,
or ``$RCATTR_DATA/squad_v2``) in file order until it reaches ``--contexts`` tokens (cut at exactly that
many tokens of the context alone); the question is the first question of the first paragraph; the given
answer is the next paragraph, cut to ``--answer`` tokens (the answer is unrelated to the question: only
the cost is measured here). The prompt is the default model's chat template (``render_prompt``).

1. Per context size and attributor (the default, the paper's recipe, the default with the null-answer
   calibration and the RC span scorers, or any recipe of the attribution ablation by its name,
   ``rcattr.eval.attribution.recipes``; ``--attributors ablation`` times them all): the median time of
   ``attributor.attribute(ContextInput(context, question), target=answer, granularity="sentence")``
   divided by the median time of one plain forward ``model(ids, logits_to_keep=1)`` over the same
   prompt + answer tokens (the attributor's own ids: the rendered prompt tokenized without special
   tokens, then the answer, concatenated; checked to be exactly the ids of the attributor's one forward).
   A calibrating attributor runs the prompt, then the content-free answer's few tokens on a copy of the
   prompt's cache, then the answer over the prompt's cache (the prompt's and the answer's ids are
   checked to make up the same ids); ``forwards_per_call`` counts them all. Both are medians of ``--repeats`` calls,
   interleaved (forward, attribute, forward, attribute, ...) in the same subprocess so that the ratio
   sees the same machine load. Each variant (a forward-only one, and one per attributor) runs in its own
   subprocess so that peak resident memory (ru_maxrss) can be compared: the figure reported is the peak
   during the calls minus the resident size after loading the model and a warm-up (in an attribute
   subprocess the peak is the attribution's: its forward is the plain one plus the capture).
2. The same example with the ``--ablation-context`` context through captum's
   ``LLMAttribution(FeatureAblation(model), tokenizer).attribute(inp, target=answer,
   forward_in_tokens=False)``, where ``inp`` is a ``TextTemplateInput`` over the same rendered prompt whose
   values are the context's sentences (``rcattr.text.segmentation.sentence_spans``, the same spans the
   attributor scores; the gaps between sentences stay in the template). Ablating a sentence replaces it
   by "" (captum's default baseline). Its single time is divided by the median time of the default
   RCAttributor on the same example, measured in the same subprocess; the forwards it
   ran are counted (n sentences + 1). Captum tokenizes the prompt with ``add_special_tokens=True`` while
   the attributor tokenizes the chat-template prompt without them; SmolLM2's tokenizer adds no special
   token, so the unablated ids are identical (checked and reported as ``same_ids``). Captum's forwards
   also compute the vocabulary logits of every position, which the attributor's forward skips.
   Before the ablation, one full forward is timed: if (n sentences + 1) of them would exceed
   ``--ablation-budget`` seconds (default 480), the context is halved until they would not, and the
   output says so.

3. A generated answer (``generate:default``): ``attribute(ContextInput(context, question), target=None,
   gen_args=...)`` against a plain ``model.generate`` of the prompt, both forced to ``--answer`` new tokens
   (greedy), interleaved in one subprocess. The attributor generates with its own cache and continues
   from it, so the prompt is not run a second time.
   With ``--many``, ``many:default``: ``attribute_many`` over two copies of the example (default
   ``max_batch_tokens``: two long prompts run one after the other), its peak memory against one call's.
4. ContextCite-style cost: ContextCite fits a surrogate on 64 ablated contexts, each one forward over
   prompt + answer with the answer's log-probabilities (``model(ids, logits_to_keep=answer + 1)``). That
   forward is timed in the forward subprocess (interleaved with the plain one) and the 64 ablations are
   reported as 64 times it (an estimate, labelled so), against the default ``attribute()``.

The machine is noisy: compare the ratios, measured in the same run, not the absolute times.

    python benchmarks/bench_attribution.py --contexts 500 2000 4000 8000 --answer 100 --repeats 3 --json bench_attribution.json

Long contexts on a model whose window reaches them (Gemma-3-270m: 32,768 tokens), short and 100-token answers:

    python benchmarks/bench_attribution.py --model gemma-3-270m --contexts 16000 32000 --answer 8 --repeats 1 \
        --attributors default --no-ablation --no-generate --many

Quick smoke run (one size, one attributor, one repeat, still with the captum ablation at 500 tokens):

    python benchmarks/bench_attribution.py --contexts 500 --repeats 1 --attributors default
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tqdm import tqdm

DEFAULT_ATTRIBUTORS = ("default", "paper", "heads-vote+calibration-n-a", "rc", "rc_bound")
"""``default``: ``RCAttributor(model, tokenizer)``; ``paper``: ``RCAttributor.paper``;
``heads-vote+calibration-n-a``: the heads' vote's scorer less the attention of a content-free answer (each a
recipe of the ablation); ``rc`` / ``rc_bound``: the default with the paper's RC span scorers
(:mod:`rcattr.eval.attribution.rc_span_scorers`)."""
SPAN_SCORERS = ("rc", "rc_bound")  # by their scorers' names
MIN_ABLATION_CONTEXT = 100


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _squad_path() -> Path:
    root = os.environ.get("RCATTR_DATA")
    data = Path(root) if root else Path(__file__).resolve().parents[1] / "data"
    return data / "squad_v2" / "dev-v2.0.json"


def build_example(tokenizer: Any, context_tokens: int, answer_tokens: int) -> tuple[str, str, str]:
    """(context, question, answer) from SQuAD v2 dev contexts, in file order."""
    with open(_squad_path(), encoding="utf-8") as handle:
        paragraphs = [p for article in json.load(handle)["data"] for p in article["paragraphs"]]
    question = paragraphs[0]["qas"][0]["question"]

    def cut(text: str, n_tokens: int) -> str:
        offsets = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)["offset_mapping"]
        return text if len(offsets) <= n_tokens else text[: offsets[n_tokens - 1][1]]

    context = ""
    for index, paragraph in enumerate(paragraphs):
        context = f"{context}\n{paragraph['context']}" if context else paragraph["context"]
        if len(tokenizer(context, add_special_tokens=False)["input_ids"]) >= context_tokens:
            return (
                cut(context, context_tokens),
                question,
                cut(paragraphs[index + 1]["context"], answer_tokens),
            )
    raise ValueError(f"SQuAD v2 dev holds fewer than {context_tokens} context tokens")


def _prompt_ids(tokenizer: Any, context: str, question: str, answer: str) -> tuple[list[int], int]:
    """prompt ⊕ answer ids as RCAttributor builds them, and the number of prompt tokens."""
    from rcattr.text.prompting import ContextInput, render_prompt

    prompt = render_prompt(tokenizer, ContextInput(context, question))
    prompt_ids = tokenizer(prompt.text, add_special_tokens=prompt.add_special_tokens)["input_ids"]
    answer_ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
    return list(prompt_ids) + list(answer_ids), len(prompt_ids)


def _setup(context_tokens: int, answer_tokens: int, model_name: str | None) -> tuple[Any, Any, str, str, str]:
    import torch

    from rcattr.attribution.attributor import RCAttributor
    from rcattr.runtime.models import load_model
    from rcattr.text.prompting import ContextInput

    torch.set_grad_enabled(False)
    model, tokenizer = load_model(model_name)
    context, question, answer = build_example(tokenizer, context_tokens, answer_tokens)
    # warm-up: a short forward and a short attribution (loads Punkt, fills allocator pools)
    model(torch.tensor([tokenizer("Warm-up text.")["input_ids"] * 16]))
    RCAttributor(model, tokenizer).attribute(
        ContextInput("Paris is in France. It is big.", "Where?"), target="In France."
    )
    return model, tokenizer, context, question, answer


def _timed(call: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _paired(calls: dict[str, Any], repeats: int) -> dict[str, float]:
    """Median time of each call, the calls interleaved so that their ratio sees the same machine load."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def recipes() -> list[Any]:
    """The ablation's recipes (``rcattr.eval.attribution.recipes``)."""
    from rcattr.eval.attribution.recipes import ablation

    return ablation()


def recipe_names() -> list[str]:
    """The command-line names of the recipes that can be timed."""
    return [recipe.name for recipe in recipes()]


def build_attributor(name: str, model: Any, tokenizer: Any) -> Any:
    """A recipe's attributor by its name, or the default one with an RC span scorer."""
    from rcattr.attribution.attributor import RCAttributor
    from rcattr.eval.attribution.rc_span_scorers import RCBoundScorer, RCScorer

    if name in SPAN_SCORERS:
        scorer = next(kind for kind in (RCScorer, RCBoundScorer) if kind.name == name)
        return RCAttributor(model, tokenizer, span_scorer=scorer())
    return next(recipe for recipe in recipes() if recipe.name == name).attributor(model, tokenizer)


def run_variant(
    variant: str, context_tokens: int, answer_tokens: int, repeats: int, model_name: str | None = None
) -> dict[str, Any]:
    """One variant in this process: ``forward`` or ``attribute:<attributor>``."""
    import torch

    from rcattr.text.prompting import ContextInput
    from rcattr.text.segmentation import sentence_spans

    model, tokenizer, context, question, answer = _setup(context_tokens, answer_tokens, model_name)
    ids_list, n_prompt = _prompt_ids(tokenizer, context, question, answer)
    ids = torch.tensor([ids_list])
    info: dict[str, Any] = {
        "context_tokens": len(tokenizer(context, add_special_tokens=False)["input_ids"]),
        "answer_tokens": len(ids_list) - n_prompt,
        "total_tokens": len(ids_list),
        "sentences": len(sentence_spans(context)),
    }
    baseline = _peak_rss_mib()
    if variant == "forward":
        n_answer = len(ids_list) - n_prompt
        paired = _paired(
            {
                "forward": lambda: model(ids, logits_to_keep=1),
                # what each of ContextCite's ablations runs: the answer's log-probabilities
                "scoring": lambda: model(ids, logits_to_keep=n_answer + 1),
            },
            repeats,
        )
        seconds = info["forward_seconds"] = paired["forward"]
        info["scoring_forward_seconds"] = paired["scoring"]
    elif variant.startswith("many:"):  # attribute_many over two copies: its peak against one call's
        attributor = build_attributor(variant.split(":", 1)[1], model, tokenizer)
        inp = ContextInput(context, question)
        paired = _paired(
            {
                "forward": lambda: model(ids, logits_to_keep=1),
                "many": lambda: attributor.attribute_many(
                    [inp, inp], [answer, answer], granularity="sentence", progress=False
                ),
            },
            repeats,
        )
        seconds, info["forward_seconds"] = paired["many"], paired["forward"]
        info["forwards_per_call"] = 2
    elif variant.startswith("generate:"):
        attributor = build_attributor(variant.split(":", 1)[1], model, tokenizer)
        n_answer = len(ids_list) - n_prompt
        gen_args = {"max_new_tokens": n_answer, "min_new_tokens": n_answer, "do_sample": False}
        prompt = torch.tensor([ids_list[:n_prompt]])
        inp = ContextInput(context, question)
        paired = _paired(
            {
                "generate": lambda: model.generate(  # type: ignore[operator]
                    prompt,
                    attention_mask=torch.ones_like(prompt),
                    pad_token_id=tokenizer.eos_token_id,
                    **gen_args,
                ),
                "attribute": lambda: attributor.attribute(inp, granularity="sentence", gen_args=gen_args),
            },
            repeats,
        )
        seconds, info["generate_seconds"] = paired["attribute"], paired["generate"]
        info["forward_seconds"] = info["generate_seconds"]  # the reference of this variant's ratio
    else:
        attributor = build_attributor(variant.split(":", 1)[1], model, tokenizer)
        inp = ContextInput(context, question)
        calls: list[list[list[int]]] = []  # per attribute() call, the ids of each model forward

        def attribute() -> None:
            calls.append([])
            hook = model.register_forward_pre_hook(
                lambda _module, args, kwargs: calls[-1].append(
                    (args[0] if args else kwargs["input_ids"])[0].tolist()
                ),
                with_kwargs=True,
            )
            try:
                attributor.attribute(inp, target=answer, granularity="sentence")
            finally:
                hook.remove()

        paired = _paired({"forward": lambda: model(ids, logits_to_keep=1), "attribute": attribute}, repeats)
        seconds, info["forward_seconds"] = paired["attribute"], paired["forward"]
        # the plain forward must time the same ids: one forward, or the prompt prefill then the answer
        # (which may run the prompt's last tokens again, over a cache cut before them)
        if not all(_covers(call, ids_list) for call in calls):
            raise RuntimeError(
                "the attributor's forwards ran on other ids than the benchmark's plain forward"
            )
        info["forwards_per_call"] = statistics.mean(len(call) for call in calls)
    return {**info, "seconds": seconds, "peak_mib": _peak_rss_mib() - baseline}


def _covers(call: list[list[int]], ids: list[int]) -> bool:
    """Whether one ``attribute()`` call's forwards run exactly ``ids``: a single forward over them, or a
    first forward over a prefix and a last one over the rest (it may run the prefix's last tokens again,
    over a cache cut before them)."""
    first, last = call[0], call[-1]
    if len(call) == 1:
        return first == ids
    return (
        ids[: len(first)] == first
        and ids[len(ids) - len(last) :] == last
        and len(first) + len(last) >= len(ids)
    )


def _template_input(tokenizer: Any, context: str, question: str) -> tuple[Any, int]:
    """captum TextTemplateInput: the rendered prompt with the context's sentences as values."""
    from captum.attr import TextTemplateInput

    from rcattr.text.prompting import ContextInput, render_prompt
    from rcattr.text.segmentation import sentence_spans

    def escape(text: str) -> str:
        return text.replace("{", "{{").replace("}", "}}")

    prompt = render_prompt(tokenizer, ContextInput(context, question))
    start = prompt.chunk_starts[0]
    spans = sentence_spans(context)
    template, cursor = "", 0
    for span in spans:
        template += escape(prompt.text[cursor : start + span.start]) + "{}"
        cursor = start + span.end
    template += escape(prompt.text[cursor:])
    values = [span.text for span in spans]
    if template.format(*values) != prompt.text:
        raise RuntimeError("the captum template does not reproduce the rendered prompt")
    return TextTemplateInput(template, values=values), len(spans)


def run_ablation(
    context_tokens: int, answer_tokens: int, repeats: int, budget: float, model_name: str | None = None
) -> dict[str, Any]:
    """captum FeatureAblation vs RCAttributor (attention) on one example, in this process."""
    import torch
    from captum.attr import FeatureAblation, LLMAttribution

    from rcattr.attribution.attributor import RCAttributor
    from rcattr.text.prompting import ContextInput

    model, tokenizer, _, _, _ = _setup(MIN_ABLATION_CONTEXT, answer_tokens, model_name)
    baseline = _peak_rss_mib()
    notes = []
    requested = context_tokens
    while True:
        context, question, answer = build_example(tokenizer, context_tokens, answer_tokens)
        inp, n_sentences = _template_input(tokenizer, context, question)
        ids_list, n_prompt = _prompt_ids(tokenizer, context, question, answer)
        ids = torch.tensor([ids_list])
        one_forward = _timed(lambda: model(ids), 1)  # noqa: B023  # full vocabulary logits, as captum's
        estimate = (n_sentences + 1) * one_forward
        if estimate <= budget or context_tokens // 2 < MIN_ABLATION_CONTEXT:
            break
        notes.append(
            f"a {context_tokens}-token context would take ~{estimate:.0f} s of ablation "
            f"({n_sentences + 1} forwards of {one_forward:.2f} s) > {budget:.0f} s budget: halved"
        )
        context_tokens //= 2

    llm_attr = LLMAttribution(FeatureAblation(model), tokenizer)
    captum_ids = llm_attr._format_model_input(inp.to_model_input())["input_ids"][0].tolist()
    target_ids = tokenizer.encode(answer, add_special_tokens=False)
    forwards = 0
    inner_forward = model.forward

    def counting_forward(*args: Any, **kwargs: Any) -> Any:
        nonlocal forwards
        forwards += 1
        return inner_forward(*args, **kwargs)

    model.forward = counting_forward  # captum calls model.forward(...) directly
    try:
        start = time.perf_counter()
        llm_attr.attribute(inp, target=answer, forward_in_tokens=False)
        captum_seconds = time.perf_counter() - start
    finally:
        del model.forward
    # the full-logit forwards (estimate + ablation) before RCAttributor runs in this process
    captum_peak = _peak_rss_mib() - baseline

    attributor = RCAttributor(model, tokenizer)
    rc_seconds = _timed(
        lambda: attributor.attribute(ContextInput(context, question), target=answer, granularity="sentence"),
        repeats,
    )
    return {
        "requested_context_tokens": requested,
        "context_tokens": len(tokenizer(context, add_special_tokens=False)["input_ids"]),
        "answer_tokens": len(ids_list) - n_prompt,
        "total_tokens": len(ids_list),
        "sentences": n_sentences,
        "estimated_seconds": estimate,
        "captum_seconds": captum_seconds,
        "captum_forwards": forwards,
        "captum_peak_mib": captum_peak,
        "rc_seconds": rc_seconds,
        "same_ids": captum_ids + target_ids == ids_list,
        "notes": notes,
    }


def _child(args: argparse.Namespace, variant: str, context_tokens: int) -> dict[str, Any]:
    command = [
        sys.executable,
        __file__,
        "--variant",
        variant,
        "--contexts",
        str(context_tokens),
        "--answer",
        str(args.answer),
        "--repeats",
        str(args.repeats),
        "--ablation-budget",
        str(args.ablation_budget),
        *(["--model", args.model] if args.model else []),
    ]
    output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--contexts",
        type=int,
        nargs="+",
        default=[500, 2000, 4000, 8000],
        help="context tokens (default 500 2000 4000 8000)",
    )
    parser.add_argument("--answer", type=int, default=100, help="answer tokens (default 100)")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per variant (default 3)")
    parser.add_argument(
        "--attributors",
        nargs="+",
        choices=[*recipe_names(), *SPAN_SCORERS, "ablation"],
        metavar="NAME",
        default=list(DEFAULT_ATTRIBUTORS),
        help=f"attributors to time: {', '.join(SPAN_SCORERS)} (the default with that span scorer), a recipe "
        f"of the attribution ablation by name ({', '.join(recipe_names())}), or 'ablation' for every "
        f"recipe (default: {' '.join(DEFAULT_ATTRIBUTORS)})",
    )
    parser.add_argument(
        "--ablation-context",
        type=int,
        default=500,
        help="context tokens for the captum ablation (default 500)",
    )
    parser.add_argument(
        "--ablation-budget",
        type=float,
        default=480.0,
        help="max expected seconds of the ablation (default 480)",
    )
    parser.add_argument(
        "--no-ablation", action="store_true", help="skip the captum FeatureAblation comparison"
    )
    parser.add_argument(
        "--no-generate",
        action="store_true",
        help="skip the generated-answer comparison (attribute(target=None) against a plain generate)",
    )
    parser.add_argument(
        "--many",
        action="store_true",
        help="also time attribute_many over two copies of the example (its peak memory against one call's)",
    )
    parser.add_argument(
        "--model",
        help="model name or path (default: the offline SmolLM2-135M-Instruct; e.g. gemma-3-270m for 16k and 32k "
        "tokens)",
    )
    parser.add_argument("--json", type=Path, help="also write all numbers to this JSON file")
    parser.add_argument("--variant", help=argparse.SUPPRESS)  # child process
    args = parser.parse_args()
    if args.variant:
        if args.variant == "ablation":
            result = run_ablation(
                args.contexts[0], args.answer, args.repeats, args.ablation_budget, args.model
            )
        else:
            result = run_variant(args.variant, args.contexts[0], args.answer, args.repeats, args.model)
        print(json.dumps(result))
        return

    names = [n for a in args.attributors for n in (recipe_names() if a == "ablation" else [a])]
    variants = ["forward", *(f"attribute:{name}" for name in dict.fromkeys(names))]
    if args.many:
        variants.append("many:default")
    if not args.no_generate:
        variants.append("generate:default")
    runs = [(size, variant) for size in args.contexts for variant in variants]
    results: dict[int, dict[str, dict[str, Any]]] = {size: {} for size in args.contexts}
    for size, variant in tqdm(runs, desc="context size x variant", unit="run"):
        results[size][variant] = _child(args, variant, size)
    ablation = None
    if not args.no_ablation:
        with tqdm(total=1, desc=f"captum FeatureAblation, {args.ablation_context}-token context") as bar:
            ablation = _child(args, "ablation", args.ablation_context)
            bar.update()

    print(
        f"\nModel: {args.model or 'SmolLM2-135M-Instruct'} (CPU), {args.answer}-token given answer, "
        f"granularity='sentence', medians of {args.repeats}. 'x forward' (time) = attribute() / plain forward "
        "`model(ids, logits_to_keep=1)` over the same tokens, the two interleaved in the same subprocess "
        "(for generate:default, attribute(target=None) / a plain generate of as many tokens, interleaved); "
        "peak MiB = ru_maxrss above the loaded model, each variant in its own subprocess, "
        "'x forward' (memory) = / the forward-only subprocess's peak\n"
    )
    print(
        "| context tok | total tok | sentences | variant | forwards | time s | forward s | x forward "
        "| peak MiB | x forward |"
    )
    print("|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    for size in args.contexts:
        plain = results[size]["forward"]
        for variant, result in results[size].items():
            print(
                f"| {result['context_tokens']} | {result['total_tokens']} | {result['sentences']} | {variant} "
                f"| {result.get('forwards_per_call', 1):g} | {result['seconds']:.3f} | {result['forward_seconds']:.3f} "
                f"| {result['seconds'] / result['forward_seconds']:.2f} "
                f"| {result['peak_mib']:.1f} | {result['peak_mib'] / max(plain['peak_mib'], 1e-9):.2f} |"
            )
    print(
        "\nContextCite-style cost (64 ablations, each one forward over prompt + answer with the answer's "
        "log-probabilities; estimated as 64 x that forward, timed in the forward subprocess) against the "
        "default attribute():\n"
    )
    print("| context tok | one scoring forward s | 64 ablations s (est.) | x attribute() |")
    print("|---:|---:|---:|---:|")
    for size in args.contexts:
        plain, default = results[size]["forward"], results[size].get("attribute:default")
        if default is None:
            continue
        estimate = 64 * plain["scoring_forward_seconds"]
        print(
            f"| {plain['context_tokens']} | {plain['scoring_forward_seconds']:.3f} | {estimate:.1f} "
            f"| {estimate / default['seconds']:.1f} |"
        )
    if ablation is not None:
        print(
            f"\ncaptum LLMAttribution(FeatureAblation) vs RCAttributor (attention) on the same example "
            f"({ablation['context_tokens']}-token context, {ablation['sentences']} sentence features, "
            f"unablated ids identical: {ablation['same_ids']}); RCAttributor median of {args.repeats}\n"
        )
        for note in ablation["notes"]:
            print(f"NOTE: reduced the ablation context: {note}")
        print("| method | forwards | time s | x RCAttributor | peak MiB |")
        print("|---|---:|---:|---:|---:|")
        print(
            f"| captum FeatureAblation | {ablation['captum_forwards']} | {ablation['captum_seconds']:.2f} "
            f"| {ablation['captum_seconds'] / ablation['rc_seconds']:.1f} | {ablation['captum_peak_mib']:.1f} |"
        )
        print(f"| RCAttributor (attention) | 1 | {ablation['rc_seconds']:.3f} | 1.0 | |")
    if args.json:
        summary = {
            "args": {
                k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items() if k != "variant"
            },
            "attribution": {
                str(size): {
                    variant: {
                        **result,
                        "x_forward_time": result["seconds"] / result["forward_seconds"],
                        "x_forward_peak": result["peak_mib"]
                        / max(results[size]["forward"]["peak_mib"], 1e-9),
                    }
                    for variant, result in results[size].items()
                }
                for size in args.contexts
            },
            "ablation": None
            if ablation is None
            else {**ablation, "x_rcattributor_time": ablation["captum_seconds"] / ablation["rc_seconds"]},
        }
        args.json.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
