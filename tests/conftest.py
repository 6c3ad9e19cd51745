"""Shared fixtures and the kvpress marker (the helpers they use are in the tests/helpers package)."""

from __future__ import annotations

import json
import os

# Tests compare a pass against a brute force over a second pass. MKL picks kernels by memory alignment,
# so two forwards of one input differ in the last bit in about one process in ten (a near-tie then flips a
# count). Conditional numerical reproducibility makes every pass bitwise repeatable; set before torch loads.
os.environ.setdefault("MKL_CBWR", "COMPATIBLE")

import pytest  # noqa: E402
import torch  # noqa: E402

from tests.helpers import ARCHITECTURES, QUOTESUM_RECORDS, char_tokenizer, data_folder, save_tiny, tiny_model


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(1234)


@pytest.fixture(scope="session")
def smollm2():
    """The offline default model and its tokenizer, loaded once for the session (a test that changes the model
    changes a deep copy)."""
    from rcattr.runtime.models import load_model

    return load_model()


@pytest.fixture(scope="session")
def gemma3():
    """The offline Gemma-3-270m and its tokenizer (the gemma extra), loaded once for the session."""
    from rcattr.runtime.models import load_model

    return load_model("gemma-3-270m")


@pytest.fixture(params=ARCHITECTURES)
def arch(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def llama():
    """The tiny Llama, built once per test module (tests that change a model build their own)."""
    return tiny_model("llama")


@pytest.fixture(scope="module")
def tokenizer():
    """The character-level tokenizer of the tiny models."""
    return char_tokenizer()


@pytest.fixture(scope="module")
def saved_llama(tmp_path_factory):
    return save_tiny(tiny_model("llama"), tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture
def quotesum_data(tmp_path, monkeypatch):
    lines = "".join(json.dumps(record) + "\n" for record in QUOTESUM_RECORDS)
    return data_folder(tmp_path, monkeypatch, "quotesum/dev.jsonl", lines)


def _kvpress_available() -> bool:
    try:
        import kvpress  # noqa: F401
    except ImportError:
        return False
    return True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``kvpress`` skip where kvpress is missing, and fail where it is required
    (``RCATTR_REQUIRE_KVPRESS=1``, set by ``make test-kvpress``)."""
    import os

    marked = [item for item in items if item.get_closest_marker("kvpress")]
    if not marked or _kvpress_available():
        return
    if os.environ.get("RCATTR_REQUIRE_KVPRESS") == "1":
        raise pytest.UsageError("RCATTR_REQUIRE_KVPRESS=1 but kvpress cannot be imported")
    skip = pytest.mark.skip(reason="kvpress is not installed here (make test-kvpress runs these)")
    for item in marked:
        item.add_marker(skip)


@pytest.fixture
def unchanged_process_state():
    """Fails the test if it leaves grad mode or matplotlib's backend changed (public entry points must not)."""
    import matplotlib

    grad, backend = torch.is_grad_enabled(), matplotlib.get_backend()
    yield
    assert torch.is_grad_enabled() == grad, "grad mode changed"
    assert matplotlib.get_backend() == backend, "matplotlib backend changed"
