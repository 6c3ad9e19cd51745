"""Which layer should the hidden-state baseline read? Chunk-level accuracy of every layer, one forward per record.

    python benchmarks/bench_hidden_state_layers.py --dataset quotesum --limit 100

Prints accuracy per layer (gold answer teacher-forced, as in ``rcattr.eval.attribution``).
"""

from __future__ import annotations

import argparse

import torch
from tqdm.auto import tqdm

from rcattr.attribution.spans import unit_sum
from rcattr.baselines import HiddenStateAttributor
from rcattr.baselines.hidden_state import anchor_votes
from rcattr.eval.common.datasets import load_attribution
from rcattr.eval.common.metrics import accuracy, source_hits
from rcattr.runtime.models import load_model
from rcattr.text.prompting import ContextInput


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="quotesum", choices=("quotesum", "verigran"))
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--model")
    args = parser.parse_args()
    model, tokenizer = load_model(args.model)
    attributor = HiddenStateAttributor(model, tokenizer)
    hits: dict[int, list[bool]] = {}
    for record in tqdm([r for r in load_attribution(args.dataset, limit=args.limit) if r.gold]):
        units = [(span.start, span.end) for span in record.gold]
        example = attributor.prepare(
            ContextInput(record.chunks, record.question), record.answer, "chunk", units
        )
        with torch.no_grad():
            hidden = model(example.ids, output_hidden_states=True, logits_to_keep=1).hidden_states
        for layer in range(1, len(hidden)):
            scores = unit_sum(anchor_votes(hidden[layer][0], example), example.unit_ranges)
            hits.setdefault(layer, []).extend(source_hits(scores, example.context_spans, record.gold))
    print(f"{args.dataset}, first {args.limit} records, {len(hits[1])} spans ({model.config.name_or_path})")
    print("| layer | accuracy |\n|---|---|")
    for layer, layer_hits in hits.items():
        print(f"| {layer} | {accuracy(layer_hits)[0]:.1%} |")


if __name__ == "__main__":
    main()
