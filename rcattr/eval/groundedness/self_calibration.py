"""Cut-offs without labels: each model's support cut-off from claims it makes for itself.

For a seeded draw of [`DRAWN`][rcattr.eval.groundedness.self_calibration.DRAWN] claims of the run, two claims whose answer is known without a person:

- a **negative**: the claim read over the references of a claim of another question (nothing there supports
  it);
- a **positive**: a sentence of the claim's own references ([`MIN_WORDS`][rcattr.eval.groundedness.self_calibration.MIN_WORDS] words or more, drawn) read as the
  answer over those references (copied, so supported).

[`self_cut`][rcattr.eval.groundedness.self_calibration.self_cut] is the support cut-off that best tells the two apart (the most of Youden's J, half-way
between neighbouring values), so a mark below it says "this model, on this kind of context, supports the claim
no more than a claim over unrelated documents" whatever the model's scale. No person's label is read.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from rcattr.text.prompting import ContextInput
from rcattr.text.segmentation import sentence_spans

if TYPE_CHECKING:
    from rcattr.attribution.attributor import RCAttributor
    from rcattr.eval.groundedness.attributionbench import ClaimRecord

DRAWN = 150
MIN_WORDS = 6
KINDS = ("negative", "positive")


def made_claims(claims: Sequence[ClaimRecord], seed: int) -> list[tuple[str, ContextInput, str]]:
    """`(key, inputs, answer)` of the negative and the positive of each of [`DRAWN`][rcattr.eval.groundedness.self_calibration.DRAWN] claims drawn with
    `seed` (a claim whose references have no sentence of [`MIN_WORDS`][rcattr.eval.groundedness.self_calibration.MIN_WORDS] words gives its negative only)."""
    rng = random.Random(f"self-calibration:{seed}")
    drawn = rng.sample(list(claims), min(DRAWN, len(claims)))
    made = []
    for record in drawn:
        others = [other for other in claims if other.question != record.question]
        other = rng.choice(others)
        made.append(
            (f"{record.id}:negative", ContextInput(list(other.references), record.question), record.claim)
        )
        sentences = [
            sentence.text
            for reference in record.references
            for sentence in sentence_spans(reference)
            if len(sentence.text.split()) >= MIN_WORDS
        ]
        if sentences:
            inputs = ContextInput(list(record.references), record.question)
            made.append((f"{record.id}:positive", inputs, rng.choice(sentences)))
    return made


def made_row(attributor: RCAttributor, key: str, inputs: ContextInput, answer: str) -> dict[str, Any]:
    """The support the library gives `answer` over `inputs` (its weakest sentence's), or `skipped`."""
    kind = key.rsplit(":", 1)[1]
    try:
        citations = attributor.attribute(inputs, target=answer).citations()
    except ValueError as error:
        return {"id": key, "kind": kind, "skipped": str(error)}
    return {"id": key, "kind": kind, "support": min(c.support for c in citations if c.support is not None)}


def self_cut(rows: Sequence[dict[str, Any]]) -> float | None:
    """The support cut-off (supported at or above it) that best separates the positives from the negatives of
    the `rows` (the most of Youden's J; half-way between the two values around it), or None without both."""
    support = {
        kind: np.array([r["support"] for r in rows if r["kind"] == kind and "skipped" not in r])
        for kind in KINDS
    }
    if not all(len(values) for values in support.values()):
        return None
    values = np.unique(np.concatenate(list(support.values())))
    halfway = (values[1:] + values[:-1]) / 2
    halfway = np.where(halfway > values[:-1], halfway, values[1:])  # two neighbours too close to halve
    cuts = np.concatenate([[values[0]], halfway, [np.inf]])
    youden = [(support["positive"] >= cut).mean() - (support["negative"] >= cut).mean() for cut in cuts]
    return float(cuts[int(np.argmax(youden))])
