"""The methods a benchmark runner may run: a mapping from name to method object, given to the runner."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Protocol, TypeVar


class Named(Protocol):
    """Anything with a `name`: a method of a benchmark."""

    @property
    def name(self) -> str: ...


M = TypeVar("M", bound=Named)


def check_methods(methods: Sequence[str], known: Sequence[str]) -> None:
    """ValueError naming the unknown methods and the known ones."""
    unknown = [name for name in methods if name not in known]
    if unknown:
        raise ValueError(f"unknown method(s) {', '.join(unknown)}; choose from {', '.join(known)}")


class MethodRegistry(Mapping[str, M]):
    """Methods by name, in the order they were added; each runner builds its default one with a function
    (e.g. [`rcattr.eval.attribution.methods.default_methods`][rcattr.eval.attribution.methods.default_methods]) and runs the methods of a registry it is
    given, so a user's method runs beside the built-in ones without changing any module's state.

    Parameters
    ----------
    methods : iterable of methods
        The first methods, each with a `name`.
    reserved : sequence of str, optional
        Names no method may take (e.g. those of other files of a run folder).

    Examples
    --------
    >>> registry = default_methods()  # doctest: +SKIP
    >>> registry.add(SpanAttributorMethod("mine", lambda model, tokenizer, config: Mine(model, tokenizer)))  # doctest: +SKIP
    """

    def __init__(self, methods: Iterable[M] = (), reserved: Sequence[str] = ()) -> None:
        self._methods: dict[str, M] = {}
        self.reserved = tuple(reserved)
        for method in methods:
            self.add(method)

    def add(self, method: M) -> M:
        """Add `method` under its name; returns it.

        Raises
        ------
        ValueError
            When a method of the registry has the name already, or the name is reserved.
        """
        if method.name in self._methods or method.name in self.reserved:
            taken = ", ".join([*self._methods, *self.reserved])
            raise ValueError(
                f"{method.name!r} is a built-in or reserved method name ({taken}); choose another"
            )
        self._methods[method.name] = method
        return method

    def check(self, names: Sequence[str]) -> None:
        """ValueError naming those of `names` that are not methods of the registry, and the known ones."""
        check_methods(names, list(self._methods))

    def __getitem__(self, name: str) -> M:
        try:
            return self._methods[name]
        except KeyError:
            raise KeyError(f"unknown method {name!r}; choose from {', '.join(self._methods)}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._methods)

    def __len__(self) -> int:
        return len(self._methods)
