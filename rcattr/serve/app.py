"""The citation service's HTTP application (FastAPI): `POST /v1/cite`, `GET /healthz`, `GET /v1/model`
and the OpenAPI schema at `/openapi.json`, which `/docs` (Swagger UI) and `/redoc` show from files served
here (fastapi-offline's), so that they work without internet.

A request is checked before any model work (its body's size, its JSON and fields, then the library's own check
of the prompt against the model's window: [`check_input`][rcattr.attribution.base.SpanAttributor.check_input]) and answered 4xx with one
line naming the field; a checked one waits in the worker's bounded queue (full: 503 with `Retry-After`) for a
batch. Every error body is `{"detail": "<one line>"}`."""

from __future__ import annotations

import asyncio
import copy
import queue
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi_offline import FastAPIOffline
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.types import Receive

from rcattr.attribution.attributor import RCAttributor
from rcattr.runtime.generation import model_window
from rcattr.serve.citing import context_input
from rcattr.serve.config import ServeConfig
from rcattr.serve.limits import BodyLimit, one_line_reason
from rcattr.serve.logs import AccessLog
from rcattr.serve.schema import CiteRequest, CiteResponse, Health, ModelInfo
from rcattr.serve.worker import CitationWorker, Job, Outcome
from rcattr.version import __version__


class Refused(Exception):
    """A request answered with `status` and one line, before any model work."""

    def __init__(self, status: int, detail: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status, self.detail, self.headers = status, detail, headers


def create_app(
    attributor: RCAttributor, config: ServeConfig | None = None, *, model_name: str = ""
) -> FastAPI:
    """The service around `attributor`: one worker thread runs it on batches of requests (started and stopped
    with the application's lifespan), the requests are checked with a copy of its tokenizer."""
    config = ServeConfig() if config is None else config
    worker = CitationWorker(attributor, config)
    checker = copy.copy(attributor)
    checker.tokenizer = copy.deepcopy(attributor.tokenizer)  # checks run beside the worker's tokenizer calls

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        worker.start()
        yield
        await run_in_threadpool(worker.stop)

    app = FastAPIOffline(  # /docs and /redoc from fastapi-offline's files, not a CDN: they work offline
        title="rcattr citation service",
        version=__version__,
        description="Cite and check an answer against its documents from the statistics of raw attention logits "
        "(RCStat): per answer sentence, the documents it came from, how much they vouch for it, and its status.",
        lifespan=lifespan,
    )
    app.state.worker = worker
    app.add_middleware(BodyLimit, max_bytes=config.max_request_bytes)
    app.add_middleware(AccessLog)  # the outermost: it sees every answer, BodyLimit's too

    def described() -> ModelInfo:
        return ModelInfo(
            model=model_name or str(getattr(attributor.model.config, "name_or_path", "")),
            device=str(attributor.model.device),
            window=model_window(attributor.model),
            version=__version__,
            torch_threads=worker.torch_threads,
            max_batch_size=config.max_batch_size,
            max_batch_tokens=config.max_batch_tokens,
        )

    app.state.model_info = described  # what rcattr serve's start-up line reports

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, error: RequestValidationError) -> JSONResponse:
        if "json" not in request.headers.get("content-type", "json"):
            detail = "the body must be JSON: send it with Content-Type: application/json (curl --json)"
            return JSONResponse({"detail": detail}, status_code=415)
        status, detail = one_line_reason(error.errors())
        return JSONResponse({"detail": detail}, status_code=status)

    @app.exception_handler(HTTPException)
    async def unparsed(request: Request, error: HTTPException) -> Response:
        reason = error.__cause__
        if isinstance(reason, UnicodeDecodeError):  # FastAPI says only "There was an error parsing the body"
            detail = (
                f"the body is not UTF-8 text (byte {reason.object[reason.start]:#04x} at {reason.start} is "
                f"{reason.reason}); send JSON encoded as UTF-8"
            )
            return JSONResponse({"detail": detail}, status_code=400)
        return await http_exception_handler(request, error)

    @app.exception_handler(Refused)
    async def refused(request: Request, error: Refused) -> JSONResponse:
        return JSONResponse({"detail": error.detail}, status_code=error.status, headers=error.headers)

    @app.get("/healthz", response_model=Health)
    async def healthz() -> Health:
        counts = worker.counts
        return Health(
            status="ok",
            queued=worker.queued,
            **{name: counts[name] for name in ("served", "failed", "dropped", "batches")},
        )

    @app.get("/v1/model", response_model=ModelInfo)
    async def model_info() -> ModelInfo:
        return described()

    @app.post(
        "/v1/cite",
        response_model=CiteResponse,
        responses={
            413: {"description": "too many documents or bytes"},
            422: {"description": "a field the library refuses, named in one line"},
            503: {"description": "the queue is full; retry after Retry-After seconds"},
        },
    )
    async def cite(body: CiteRequest, request: Request) -> Any:
        request.state.documents = len(body.documents)
        if len(body.documents) > config.max_documents:
            raise Refused(
                413,
                f"documents: {len(body.documents)} given, this service takes at most {config.max_documents}",
            )
        tokens = await run_in_threadpool(check, checker, body)
        request.state.tokens = tokens
        outcome = await answered(worker, body, tokens, request)
        if outcome is None:  # the client went away: nobody reads this
            return Response(status_code=499)
        if isinstance(outcome, Exception):
            return JSONResponse(
                {"detail": f"the request failed while it was explained: {type(outcome).__name__}: {outcome}"},
                status_code=500,
            )
        return outcome

    return app


def check(checker: RCAttributor, body: CiteRequest) -> int:
    """The library's check of `body` (no model work, no warning recorded: `warnings.catch_warnings` is the
    process's, and the worker's thread records its batch's): its prompt's tokens; [`Refused`][rcattr.serve.app.Refused] 422 with the
    library's message, after the field it is about."""
    try:
        inp = context_input(body)
    except (ValueError, TypeError) as error:
        raise Refused(422, f"documents: {one_line(error)}") from None
    blank = [index for index, document in enumerate(inp.documents) if not document.text.strip()]
    if blank:
        raise Refused(422, f"documents[{blank[0]}]: the document is empty or only whitespace")
    if body.answer is not None and not body.answer.strip():
        raise Refused(
            422, "answer: the answer is empty; give the answer to explain, or null to let the model answer"
        )
    spans = {"granularity": body.granularity, "output_granularity": body.output_granularity}
    try:
        return checker.check_input(inp, body.answer, **spans)
    except (ValueError, TypeError) as error:
        reason = one_line(error)
    try:  # which field: is the prompt refused without the answer too? (only refusals pay a second look)
        checker.check_input(inp, **spans)
    except (ValueError, TypeError):
        raise Refused(422, f"documents: {reason}") from None
    raise Refused(422, f"answer: {reason}")


def one_line(error: Exception) -> str:
    """The error's message on one line."""
    return " ".join(str(error).split())


async def answered(
    worker: CitationWorker, body: CiteRequest, tokens: int, request: Request
) -> Outcome | None:
    """The outcome of `body` (a checked request of `tokens` prompt tokens) from the worker, or None when the
    client disconnects first (its job is then marked gone: the worker drops it, or discards its answer);
    [`Refused`][rcattr.serve.app.Refused] 503 when the queue is full."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[Outcome] = loop.create_future()

    def settle(outcome: Outcome) -> None:
        if not future.done():
            future.set_result(outcome)

    def deliver(outcome: Outcome) -> None:  # called from the worker's thread
        loop.call_soon_threadsafe(settle, outcome)

    job = Job(body, tokens, deliver)
    try:
        worker.submit(job)
    except queue.Full:
        raise Refused(
            503,
            f"the service is busy ({worker.config.queue_size} requests queued); retry later",
            {"Retry-After": str(worker.retry_after())},
        ) from None
    gone = asyncio.ensure_future(disconnected(request.receive))
    waiting: set[asyncio.Future[Any]] = {future, gone}
    try:
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if future.done():
        return future.result()
    job.gone.set()
    return None


async def disconnected(receive: Receive) -> None:
    """Returns when the client has disconnected (the request's body was read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass
