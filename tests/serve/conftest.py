"""The service tests' attributor: the tiny Llama with the character tokenizer, gated (tests.helpers.serving)."""

from __future__ import annotations

import pytest

from tests.helpers import char_tokenizer, tiny_model
from tests.helpers.serving import GatedAttributor


@pytest.fixture(scope="module")
def gated() -> GatedAttributor:
    return GatedAttributor(tiny_model("llama"), char_tokenizer())


@pytest.fixture(autouse=True)
def _open_gate(gated: GatedAttributor):
    gated.gate.set()
    gated.entered.clear()
    gated.batch_sizes.clear()
    yield
    gated.gate.set()  # never leave a worker waiting
