"""One 32,000-token explanation on Gemma-3-270m, timed once (issue 51): RCAttributor.attribute() on SQuAD v2
contexts (build_example of bench_attribution.py), an 8-token answer; prints seconds and peak memory.

    python benchmarks/long_context_once.py
"""

import json
import resource
import sys
import time

sys.path.insert(0, "benchmarks")
import torch
from bench_attribution import build_example

from rcattr import RCAttributor
from rcattr.runtime.models import load_model
from rcattr.text.prompting import ContextInput

torch.set_grad_enabled(False)
model, tokenizer = load_model("gemma-3-270m")
context, question, answer = build_example(tokenizer, 32000, 8)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
start = time.perf_counter()
result = RCAttributor(model, tokenizer).attribute(
    ContextInput(context, question), target=answer, granularity="sentence"
)
seconds = time.perf_counter() - start
print(
    json.dumps(
        {
            "model": "gemma-3-270m",
            "context_tokens": 32000,
            "answer": answer,
            "total_tokens": int(result.example.ids.shape[1]) if hasattr(result, "example") else None,
            "sentences": len(result.context_spans),
            "seconds": seconds,
            "peak_mib_above_loaded": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base,
            "top_sentence": result.top(1)[0][0].text[:80] if result.top(1) else None,
        }
    )
)
