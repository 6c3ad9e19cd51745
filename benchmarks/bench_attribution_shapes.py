"""``attribute()`` against one plain forward on a model of a named shape with random weights, on any device and
attention kernel (issue 74: an 8B-shaped model at 8k and 32k tokens, sdpa and flex attention, on a GPU).

No weights travel: the model is built from its shape (``SHAPES``, the published configs' sizes) with random
weights in ``--dtype``, and the text is tokenized by a word-level tokenizer built from the text itself (a word
with its leading space, a punctuation mark or a run of whitespace is one token; about one BPE token each), so the
sentences have about the length they have under the real tokenizer. The example is ``bench_attribution.py``'s
(SQuAD v2 dev contexts cut at ``--contexts`` tokens, the question of the first paragraph, the next paragraph cut to
``--answer`` tokens as the answer), with no chat template.

Per kernel and context: ``--repeats`` interleaved pairs (a plain forward ``model(ids, logits_to_keep=1)``, then
``RCAttributor(model, tokenizer).attribute(ContextInput(context, question), target=answer,
granularity="sentence")``) after one warm-up of each (flex attention compiles for each new shape there), each call
ended by a device synchronisation; the medians and their ratio. On CUDA, the peak memory each call allocates over
what was allocated before it (``torch.cuda.max_memory_allocated``, the weights excluded), and their ratio.

    python benchmarks/bench_attribution_shapes.py --shape llama3-8b --contexts 8192 32768 \
        --attn sdpa flex_attention --device cuda --dtype bfloat16 --json shapes.json
    python benchmarks/bench_attribution_shapes.py --shape smollm2-135m --contexts 2048 --repeats 3  # the CPU
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from bench_attribution import _prompt_ids, _squad_path, build_example
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from rcattr import ContextInput, RCAttributor

SHAPES: dict[str, dict[str, Any]] = {  # Llama-architecture sizes of the published configs
    "llama3-8b": {
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "rope_theta": 500000.0,
        "max_position_embeddings": 131072,
    },
    "smollm2-135m": {
        "hidden_size": 576,
        "intermediate_size": 1536,
        "num_hidden_layers": 30,
        "num_attention_heads": 9,
        "num_key_value_heads": 3,
        "vocab_size": 49152,
        "rope_theta": 100000.0,
        "max_position_embeddings": 65536,
    },
}
PIECE = r" ?\w+| ?[^\w\s]|\s+"


def word_tokenizer(text: str, vocab_size: int) -> PreTrainedTokenizerFast:
    """A word-level tokenizer whose vocabulary is ``text``'s pieces (:data:`PIECE`), at most ``vocab_size``."""
    vocab = {"<unk>": 0, "<bos>": 1, "<eos>": 2}
    for piece in re.findall(PIECE, text):
        if len(vocab) == vocab_size:
            break
        vocab.setdefault(piece, len(vocab))
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(PIECE), behavior="isolated")
    backend.decoder = decoders.Fuse()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<bos>", eos_token="<eos>", unk_token="<unk>"
    )


def squad_tokenizer(shape: str) -> PreTrainedTokenizerFast:
    """:func:`word_tokenizer` of SQuAD v2 dev's contexts and questions, at ``shape``'s vocabulary size."""
    with open(_squad_path(), encoding="utf-8") as handle:
        squad = json.load(handle)["data"]
    words = "".join(
        p["context"] + p["qas"][0]["question"] for a in squad for p in a["paragraphs"] if p["qas"]
    )
    return word_tokenizer(words, SHAPES[shape]["vocab_size"])


def random_model(shape: str, attn: str, device: str, dtype: torch.dtype) -> LlamaForCausalLM:
    """A Llama model of ``shape`` with random weights, built on ``device`` in ``dtype``."""
    config = LlamaConfig(**SHAPES[shape], attn_implementation=attn)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(default)
    return model.eval()


def _measured(call: Callable[[], Any], device: torch.device) -> tuple[float, float | None]:
    """Seconds of one call to its device's end, and the memory it allocated at its peak (MiB, CUDA only)."""
    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
    start = time.perf_counter()
    call()
    if cuda:
        torch.cuda.synchronize(device)
    seconds = time.perf_counter() - start
    peak = (torch.cuda.max_memory_allocated(device) - before) / 2**20 if cuda else None
    return seconds, peak


def measure(
    model: Any, tokenizer: Any, context_tokens: int, answer_tokens: int, repeats: int
) -> dict[str, Any]:
    """The paired medians of one context size (seconds, peak MiB) and their ratios."""
    context, question, answer = build_example(tokenizer, context_tokens, answer_tokens)
    explainer = RCAttributor(model, tokenizer)
    source = ContextInput(context, question)
    ids = torch.tensor([_prompt_ids(tokenizer, context, question, answer)[0]], device=model.device)
    calls = {
        "forward": lambda: model(ids, logits_to_keep=1),
        "attribute": lambda: explainer.attribute(source, target=answer, granularity="sentence"),
    }
    runs: dict[str, list[tuple[float, float | None]]] = {name: [] for name in calls}
    with torch.no_grad():
        for call in calls.values():
            call()  # warm-up (and flex attention's compilation for this shape)
        for _ in range(repeats):
            for name, call in calls.items():
                runs[name].append(_measured(call, model.device))
    seconds = {name: statistics.median(run[0] for run in values) for name, values in runs.items()}
    row: dict[str, Any] = {
        "context_tokens": context_tokens,
        "tokens": ids.shape[1],
        "seconds": seconds,
        "attribute / forward": seconds["attribute"] / seconds["forward"],
        "each": {name: [round(run[0], 4) for run in values] for name, values in runs.items()},
    }
    if model.device.type == "cuda":
        peak = {name: max(run[1] or 0.0 for run in values) for name, values in runs.items()}
        row["peak MiB over the weights"] = peak
        row["attribute / forward peak"] = peak["attribute"] / peak["forward"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", choices=list(SHAPES), default="llama3-8b")
    parser.add_argument("--contexts", nargs="+", type=int, default=[8192, 32768], help="context tokens")
    parser.add_argument("--answer", type=int, default=100, help="answer tokens (default 100)")
    parser.add_argument("--attn", nargs="+", default=["sdpa"], choices=["sdpa", "eager", "flex_attention"])
    parser.add_argument("--repeats", type=int, default=5, help="interleaved (forward, attribute) pairs")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float16", "float32"])
    parser.add_argument("--json", type=Path, help="also write the rows to this JSON file")
    args = parser.parse_args()
    torch.manual_seed(0)
    tokenizer = squad_tokenizer(args.shape)
    rows = []
    for attn in args.attn:
        model = random_model(args.shape, attn, args.device, getattr(torch, args.dtype))
        for context_tokens in args.contexts:
            row = {"shape": args.shape, "attn": attn, "dtype": args.dtype, "device": args.device}
            row |= measure(model, tokenizer, context_tokens, args.answer, args.repeats)
            print(json.dumps(row), flush=True)
            rows.append(row)
            if args.json:
                args.json.write_text(json.dumps(rows, indent=1))
        del model
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
