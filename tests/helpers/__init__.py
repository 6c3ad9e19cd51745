"""Helpers the tests share (fixtures are in conftest.py): tiny models and a character tokenizer
(:mod:`.models`), the benchmark runners' tiny data (:mod:`.data`); synthetic logits blocks, hypothesis
strategies, the attribution tests' example and the leak tests' entry points are in their own modules."""

from tests.helpers.data import (
    KV_CONTEXT,
    KV_QUESTION,
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
    save_tiny,
    tiny_configs,
    tiny_model,
    wide_llama,
)

__all__ = [
    "KV_CONTEXT",
    "KV_QUESTION",
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
    "run_attribution",
    "save_tiny",
    "tiny_configs",
    "tiny_model",
    "wide_llama",
    "without_timings",
]
