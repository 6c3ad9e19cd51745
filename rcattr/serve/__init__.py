"""The citation service: rcattr behind HTTP for RAG systems that generate elsewhere (`rcattr serve`).

`create_app` builds the FastAPI application around an [`RCAttributor`][rcattr.attribution.attributor.RCAttributor] (`POST /v1/cite`,
`GET /healthz`, `GET /v1/model`); `ServeConfig` holds the operator's limits; the request and response
bodies mirror the library's objects ([`rcattr.serve.schema`][rcattr.serve.schema]). [`rcattr.client.CitationClient`][rcattr.client.CitationClient] calls
it from Python. Needs the `serve` extra (FastAPI, uvicorn, httpx).
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
