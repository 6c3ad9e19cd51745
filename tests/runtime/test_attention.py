"""rcattr's one attention layer (rcattr.runtime.attention): capture and RCKVCache read the same queries, keys and
visibility whatever kernel the model runs, and leave the model and transformers as they were."""

from __future__ import annotations

import gc

import pytest
import torch

from rcattr.kvcache import RCKVCache
from rcattr.runtime import attention
from rcattr.runtime.capture import LogitCapture, LogitStore
from rcattr.runtime.compat import cache_argument, registered_attention
from tests.helpers import tiny_model
from tests.helpers.device_reads import DeviceReads
from tests.reference import next_logits

pytestmark = pytest.mark.transformers_line

KERNELS = ("sdpa", "eager", "flex_attention")


def _kernels() -> tuple[str, ...]:
    """:data:`KERNELS`, less flex attention where kvpress is imported: kvpress wraps every registered attention
    function in one that passes ``dropout`` by position, which transformers' flex function takes as ``scaling``
    (a TypeError with or without rcattr)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    if ALL_ATTENTION_FUNCTIONS["flex_attention"].__module__.startswith("kvpress"):
        return KERNELS[:2]
    return KERNELS


@pytest.fixture(autouse=True)
def uncompiled_flex(monkeypatch) -> None:
    """transformers compiles flex attention; on CPU, torch 2.13's inductor fails to build the kernel for a pass
    over a filled cache (a C++ error with or without rcattr), so these tests run flex attention uncompiled:
    the same BlockMask and score_mod, computed by torch's reference implementation."""
    from torch.nn.attention.flex_attention import flex_attention
    from transformers.integrations import flex_attention as integration

    def uncompiled(
        query, key, value, score_mod=None, block_mask=None, enable_gqa=False, scale=None, **kwargs
    ):
        kwargs.pop("kernel_options", None), kwargs.pop("training", None)
        return flex_attention(
            query,
            key,
            value,
            score_mod=score_mod,
            block_mask=block_mask,
            enable_gqa=enable_gqa,
            scale=scale,
            **kwargs,
        )

    monkeypatch.setattr(integration, "compile_friendly_flex_attention", uncompiled)


def _padded(batch: int = 2, length: int = 24, pad: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(3, 120, (batch, length))
    mask = torch.ones(batch, length, dtype=torch.long)
    mask[-1, :pad] = 0
    return ids, mask


def _kernel_model(arch: str, kernel: str):
    model = tiny_model(arch)  # the same seeded weights whatever the kernel
    model.set_attn_implementation(kernel)
    return model


@pytest.mark.parametrize("arch", ["llama", "gemma3", "mistral"])
@torch.no_grad()
def test_capture_is_the_same_under_every_kernel(arch) -> None:
    """Left-padded batch, a pre-filled cache and then more tokens: the captured logits, their positions and
    which keys each row sees agree under sdpa, eager and flex attention (sliding windows included)."""
    ids, mask = _padded()
    more = torch.randint(3, 120, (2, 3))
    captured = {}
    for kernel in _kernels():
        model = _kernel_model(arch, kernel)
        store = LogitStore()
        with LogitCapture(model, store, query_positions=slice(8, None)):
            out = model(ids, attention_mask=mask, use_cache=True)
            model(
                more,
                attention_mask=torch.cat([mask, torch.ones_like(more)], -1),
                **cache_argument(model, out.past_key_values),
            )
        captured[kernel] = store
    reference = captured["sdpa"]
    for kernel in _kernels()[1:]:
        store = captured[kernel]
        assert sorted(store.steps) == sorted(reference.steps)
        for layer in reference.steps:
            for (logits, step), (want, want_step) in zip(
                store.steps[layer], reference.steps[layer], strict=True
            ):
                assert torch.equal(step.query_positions, want_step.query_positions), (kernel, layer)
                assert torch.equal(step.key_positions, want_step.key_positions), (kernel, layer)
                visible = step.visible.expand(2, *step.visible.shape[1:])
                assert torch.equal(visible, want_step.visible.expand_as(visible)), (kernel, layer)
                hidden = ~visible[
                    :, None
                ]  # padding keys: what a fully masked pad row computes is kernel-specific
                torch.testing.assert_close(
                    logits.masked_fill(hidden, 0), want.masked_fill(hidden, 0), rtol=1e-5, atol=1e-5
                )


@pytest.mark.parametrize("arch", ["llama", "gemma3"])
@torch.no_grad()
def test_rckvcache_is_the_same_under_every_kernel(arch) -> None:
    """The same tokens evicted, the same scores and the same next-token logits (prompt, a chunk of three and
    two decoded tokens) under sdpa, eager and flex attention."""
    ids, mask = _padded(length=40)
    chunks = [torch.randint(3, 120, (2, q)) for q in (3, 1, 1)]
    results = {}
    for kernel in _kernels():
        model = _kernel_model(arch, kernel)
        with RCKVCache(model, c=1.0, window=4) as cache:
            logits = next_logits(model, cache, ids, mask, chunks)
        assert 0.1 < cache.compression_ratio < 0.9
        results[kernel] = (cache, logits)
    reference, reference_logits = results["sdpa"]
    for kernel in _kernels()[1:]:
        cache, logits = results[kernel]
        for got, want in zip(cache.layers, reference.layers, strict=True):
            for eviction, expected in zip(
                getattr(got, "evictions", []), getattr(want, "evictions", []), strict=True
            ):
                assert torch.equal(eviction.kept, expected.kept), kernel
                torch.testing.assert_close(
                    eviction.scores, expected.scores, rtol=1e-5, atol=1e-5, equal_nan=True
                )
        for got_logits, want_logits in zip(logits, reference_logits, strict=True):
            torch.testing.assert_close(got_logits, want_logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("kernel", KERNELS)
@torch.no_grad()
def test_capture_and_cache_leave_the_model_and_transformers_as_they_were(kernel) -> None:
    if kernel not in _kernels():
        pytest.skip("kvpress's attention patch breaks flex attention (see _kernels)")
    gc.collect()  # caches other tests left behind give their models back first
    model = _kernel_model("llama", kernel)
    ids, mask = _padded()
    before = registered_attention()
    plain = model(ids, attention_mask=mask).logits
    with RCKVCache(model, window=4) as cache, LogitCapture(model, LogitStore()):
        assert model.config._attn_implementation == attention.PREFIX + kernel  # one route for both
        model.generate(
            ids, attention_mask=mask, **cache_argument(model, cache), max_new_tokens=2, do_sample=False
        )
    assert model.config._attn_implementation == kernel
    assert registered_attention() == before
    assert not attention._ROUTES and not attention._BY_MODULE
    torch.testing.assert_close(model(ids, attention_mask=mask).logits, plain, rtol=0, atol=0)


def test_hooks_run_newest_first_and_only_for_their_own_model() -> None:
    model, other = tiny_model("llama"), tiny_model("llama")
    seen: list[tuple[str, int]] = []

    def hook(name: str):
        def observe(call, proceed):
            seen.append((name, call.layer_idx))
            return proceed()

        return observe

    first, second, elsewhere = hook("first"), hook("second"), hook("other")
    attention.attach(model, first)
    attention.attach(model, second)
    attention.attach(other, elsewhere)
    try:
        with torch.no_grad():
            model(torch.randint(3, 120, (1, 5)))
    finally:
        for owner, held in ((model, first), (model, second), (other, elsewhere)):
            attention.detach(owner, held)
    layers = model.config.num_hidden_layers
    assert seen == [(name, layer) for layer in range(layers) for name in ("second", "first")]


def test_switching_the_kernel_under_a_route_is_refused() -> None:
    model = tiny_model("llama")
    with RCKVCache(model):
        model.set_attn_implementation("eager")
        with pytest.raises(RuntimeError, match="switched to 'eager'"), LogitCapture(model, LogitStore()):
            pass
    assert model.config._attn_implementation == "eager"


def test_each_layer_reads_the_first_position_the_pass_gives_without_a_device_read_each() -> None:
    model = tiny_model("llama")
    starts: list[int] = []

    def observe(call, proceed):
        starts.append(call.start)
        return proceed()

    ids = torch.randint(3, 120, (1, 5))
    positions = torch.arange(7, 12)[None]
    attention.attach(model, observe)
    try:
        with torch.no_grad(), DeviceReads() as reads:
            model(ids, position_ids=positions)
        assert reads.total == 1  # one read for the pass, not one a layer
        positions += 3  # edited in place: read again
        with torch.no_grad():
            model(ids, position_ids=positions)
            model(ids, position_ids=torch.arange(2, 7)[None])  # a new tensor
        with torch.inference_mode():  # its tensors keep no version to compare
            model(ids, position_ids=torch.arange(4, 9)[None])
    finally:
        attention.detach(model, observe)
    layers = model.config.num_hidden_layers
    assert starts == [7] * layers + [10] * layers + [2] * layers + [4] * layers
