"""Compatibility with the installed transformers (rcattr.runtime.compat)."""

from __future__ import annotations

import pytest
import torch

from rcattr.kvcache import (
    RCKVCache,
    cache_argument,
)
from tests.helpers import char_tokenizer, tiny_model

pytestmark = pytest.mark.transformers_line


def test_cache_argument_names_the_cache_as_the_installed_transformers_wants() -> None:
    """``cache=`` where the forward takes it (5.24 deprecates ``past_key_values=`` with a FutureWarning),
    ``past_key_values=`` on the 5.2 line (whose generate refuses ``cache=``, and whose forward ignores it):
    no warning either way, and the cache is the one generate fills. rcattr's own generate calls too."""
    import warnings

    from rcattr import RCAttributor, TopHeads

    model = tiny_model("llama")
    ids = torch.randint(3, 120, (1, 30))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        with RCKVCache(model, window=4) as cache:
            model.generate(
                ids, **cache_argument(model, cache), max_new_tokens=3, do_sample=False, pad_token_id=0
            )
            assert cache.get_seq_length() == 32 and 0 < cache.compression_ratio < 1  # filled, and evicted
            model(ids[:, :1], **cache_argument(model, cache))
        result = RCAttributor(model, char_tokenizer(), TopHeads(4)).attribute(
            "Paris is in France.", gen_args={"max_new_tokens": 3}
        )
    assert result.answer
