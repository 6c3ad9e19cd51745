"""What the service logs: the start-up line once it listens, one line per request (documents and tokens, or
the one-line reason of a refusal; failures as errors), and the levels ``--log-level`` sets."""

from __future__ import annotations

import logging
import logging.config
import re

import httpx
import pytest

from rcattr.serve.app import create_app
from rcattr.serve.citing import context_input
from rcattr.serve.config import ServeConfig
from rcattr.serve.logs import log_config, startup_line
from rcattr.serve.schema import CiteRequest
from tests.helpers.serving import REQUESTS, GatedAttributor, served

pytestmark = pytest.mark.filterwarnings("ignore:no selected head sees the context")

SERVICE = "rcattr.serve"


def _lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(record.levelno, record.getMessage()) for record in caplog.records if record.name == SERVICE]


def test_each_request_gets_one_line_with_its_status_time_documents_and_tokens(
    gated: GatedAttributor, caplog: pytest.LogCaptureFixture
) -> None:
    config = ServeConfig(max_wait_ms=5.0, max_request_bytes=2000)
    app = create_app(gated, config, model_name="tiny-llama")
    caplog.set_level(logging.INFO, logger=SERVICE)
    with served(app, lambda url: startup_line(url, app.state.model_info(), config)) as url:
        good = httpx.post(f"{url}/v1/cite", json=REQUESTS[0], timeout=60)
        empty = httpx.post(f"{url}/v1/cite", json={"documents": ["ok", " "]}, timeout=60)
        large = httpx.post(f"{url}/v1/cite", json={"documents": ["x" * 3000]}, timeout=60)
        failed = httpx.post(f"{url}/v1/cite", json={**REQUESTS[0], "answer": "It FAILS."}, timeout=60)
        httpx.get(f"{url}/healthz")
    assert [good.status_code, empty.status_code, large.status_code, failed.status_code] == [
        200,
        422,
        413,
        500,
    ]
    (start, *requests) = _lines(caplog)
    assert start[0] == logging.INFO
    assert start[1].startswith(f"rcattr {app.version} serves tiny-llama on cpu (a 256-token window, ")
    assert f"at {url} (API pages at {url}/docs): batches of up to 16 requests and 8192 tokens" in start[1]
    assert "2000 bytes" in start[1]
    request = CiteRequest.model_validate(REQUESTS[0])
    tokens = gated.check_input(context_input(request), request.answer)  # the prompt's, as the service counts
    expected = [
        (logging.INFO, rf'"POST /v1/cite" 200 in \d+ ms: 3 documents, {tokens} tokens$'),
        (
            logging.INFO,
            r'"POST /v1/cite" 422 in \d+ ms: documents\[1\]: the document is empty or only whitespace$',
        ),
        (
            logging.INFO,
            r'"POST /v1/cite" 413 in \d+ ms: the request body is over this service\'s limit of 2000',
        ),
        (logging.ERROR, r'"POST /v1/cite" 500 in \d+ ms: the request failed while it was explained: '),
        (logging.INFO, r'"GET /healthz" 200 in \d+ ms$'),
    ]
    assert len(requests) == len(expected), requests
    for (level, line), (wanted_level, pattern) in zip(requests, expected, strict=True):
        assert level == wanted_level and line.startswith("127.0.0.1:") and re.search(pattern, line), line


@pytest.mark.parametrize(
    ("level", "service_logs", "uvicorn_level"),
    [
        ("debug", logging.DEBUG, logging.DEBUG),
        ("info", logging.INFO, logging.WARNING),
        ("warning", logging.WARNING, logging.WARNING),
        ("error", logging.ERROR, logging.ERROR),
    ],
)
def test_the_log_level_quiets_the_service_and_uvicorn(
    level: str, service_logs: int, uvicorn_level: int
) -> None:
    names = (SERVICE, "uvicorn", "uvicorn.error", "uvicorn.access")
    saved = {name: (logging.getLogger(name).level, logging.getLogger(name).handlers[:]) for name in names}
    try:
        logging.config.dictConfig(log_config(level))
        service = logging.getLogger(SERVICE)
        assert service.getEffectiveLevel() == service_logs and not service.propagate
        assert service.isEnabledFor(logging.ERROR)  # a failure is always told
        assert service.isEnabledFor(logging.INFO) == (level in ("debug", "info"))
        assert logging.getLogger("uvicorn.error").getEffectiveLevel() == uvicorn_level
    finally:
        for name, (saved_level, handlers) in saved.items():
            logger = logging.getLogger(name)
            logger.setLevel(saved_level)
            logger.handlers[:] = handlers
        logging.getLogger(SERVICE).propagate = True
