"""A small generic registry for plugins (HIT types, providers, aggregators)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Generic, TypeVar

from crowd.exceptions import RegistryError, UnknownName

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to plugins; raises on a duplicate or unknown name."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T) -> T:
        if name in self._entries:
            raise RegistryError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = entry
        return entry

    def get(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries)) or "none"
            raise UnknownName(f"unknown {self.kind} {name!r} (known: {known})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._entries))

    def items(self) -> list[tuple[str, T]]:
        return sorted(self._entries.items())
