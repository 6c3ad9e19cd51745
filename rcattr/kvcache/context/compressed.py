"""A document compressed once and asked anything afterwards, in this process or in another:
`compress_context` and `CompressedContext` (docs/guide/kvcache.md, "Compress once, ask many").

Saved as a folder of two files: `cache.safetensors` (every layer's kept keys and values, the slots' positions,
the decisions, the context's ids) and `context.json` (the layout, the settings, rcattr's version, the model's
and the tokenizer's identity, a checksum of both files). Loading checks all of it and refuses, in one line,
another model or tokenizer, a damaged or edited file, and a newer format.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Sequence, Sized
from pathlib import Path
from types import TracebackType
from typing import Any, SupportsIndex

import torch
from transformers import PreTrainedModel

from rcattr.kvcache.cache import RCKVCache
from rcattr.kvcache.context.format import cache_layout, policy_from_settings, policy_settings, restore_cache
from rcattr.kvcache.context.prompt import split_prompt
from rcattr.kvcache.distilled import predictor_identity
from rcattr.kvcache.policy import EvictionPolicy
from rcattr.kvcache.prefill import chunked_prefill
from rcattr.protocols import TokenizerLike, check_model_and_tokenizer
from rcattr.runtime.compat import cache_argument

__all__ = ["FORMAT", "CompressedContext", "compress_context"]

FORMAT = 1  # of a saved context; a newer one is refused
SETTINGS, TENSORS = "context.json", "cache.safetensors"
CONTEXT_IDS = "context_ids"
QUESTION_PLACEHOLDER = "context"  # what the question's part is cut after: it does not depend on the document


def compress_context(
    model: PreTrainedModel,
    tokenizer: TokenizerLike,
    document: str | Sequence[str],
    *,
    ratio: float | None = None,
    c: float | None = None,
    budget: int | None = None,
    policy: EvictionPolicy | None = None,
    window: int = 16,
    system: str | None = None,
    chunk_size: int | None = None,
) -> CompressedContext:
    """Prefill `document` once, compressed, ready for any question.

    The document goes in the chat template's user turn (after a `system` turn when given), cut where the
    document ends (`split_prompt`; a model without a template reads it after its BOS
    token), and `RCKVCache` evicts from it as `ratio`, `c`, `budget` or `policy`
    say (default: half of it). Each question is asked later of a copy (`CompressedContext.generate`).

    Parameters
    ----------
    model, tokenizer
        A causal LM RCKVCache supports, and its tokenizer.
    document : str or sequence of str
        The context; several documents are joined by blank lines.
    ratio, c, budget, policy
        As `RCKVCache` takes them (default: half of the document's entries evicted).
    window : int, default 16
        As `RCKVCache` takes it.
    system : str, optional
        A system prompt in front of the document, compressed with it.
    chunk_size : int, optional
        Prefill the document this many tokens per forward (`chunked_prefill`): a lower
        peak for long documents, each chunk cut on its own. Default: one forward.

    Returns
    -------
    CompressedContext

    Examples
    --------
    >>> context = compress_context(model, tokenizer, document, ratio=0.5)
    >>> context.generate("When was the bridge opened?", max_new_tokens=32)
    >>> context.save("bridge.rcctx")
    """
    check_model_and_tokenizer("compress_context", model, tokenizer)
    text = document if isinstance(document, str) else "\n\n".join(document)
    context_ids = split_prompt(tokenizer, text, "", system=system).context_ids
    _check_fits(model, context_ids.shape[1], "the document")
    cache = RCKVCache(model, c, window, ratio=ratio, budget=budget, policy=policy)
    ids = context_ids.to(model.device)
    if chunk_size is None:
        with torch.no_grad():
            model(ids, **cache_argument(model, cache), logits_to_keep=1)
    else:
        chunked_prefill(model, cache, ids, chunk_size=chunk_size)
    return CompressedContext(model, tokenizer, cache, context_ids)


class CompressedContext:
    """A compressed context and what answers from it: the model, its tokenizer, the `RCKVCache`
    holding the context, and the context's ids `[1, n]`.

    Made by `compress_context` or `load`. Each `generate` continues a copy of the cache, so
    the context is reused unchanged; `save` writes it to a folder that `load` reads in another
    process. It cannot be pickled (it holds the model): save it.
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: TokenizerLike,
        cache: RCKVCache,
        context_ids: torch.Tensor,
    ) -> None:
        if cache.get_seq_length() != context_ids.shape[1]:
            raise ValueError(
                f"the cache has seen {cache.get_seq_length()} tokens; the context has {context_ids.shape[1]}"
            )
        self.model, self.tokenizer, self.cache, self.context_ids = model, tokenizer, cache, context_ids

    @property
    def n_tokens(self) -> int:
        """Tokens of the context (before eviction)."""
        return self.context_ids.shape[1]

    @property
    def compression_ratio(self) -> float:
        """Share of the context's entries evicted (`RCKVCache.compression_ratio`)."""
        return self.cache.compression_ratio

    def nbytes(self) -> int:
        """Bytes the cache holds."""
        return self.cache.nbytes()

    def full_nbytes(self) -> int:
        """Bytes a `DynamicCache` would hold for the same context."""
        return self.cache.full_nbytes()

    @torch.no_grad()
    def generate(self, question: str, max_new_tokens: int = 64, **generate_kwargs: Any) -> str:
        """The answer to `question` asked right after the context (greedy unless `generate_kwargs` say
        otherwise; they go to `model.generate`), decoded without special tokens. The context stays as it was."""
        question_ids = split_prompt(self.tokenizer, QUESTION_PLACEHOLDER, question).question_ids
        ids = torch.cat([self.context_ids, question_ids], dim=1).to(self.model.device)
        _check_fits(self.model, ids.shape[1] + max_new_tokens, "the context, the question and max_new_tokens")
        options: dict[str, Any] = {"do_sample": False, "max_new_tokens": max_new_tokens}
        if self.model.generation_config.pad_token_id is None:
            options["pad_token_id"] = self.tokenizer.pad_token_id or self.tokenizer.eos_token_id
        with copy.deepcopy(self.cache) as cache:
            out = self.model.generate(  # type: ignore[operator]  # transformers types generate as a Tensor
                ids,
                attention_mask=torch.ones_like(ids),
                **cache_argument(self.model, cache),
                **(options | generate_kwargs),
            )
        return str(self.tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True))

    def save(self, path: str | Path) -> Path:
        """Write the context to the folder `path` (made if missing; its two files replaced): the kept keys
        and values of every layer as safetensors, and JSON beside them. Returns the folder."""
        from safetensors.torch import save_file

        folder = Path(path)
        folder.mkdir(parents=True, exist_ok=True)
        tensors: dict[str, torch.Tensor] = {CONTEXT_IDS: self.context_ids}
        settings = {
            "format": FORMAT,
            "rcattr": _version(),
            "model": model_identity(self.model),
            "tokenizer": tokenizer_identity(self.tokenizer),
            "window": self.cache.window,
            "policy": policy_settings(self.cache.policy, tensors),
            "layers": cache_layout(self.cache, tensors),
            "tokens": self.n_tokens,
        }
        save_file({name: t.detach().cpu().contiguous() for name, t in tensors.items()}, str(folder / TENSORS))
        settings["tensors_sha256"] = _file_sha256(folder / TENSORS)
        settings["checksum"] = _checksum(settings)
        (folder / SETTINGS).write_text(json.dumps(settings, indent=1))
        return folder

    @classmethod
    def load(cls, path: str | Path, model: PreTrainedModel, tokenizer: TokenizerLike) -> CompressedContext:
        """The context `save` wrote to `path`, open on `model`; ValueError, with the reason in one line,
        for another model or tokenizer, a damaged or edited file, or a format newer than this rcattr reads."""
        from safetensors.torch import load_file

        check_model_and_tokenizer("CompressedContext.load", model, tokenizer)
        folder = Path(path)
        settings = _read_settings(folder)
        _check_same("model", settings["model"], model_identity(model), folder)
        _check_same("tokenizer", settings["tokenizer"], tokenizer_identity(tokenizer), folder)
        if _file_sha256(folder / TENSORS) != settings["tensors_sha256"]:
            raise ValueError(f"{folder / TENSORS} is truncated or damaged: its checksum is not the one saved")
        tensors = load_file(str(folder / TENSORS), device=str(model.device))
        policy = policy_from_settings(settings["policy"], tensors)
        cache = restore_cache(model, settings["window"], policy, settings["layers"], tensors)
        return cls(model, tokenizer, cache, tensors[CONTEXT_IDS].cpu())

    def close(self) -> None:
        """Close the cache (`RCKVCache.close`); also done by `with` and garbage collection."""
        self.cache.close()

    def __enter__(self) -> CompressedContext:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __reduce_ex__(self, protocol: SupportsIndex) -> str | tuple[Any, ...]:
        raise TypeError(
            "a CompressedContext holds its model and cannot be pickled: write it with .save(path)"
        )


def model_identity(model: PreTrainedModel) -> dict[str, Any]:
    """What a saved context is checked against: the model's shape (as a score predictor's), its dtype and a hash of
    its first embedding rows (another checkpoint of the same architecture differs there); its name is kept to be
    read, not compared."""
    embedding = model.get_input_embeddings().weight
    assert isinstance(embedding, torch.Tensor)
    rows = embedding[:32].detach().float().cpu()
    return predictor_identity(model) | {
        "dtype": str(model.dtype).removeprefix("torch."),
        "embedding_sha256": hashlib.sha256(rows.numpy().tobytes()).hexdigest(),
    }


def tokenizer_identity(tokenizer: TokenizerLike) -> dict[str, Any]:
    """The tokenizer's size and a hash of its vocabulary, special tokens and chat template (and its name, kept to
    be read)."""
    vocabulary = tokenizer.get_vocab() if hasattr(tokenizer, "get_vocab") else {}
    described = json.dumps(
        [sorted(vocabulary.items()), tokenizer.chat_template, tokenizer.bos_token_id, tokenizer.eos_token_id]
    )
    return {
        "name": Path(str(getattr(tokenizer, "name_or_path", ""))).name,
        "size": len(tokenizer) if isinstance(tokenizer, Sized) else len(vocabulary),
        "sha256": hashlib.sha256(described.encode()).hexdigest(),
    }


def _read_settings(folder: Path) -> dict[str, Any]:
    if not (folder / SETTINGS).is_file() or not (folder / TENSORS).is_file():
        raise ValueError(f"{folder} is not a saved context: it needs {SETTINGS} and {TENSORS}")
    try:
        settings = json.loads((folder / SETTINGS).read_text())
        saved_format = int(settings["format"])
    except (ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{folder / SETTINGS} is not a saved context's settings ({error})") from error
    if saved_format > FORMAT:
        raise ValueError(
            f"{folder} was saved by rcattr {settings.get('rcattr')} in format {saved_format}; this rcattr "
            f"({_version()}) reads format {FORMAT} and older: upgrade rcattr"
        )
    if settings.get("checksum") != _checksum(settings):
        raise ValueError(f"{folder / SETTINGS} was edited or damaged: its checksum is not the one saved")
    return settings


def _check_same(what: str, saved: dict[str, Any], given: dict[str, Any], folder: Path) -> None:
    """ValueError naming what differs; names are not compared (a copied folder is the same model), hashes are."""
    keys = sorted((set(saved) | set(given)) - {"model", "name"})
    differing = [key for key in keys if saved.get(key) != given.get(key)]
    if differing:
        shown = ", ".join(f"{key} {saved.get(key)!r} (this one: {given.get(key)!r})" for key in differing[:3])
        raise ValueError(f"{folder} was saved with another {what}: {shown}")


def _check_fits(model: PreTrainedModel, tokens: int, what: str) -> None:
    limit = getattr(model.config.get_text_config(), "max_position_embeddings", None)
    if limit is not None and tokens > limit:
        raise ValueError(f"{what} take {tokens} tokens; {type(model).__name__}'s window is {limit}")


def _checksum(settings: dict[str, Any]) -> str:
    body = {key: value for key, value in settings.items() if key != "checksum"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def _file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _version() -> str:
    from rcattr.version import __version__

    return __version__
