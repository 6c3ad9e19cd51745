"""The citation service: rcattr behind HTTP for RAG systems that generate elsewhere (``rcattr serve``).

:func:`create_app` builds the FastAPI application around an :class:`~rcattr.RCAttributor` (``POST /v1/cite``,
``GET /healthz``, ``GET /v1/model``); :class:`ServeConfig` holds the operator's limits; the request and response
bodies mirror the library's objects (:mod:`rcattr.serve.schema`). :class:`rcattr.client.CitationClient` calls
it from Python. Needs the ``serve`` extra (FastAPI, uvicorn, httpx).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rcattr.lazy import lazy_exports

if TYPE_CHECKING:
    from rcattr.serve.app import create_app
    from rcattr.serve.config import ServeConfig
    from rcattr.serve.schema import CiteRequest, CiteResponse

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {".app": ["create_app"], ".config": ["ServeConfig"], ".schema": ["CiteRequest", "CiteResponse"]},
)
