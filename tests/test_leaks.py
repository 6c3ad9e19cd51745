"""Every public entry point leaves the process as it found it: transformers' attention registries, the model's
attention implementation and hooks, rcattr's routes, grad mode, matplotlib's backend, and torch's and numba's
thread counts (in this process, and in a fresh one whose first numba kernel starts numba's OpenMP threads)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import numba
import pytest
import torch

from rcattr.runtime import attention
from rcattr.runtime.compat import registered_attention
from tests.helpers import char_tokenizer, tiny_model
from tests.helpers.entry_points import ENTRY_POINTS


def _state(model) -> tuple[object, ...]:
    import matplotlib

    hooks = sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())
    return (
        registered_attention(),
        model.config._attn_implementation,
        hooks,
        dict(attention._ROUTES),
        torch.is_grad_enabled(),
        matplotlib.get_backend(),
        torch.get_num_threads(),
        numba.get_num_threads(),
    )


@pytest.mark.parametrize("entry_point", sorted(ENTRY_POINTS))
@pytest.mark.parametrize("grad", [True, False])
def test_entry_point_leaves_the_process_as_it_found_it(entry_point, grad, tmp_path) -> None:
    gc.collect()  # caches other tests left behind give their models back first
    model, tokenizer = tiny_model("llama"), char_tokenizer()
    with torch.no_grad():  # transformers installs its output-recording hooks on first use, for good
        model(torch.randint(3, 120, (1, 4)), output_hidden_states=True)
    threads = torch.get_num_threads()
    numba.get_num_threads()  # starts numba's OpenMP threads (a fresh process: the test below)
    torch.set_num_threads(1)  # a budget below the cores', so that taking more shows
    try:
        with torch.set_grad_enabled(grad):
            before = _state(model)
            ENTRY_POINTS[entry_point](model, tokenizer, tmp_path)
            gc.collect()
            assert _state(model) == before
    finally:
        torch.set_num_threads(threads)


_FRESH_PROCESS = """
import sys, tempfile
from pathlib import Path
import torch
torch.set_num_threads(1)
from tests.helpers.entry_points import ENTRY_POINTS
from tests.helpers import char_tokenizer, tiny_model
from tests.helpers.entry_points import ENTRY_POINTS
model, tokenizer = tiny_model("llama"), char_tokenizer()
ENTRY_POINTS[sys.argv[1]](model, tokenizer, Path(tempfile.mkdtemp()))
print(torch.get_num_threads())
"""


@pytest.mark.parametrize(
    "entry_point", ["RCKVCache in generate", "RCAttributor.attribute, save_html, save_head_heatmap"]
)
def test_first_numba_kernel_keeps_the_callers_thread_count(entry_point) -> None:
    """numba's OpenMP threads start on its first kernel and set the count torch shares (to every core):
    in a fresh process limited to one thread, the count is still one after the entry point."""
    finished = subprocess.run(
        [sys.executable, "-c", _FRESH_PROCESS, entry_point],
        capture_output=True,
        text=True,
        env={**os.environ, "NUMBA_NUM_THREADS": "2"},
        cwd=Path(__file__).parent.parent,
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-2000:]
    assert finished.stdout.split()[-1] == "1"
