"""Tiny randomly initialised models of each supported architecture and a character-level tokenizer."""

from __future__ import annotations

import torch
from transformers import (
    AutoModelForCausalLM,
    Gemma3TextConfig,
    LlamaConfig,
    MistralConfig,
    Phi3Config,
    PretrainedConfig,
    Qwen2Config,
    Qwen3Config,
)

COMMON = {
    "vocab_size": 128,
    "hidden_size": 64,
    "intermediate_size": 96,
    "num_hidden_layers": 3,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 256,
}


def tiny_configs() -> dict[str, PretrainedConfig]:
    """One tiny config per architecture; window sizes are small so sliding layers really slide."""
    return {
        "llama": LlamaConfig(**COMMON),
        "mistral": MistralConfig(**COMMON, sliding_window=5),
        "qwen2": Qwen2Config(**COMMON, use_sliding_window=True, sliding_window=5, max_window_layers=1),
        "qwen3": Qwen3Config(**COMMON, head_dim=16),
        "gemma3": Gemma3TextConfig(
            **COMMON,
            head_dim=32,
            sliding_window=5,
            layer_types=["sliding_attention", "full_attention", "sliding_attention"],
        ),
        "phi3": Phi3Config(**COMMON, pad_token_id=0, bos_token_id=1, eos_token_id=2),
    }


ARCHITECTURES = sorted(tiny_configs())


def tiny_model(arch: str, *, dtype: torch.dtype = torch.float32, attn_implementation: str = "sdpa"):
    """A seeded tiny random causal LM of ``arch`` (one of :data:`ARCHITECTURES`)."""
    config = tiny_configs()[arch]
    config._attn_implementation = attn_implementation
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=dtype, attn_implementation=attn_implementation)
    return model.eval()


def kv_model(arch: str, attn_implementation: str = "sdpa"):
    """The tiny model of ``arch``; Mistral without its sliding window, which would leave nothing to evict."""
    if arch != "mistral":
        return tiny_model(arch, attn_implementation=attn_implementation)
    config = tiny_configs()["mistral"]
    config.sliding_window = None
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation)
    return model.eval()


def wide_llama():
    """A tiny Llama with 64-dimensional heads: kvpress's AdaKV masks a key by searching a direction every
    query of the chunk is on one side of, which random queries in 16 dimensions seldom allow."""
    config = LlamaConfig(**{**COMMON, "hidden_size": 128, "num_attention_heads": 2, "num_key_value_heads": 2})
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config).eval()


def prompt(batch: int = 1, length: int = 40, pad: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ids and a left-padded attention mask: the last row loses its first ``pad`` tokens."""
    ids = torch.randint(3, 120, (batch, length))
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[-1, :pad] = 0
    ids[-1, :pad] = 0
    return ids, mask


CHAT_TEMPLATE = (
    "{% for m in messages %}<bos>{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)


def char_tokenizer(*, chat: bool = True):
    """A fast character-level tokenizer for the tiny models: printable ASCII is its own id, the rest <unk>."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<bos>": 1, "<eos>": 2, "\t": 9, "\n": 10, **{chr(i): i for i in range(32, 127)}}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, bos_token="<bos>", eos_token="<eos>", unk_token="<unk>"
    )
    if chat:
        tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def save_tiny(model, path):
    """Save ``model`` with the character tokenizer, as a runner's ``--model PATH`` loads it."""
    model.save_pretrained(path)
    char_tokenizer().save_pretrained(path)
    return path


def random_predictor(model, seed: int = 0, layers: list[int] | None = None):
    """A score predictor of random maps for ``model``'s layers (all, or ``layers``)."""
    from rcattr.kvcache.distilled import ScorePredictor, predictor_identity

    config = model.config.get_text_config()
    generator = torch.Generator().manual_seed(seed)
    chosen = range(config.num_hidden_layers) if layers is None else layers
    kv_heads, width = config.num_key_value_heads, config.hidden_size
    return ScorePredictor(
        predictor_identity(model),
        {i: torch.randn(width, kv_heads, generator=generator) / width**0.5 for i in chosen},
        {i: torch.randn(kv_heads, generator=generator) for i in chosen},
        {"teacher": "test"},
    )
