"""Helpers the tests share (fixtures are in the conftest.py files): tiny models and a character tokenizer
(:mod:`.models`) and the benchmarks' tiny data (:mod:`.data`), re-exported here; in their own modules, the
attribution tests' example (:mod:`.attribution`), synthetic logits blocks (:mod:`.blocks`), hypothesis strategies
(:mod:`.samples`), hand-made results (:mod:`.results`, with documents
:mod:`.cited`), citation row lines (:mod:`.citation_lines`), command lines run in a fresh interpreter (:mod:`.commands`), the leak
tests' entry points (:mod:`.entry_points`), the package's and tests' layout and the mirror rule (:mod:`.layout`) and a
pytest plugin that reports what a marker expression selects (:mod:`.selection`). Brute-force references are in :mod:`tests.reference`."""

from tests.helpers.data import (
    KV_CONTEXT,
    KV_QUESTION,
    LENGTH_SQUAD,
    PAIRED_ARTICLES,
    PARAGRAPHS,
    QUOTESUM_RECORDS,
    SQUAD,
    TIMINGS,
    context_files,
    data_folder,
    kv_row,
    kv_summary,
    run_attribution,
    without_timings,
)
from tests.helpers.models import (
    ARCHITECTURES,
    CHAT_TEMPLATE,
    COMMON,
    char_tokenizer,
    kv_model,
    prompt,
    random_predictor,
    save_tiny,
    tiny_configs,
    tiny_model,
    wide_llama,
)

__all__ = [
    "KV_CONTEXT",
    "KV_QUESTION",
    "LENGTH_SQUAD",
    "PAIRED_ARTICLES",
    "ARCHITECTURES",
    "CHAT_TEMPLATE",
    "COMMON",
    "PARAGRAPHS",
    "QUOTESUM_RECORDS",
    "SQUAD",
    "TIMINGS",
    "char_tokenizer",
    "context_files",
    "data_folder",
    "kv_model",
    "kv_row",
    "kv_summary",
    "prompt",
    "random_predictor",
    "run_attribution",
    "save_tiny",
    "tiny_configs",
    "tiny_model",
    "wide_llama",
    "without_timings",
]
