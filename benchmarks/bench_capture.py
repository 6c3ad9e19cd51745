"""Cost of logit capture on the default model: a teacher-forced forward over a long prompt + answer.

Every variant calls ``model(ids, logits_to_keep=1)``: the pass that feeds attribution needs no vocabulary
logits, which would otherwise dominate the memory (|s| x 49,152 floats). Each variant runs in its own subprocess so that peak resident memory (ru_maxrss) can be compared:
the figure reported is the peak during the forwards minus the resident size after loading the model.
Times are the median of --repeats forwards, measured in the same run as the plain forward.

    python benchmarks/bench_capture.py --prompt 2000 --answer 100
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time

VARIANTS = {
    "plain": "plain forward (sdpa), no capture",
    "head_rc": "capture all layers' answer rows, reduce each layer to per-head E[Z] at once",
    "store": "capture all layers' answer rows and keep them (LogitStore)",
}


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def run_variant(variant: str, prompt_len: int, answer_len: int, repeats: int) -> dict[str, float]:
    import torch

    from rcattr.runtime.capture import LogitCapture, LogitStore
    from rcattr.runtime.models import load_model
    from rcattr.stats import expected_rc

    torch.set_grad_enabled(False)
    model, _ = load_model()
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(100, model.config.vocab_size, (1, prompt_len + answer_len), generator=generator)
    rows = slice(prompt_len, None)
    model(ids[:, :64])  # warm-up
    baseline = _peak_rss_mib()

    def head_rc(logits: torch.Tensor, step) -> None:
        cross = logits[0, :, :, :prompt_len].flatten(1)  # X(p, g)
        self_logits = logits[0, :, :, prompt_len:]  # Y(g, g), causal part only
        expected_rc(cross, self_logits.flatten(1), y_mask=step.visible[0, :, prompt_len:].flatten()[None])

    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        if variant == "plain":
            model(ids, logits_to_keep=1)
        else:
            reducer = head_rc if variant == "head_rc" else LogitStore()
            with LogitCapture(model, reducer, query_positions=rows):
                model(ids, logits_to_keep=1)
        times.append(time.perf_counter() - start)
    return {"seconds": statistics.median(times), "peak_mib": _peak_rss_mib() - baseline}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--prompt", type=int, default=2000, help="prompt tokens (default 2000)")
    parser.add_argument("--answer", type=int, default=100, help="answer tokens (default 100)")
    parser.add_argument("--repeats", type=int, default=3, help="forwards per variant (default 3)")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # child process
    args = parser.parse_args()
    if args.variant:
        print(json.dumps(run_variant(args.variant, args.prompt, args.answer, args.repeats)))
        return

    results = {}
    for variant in VARIANTS:
        command = [
            sys.executable,
            __file__,
            "--variant",
            variant,
            "--prompt",
            str(args.prompt),
            "--answer",
            str(args.answer),
            "--repeats",
            str(args.repeats),
        ]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        results[variant] = json.loads(output.strip().splitlines()[-1])

    plain = results["plain"]
    print(
        f"default model, teacher-forced forward over {args.prompt} prompt + {args.answer} answer tokens, "
        f"median of {args.repeats}"
    )
    print(f"{'variant':<9} {'time s':>8} {'x plain':>8} {'peak MiB':>9} {'x plain':>8}  what")
    for variant, result in results.items():
        print(
            f"{variant:<9} {result['seconds']:>8.3f} {result['seconds'] / plain['seconds']:>8.2f} "
            f"{result['peak_mib']:>9.1f} {result['peak_mib'] / max(plain['peak_mib'], 1e-9):>8.2f}  {VARIANTS[variant]}"
        )


if __name__ == "__main__":
    main()
