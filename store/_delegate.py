"""A method of a part, exposed on the object that owns the part.

A composition root such as :class:`~mqstore.message_store.MessageStore` answers many
calls by handing them to one of its parts unchanged. ``get_message =
Delegate("_reader", StoreReader.get_message)`` in its class body makes
``store.get_message`` the bound method ``store._reader.get_message``: one signature
and one docstring (the part's), checked by mypy as the part's method, with no frame
of the owner per call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, overload

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


class Delegate(Generic[T, P, R]):
    """Read on an instance: ``getattr(instance.<part>, <the method's name>)``; read on
    the class: a function of the owner that calls it (wrapping the part's method, so
    ``help()`` and ``inspect.signature`` show its signature and doc).

    Args:
        part: the attribute of the owner that holds the part.
        method: the part's method (``Part.method``): its name, signature and docstring.
    """

    def __init__(self, part: str, method: Callable[Concatenate[T, P], R]) -> None:
        self._part = part
        name: str = method.__name__
        self._name = name
        self.__doc__ = method.__doc__

        def unbound(owner: Any, /, *args: P.args, **kwargs: P.kwargs) -> R:
            bound: Callable[P, R] = getattr(getattr(owner, part), name)
            return bound(*args, **kwargs)

        self._unbound: Callable[Concatenate[Any, P], R] = functools.wraps(method)(unbound)

    @overload
    def __get__(self, owner: None, cls: type[Any]) -> Callable[Concatenate[Any, P], R]: ...

    @overload
    def __get__(self, owner: object, cls: type[Any] | None = None) -> Callable[P, R]: ...

    def __get__(self, owner: object, cls: type[Any] | None = None) -> Callable[..., R]:
        if owner is None:
            return self._unbound
        method: Callable[P, R] = getattr(getattr(owner, self._part), self._name)
        return method


__all__ = ["Delegate"]
