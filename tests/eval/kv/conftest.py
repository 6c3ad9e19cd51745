"""The KV benchmark tests' tiny saved model and SQuAD-format data folder."""

from __future__ import annotations

import json

import pytest

from tests.helpers import SQUAD, data_folder, save_tiny, wide_llama


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    """The wide tiny Llama saved with the character tokenizer, once per test module."""
    return save_tiny(wide_llama(), tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture
def data(tmp_path, monkeypatch):
    """A data folder holding the tiny SQuAD v2 file (``RCATTR_DATA`` points there)."""
    return data_folder(tmp_path, monkeypatch, "squad_v2/dev-v2.0.json", json.dumps(SQUAD))
