"""What RCAttributor gives, written down so that a refactor can be shown to change nothing.

Real-model attributions under several recipes (the default, BM25 fusion, the mass vote, fixed and top-k
heads, the paper's, chunk / sentence / token granularities, ``attribute_many``), each with everything a user
reads off the result: scores, signals, heads, citations, the cited answer in every style, the table, the
dict, the HTML page and the support probe's verdict:

    python benchmarks/fingerprint_attribution.py --out /tmp/attr_before.json            # on the code before
    python benchmarks/fingerprint_attribution.py --out /tmp/attr_after.json --compare /tmp/attr_before.json

``--compare`` prints each entry that differs and the count of differences, and exits 1 when there is one.
"""

from __future__ import annotations

from typing import Any

from fingerprint_kvcache import fingerprint_parser, plain, write_and_compare

import rcattr
from rcattr import ContextInput, FixedHeads, RCAttributor, TopHeads
from rcattr.viz import to_html

DOCUMENTS = [
    "The Eiffel Tower was completed in 1889 for the World's Fair. It is 330 metres tall.",
    "Paris is the capital of France. About two million people live in the city itself.",
    "The Louvre, once a royal palace, opened as a museum in 1793. It holds the Mona Lisa.",
]
QUESTION = "When was the Eiffel Tower completed, and where is the Mona Lisa?"
ANSWER = "The Eiffel Tower was completed in 1889. The Mona Lisa is in the Louvre, which opened in 1802."


def views(result: rcattr.RCAttributionResult) -> dict[str, Any]:
    """Everything a user reads off a result."""
    return {
        "dict": plain(result.to_dict()),
        "repr": repr(result),
        "frame": result.to_dataframe().to_json(),
        "citations": plain(result.citations(sentences=1)),
        "citations_loose": plain(result.citations(min_share=0.2, min_support=0.0)),
        "cited": [result.cited_answer(style) for style in ("[n]", "markdown", "html")],
        "cited_bare": result.cited_answer(references=False, max_sources=1),
        "unsupported": result.unsupported_tokens(0.5),
        "documents": result.document_scores().tolist(),
        "table": result._repr_html_(),
        "html": to_html(result),
        "keys": result.span_keys(),
        "labels": result.span_labels(),
    }


def run() -> dict[str, Any]:
    model, tokenizer = rcattr.load_model()
    context = ContextInput(DOCUMENTS, question=QUESTION)
    attributors = {
        "default": RCAttributor(model, tokenizer),
        "lexical": RCAttributor(model, tokenizer, lexical=True),
        "mass": RCAttributor(model, tokenizer, votes="mass"),
        "top5": RCAttributor(model, tokenizer, heads=TopHeads(5)),
        "fixed": RCAttributor(model, tokenizer, heads=FixedHeads([(3, 1), (10, 4), (20, 7)])),
        "paper": RCAttributor.paper(model, tokenizer),
    }
    out: dict[str, Any] = {}
    for name, attributor in attributors.items():
        for granularity, output in (("sentence", "answer"), ("chunk", "sentence"), ("sentence", "token")):
            if (
                name == "lexical" and output == "token"
            ):  # a token of no word crashed BM25 before issue 76's fix
                continue
            result = attributor.attribute(context, ANSWER, granularity=granularity, output_granularity=output)
            out[f"{name} {granularity}/{output}"] = views(result)
    default = attributors["default"]
    many = default.attribute_many([context, ContextInput(DOCUMENTS[:2])], [ANSWER, None], progress=False)
    out["many"] = [views(result) for result in many]
    verdict = rcattr.claim_verdict(default, context, "The Eiffel Tower was completed in 1889.")
    out["verdict"] = plain(verdict)
    return out


def main() -> None:
    args = fingerprint_parser(__doc__ or "").parse_args()
    prints = run()
    write_and_compare(prints, args, len(prints), "attributions")


if __name__ == "__main__":
    main()
