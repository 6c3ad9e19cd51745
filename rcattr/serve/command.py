"""``rcattr serve``: the citation service on one model, with uvicorn (the ``serve`` extra)."""

from __future__ import annotations

import argparse

from rcattr.cli.inputs import CommandError


def serve(args: argparse.Namespace) -> int:
    """Load the model, build the service with the operator's limits, and serve until interrupted."""
    try:
        import uvicorn

        from rcattr.serve.app import create_app
    except ImportError as error:
        raise CommandError(
            f"rcattr serve needs FastAPI and uvicorn ({error.name} is missing): pip install 'rcattr[serve]'"
        ) from None
    import torch

    from rcattr.cli.commands import attributor_of
    from rcattr.models import DEFAULT_MODEL
    from rcattr.serve.config import ServeConfig

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    config = ServeConfig(
        max_documents=args.max_documents,
        max_request_bytes=args.max_request_bytes,
        queue_size=args.queue_size,
        max_batch_size=args.max_batch_size,
        max_batch_tokens=args.max_batch_tokens,
        max_wait_ms=args.max_wait_ms,
        max_new_tokens=args.max_new_tokens,
    )
    app = create_app(attributor_of(args), config, model_name=args.model or DEFAULT_MODEL)
    uvicorn.run(app, host=args.host, port=args.port, log_level="info" if args.verbose else "warning")
    return 0
