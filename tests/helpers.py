"""Helpers the tests share: tiny randomly initialised models of each supported architecture, a
character-level tokenizer, and the benchmark runners' tiny data (fixtures are in conftest.py)."""

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

from rcattr.head_selection import HeadSelection
from rcattr.signals import RCSignals

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


# the benchmark runners' tests: a tiny saved model and a tiny QuoteSum-format file
QUOTESUM_RECORDS = [
    {
        "qid": f"q{i}",
        "unique_id": f"q{i}_0",
        "question": "Who sat?",
        "summary": f"[ 1 The cat sat ] and [ 2 dogs {verb} ].",
        "title1": "Cats",
        "source1": "The cat sat on a mat.",
        "title2": "Dogs",
        "source2": f"Loud dogs {verb} at night.",
        **{f"{field}{slot}": "" for slot in range(3, 9) for field in ("title", "source")},
    }
    for i, verb in enumerate(["bark", "run", "howl"])
]


def save_tiny(model, path):
    """Save ``model`` with the character tokenizer, as a runner's ``--model PATH`` loads it."""
    model.save_pretrained(path)
    char_tokenizer().save_pretrained(path)
    return path


def data_folder(tmp_path, monkeypatch, relative: str, text: str):
    """A benchmark data folder holding one file (``RCATTR_DATA`` points there); returns ``tmp_path``."""
    path = tmp_path / "data" / relative
    path.parent.mkdir(parents=True)
    path.write_text(text)
    monkeypatch.setenv("RCATTR_DATA", str(tmp_path / "data"))
    return tmp_path


TIMINGS = ("seconds", "seconds_per_example", "peak_memory_mib")


def without_timings(value):
    """A benchmark's results or rows without the fields that differ from run to run (times, memory)."""
    if isinstance(value, dict):
        return {key: without_timings(item) for key, item in value.items() if key not in TIMINGS}
    if isinstance(value, list):
        return [without_timings(item) for item in value]
    return value


def rc_signals(
    n_tokens: int,
    n_units: int,
    *,
    support: list[float] | None = None,
    reliance: list[float] | None = None,
    groundedness: list[float] | None = None,
    selection: HeadSelection | None = None,
) -> RCSignals:
    """RC signals for an answer of ``n_tokens`` tokens and ``n_units`` output units: the values given, else full
    support, reliance and groundedness (1), log-probability 0 and one selected head of a 2 x 2 model."""
    ones = torch.ones(n_tokens)
    return RCSignals(
        groundedness=ones if groundedness is None else torch.tensor(groundedness),
        lookback=ones,
        unit_context_reliance=torch.ones(n_units) if reliance is None else torch.tensor(reliance),
        token_logprob=torch.zeros(n_tokens),
        token_peak=ones,
        token_support=ones if support is None else torch.tensor(support),
        head_selection=HeadSelection(torch.eye(2), torch.tensor([[0, 0]]), "superiority")
        if selection is None
        else selection,
    )


def command_help(module: str) -> tuple[str, list[str]]:
    """``python -m MODULE --help`` in a fresh interpreter: its output, and which of torch and transformers it
    imported (a benchmark's command line parses before either loads)."""
    import subprocess
    import sys

    probe = (
        "import contextlib, io, runpy, sys\n"
        f"sys.argv = [{module!r}, '--help']\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):\n"
        f"    runpy.run_module({module!r}, run_name='__main__')\n"
        "print(out.getvalue())\n"
        "print([name for name in ('torch', 'transformers') if name in sys.modules])\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    text, _, heavy = done.stdout.rstrip().rpartition("\n")
    return text, eval(heavy)
