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
# # Cite a RAG system's answers over HTTP
#
# A RAG system in production generates with its own serving engine (vLLM, TGI, an API) and cannot load
# rcattr into that process. `rcattr serve` runs the citation model beside it as a service: the system sends
# the retrieved documents, the question and the answer it generated, and gets back each answer sentence's
# cited documents, how much they vouch for it, and the answer with citation marks. The citing model reads
# the answer teacher-forced, whoever wrote it (ContextCite's answer to "how do I cite vLLM's answers?").
#
# This tutorial runs the three parts together on one machine: a BM25 retriever over LangChain-shaped
# documents, a stand-in generator (your LLM), and the service with its Python client.

# %%
import os
import signal
from pathlib import Path
from types import SimpleNamespace

import bm25s
import pandas as pd

from rcattr.client import CitationClient, ServiceError
from rcattr.serve.command import start_service

OUT = Path(os.environ.get("RCATTR_TUTORIAL_OUT", "tutorial-output")) / "05_citation_service"
OUT.mkdir(parents=True, exist_ok=True)

# %% [markdown]
# ## 1. Start the service
#
# On the command line it is `rcattr serve --port 8000` (the offline SmolLM2-135M-Instruct; `--model` for
# another). Here it starts as a subprocess on a free loopback port, and `GET /healthz` says when it is ready.
# Concurrent requests share forward passes: the service gathers them into batches for a few milliseconds.

# %%
server, url = start_service()  # rcattr serve on a free port, once /healthz answers (rcattr.serve.command)
client = CitationClient(url)
print(client.health())
print(client.model())

# %% [markdown]
# ## 2. A retriever over LangChain documents
#
# LangChain's `Document` has `page_content` and `metadata` (LlamaIndex's nodes have `text`); the client
# sends any shape the library reads, with its metadata. The retriever is BM25 (`bm25s`) over a small corpus.

# %%
corpus = [
    SimpleNamespace(  # what langchain_core.documents.Document looks like
        page_content="Lake Baikal in Siberia is the deepest lake in the world, reaching 1,642 metres.",
        metadata={"title": "Lake Baikal", "source": "wiki/Lake_Baikal"},
    ),
    SimpleNamespace(
        page_content="The Caspian Sea is the largest lake by area, covering 371,000 square kilometres.",
        metadata={"title": "Caspian Sea", "source": "wiki/Caspian_Sea"},
    ),
    SimpleNamespace(
        page_content="Lake Superior is the largest of the Great Lakes of North America.",
        metadata={"title": "Lake Superior", "source": "wiki/Lake_Superior"},
    ),
    SimpleNamespace(
        page_content="Mount Fuji is the highest mountain in Japan, rising 3,776 metres.",
        metadata={"title": "Mount Fuji", "source": "wiki/Mount_Fuji"},
    ),
]
index = bm25s.BM25()
index.index(
    bm25s.tokenize([document.page_content for document in corpus], show_progress=False), show_progress=False
)


def retrieve(question: str, k: int = 3) -> list:
    found, _ = index.retrieve(bm25s.tokenize([question], show_progress=False), k=k, show_progress=False)
    return [corpus[int(position)] for position in found[0]]


# %% [markdown]
# ## 3. A stand-in generator
#
# Your LLM goes here: anything that turns documents and a question into an answer. This one writes fixed
# answers, one of them with a number no document holds, as generators sometimes do.

# %%
ANSWERS = {
    "Which lake is the deepest?": "Lake Baikal is the deepest lake, at 1,642 metres.",
    "Which lake is the largest by area?": "The Caspian Sea is the largest by area. It covers 512,000 square kilometres.",
    "How high is Mount Fuji?": "Mount Fuji rises 3,776 metres.",
}


def generate(documents: list, question: str) -> str:
    return ANSWERS[question]


# %% [markdown]
# ## 4. Cite each answer
#
# `client.cite` returns the library's own `Citation` objects: per sentence its cited documents (with their
# metadata), its support and status, and the numbers, dates and names no document holds. The three requests
# are sent together, as three users of the RAG system would, and share the service's batches.

# %%
from concurrent.futures import ThreadPoolExecutor  # noqa: E402


def answer_and_cite(question: str):
    documents = retrieve(question)
    return client.cite(documents, question, answer=generate(documents, question), style="markdown")


with ThreadPoolExecutor(3) as pool:
    served = list(pool.map(answer_and_cite, ANSWERS))
rows = []
for question, cited in zip(ANSWERS, served, strict=True):
    print(f"Q: {question}\n{cited.cited_answer}\n")
    for citation in cited.citations:
        rows.append(
            {
                "question": question,
                "sentence": citation.text,
                "status": citation.status,
                "support": round(citation.support, 3),
                "cited": "; ".join(source.metadata["title"] for source in citation.sources),
                "not in the documents": "; ".join(claim.text for claim in citation.unheld_claims),
            }
        )
table = pd.DataFrame(rows)
table.to_csv(OUT / "citations.csv", index=False)
print(table.to_string())

# %% [markdown]
# ## 5. What the service refuses, and stopping it
#
# A bad request gets a 4xx with one line naming the field, before any model work (`ServiceError` in Python);
# a full queue answers 503 with `Retry-After`, which the client waits out and retries. The service's
# counters are at `/healthz`.

# %%
try:
    client.cite(["   "], "Anything?", answer="No.")
except ServiceError as error:
    print(f"refused: {error}")
print(client.health())
client.close()
server.send_signal(signal.SIGINT)
server.wait(60)
