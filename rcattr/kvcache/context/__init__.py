"""A document compressed once, before its questions, and kept: :func:`compress_context`, :class:`CompressedContext`
(its answers, save and load), the prompt's cut after the document (:func:`split_prompt`) and the saved format."""

from rcattr.kvcache.context.compressed import CompressedContext, compress_context
from rcattr.kvcache.context.prompt import SplitPrompt, split_prompt

__all__ = ["CompressedContext", "SplitPrompt", "compress_context", "split_prompt"]
