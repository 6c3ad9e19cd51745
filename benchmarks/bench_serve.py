"""The citation service under load, on loopback: throughput at 1, 4 and 16 concurrent clients, latency, memory,
and every response checked against its own single-call result.

``rcattr serve`` runs in a subprocess on a free 127.0.0.1 port with the default model (``--model`` for another)
and its default batching (at most 16 requests, 8,192 padded tokens, a 10 ms wait). The requests carry their
answers, so the work is teacher-forced:

* ``--workload squad``: a SQuAD 2.0 dev question over its paragraph, answered with its first gold answer (a
  one-document RAG request; prompts of about 150 to 400 tokens);
* ``--workload quotesum``: a QuoteSum dev question over its sources, answered with the gold summary (prompts of
  about 230 to 800 tokens).

1. One client sends each of ``--records`` distinct requests once, one at a time: the one-at-a-time baseline,
   and each request's single-call result (a batch of one is one ``attribute()``: tests/serve/test_app.py).
2. 4 clients, then 16, send ``--per-level`` requests each level (the records cycled); then 16 clients go on
   until ``--requests`` requests were sent in all. Every response is compared with its record's single-call
   result: the same answer, citations, sources and statuses, numbers within 1e-4 (``mixed up``: responses that
   differ; ``lost``: requests without a 200).
3. The server's resident memory (``/proc/PID/status`` VmRSS) after 100 requests of the 16-client load and after
   the last request.

The machine is noisy: compare the throughput ratios (``x one-at-a-time``), measured in the same run, not the
absolute times.

    python benchmarks/bench_serve.py --workload squad --records 100 --per-level 200 --requests 1000 \\
        --json docs/records/serve/squad.json
    python benchmarks/bench_serve.py --workload quotesum --records 32 --per-level 64 --requests 200

Quick smoke run:

    python benchmarks/bench_serve.py --records 4 --per-level 8 --requests 30
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
TOLERANCE = 1e-4


def squad_requests(count: int) -> list[dict[str, Any]]:
    """The first ``count`` answerable SQuAD 2.0 dev questions over their paragraphs, with their first answer."""
    article_list = json.loads((ROOT / "data/squad_v2/dev-v2.0.json").read_text())["data"]
    requests = []
    for article in article_list:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                if qa["answers"] and len(requests) < count:
                    requests.append(
                        {
                            "documents": [
                                {"text": paragraph["context"], "metadata": {"title": article["title"]}}
                            ],
                            "question": qa["question"],
                            "answer": qa["answers"][0]["text"],
                        }
                    )
    return requests


def quotesum_requests(count: int) -> list[dict[str, Any]]:
    """The first ``count`` QuoteSum dev records: their sources (with titles), question and gold summary."""
    from rcattr.eval.common.datasets import load_quotesum

    return [
        {
            "documents": [
                {"text": text, "metadata": {"title": title}}
                for text, title in zip(record.chunks, record.titles or [""] * len(record.chunks), strict=True)
            ],
            "question": record.question,
            "answer": record.answer,
        }
        for record in load_quotesum(limit=count)
    ]


WORKLOADS = {"squad": squad_requests, "quotesum": quotesum_requests}


def resident_mib(pid: int) -> float | None:
    """The process's resident memory in MiB (Linux), else None."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def start_server(args: argparse.Namespace) -> tuple[subprocess.Popen, str]:
    from rcattr.serve.command import start_service

    options = ["--device", args.device]
    options += ["--model", args.model] if args.model else []
    options += ["--threads", str(args.threads)] if args.threads else []
    options += ["--max-batch-size", str(args.max_batch_size)] if args.max_batch_size else []
    return start_service(*options)


def send(url: str, bodies: Sequence[tuple[int, dict[str, Any]]], clients: int) -> tuple[float, list[tuple]]:
    """``bodies`` (record index, body) sent by ``clients`` concurrent clients, each with its own connection;
    the wall seconds and per request (record index, status, seconds, json or None)."""
    lock = threading.Lock()
    pending = list(reversed(bodies))
    done: list[tuple] = []

    def client() -> None:
        with httpx.Client(base_url=url, timeout=600) as http:
            while True:
                with lock:
                    if not pending:
                        return
                    index, body = pending.pop()
                start = time.perf_counter()
                response = http.post("/v1/cite", json=body)
                seconds = time.perf_counter() - start
                with lock:
                    done.append(
                        (
                            index,
                            response.status_code,
                            seconds,
                            response.json() if response.is_success else None,
                        )
                    )

    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(client) for _ in range(clients)]:
            future.result()
    return time.perf_counter() - start, done


def differs(served: Any, expected: Any) -> bool:
    """Whether two responses differ beyond :data:`TOLERANCE` (numbers) or at all (everything else)."""
    if isinstance(expected, dict):
        return (
            not isinstance(served, dict)
            or served.keys() != expected.keys()
            or any(differs(served[key], expected[key]) for key in expected)
        )
    if isinstance(expected, list):
        return (
            not isinstance(served, list)
            or len(served) != len(expected)
            or any(differs(one, other) for one, other in zip(served, expected, strict=True))
        )
    if isinstance(expected, float) and isinstance(served, (int, float)) and not isinstance(served, bool):
        return abs(served - expected) > TOLERANCE
    return served != expected


def level_row(
    label: str, clients: int, seconds: float, done: list[tuple], references: dict[int, Any]
) -> dict:
    latencies = sorted(item[2] for item in done)
    ok = [item for item in done if item[1] == 200]
    return {
        "label": label,
        "clients": clients,
        "requests": len(done),
        "seconds": seconds,
        "requests_per_s": len(done) / seconds,
        "p50_s": statistics.median(latencies),
        "p99_s": latencies[min(len(latencies) - 1, round(0.99 * (len(latencies) - 1)))],
        "lost": len(done) - len(ok),
        "mixed_up": sum(differs(item[3], references[item[0]]) for item in ok),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--workload", choices=sorted(WORKLOADS), default="squad", help="the requests (default squad)"
    )
    parser.add_argument("--records", type=int, default=100, help="distinct requests (default 100)")
    parser.add_argument(
        "--per-level", type=int, default=200, help="requests at 4 and at 16 clients (default 200)"
    )
    parser.add_argument("--requests", type=int, default=1000, help="requests in all, at most (default 1000)")
    parser.add_argument("--max-seconds", type=float, default=3600, help="stop the 16-client load after this")
    parser.add_argument("--model", help="the model rcattr serve loads (default: the offline default model)")
    parser.add_argument("--threads", type=int, help="the server's torch threads (default: torch's own)")
    parser.add_argument("--device", default="cpu", help="where the server's model runs (default cpu; cuda)")
    parser.add_argument(
        "--max-batch-size", type=int, help="the server's --max-batch-size (default: its own, 16)"
    )
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    args = parser.parse_args()

    bodies = WORKLOADS[args.workload](args.records)
    server, url = start_server(args)
    try:
        seconds, done = send(url, list(enumerate(bodies)), 1)
        references = {item[0]: item[3] for item in done}
        rows = [level_row("one at a time", 1, seconds, done, references)]
        sent = len(done)
        cycle = [(index % len(bodies), bodies[index % len(bodies)]) for index in range(args.per_level)]
        seconds, done = send(url, cycle, 4)
        rows.append(level_row("4 clients", 4, seconds, done, references))
        sent += len(done)
        seconds, done = send(url, cycle[:100], 16)
        memory_at_100 = resident_mib(server.pid)
        more_seconds, more = send(url, cycle[100:], 16)
        rows.append(level_row("16 clients", 16, seconds + more_seconds, done + more, references))
        sent += len(done) + len(more)
        soak: list[tuple] = []
        started = time.monotonic()
        while sent < args.requests and time.monotonic() - started < args.max_seconds:
            batch = [
                (index % len(bodies), bodies[index % len(bodies)])
                for index in range(sent, min(args.requests, sent + 100))
            ]
            _, part = send(url, batch, 16)
            soak += part
            sent += len(part)
        memory_at_end = resident_mib(server.pid)
        health = httpx.get(f"{url}/healthz").json()
        model = httpx.get(f"{url}/v1/model").json()
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(60)
    lost = sum(row["lost"] for row in rows) + sum(item[1] != 200 for item in soak)
    mixed = sum(row["mixed_up"] for row in rows) + sum(
        differs(item[3], references[item[0]]) for item in soak if item[1] == 200
    )
    baseline = rows[0]["requests_per_s"]
    print(
        f"\n{model['model']} on {args.device} ({model['torch_threads']} torch threads, batches of at most "
        f"{model['max_batch_size']}), "
        f"workload {args.workload}: {len(bodies)} distinct requests, {sent} in all on loopback\n"
    )
    print("| clients | requests | requests/s | x one-at-a-time | p50 s | p99 s | lost | mixed up |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['label']} | {row['requests']} | {row['requests_per_s']:.2f} | "
            f"{row['requests_per_s'] / baseline:.2f} | {row['p50_s']:.2f} | {row['p99_s']:.2f} | {row['lost']} | "
            f"{row['mixed_up']} |"
        )
    growth = None if memory_at_100 is None or memory_at_end is None else memory_at_end / memory_at_100 - 1
    print(
        f"\nAll {sent} requests: {lost} lost, {mixed} mixed up (differing from their single-call result beyond "
        f"{TOLERANCE:g}); the server counted {health['served']} served, {health['failed']} failed, "
        f"{health['batches']} batches.\nServer resident memory: {memory_at_100:.0f} MiB after {len(cycle[:100])} "
        f"requests at 16 "
        f"clients, {memory_at_end:.0f} MiB after {sent} requests ({growth:+.1%})."
        if growth is not None
        else "\n(resident memory not measured: no /proc)"
    )
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        summary = {
            "workload": args.workload,
            "device": args.device,
            "model": model,
            "distinct_requests": len(bodies),
            "requests": sent,
            "levels": rows,
            "lost": lost,
            "mixed_up": mixed,
            "health": health,
            "resident_mib_after_100_at_16": memory_at_100,
            "resident_mib_at_end": memory_at_end,
            "cpu_count": os.cpu_count(),
        }
        args.json.write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
