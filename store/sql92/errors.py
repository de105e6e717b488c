"""The errors of the SQL92 filter language."""

from __future__ import annotations

from mqstore.errors import StoreError


class SqlParseError(StoreError, ValueError):
    """A SQL92 filter expression does not compile (RocketMQ ``MQFilterException``)."""


class SqlEvaluationError(StoreError):
    """Evaluating a filter threw in RocketMQ (a property that does not parse as the number
    it is compared with): the message is not matched."""
