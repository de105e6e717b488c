"""The two ways a request to a broker fails, as every transport reports them.

A transport (TCP or in-process) raises :class:`BrokerError` when the broker answered
with an error response code and :class:`TransportError` when no answer came (connection
lost, timeout); nothing returns a sentinel.
"""

from __future__ import annotations

from mqstore.errors import StoreError


class TransportError(StoreError):
    """The broker could not be reached or did not answer in time."""


class BrokerError(StoreError):
    """The broker answered with an error response code.

    ``code`` is RocketMQ's numeric response code (``mqstore.remoting.codes``),
    ``remark`` the broker's text.
    """

    def __init__(self, code: int, remark: str = "") -> None:
        super().__init__(f"broker error {code}: {remark}")
        self.code = code
        self.remark = remark


class BadRequestError(StoreError, ValueError):
    """A request header or body does not hold what its code requires."""
