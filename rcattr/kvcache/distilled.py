"""A distilled eviction score: what a replay of the context would say, predicted from the prefill alone.

Scored against a replay of the context (KVzip's probe: the context, a prompt asking to repeat it, the context
again), a key's largest attention weight from the replay's queries says what rebuilding the context needs,
whatever the question that follows; but the replay costs a second prefill of the whole context. As KVzap does
(arXiv 2601.07891), [`ScorePredictor`][rcattr.kvcache.distilled.ScorePredictor] maps each layer's attention input (the hidden states its q/k/v
projections read, `[B, n, d]`) to the log of that replay score per key head by one linear map fitted in closed
form (ridge), so the score costs one `[n, d] x [d, Hkv]` product per layer at prefill.
[`DistilledScorer`][rcattr.kvcache.distilled.DistilledScorer] puts it behind [`WindowScorer`][rcattr.kvcache.scoring.WindowScorer]'s seam, so every rule, scope,
[`chunked_prefill`][rcattr.kvcache.prefill.chunked_prefill] and [`RCKVCache`][rcattr.kvcache.cache.RCKVCache] work with it unchanged.

`python -m rcattr.eval.kv.distill` fits a predictor for a model (docs/guide/kvcache.md); the one fitted for
the default model ships with the package ([`ScorePredictor.shipped`][rcattr.kvcache.distilled.ScorePredictor.shipped]).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import torch
from transformers import PreTrainedModel
from transformers.cache_utils import Cache

from rcattr.kvcache.layer import RCLayer
from rcattr.kvcache.scoring import WindowScorer, value_weighted

__all__ = [
    "DistilledScorer",
    "ScorePredictor",
    "attention_inputs",
    "predictor_identity",
]

FORMAT = 1  # the predictor file's format; a newer one is refused
# the predictors fitted here (python -m rcattr.eval.kv.distill), by model name in lower case -> file in predictors/
SHIPPED = {
    "smollm2-135m-instruct": "smollm2-135m-instruct.safetensors",
    "qwen2.5-coder-0.5b-instruct": "qwen2.5-coder-0.5b-instruct.safetensors",
    "gemma-3-270m": "gemma-3-270m.safetensors",
}


def predictor_identity(model: PreTrainedModel) -> dict[str, Any]:
    """What a predictor is checked against: the model's name (the last part of `name_or_path`), its
    architecture, layers, key heads, hidden size and vocabulary."""
    config = model.config.get_text_config()
    return {
        "model": Path(str(model.config.name_or_path)).name,
        "architecture": str(config.model_type),
        "vocabulary": int(config.vocab_size),
        "layers": int(config.num_hidden_layers),
        "kv_heads": int(config.num_key_value_heads),
        "hidden_size": int(config.hidden_size),
    }


@dataclass(frozen=True, eq=False)  # tensors: compared by identity
class ScorePredictor:
    """Per layer, a linear map from the attention's input `[B, n, d]` to the log replay score `[B, Hkv, n]`.

    Attributes
    ----------
    identity : dict
        The model it was fitted on ([`predictor_identity`][rcattr.kvcache.distilled.predictor_identity]).
    weights : dict of int to torch.Tensor
        `[d, Hkv]` per evicting layer index.
    biases : dict of int to torch.Tensor
        `[Hkv]` per layer.
    info : dict
        How it was fitted (teacher, contexts, penalties, held-out rank correlation), saved beside the weights.
    """

    identity: dict[str, Any]
    weights: dict[int, torch.Tensor]
    biases: dict[int, torch.Tensor]
    info: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if set(self.weights) != set(self.biases):
            raise ValueError("every layer needs a weight and a bias")
        for layer, weight in self.weights.items():
            if weight.ndim != 2 or self.biases[layer].shape != weight.shape[1:]:
                raise ValueError(
                    f"layer {layer}: a weight [d, Hkv] and a bias [Hkv], got {tuple(weight.shape)} and "
                    f"{tuple(self.biases[layer].shape)}"
                )

    def __deepcopy__(self, memo: dict[int, object]) -> ScorePredictor:
        return self  # never changed after it is made: a copied cache shares it

    @property
    def layers(self) -> list[int]:
        """The layer indices it predicts for."""
        return sorted(self.weights)

    def check(self, model: PreTrainedModel) -> None:
        """ValueError unless `model` is the one the predictor was fitted on."""
        identity = predictor_identity(model)
        if not _same_model(identity, self.identity):
            raise ValueError(
                f"this score predictor was fitted on {_describe(self.identity)}, not on {_describe(identity)}: "
                "fit one for this model (python -m rcattr.eval.kv.distill --help)"
            )

    def predict(self, layer: int, hidden: torch.Tensor) -> torch.Tensor:
        """`[B, Hkv, n]` the predicted log replay score of every token of `hidden [B, n, d]` at `layer`."""
        if layer not in self.weights:
            raise ValueError(f"this score predictor has no map for layer {layer} (it has {self.layers})")
        weight = self.weights[layer]
        if hidden.shape[-1] != weight.shape[0]:
            raise ValueError(
                f"hidden states of width {hidden.shape[-1]}; layer {layer} reads {weight.shape[0]}"
            )
        weight = weight.to(device=hidden.device, dtype=torch.float32)
        bias = self.biases[layer].to(device=hidden.device, dtype=torch.float32)
        return (hidden.float() @ weight + bias).transpose(-1, -2)

    def save(self, path: str | Path) -> None:
        """Write the weights as safetensors, with the identity and `info` as its JSON metadata."""
        from safetensors.torch import save_file

        tensors = {f"layer.{i}.weight": w.float().contiguous() for i, w in self.weights.items()}
        tensors |= {f"layer.{i}.bias": b.float().contiguous() for i, b in self.biases.items()}
        metadata = {
            "format": str(FORMAT),
            "identity": json.dumps(self.identity),
            "info": json.dumps(self.info),
        }
        save_file(tensors, str(path), metadata=metadata)

    @classmethod
    def load(cls, path: str | Path, model: PreTrainedModel | None = None) -> ScorePredictor:
        """The predictor [`save`][rcattr.kvcache.distilled.ScorePredictor.save] wrote to `path`; checked against `model` when given."""
        from safetensors import SafetensorError, safe_open

        try:
            with safe_open(str(path), framework="pt") as file:
                metadata = file.metadata() or {}
                tensors = {name: file.get_tensor(name) for name in file.keys()}  # noqa: SIM118
        except (SafetensorError, OSError) as error:
            raise ValueError(f"{path} is not a score predictor file: {error}") from error
        if "identity" not in metadata or not metadata.get("format", "").isdigit():
            raise ValueError(f"{path} is not a score predictor file: its metadata names no model")
        if int(metadata["format"]) > FORMAT:
            raise ValueError(
                f"{path} has format {metadata['format']}, newer than this rcattr reads ({FORMAT}): upgrade rcattr"
            )
        weights: dict[int, torch.Tensor] = {}
        biases: dict[int, torch.Tensor] = {}
        for name, tensor in tensors.items():
            _, layer, kind = name.split(".")
            (weights if kind == "weight" else biases)[int(layer)] = tensor
        predictor = cls(
            json.loads(metadata["identity"]), weights, biases, json.loads(metadata.get("info", "{}"))
        )
        if model is not None:
            predictor.check(model)
        return predictor

    @classmethod
    def shipped(cls, model: PreTrainedModel) -> ScorePredictor | None:
        """The predictor shipped for `model`, or None where none was fitted on a model of its name and shape."""
        identity = predictor_identity(model)
        name = SHIPPED.get(identity["model"].lower())
        if name is None:
            return None
        predictor = cls.load(Path(str(resources.files("rcattr.kvcache") / "predictors" / name)))
        return predictor if _same_model(predictor.identity, identity) else None


def _same_model(first: Mapping[str, Any], second: Mapping[str, Any]) -> bool:
    """Whether two identities name the same model (names compared without case: a hub name and its folder)."""
    names = (str(first.get("model", "")).lower(), str(second.get("model", "")).lower())
    return names[0] == names[1] and {**first, "model": ""} == {**second, "model": ""}


def _describe(identity: Mapping[str, Any]) -> str:
    return (
        f"{identity.get('model') or 'an unnamed model'} ({identity.get('architecture')}, {identity.get('layers')} "
        f"layers, {identity.get('kv_heads')} key heads, width {identity.get('hidden_size')}, vocabulary "
        f"{identity.get('vocabulary')})"
    )


@dataclass(frozen=True, eq=False)
class DistilledScorer(WindowScorer):
    """Each key's replay score as [`ScorePredictor`][rcattr.kvcache.distilled.ScorePredictor] predicts it from the layer's attention input, times the
    norm of its value (as the other scorers), the first `sinks` tokens kept whatever their score.

    It reads no logits: the window's queries play no part, so the score of a key is the same whatever prompt
    follows it. Not with decode-time eviction (the generated tokens' hidden states are gone by then) nor a
    replay (it predicts one).

    Parameters
    ----------
    predictor : ScorePredictor
        Fitted on the model the cache runs (`RCKVCache` checks it).
    value_norm : bool, default True
    sinks : int, default 4
    dtype : torch.dtype, default torch.float32
    """

    predictor: ScorePredictor | None = None
    reads_hidden_states: ClassVar[bool] = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.predictor, ScorePredictor):
            raise ValueError(f"predictor must be a ScorePredictor, got {self.predictor!r}")

    def check_model(self, model: torch.nn.Module, layers: list[int]) -> None:
        """ValueError unless the predictor was fitted on `model` and maps every evicting layer of it."""
        assert self.predictor is not None  # checked when made
        self.predictor.check(model)  # type: ignore[arg-type]
        missing = sorted(set(layers) - set(self.predictor.layers))
        if missing:
            raise ValueError(f"the score predictor has no map for the evicting layers {missing}")

    def hidden_state_scores(
        self,
        layer: int,
        hidden: torch.Tensor,
        values: torch.Tensor,
        window_scores: Callable[[], torch.Tensor],
    ) -> torch.Tensor:
        """`[B, Hkv, m]` the score of the first `m` keys from their attention input `hidden [B, m, d]`
        and the layer's `[B, Hkv, >= m, d]` values (`window_scores` is not called)."""
        assert self.predictor is not None  # checked when made
        scores = self.predictor.predict(layer, hidden).to(self.dtype).exp()
        return value_weighted(scores, values) if self.value_norm else scores


def attention_modules(model: PreTrainedModel) -> dict[int, torch.nn.Module]:
    """`model`'s attention modules by layer index (the modules with `layer_idx` and a query projection)."""
    found: dict[int, torch.nn.Module] = {}
    for module in model.modules():
        layer = getattr(module, "layer_idx", None)
        if isinstance(layer, int) and any(hasattr(module, name) for name in ("q_proj", "qkv_proj")):
            found[layer] = module
    return found


def hold_attention_inputs(
    model: PreTrainedModel, layers: list[int], store: Callable[[int, torch.Tensor, object], None]
) -> Callable[[], None]:
    """Hand every forward's attention input `[B, n, d]` at `layers` to `store(layer, hidden, cache)`, with
    the cache the forward fills (None where it names none); returns the function that removes the hooks."""
    modules = attention_modules(model)
    missing = sorted(set(layers) - set(modules))
    if missing:
        raise NotImplementedError(
            f"{type(model).__name__}: no attention module with a query projection found for layers {missing}"
        )

    def hook_of(layer: int) -> Callable[..., None]:
        def pre_hook(module: torch.nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
            hidden = kwargs.get("hidden_states", args[0] if args else None)
            if isinstance(hidden, torch.Tensor):
                # transformers' 5.2 line names the cache past_key_values, later releases cache
                store(layer, hidden, kwargs.get("cache", kwargs.get("past_key_values")))

        return pre_hook

    handles = [modules[i].register_forward_pre_hook(hook_of(i), with_kwargs=True) for i in layers]

    def remove() -> None:
        for handle in handles:
            handle.remove()

    return remove


def feed_attention_inputs(model: PreTrainedModel, cache: Cache, layers: list[int]) -> Callable[[], None]:
    """Hooks that set the `hidden` of each of `cache`'s evicting `layers` to its attention input in the forwards
    that fill `cache` (held weakly), for a scorer that reads it; returns their removal."""
    owner = weakref.ref(cache)

    def store(layer: int, hidden: torch.Tensor, filled: object) -> None:
        held = owner()
        if held is not None and filled is held:
            evicting = held.layers[layer]
            assert isinstance(evicting, RCLayer)
            evicting.hidden = hidden

    return hold_attention_inputs(model, layers, store)


@contextmanager
def attention_inputs(model: PreTrainedModel, layers: list[int]) -> Iterator[dict[int, torch.Tensor]]:
    """Inside the block, the last attention input of each of `layers`, by index (`[B, n, d]`)."""
    held: dict[int, torch.Tensor] = {}

    def store(layer: int, hidden: torch.Tensor, cache: object) -> None:
        held[layer] = hidden

    remove = hold_attention_inputs(model, layers, store)
    try:
        yield held
    finally:
        remove()
