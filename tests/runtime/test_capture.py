from __future__ import annotations

import copy

import pytest
import torch
from transformers import AutoModelForCausalLM, BloomConfig

from rcattr.runtime.capture import LogitCapture, LogitStore, raw_logits
from rcattr.runtime.compat import cache_argument, registered_attention
from tests.helpers import tiny_configs, tiny_model
from tests.helpers.device_reads import DeviceReads
from tests.reference import float64_logits, record_eager_qk

pytestmark = pytest.mark.transformers_line

SEQ = 12
ROWS = slice(4, None)


def _ids(batch: int = 2, seq: int = SEQ) -> torch.Tensor:
    return torch.randint(3, 128, (batch, seq))


def _attention_modules(model):
    return [m for m in model.modules() if hasattr(m, "layer_idx") and hasattr(m, "scaling")]


@torch.no_grad()
def test_captured_logits_equal_float64_eager_qk(arch):
    model = tiny_model(arch)
    ids = _ids()
    store = LogitStore()
    with LogitCapture(model, store, query_positions=ROWS):
        model(ids)

    reference_model = copy.deepcopy(model).double()
    reference_model.set_attn_implementation("eager")
    with record_eager_qk(reference_model) as records:
        reference_model(ids)

    assert sorted(store.steps) == sorted(records) == list(range(model.config.num_hidden_layers))
    for layer, [(logits, step)] in store.steps.items():
        [(query, key)] = records[layer]
        expected = float64_logits(query, key)[:, :, ROWS]
        assert logits.dtype == torch.float32
        assert logits.shape == expected.shape == (2, model.config.num_attention_heads, SEQ - 4, SEQ)
        assert step.query_positions.tolist() == list(range(4, SEQ))
        assert step.key_positions.tolist() == list(range(SEQ))
        error = (logits.double() - expected).abs().max() / expected.abs().max()
        assert error <= 1e-4, f"layer {layer}: relative error {error:.2e}"


@torch.no_grad()
def test_softmax_of_captured_logits_is_the_models_attention(arch):
    model = tiny_model(arch, dtype=torch.float64, attn_implementation="eager")
    ids = _ids()
    store = LogitStore()
    with LogitCapture(model, store, query_positions=ROWS):
        attentions = model(ids, output_attentions=True).attentions
    for module in _attention_modules(model):
        [(logits, step)] = store.steps[module.layer_idx]
        scaled = (logits * module.scaling).masked_fill(~step.visible[:, None], float("-inf"))
        expected = attentions[module.layer_idx][:, :, ROWS]
        # some eager implementations take the softmax in float32
        torch.testing.assert_close(scaled.softmax(-1), expected, rtol=1e-5, atol=1e-7)


@torch.no_grad()
def test_capture_leaves_outputs_and_model_unchanged(arch):
    model = tiny_model(arch)
    ids = _ids()
    plain = model(ids).logits
    before = registered_attention()
    with (
        LogitCapture(model, LogitStore()),
        LogitCapture(model, LogitStore()),
    ):  # nested captures share a route
        captured = model(ids).logits
    assert (captured - plain).abs().max() <= 1e-6
    assert model.config._attn_implementation == "sdpa"
    assert registered_attention() == before  # nothing left in transformers' registries
    torch.testing.assert_close(model(ids).logits, plain, rtol=0, atol=0)


@torch.no_grad()
def test_generate_rows_match_teacher_forced_rows(arch):
    model = tiny_model(arch)
    prompt = _ids(batch=1, seq=9)
    plain = model.generate(prompt, max_new_tokens=6, do_sample=False)
    generated_store = LogitStore()
    with LogitCapture(model, generated_store, query_positions=slice(9, None)):
        generated = model.generate(prompt, max_new_tokens=6, do_sample=False)
    assert torch.equal(generated, plain)

    forced_store = LogitStore()
    with LogitCapture(model, forced_store, query_positions=slice(9, None)):
        model(generated)
    for layer in range(model.config.num_hidden_layers):
        during, rows = generated_store.layer(layer)
        forced, forced_rows = forced_store.layer(layer)
        # the last generated token is never fed back through the model
        assert rows.tolist() == forced_rows[:-1].tolist() == list(range(9, 14))
        forced = forced[:, :, :-1, : during.shape[-1]]
        assert torch.equal(during.isnan(), forced.isnan()), f"layer {layer}: visible keys differ"
        torch.testing.assert_close(during, forced, rtol=1e-4, atol=1e-5, equal_nan=True)


@pytest.mark.parametrize("arch", ["mistral", "qwen2", "gemma3"])
@torch.no_grad()
def test_sliding_window_layers_expose_their_window(arch):
    model = tiny_model(arch)
    window = tiny_configs()[arch].sliding_window
    store = LogitStore()
    with LogitCapture(model, store):
        model(_ids(batch=1))
    causal = torch.ones(SEQ, SEQ, dtype=torch.bool).tril()
    in_window = causal & ~torch.ones(SEQ, SEQ, dtype=torch.bool).tril(-window)
    layer_types = (
        getattr(model.config, "layer_types", None) or ["sliding_attention"] * model.config.num_hidden_layers
    )
    for layer, [(_, step)] in store.steps.items():
        sliding = layer_types[layer] == "sliding_attention"
        assert step.sliding_window == (window if sliding else None)
        assert torch.equal(step.visible[0], in_window if sliding else causal), f"layer {layer}"


@torch.no_grad()
@pytest.mark.parametrize("arch", ["mistral", "gemma3"])
@pytest.mark.parametrize("left_pad", [0, 3])
def test_a_capture_on_a_prefilled_cache_reports_the_true_positions(arch, left_pad):
    from transformers import DynamicCache

    model = tiny_model(arch)
    window = tiny_configs()[arch].sliding_window
    ids = _ids(batch=2)
    mask = torch.ones_like(ids)
    mask[1, :left_pad] = 0
    cache = DynamicCache(config=model.config)
    # 12 tokens before the capture starts
    out = model(ids, attention_mask=mask, **cache_argument(model, cache))
    store = LogitStore()
    with LogitCapture(model, store):
        model(
            out.logits[:, -1:].argmax(-1),
            attention_mask=torch.cat([mask, mask[:, :1]], -1),
            **cache_argument(model, cache),
        )
    layer_types = (
        getattr(model.config, "layer_types", None) or ["sliding_attention"] * model.config.num_hidden_layers
    )
    for layer, [(_, step)] in store.steps.items():
        assert step.query_positions.tolist() == [SEQ], f"layer {layer}"
        first_key = SEQ + 1 - window if layer_types[layer] == "sliding_attention" else 0
        assert step.key_positions.tolist() == list(range(first_key, SEQ + 1)), f"layer {layer}"


@torch.no_grad()
def test_left_padding_hides_pad_keys(arch):
    model = tiny_model(arch)
    ids = _ids()
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    padded, unpadded = LogitStore(), LogitStore()
    with LogitCapture(model, padded, query_positions=ROWS):
        model(ids, attention_mask=mask)
    with LogitCapture(model, unpadded, query_positions=ROWS):
        model(ids)
    for layer, [(_, step)] in padded.steps.items():
        [(_, reference)] = unpadded.steps[layer]
        assert step.visible.shape == (2, SEQ - 4, SEQ)
        assert not step.visible[0, :, :3].any()
        assert torch.equal(step.visible[0, :, 3:], reference.visible[0, :, 3:])
        assert torch.equal(step.visible[1], reference.visible[0])


@torch.no_grad()
def test_selected_layers_and_explicit_rows():
    model = tiny_model("llama")
    store = LogitStore()
    with LogitCapture(model, store, query_positions=[2, 7, 11], layers=[1]):
        model(_ids())
    assert list(store.steps) == [1]
    logits, rows = store.layer(1)
    assert rows.tolist() == [2, 7, 11]
    assert logits.shape == (2, 4, 3, SEQ)
    assert logits[:, :, 0, 3:].isnan().all() and not logits[:, :, 0, :3].isnan().any()


def test_raw_logits_use_the_key_head_of_each_query_group():
    query, key = torch.randn(1, 6, 3, 8), torch.randn(1, 2, 5, 8)
    logits = raw_logits(query, key)
    for head in range(6):
        torch.testing.assert_close(logits[0, head], query[0, head] @ key[0, head // 3].T)
    with pytest.raises(ValueError, match="5 query heads cannot share 2 key heads"):
        raw_logits(torch.randn(1, 5, 3, 8), key)


def test_restores_attention_after_an_error():
    model = tiny_model("llama")
    before = registered_attention()
    with pytest.raises(RuntimeError, match="boom"), LogitCapture(model, LogitStore()):
        raise RuntimeError("boom")
    assert model.config._attn_implementation == "sdpa"
    assert registered_attention() == before


def test_unsupported_architecture_is_named():
    config = BloomConfig(vocab_size=64, hidden_size=32, n_layer=1, n_head=4)
    model = AutoModelForCausalLM.from_config(config)
    with pytest.raises(NotImplementedError, match="BloomForCausalLM does not route its attention"):
        LogitCapture(model, LogitStore())


def test_unsupported_attention_implementation_is_named():
    model = tiny_model("llama")
    model.config._attn_implementation_internal = "flash_attention_2"
    with pytest.raises(NotImplementedError, match="attn_implementation='flash_attention_2'.*'sdpa'"):
        LogitCapture(model, LogitStore())


@pytest.mark.parametrize("rows", [slice(0, 10, 2), slice(-3, None), [1, -2]])
def test_bad_query_positions_are_rejected(rows):
    with pytest.raises(ValueError, match="query_positions"):
        LogitCapture(tiny_model("llama"), LogitStore(), query_positions=rows)


@pytest.mark.parametrize("rows", [ROWS, slice(2, 9), slice(SEQ + 3, None)])
@torch.no_grad()
def test_a_range_of_rows_is_captured_without_reading_the_device_each_layer(arch, rows) -> None:
    model = tiny_model(arch)
    ids = _ids()
    with DeviceReads() as plain:
        model(ids)
    store = LogitStore()
    with LogitCapture(model, store, query_positions=rows), DeviceReads() as captured:
        model(ids)
    assert captured.total - plain.total <= 1  # the pass's first position, once
    expected = list(range(SEQ))[rows]
    if not expected:
        assert not store.steps
    for [(logits, step)] in store.steps.values():
        assert step.query_positions.tolist() == expected and logits.shape[-2] == len(expected)
