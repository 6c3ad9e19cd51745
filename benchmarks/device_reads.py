"""Where ``attribute()`` makes the host wait for the model's device: the operations that read a value computed
on the device, counted in one call and in one plain forward, by the line of rcattr that asked.

On a GPU each such read (``int(t)``, ``t.item()``, ``bool(t)``, ``t.nonzero()``, indexing by a bool mask,
``masked_select``, ``unique``, ``repeat_interleave`` by a tensor) synchronises the host with the device's
queue: the host stops queueing kernels until the device has run everything before it, and the device idles
while the next kernels are queued (issue 74: 552 synchronisations in one call on an 8B model at 8k tokens).
They are counted here on any device (the CPU by default) below autograd, by ``tests/helpers/device_reads.py``'s
``DeviceReads``, so the count needs no GPU. Copies between host and device (``.cpu()``, ``.to(device)``) are not
counted: on the CPU there are none to see. On the CPU every tensor is on the host, so reads of tensors that
rcattr keeps on the host anyway (the selection's head indices) are counted too.

The model is :mod:`bench_attribution_shapes`' random-weight model of ``--shape`` and the example its
(``bench_attribution.py``'s text, a word-level tokenizer).

    python benchmarks/device_reads.py --shape smollm2-135m --context 512 --answer 30
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from bench_attribution import _prompt_ids, build_example
from bench_attribution_shapes import SHAPES, random_model, squad_tokenizer

from rcattr import ContextInput, RCAttributor

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.helpers.device_reads import DeviceReads  # noqa: E402  # the tests' counter, from the repository


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--shape", choices=list(SHAPES), default="smollm2-135m")
    parser.add_argument("--context", type=int, default=512, help="context tokens (default 512)")
    parser.add_argument("--answer", type=int, default=30, help="answer tokens (default 30)")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.manual_seed(0)
    tokenizer = squad_tokenizer(args.shape)
    model = random_model(args.shape, "sdpa", args.device, torch.float32)
    context, question, answer = build_example(tokenizer, args.context, args.answer)
    ids = torch.tensor([_prompt_ids(tokenizer, context, question, answer)[0]], device=model.device)
    explainer = RCAttributor(model, tokenizer)
    calls = {
        "forward": lambda: model(ids, logits_to_keep=1),
        "attribute": lambda: explainer.attribute(
            ContextInput(context, question), target=answer, granularity="sentence"
        ),
    }
    with torch.no_grad():
        for name, call in calls.items():
            call()  # warm-up: first-call set-up is not what a user pays each time
            with DeviceReads() as reads:
                call()
            print(f"{name}: {reads.total} reads ({ids.shape[1]} tokens)")
            for (operation, asker), count in reads.counts.most_common():
                print(f"  {count:5d}  {operation:22s} {asker}")


if __name__ == "__main__":
    main()
