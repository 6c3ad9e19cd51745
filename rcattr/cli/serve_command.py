"""`rcattr serve`: the citation service ([`rcattr.serve`][rcattr.serve]) on one model, with uvicorn (the `serve` extra)."""

from __future__ import annotations

import argparse

from rcattr.cli.commands import attributor_of
from rcattr.cli.inputs import CommandError
from rcattr.options import settings_of


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

    from rcattr.runtime.models import DEFAULT_MODEL
    from rcattr.serve.config import ServeConfig
    from rcattr.serve.logs import AnnouncedServer, log_config, startup_line

    if args.threads is not None:
        torch.set_num_threads(args.threads)
    config = settings_of(ServeConfig, args)
    app = create_app(attributor_of(args), config, model_name=args.model or DEFAULT_MODEL)
    settings = log_config(args.log_level)
    uvicorn_level = settings["loggers"]["uvicorn"]["level"].lower()
    options = {"log_config": settings, "log_level": uvicorn_level, "access_log": False}
    server = AnnouncedServer(
        uvicorn.Config(app, host=args.host, port=args.port, **options),
        lambda url: startup_line(url, app.state.model_info(), config),
    )
    server.run()
    return 0
