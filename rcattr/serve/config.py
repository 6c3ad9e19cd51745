"""What an operator sets for the citation service: the limits on a request and on the model's batches."""

from __future__ import annotations

from dataclasses import dataclass

from rcattr.attribution.many import is_count


@dataclass(frozen=True)
class ServeConfig:
    """The service's limits.

    Attributes
    ----------
    max_documents : int
        Documents a request may give (more: 413).
    max_request_bytes : int
        Bytes of a request body (more: 413, before it is parsed).
    queue_size : int
        Requests waiting for the model (more: 503 with `Retry-After`).
    max_batch_size : int
        Requests explained together in one batch ([`attribute_many`][rcattr.attribution.base.SpanAttributor.attribute_many]).
    max_batch_tokens : int or None
        Padded prompt tokens of one forward (`attribute_many`'s `max_batch_tokens`).
    max_wait_ms : float
        How long the first request of a batch waits for others to join it.
    max_new_tokens : int
        The length limit of the answers the model generates (a request without `answer`).
    """

    max_documents: int = 64
    max_request_bytes: int = 2_000_000
    queue_size: int = 64
    max_batch_size: int = 16
    max_batch_tokens: int | None = 8192
    max_wait_ms: float = 10.0
    max_new_tokens: int = 128

    def __post_init__(self) -> None:
        for name in ("max_documents", "max_request_bytes", "queue_size", "max_batch_size", "max_new_tokens"):
            if not is_count(getattr(self, name)):
                raise ValueError(f"{name} must be a whole number >= 1, got {getattr(self, name)!r}")
        if self.max_batch_tokens is not None and not is_count(self.max_batch_tokens):
            raise ValueError(
                f"max_batch_tokens must be a whole number >= 1 or None, got {self.max_batch_tokens!r}"
            )
        if not 0 <= self.max_wait_ms < float("inf"):
            raise ValueError(f"max_wait_ms must be a finite number >= 0, got {self.max_wait_ms!r}")
