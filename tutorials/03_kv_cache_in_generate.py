# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     name: python3
# ---

# %% [markdown]
# # Compress the KV cache of `model.generate` with RCKVCache
#
# During generation a decoder keeps the keys and values of every prompt token in its KV cache, in every
# layer and key head. On long prompts that cache dominates memory. `RCKVCache` is a drop-in replacement
# for transformers' `DynamicCache`: at prefill it scores each prompt token, per layer and key head, by
# its expected relative contextualization (RC) against the last `window` prompt tokens times the norm of
# its value vector, and evicts the tokens scoring below `c` times the mean score over every layer and key
# head. Every head therefore keeps a budget of its own, larger where the context stands out.
#
# This tutorial:
#
# 1. builds a ~600-token prompt from SQuAD v2 paragraphs and a question;
# 2. answers it with `model.generate`, once with the default cache and once with `RCKVCache`;
# 3. measures the memory saved, overall, per layer and per key head;
# 4. sweeps the threshold `c` and measures how far the compressed cache's next-token predictions drift
#    from the full cache's;
# 5. compares RCKVCache with kvpress's SnapKV at the same compression (when kvpress is installed).
#
# It runs on CPU with the offline default model (SmolLM2-135M-Instruct) in about a minute.

# %%
import copy
import importlib.util
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import torch
from transformers import Cache, DynamicCache

from rcattr import load_model
from rcattr.eval.kv.data import load_squad
from rcattr.eval.kv.methods import (
    KVPRESS_HINT,
    FullCache,
    KVMethod,
    PressMethod,
    RCMethod,
)
from rcattr.eval.kv.metrics import LastLayerHeadOutputs, value_error_rate
from rcattr.eval.kv.protocol import greedy_answer, teacher_forced
from rcattr.eval.kv.variants import DEFAULT_RECIPE
from rcattr.kvcache import RCKVCache, cache_argument, split_prompt

OUT = Path(os.environ.get("RCATTR_TUTORIAL_OUT", "tutorial-output")) / "03_kv_cache_in_generate"
OUT.mkdir(parents=True, exist_ok=True)
torch.set_grad_enabled(False)  # inference only

# %% [markdown]
# ## 1. Model, context and question
#
# `load_model()` loads SmolLM2-135M-Instruct from the local files (no network). The context is the
# first three paragraphs of SQuAD v2's dev set (the article on the Normans); the question is about the
# first paragraph, so its answer lies far from the end of the prompt, where `RCKVCache`'s scoring
# window is.

# %%
model, tokenizer = load_model()

records = load_squad(limit=20)
paragraphs = list(dict.fromkeys(record.context for record in records))[:3]
context = "\n\n".join(paragraphs)
record = next(r for r in records if r.question == "Who was the Norse leader?")
question = f"Answer in a few words. Question: {record.question}"

inputs = tokenizer.apply_chat_template(
    [{"role": "user", "content": f"{context}\n\n{question}"}],
    add_generation_prompt=True,
    return_tensors="pt",
    return_dict=True,
)
prompt_ids = inputs["input_ids"]
n_prompt = prompt_ids.shape[1]
print(f"prompt: {n_prompt} tokens ({len(paragraphs)} paragraphs + question)")
print(f"question: {record.question}   gold answer: {record.answers[0]}")

# %% [markdown]
# ## 2. Generate with the default cache and with RCKVCache
#
# `RCKVCache(model, c=1.0, window=16)` goes where any transformers cache goes: `cache=` in recent
# transformers releases, which deprecate `past_key_values=`, still the only name on the 5.2 line;
# `**cache_argument(model, cache)` gives the one the installed release takes.
# The prefill forward fills it and evicts, then decoding proceeds as usual. The window (the last 16
# prompt tokens, here the question and the chat template's assistant opening) and every generated
# token are always kept. Both runs decode greedily.

# %%
MAX_NEW_TOKENS = 32


def answer_text(output_ids: torch.Tensor) -> str:
    return tokenizer.decode(output_ids[0, n_prompt:], skip_special_tokens=True).strip()


full_ids = model.generate(**inputs, max_new_tokens=MAX_NEW_TOKENS, do_sample=False)
cache = RCKVCache(model, c=1.0, window=16)
rc_ids = model.generate(
    **inputs, **cache_argument(model, cache), max_new_tokens=MAX_NEW_TOKENS, do_sample=False
)

print(f"DynamicCache     : {answer_text(full_ids)!r}")
print(f"RCKVCache (c=1)  : {answer_text(rc_ids)!r}")

# %% [markdown]
# ## 3. How much memory the cache saves
#
# * `cache.compression_ratio`: the share of prompt entries (layers × key heads × prompt tokens)
#   evicted.
# * `cache.nbytes()` is what the cache holds now (keys, values, and the positions of the kept tokens);
#   `cache.full_nbytes()` is what a `DynamicCache` would hold for the same tokens.
# * `cache.layer_compression_ratio` (`[layers]`) and `cache.head_compression_ratio`
#   (`[layers, batch, key heads]`) break the compression down.
#
# SmolLM2-135M has 30 layers with 9 query heads sharing 3 key heads (grouped-query attention); a key
# head scores a token by the mean over its query heads.

# %%
held, full = cache.nbytes(), cache.full_nbytes()
print(f"compression ratio : {cache.compression_ratio:.1%} of the prompt's entries evicted")
print(f"bytes held        : {held / 2**20:.2f} MiB of {full / 2**20:.2f} MiB ({held / full:.1%})")

per_layer = cache.layer_compression_ratio
per_head = cache.head_compression_ratio[:, 0]  # [layers, key heads] of the one batch row
print(
    f"per layer         : from {per_layer.min():.1%} (layer {per_layer.argmin()}) "
    f"to {per_layer.max():.1%} (layer {per_layer.argmax()})"
)
print(f"per key head      : from {per_head.min():.1%} to {per_head.max():.1%}")

# %%
fig, (ax_layer, ax_head) = plt.subplots(1, 2, figsize=(11, 4.5), width_ratios=(2, 1))
layers = range(len(per_layer))
ax_layer.bar(layers, per_layer, color="tab:blue")
ax_layer.axhline(cache.compression_ratio, color="k", linestyle="--", label="whole cache")
ax_layer.set(xlabel="layer", ylabel="share of the prompt evicted", ylim=(0, 1), title="Per layer")
ax_layer.legend()
image = ax_head.imshow(per_head, aspect="auto", cmap="viridis", vmin=0, vmax=1)
ax_head.set(
    xlabel="key head",
    ylabel="layer",
    xticks=range(per_head.shape[1]),
    title="Per (layer, key head)",
)
fig.colorbar(image, ax=ax_head, label="share of the prompt evicted")
fig.suptitle(f"RCKVCache c=1, window=16 on a {n_prompt}-token prompt")
fig.tight_layout()
fig.savefig(OUT / "compression_per_head.png", dpi=120)
plt.close(fig)
print(f"saved {OUT / 'compression_per_head.png'}")

# %% [markdown]
# Budgets vary a lot: some heads attend to a few tokens and keep few, others spread their attention
# and keep most of the prompt. A single threshold `c` lets each head find its own budget; a fixed-ratio
# method would give them all the same.
#
# ## 4. Choosing `c`
#
# A token is evicted when its score is below `c` × the mean score: `c=0` keeps everything
# (the same tokens as `DynamicCache`), and larger `c` evicts more. To see what a given `c` costs in
# quality, we **teacher-force** the full cache's greedy answer through each compressed cache: feed the
# prompt (the prefill, which compresses the cache), then the answer's tokens, and compare the
# next-token distributions at every answer position with the full cache's:
#
# * **top-1 agreement**: the share of positions where both caches predict the same next token;
# * **KL(full ‖ compressed)**, averaged over positions (0 is identical);
# * **VER**, the value error rate of the RCStat paper: the relative error of the last layer's per-head
#   attention outputs (`rcattr.eval.kv.metrics.value_error_rate`), the KV benchmark's metric.
#
# This is the setting of `model.generate`: the question is part of the prompt, hence of the scoring
# window. The first answer token is predicted by the prefill itself, before anything is evicted.

# %%
reference = full_ids[0, n_prompt:]  # the full cache's greedy answer, [T] tokens


def teacher_force(cache: Cache) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompt, then ``reference`` but its last token, through ``cache``: the ``[T, vocab]`` log-probs at
    the positions predicting ``reference`` and the last layer's ``[T, heads, head_dim]`` head outputs."""
    with LastLayerHeadOutputs(model) as outputs:
        first = model(prompt_ids, **cache_argument(model, cache), logits_to_keep=1).logits  # prefill: evicts
        rest = model(reference[None, :-1], **cache_argument(model, cache)).logits
    logits = torch.cat([first, rest], dim=1)[0]
    return logits.log_softmax(-1), outputs.heads[0, -len(reference) :]


def fidelity(reference_logp, reference_heads, logp, heads) -> dict[str, float]:
    """How close a cache's teacher-forced predictions stay to the full cache's."""
    return {
        "top1_agreement": (logp.argmax(-1) == reference_logp.argmax(-1)).float().mean().item(),
        "kl": (reference_logp.exp() * (reference_logp - logp)).sum(-1).mean().item(),
        "ver": value_error_rate(reference_heads, heads),
    }


full_logp, full_heads = teacher_force(DynamicCache())
rows = []
for c in (0.0, 0.5, 1.0, 1.5, 2.0):
    cache = RCKVCache(model, c=c, window=16)
    logp, heads = teacher_force(cache)
    rows.append(
        {
            "c": c,
            "compression_ratio": cache.compression_ratio,
            "kv_bytes": cache.nbytes(),
            "full_kv_bytes": cache.full_nbytes(),
            "bytes_ratio": cache.nbytes() / cache.full_nbytes(),
            **fidelity(full_logp, full_heads, logp, heads),
        }
    )
choosing_c = pd.DataFrame(rows)
choosing_c.to_csv(OUT / "choosing_c.csv", index=False)
print(f"{len(reference)} answer tokens teacher-forced; saved {OUT / 'choosing_c.csv'}")
print(choosing_c.to_string(index=False, float_format="{:.3f}".format))

# %%
fig, (ax_top1, ax_kl) = plt.subplots(1, 2, figsize=(10, 4))
for ax, column, label in (
    (ax_top1, "top1_agreement", "top-1 agreement with the full cache"),
    (ax_kl, "kl", "KL(full ‖ compressed), nats"),
):
    ax.plot(choosing_c["compression_ratio"], choosing_c[column], "o-")
    for row in choosing_c.itertuples():
        ax.annotate(
            f"c={row.c:g}",
            (row.compression_ratio, getattr(row, column)),
            xytext=(4, 4),
            textcoords="offset points",
        )
    ax.set(xlabel="share of the prompt's KV entries evicted", ylabel=label)
    ax.margins(0.12)
    ax.grid(alpha=0.3)
fig.suptitle(f"Choosing c: compression vs fidelity ({n_prompt}-token prompt, window 16)")
fig.tight_layout()
fig.savefig(OUT / "choosing_c.png", dpi=120)
plt.close(fig)
print(f"saved {OUT / 'choosing_c.png'}")

# %% [markdown]
# **Reading the table.** Each row is one cache, after the teacher-forced answer. `compression_ratio` is
# the share of the prompt's entries evicted. `bytes_ratio` is what the cache holds against a
# `DynamicCache` of the same tokens; it sits a little above `1 - compression_ratio` because the answer's
# tokens are always kept and the positions of the kept tokens are stored too (hence 1.008 at `c=0`).
# `c=0` keeps everything: agreement 1, KL and VER 0. As `c` grows, compression rises fast and then
# saturates, because the few tokens a head attends to most score many times its mean and stay; the
# fidelity numbers degrade along the way.
#
# **Picking `c`.** One question is a small sample: on your own data, run the same sweep on a few dozen
# prompts and pick the largest `c` whose top-1 agreement (or task metric) you can accept. `c=1` (evict
# what scores below the mean score over all layers and key heads) is the paper's and a good start;
# `RCKVCache(model)` with no size evicts half of the prompt's entries (`ratio=0.5`) instead. If
# you need a fixed memory budget instead, `RCKVCache(model, budget=256)` keeps 256 entries per key head
# on average, shared by score over all layers and heads, and
# `RCKVCache(model, policy=EvictionPolicy(Ratio(0.6)))` evicts that share of the prompt's entries
# (`Ratio(0.6, scope="head")`: the same share of every key head's prompt).
#
# ## 5. Against a kvpress press at the same compression
#
# [kvpress](https://github.com/NVIDIA/kvpress) implements many KV-compression methods as "presses".
# A press compresses the cache during the forward it wraps, so kvpress's pipeline prefills the
# **context alone** under the press, then asks the question after it, uncompressed. For a like-for-like
# comparison, RCKVCache follows the same protocol here (the one of the KV benchmark,
# `python -m rcattr.eval.kv`): its window is now the last 16 tokens of the context, not the question, so
# its compression at `c=1` differs from section 4's. The presses run at the ratio RCKVCache reaches.
#
# The benchmark's building blocks do the work: `split_prompt` cuts the chat-formatted prompt into
# context and question; `FullCache`, `RCMethod` and `PressMethod` prefill the context into a cache
# and measure its compression; `greedy_answer` answers after it; `teacher_forced` feeds the question
# and a given answer after it and returns the next-token log-probabilities and the head outputs for
# VER. Both add to the cache they are given, hence the copies. kvpress pins transformers < 5.3, so it
# lives in its own environment.

# %%
if importlib.util.find_spec("kvpress") is None:
    print(f"Skipping the kvpress comparison. {KVPRESS_HINT}")
else:
    split = split_prompt(tokenizer, context, question)

    def prefill_and_answer(method: KVMethod) -> tuple[dict, Cache, torch.Tensor]:
        """Prefill the context into ``method``'s cache and answer greedily after it; the row, a copy of
        the cache from before the answer (for teacher forcing), and the answer ``[T]``."""
        cache = method.prefill(model, split.context_ids)
        compression = method.compression(model, cache, split.n_context)
        forced = copy.deepcopy(cache)
        answer = greedy_answer(model, cache, split, MAX_NEW_TOKENS)
        row = {
            "method": method.label,
            "compression_ratio": compression.ratio,
            "bytes_ratio": compression.bytes_ratio,
            "answer": tokenizer.decode(answer, skip_special_tokens=True).strip(),
        }
        return row, forced, answer

    def teacher_force_after_context(cache: Cache, answer: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Question, then ``answer`` but its last token, after the context in ``cache``: log-probs and
        last-layer head outputs at the positions predicting ``answer``."""
        forced = teacher_forced(model, cache, split, answer)
        return forced.log_probs, forced.heads

    full_row, full_cache, split_reference = prefill_and_answer(FullCache())
    split_full = teacher_force_after_context(full_cache, split_reference)
    rows = [full_row | fidelity(*split_full, *split_full)]

    def compare(method: KVMethod) -> dict:
        row, cache, _ = prefill_and_answer(method)
        return row | fidelity(*split_full, *teacher_force_after_context(cache, split_reference))

    rows.append(
        compare(RCMethod(c=1.0, window=16, variant=DEFAULT_RECIPE))
    )  # the default recipe at the paper's c
    ratio = round(rows[-1]["compression_ratio"], 3)  # what RCKVCache reached at c=1
    rows += [compare(PressMethod(name, ratio)) for name in ("snapkv", "streaming_llm")]
    presses = pd.DataFrame(rows)
    presses.to_csv(OUT / "press_comparison.csv", index=False)
    print(
        f"context {split.n_context} tokens, then the question ({split.question_ids.shape[1]} tokens); "
        f"presses at ratio {ratio}, RCKVCache's at c=1"
    )
    print(presses.drop(columns="answer").to_string(index=False, float_format="{:.3f}".format))
    for row in rows:
        print(f"{row['method']:>22}: {row['answer']!r}")
    print(f"saved {OUT / 'press_comparison.csv'}")

# %% [markdown]
# At the same share of entries evicted, RCKVCache spreads its budget unevenly over heads and layers;
# SnapKV gives every head the same number of tokens, those the last 64 context tokens attend to most;
# StreamingLLM keeps the first 4 tokens and the most recent ones. Compare the fidelity columns and the
# answers, but keep in mind that one prompt says little: the benchmark below runs these comparisons over
# many questions.
#
# ## 6. Where to go next
#
# * The full KV benchmark (RCKVCache against seven kvpress presses on SQuAD v2 and QMSum, VER and
#   ROUGE, resumable runs with plots): `python -m rcattr.eval.kv --help`; the results are in the
#   README's "Headline results" (docs/results.md), the protocol and every row in `docs/benchmarks/kv-cache.md` ("KV benchmark").
# * `benchmarks/bench_kv_fidelity.py` (KL and top-1 agreement over 40 questions) and
#   `benchmarks/bench_kvcache.py` (memory and speed against `DynamicCache`), summarised in
#   docs/guide/kvcache.md.
# * The other tutorials: `01_explain_a_rag_answer.py` (attributing an answer to its sources) and
#   `02_benchmark_attribution.py` (benchmarking attribution methods).
