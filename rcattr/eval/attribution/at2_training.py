"""Train AT2 for a model on data that is no benchmark file, and measure its accuracy per training size.

    python -m rcattr.eval.attribution.at2_training --examples 400 --sizes 25,100,400 --out runs/at2

The training inputs ([`training_inputs`][rcattr.eval.attribution.at2_training.training_inputs]) are RAG-shaped and disjoint from the attribution benchmark's
files: SQuAD v2 dev questions, taken from the end of the file, each with its own paragraph and three
paragraphs of other articles as documents (in a seeded order); every fourth input is a QMSum validation
query over a meeting excerpt of 512 tokens. The model answers each itself, the package's trainer ablates
each example's sentences 32 times and fits one estimator per training size
([`rcattr.baselines.at2.train_estimator`][rcattr.baselines.at2.train_estimator]). Each estimator is then run as the benchmark's `at2` method
on the first `--eval-limit` records of QuoteSum and Veri-Gran dev; `OUT/accuracy.md` holds the table of
accuracy against training examples.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import PreTrainedModel

from rcattr.baselines.at2 import train_estimator
from rcattr.eval.attribution.config import BenchmarkConfig
from rcattr.eval.attribution.runner import AttributionBenchmark
from rcattr.eval.kv.data import load_qmsum, squad_articles
from rcattr.options import positive_int
from rcattr.protocols import TokenizerLike
from rcattr.runtime.models import load_model
from rcattr.text.prompting import ContextInput

DISTRACTORS = 3  # paragraphs of other articles beside a SQuAD question's own
QMSUM_EVERY = 4  # every fourth training input is a QMSum query
QMSUM_BUDGET = 512  # tokens of meeting excerpt


def training_inputs(tokenizer: TokenizerLike, n: int, seed: int = 0) -> list[ContextInput]:
    """`n` training inputs: SQuAD v2 dev questions from the file's end with distractor paragraphs, and every
    [`QMSUM_EVERY`][rcattr.eval.attribution.at2_training.QMSUM_EVERY]-th one a QMSum validation query over its meeting excerpt."""
    rng = random.Random(seed)
    articles = squad_articles()
    questions = [
        (a, paragraph["context"], qa["question"])
        for a, article in enumerate(articles)
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
        if not qa["is_impossible"]
    ][::-1]
    n_qmsum = n // QMSUM_EVERY
    qmsum = load_qmsum(lambda text: len(tokenizer(text)["input_ids"]), QMSUM_BUDGET, n_qmsum)
    inputs = []
    for i in range(n):
        if (i + 1) % QMSUM_EVERY == 0 and qmsum:
            record = qmsum.pop(0)
            inputs.append(ContextInput(record.context, record.question))
            continue
        article, own, question = questions.pop(0)
        others = [i for i in range(len(articles)) if i != article]
        documents = [own] + [
            rng.choice(articles[other]["paragraphs"])["context"] for other in rng.sample(others, DISTRACTORS)
        ]
        rng.shuffle(documents)
        inputs.append(ContextInput(documents, question))
    return inputs


Accuracy = dict[str, dict[int, dict[str, Any]]]  # dataset -> training size -> accuracy, interval, counts


def accuracy_by_size(
    model: PreTrainedModel,
    tokenizer: TokenizerLike,
    out: Path,
    sizes: Sequence[int],
    eval_limit: int | None,
    datasets: Sequence[str] = ("quotesum", "verigran"),
) -> Accuracy:
    """Each size's estimator as the benchmark's `at2` method: accuracy [95% CI] per dataset and size."""
    table: Accuracy = {}
    for dataset in datasets:
        for size in sizes:
            config = BenchmarkConfig(
                dataset=dataset,
                methods=("at2",),
                limit=eval_limit,
                at2_estimator=str(out / "estimators" / f"n{size}" / "score_estimator.pt"),
            )
            run = AttributionBenchmark(config, model, tokenizer, out / "eval" / f"{dataset}-n{size}")
            row = run.run()["methods"]["at2"]
            table.setdefault(dataset, {})[size] = {
                key: row[key] for key in ("accuracy", "interval", "n_spans", "n_records")
            }
    return table


def markdown(table: Accuracy) -> str:
    """The accuracy table: one row per training size, one column per dataset."""
    datasets = list(table)
    sizes = sorted({size for rows in table.values() for size in rows})
    lines = [
        "| training examples | " + " | ".join(datasets) + " |",
        "|---|" + "---|" * len(datasets),
    ]
    for size in sizes:
        cells = []
        for dataset in datasets:
            row = table[dataset].get(size)
            if row is None:
                cells.append("—")
                continue
            low, high = row["interval"]
            cells.append(f"{row['accuracy']:.1%} [{low:.1%}, {high:.1%}] ({row['n_records']} records)")
        lines.append(f"| {size} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m rcattr.eval.attribution.at2_training",
        description="Train AT2 (the at2 package) on SQuAD v2 and QMSum inputs the model answers itself; "
        "report its QuoteSum and Veri-Gran accuracy per training size.",
    )
    parser.add_argument("--out", required=True, help="the run folder (resumed when it exists)")
    parser.add_argument("--examples", type=positive_int, default=400, help="training inputs (default 400)")
    parser.add_argument(
        "--sizes", default=None, help="comma-separated training sizes (default: --examples alone)"
    )
    parser.add_argument(
        "--num-masks", type=positive_int, default=32, help="ablations per example (default 32)"
    )
    parser.add_argument(
        "--eval-limit", type=positive_int, default=None, help="records of each dev file (default: all)"
    )
    parser.add_argument(
        "--datasets", default="quotesum,verigran", help="dev files to measure on (default: quotesum,verigran)"
    )
    parser.add_argument("--model", default=None, help="model name or path (default: the offline default)")
    parser.add_argument("--device", default="cpu")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")] if args.sizes else [args.examples]
    model, tokenizer = load_model(args.model, device=args.device)
    out = Path(args.out)
    inputs = training_inputs(tokenizer, args.examples)
    train_estimator(model, tokenizer, inputs, out, sizes=sizes, num_masks=args.num_masks)
    table = accuracy_by_size(model, tokenizer, out, sizes, args.eval_limit, args.datasets.split(","))
    (out / "accuracy.json").write_text(json.dumps(table, indent=2))
    (out / "accuracy.md").write_text(markdown(table))
    print(markdown(table))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
