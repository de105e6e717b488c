"""The ``with`` protocol of the project's resources, stated once.

Two kinds of object are used in a ``with`` block:

- :class:`Closeable`: opened by its constructor (or a factory such as
  ``MessageStore.open``); ``with`` closes it at the end of the block;
- :class:`Stoppable`: built idle; ``with`` starts it and stops it at the end.

Both are abstract bases that hold no state and define only the protocol's two methods
from the one abstract method (or two) a subclass implements: the state stays in the
subclass. The block's exception is never suppressed.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Self


class Closeable(ABC):
    """A resource that ``with`` closes: ``__enter__`` returns it, ``__exit__`` calls
    :meth:`close`."""

    @abstractmethod
    def close(self) -> None:
        """Release what the object holds."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Stoppable(ABC):
    """A service that ``with`` runs: ``__enter__`` calls :meth:`start` and returns the
    service, ``__exit__`` calls :meth:`stop`."""

    @abstractmethod
    def start(self) -> object:
        """Start the service (what it returns, a bound port for example, is the
        subclass's)."""

    @abstractmethod
    def stop(self) -> None:
        """Stop the service and release what it holds."""

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


__all__ = ["Closeable", "Stoppable"]
