"""rcattr's version, in one place: the package (`rcattr.__version__`), its metadata (pyproject.toml reads it) and
what records it (a saved context, the service's API pages)."""

__version__ = "0.2.0"
