"""A document compressed once, before its questions, and kept: `compress_context`, `CompressedContext`
(its answers, save and load), the prompt's cut after the document (`split_prompt`) and the saved format."""

from rcattr.kvcache.context.compressed import CompressedContext, compress_context
from rcattr.kvcache.context.prompt import SplitPrompt, split_prompt

__all__ = ["CompressedContext", "SplitPrompt", "compress_context", "split_prompt"]
