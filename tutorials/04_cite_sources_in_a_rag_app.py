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
# # Cite sources in a RAG app
#
# A RAG application shows people an answer with citation marks and a list of sources. This tutorial
# goes from retrieved documents, as a retrieval framework returns them (text plus metadata), to that
# answer, for one question and then for several at once.
#
# `rcattr` reads the citations off the same one forward pass that explains the answer: each answer
# sentence cites the documents whose share of its attribution is at least 0.8 of the best one's, at most
# three (the rule chosen on QuoteSum and Veri-Gran, see docs/benchmarks/citations.md "Citations").
#
# Everything runs offline on CPU with the packaged SmolLM2-135M-Instruct.

# %%
import os
from pathlib import Path
from types import SimpleNamespace

import pandas as pd

from rcattr import ContextInput, RCAttributor, load_model

OUT = Path(os.environ.get("RCATTR_TUTORIAL_OUT", "tutorial-output")) / "04_cite_sources_in_a_rag_app"
OUT.mkdir(parents=True, exist_ok=True)

model, tokenizer = load_model()  # offline SmolLM2-135M-Instruct, float32, CPU
attributor = RCAttributor(model, tokenizer)

# %% [markdown]
# ## 1. Documents as a retriever returns them
#
# LangChain's `Document` has `page_content` and `metadata`; LlamaIndex's nodes have `text`, `metadata` and
# `id_`; a JSON store gives dicts. `ContextInput` reads all of them by their fields (it imports neither
# framework), so the retriever's output goes in as it is. Here the retriever is a list: one LangChain-shaped
# object, one LlamaIndex-shaped object and two dicts.

# %%
retrieved = [
    SimpleNamespace(  # what langchain_core.documents.Document looks like
        page_content="Lake Baikal in Siberia is the deepest lake in the world, reaching 1,642 metres. "
        "It holds about a fifth of the world's unfrozen fresh water.",
        metadata={"title": "Lake Baikal", "url": "https://en.wikipedia.org/wiki/Lake_Baikal"},
        id="wiki-baikal",
    ),
    SimpleNamespace(  # what a llama_index TextNode looks like
        text="The Caspian Sea is the largest lake by area, covering 371,000 square kilometres.",
        metadata={"title": "Caspian Sea", "url": "https://en.wikipedia.org/wiki/Caspian_Sea"},
        id_="node-17",
    ),
    {"page_content": "Bread has been baked for at least 14,000 years.", "metadata": {"source": "bread.txt"}},
    {
        "page_content": "Lake Superior is the largest of the Great Lakes of North America by area.",
        "metadata": {"title": "Lake Superior"},
    },
]
question = "Which lake is the deepest, and which is the largest by area?"
inp = ContextInput(retrieved, question)
print([(document.id, document.label()) for document in inp.documents])

# %% [markdown]
# ## 2. Answer and cite
#
# `target=None` lets the model answer; `output_granularity="sentence"` gives one citation per answer
# sentence. `cited_answer("markdown")` writes footnote marks and the source list, with the titles and
# links from the metadata.

# %%
result = attributor.attribute(inp, target=None, granularity="sentence", output_granularity="sentence")
markdown = result.cited_answer("markdown")
print(markdown)
(OUT / "cited_answer.md").write_text(markdown + "\n")

# %% [markdown]
# The same answer with plain `[n]` marks, and as an HTML fragment for a web page (every text escaped,
# links from the metadata's `url`):

# %%
print(result.cited_answer("[n]"))
(OUT / "cited_answer.html").write_text(result.cited_answer("html") + "\n")

# %% [markdown]
# ## 3. What a citation holds
#
# `citations()` gives the data behind the marks: per answer sentence, its character offsets in the answer,
# the cited documents with their share of the sentence's attribution, the id and metadata from the input,
# and (with `sentences=1`) the best sentence of each cited document with its offsets in that document, to
# highlight the quote. Each citation also says how much the documents vouch for its sentence: `support`
# (its mean token support, 0 when no sentence of the documents or the question holds one of its numbers or
# dates) and `status`, `"supported"`, `"weak"` (below 0.5) or `"unsupported"` (below 0.25: no citation, and
# `cited_answer()` writes `[unsupported: ...]` with the claims the documents do not hold); `"partial"` when
# the sentence mixes held and unheld claims: its held part keeps its citation and `cited_answer()` tags each
# unheld claim where it stands. A sentence without a citation says why (`uncited`).

# %%
rows = []
for citation in result.citations(sentences=1):
    for cited in citation.sources:
        rows.append(
            {
                "answer sentence": citation.text,
                "status": citation.status,
                "support": round(citation.support, 3),
                "mark": f"[{cited.number}]",
                "share": round(cited.score, 3),
                "id": cited.id,
                "title": cited.metadata.get("title") or cited.metadata.get("source"),
                "quote": cited.spans[0].text,
            }
        )
    if not citation.sources:
        unheld = ", ".join(claim.text for claim in citation.unheld_claims)
        rows.append(
            {
                "answer sentence": citation.text,
                "status": citation.status,
                "uncited": citation.uncited,
                "unheld": unheld,
            }
        )
table = pd.DataFrame(rows)
table.to_csv(OUT / "citations.csv", index=False)
print(table.to_string())

# %% [markdown]
# ## 4. A given answer, and what the metadata does downstream
#
# An application that generates with its own stack passes the answer as `target`. Here it is an answer
# whose first sentence comes from document 1 and whose second from document 2. `to_dict()` carries the
# metadata too, so a log of explanations keeps where each source came from.

# %%
given = "Lake Baikal is the deepest lake, at 1,642 metres. The Caspian Sea is the largest by area."
explained = attributor.attribute(inp, given, granularity="sentence", output_granularity="sentence")
print(explained.cited_answer("[n]"))
print([document["metadata"] for document in explained.to_dict()["documents"]][:2])

# %% [markdown]
# ## 5. Many questions at once
#
# An application answers many questions. `attribute_many` takes a list of inputs (and optionally their
# answers), generates the missing answers a batch at a time (left-padded, greedy) and explains each batch
# with one left-padded forward pass, with a progress bar. Its results equal those of one `attribute` call
# per input (the test suite checks them to 1e-5); on a GPU the batch runs many examples in the time of a
# few (on this 2-core CPU the gain is small: `benchmarks/bench_batch.py`).

# %%
questions = [
    "Which lake is the deepest?",
    "How large is the Caspian Sea?",
    "How long has bread been baked?",
]
inputs = [ContextInput(retrieved, q) for q in questions]
results = attributor.attribute_many(
    inputs, batch_size=3, granularity="chunk", output_granularity="sentence", gen_args={"max_new_tokens": 40}
)
batch = pd.DataFrame(
    {"question": questions, "answer": [r.cited_answer("[n]", references=False) for r in results]}
)
batch.to_csv(OUT / "batch.csv", index=False)
print(batch.to_string())
