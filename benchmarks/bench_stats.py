"""Benchmark of rcattr.stats against the brute-force pairwise route.

One attention head with |p| prompt and |g| generated positions:

* X = X(p, g): the |p| x |g| cross logits (|p||g| samples),
* Y = Y(g, g): the lower-triangular self logits (|g|(|g|+1)/2 samples),

filled with random normal logits. ``expected_rc`` (sort + prefix sums + binary search,
O((|X| + |Y|) log |Y|)) is timed against the paper's brute-force route over all |X||Y| pairs
(O(|p||g|^3)), which runs here in float64 chunks of bounded memory. When the brute force would
take longer than ``--brute-budget`` seconds, only a measured fraction of its chunks is run and
the full time is extrapolated (the output says so). A batched call over [layers, heads] is
timed too when its estimated memory stays below ``--batch-mem-limit-gb``; it runs in a child
process so that its peak memory can be measured.

Usage::

    python benchmarks/bench_stats.py [--prompt 2000] [--gen 200]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import torch

from rcattr.stats import expected_rc, overlap_bounds, phi, probability_of_superiority

# Working memory per element of X, measured for float64 accumulation (see _batched_child):
# expected_rc ~35 B, overlap_bounds ~60 B (plus the float32 input, counted separately).
_BYTES_PER_X = {"expected_rc": 40, "overlap_bounds": 64}


def make_head(
    prompt: int, gen: int, *, layers: int = 0, heads: int = 0, seed: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Random logits: X [..., prompt * gen] cross, Y [..., gen * (gen + 1) / 2] lower-triangular self."""
    g = torch.Generator().manual_seed(seed)
    lead = (layers, heads) if layers and heads else ()
    cross = torch.randn(*lead, prompt, gen, generator=g)  # X(p, g)
    self_ = torch.randn(*lead, gen, gen, generator=g) + 0.5  # Y(g, g), only the causal part is used
    rows, cols = torch.tril_indices(gen, gen)
    return cross.flatten(-2), self_[..., rows, cols]


def timeit(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Median wall time over ``repeats`` calls after one warm-up call; returns (seconds, result)."""
    out = fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def brute_force(x: torch.Tensor, y: torch.Tensor, budget_s: float, chunk_pairs: int) -> dict[str, Any]:
    """Mean of max(x_i - y_j, 0) over all pairs, in float64 chunks of rows of x.

    Runs every chunk when the projected time fits ``budget_s``; otherwise stops once about a
    third of the budget is spent and extrapolates the full time from the chunks done.
    """
    x64, y64 = x.double(), y.double()
    rows = max(1, chunk_pairs // y64.numel())
    n_chunks = -(-x64.numel() // rows)
    total = torch.zeros((), dtype=torch.float64)
    done = 0
    t0 = time.perf_counter()
    extrapolated = False
    while done < n_chunks:
        xc = x64[done * rows : (done + 1) * rows]
        d = xc[:, None] - y64[None, :]
        total += d.clamp_min_(0).sum()
        done += 1
        elapsed = time.perf_counter() - t0
        if done < n_chunks and elapsed / done * n_chunks > budget_s and elapsed >= budget_s / 3:
            extrapolated = True
            break
    elapsed = time.perf_counter() - t0
    n_x = min(done * rows, x64.numel())
    return {
        "value": (total / (n_x * y64.numel())).item(),
        "n_x": n_x,
        "chunks_done": done,
        "chunks_total": n_chunks,
        "measured_s": elapsed,
        "total_s": elapsed * n_chunks / done,
        "extrapolated": extrapolated,
    }


def _batched_child(args: argparse.Namespace, which: str, conn: Any) -> None:
    """Time one batched call in a fresh process and measure its peak memory growth."""
    if args.threads:
        torch.set_num_threads(args.threads)
    x, y = make_head(args.prompt, args.batch_gen, layers=args.layers, heads=args.heads, seed=args.seed + 1)
    fn = {"expected_rc": expected_rc, "overlap_bounds": overlap_bounds}[which]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rep = max(1, args.repeats // 2)
    t, _ = timeit(lambda: fn(x, y), rep)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # ru_maxrss is in KiB on Linux
    conn.send({"t": t, "rep": rep, "peak_gb": (peak - base) * 1024 / 1e9})
    conn.close()


def run_batched(args: argparse.Namespace, which: str) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_batched_child, args=(args, which, child))
    proc.start()
    res: dict[str, Any] = parent.recv()
    proc.join()
    return res


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompt", type=int, default=2000, help="|p|, prompt positions (default 2000)")
    ap.add_argument("--gen", type=int, default=200, help="|g|, generated positions (default 200)")
    ap.add_argument("--repeats", type=int, default=5, help="timed repeats of the fast calls (median)")
    ap.add_argument("--brute-budget", type=float, default=60.0, help="seconds before extrapolating")
    ap.add_argument("--chunk-pairs", type=int, default=1 << 24, help="pairs per brute-force chunk")
    ap.add_argument("--layers", type=int, default=30, help="layers of the batched call")
    ap.add_argument("--heads", type=int, default=9, help="heads of the batched call")
    ap.add_argument("--batch-gen", type=int, default=100, help="|g| of the batched call (|p| = --prompt)")
    ap.add_argument("--batch-mem-limit-gb", type=float, default=4.0, help="skip the batched call above this")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0 = torch default)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    x, y = make_head(args.prompt, args.gen, seed=args.seed)
    nx, ny = x.numel(), y.numel()
    print(
        f"torch {torch.__version__}, CPU, {torch.get_num_threads()} threads, inputs float32, accumulation float64"
    )
    print(
        f"one head: |p|={args.prompt}, |g|={args.gen}: |X| = {nx:,} cross logits, |Y| = {ny:,} self logits, "
        f"|X||Y| = {nx * ny:,} pairs"
    )
    print()

    rep = args.repeats
    t_e, e = timeit(lambda: expected_rc(x, y), rep)
    t_e32, e32 = timeit(lambda: expected_rc(x, y, dtype=torch.float32), rep)
    t_rev, e_rev = timeit(lambda: expected_rc(x, y, reverse=True), rep)
    t_phi, _ = timeit(lambda: phi(x, y), rep)
    t_ps, ps = timeit(lambda: probability_of_superiority(x, y), rep)
    t_b, (lo, up) = timeit(lambda: overlap_bounds(x, y), rep)

    bf = brute_force(x, y, args.brute_budget, args.chunk_pairs)
    if bf["extrapolated"]:
        e_same = expected_rc(x[: bf["n_x"]], y).item()
        scope = f"first {bf['n_x']:,} of {nx:,} X samples"
    else:
        e_same = e.item()
        scope = "all pairs"
    diff = abs(e_same - bf["value"])

    rows: list[tuple[str, str, str]] = [
        ("expected_rc (float64)", f"{t_e * 1e3:10.2f} ms", f"median of {rep}"),
        ("expected_rc (float32 accumulation)", f"{t_e32 * 1e3:10.2f} ms", f"median of {rep}"),
        ("expected_rc reverse=True", f"{t_rev * 1e3:10.2f} ms", f"median of {rep}"),
        ("phi (per x)", f"{t_phi * 1e3:10.2f} ms", f"median of {rep}"),
        ("probability_of_superiority", f"{t_ps * 1e3:10.2f} ms", f"median of {rep}"),
        ("overlap_bounds", f"{t_b * 1e3:10.2f} ms", f"median of {rep}"),
    ]
    if bf["extrapolated"]:
        note = (
            f"EXTRAPOLATED from {bf['chunks_done']} of {bf['chunks_total']} chunks "
            f"({bf['measured_s']:.1f} s measured)"
        )
    else:
        note = f"measured, all {bf['chunks_total']} chunks"
    rows.append(("brute force pairwise (float64)", f"{bf['total_s']:10.2f} s ", note))
    rows.append(("speed-up brute / expected_rc", f"{bf['total_s'] / t_e:10.0f} x ", ""))

    w = max(len(r[0]) for r in rows)
    print(f"{'operation':<{w}}  {'time':>13}  notes")
    print("-" * (w + 2 + 13 + 2 + 50))
    for name, t, n in rows:
        print(f"{name:<{w}}  {t:>13}  {n}".rstrip())
    print()
    print(f"E[max(X-Y,0)]  fast = {e.item():.15f}   float32 accumulation = {e32.item():.9f}")
    print(f"|fast - brute| on {scope}: {diff:.3e}  (brute = {bf['value']:.15f})")
    print(
        f"E[max(Y-X,0)]  = {e_rev.item():.12f};  E[Z] - E[Z'] = {(e - e_rev).item():.12f}, "
        f"mean X - mean Y = {(x.double().mean() - y.double().mean()).item():.12f}"
    )
    print(f"bounds for every coupling: {lo.item():.6f} <= E = {e.item():.6f} <= {up.item():.6f}")
    print(f"P(X > Y) = {ps.item():.6f}")
    print()

    # ---- batched call over [layers, heads] -------------------------------------------------
    b = args.layers * args.heads
    bnx = args.prompt * args.batch_gen
    bny = args.batch_gen * (args.batch_gen + 1) // 2
    in_gb = b * (bnx + bny) * 4 / 1e9
    est_gb = {k: in_gb + b * (bnx + bny) * v / 1e9 for k, v in _BYTES_PER_X.items()}
    label = f"[{args.layers}, {args.heads}] heads, |p|={args.prompt}, |g|={args.batch_gen}"
    print(
        f"batched: {label}: X [{args.layers}, {args.heads}, {bnx:,}], Y [{args.layers}, {args.heads}, {bny:,}]; "
        f"estimated memory expected_rc {est_gb['expected_rc']:.2f} GB, "
        f"overlap_bounds {est_gb['overlap_bounds']:.2f} GB (limit {args.batch_mem_limit_gb} GB)"
    )
    for which, est in est_gb.items():
        if est >= args.batch_mem_limit_gb:
            print(f"  {which:<15} SKIPPED: estimated memory {est:.2f} GB >= {args.batch_mem_limit_gb} GB")
            continue
        res = run_batched(args, which)
        print(
            f"  {which:<15} {res['t']:8.3f} s (median of {res['rep']}) for {b} heads = "
            f"{res['t'] / b * 1e3:.1f} ms per head; measured peak memory growth {res['peak_gb']:.2f} GB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
