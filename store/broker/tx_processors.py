"""END_TRANSACTION (37): the request processor over
:class:`~mqstore.broker.transactions.TransactionService` (Rule 2 there).

The header is RocketMQ's ``EndTransactionRequestHeader``: ``producerGroup``,
``tranStateTableOffset``, ``commitLogOffset``, ``commitOrRollback`` (0 unknown, 8 commit,
12 rollback), ``fromTransactionCheck``, ``msgId``, ``transactionId``. The Java producer
sends it oneway, so its answer is mostly unread; an unknown ``commitOrRollback`` is
SYSTEM_ERROR here (RocketMQ sends no response at all). With ACL the signer must hold PUB
on the half record's real topic, else NO_PERMISSION (an account could otherwise commit a
half message into a topic it may not write).
"""

from __future__ import annotations

from mqstore.broker.context import Processor, RequestContext
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode
from mqstore.remoting.headers import ext_int, ext_str
from mqstore.transaction import EndTransaction, TransactionState


def parse_end_transaction(ext: dict[str, str]) -> EndTransaction | None:
    """The header as an :class:`EndTransaction`; None for an unknown outcome code.

    Raises:
        BadRequestError: a required field is missing or not a number.
    """
    code = ext_int(ext, "commitOrRollback")
    try:
        state = TransactionState(code)
    except ValueError:
        return None
    return EndTransaction(
        producer_group=ext_str(ext, "producerGroup"),
        tran_state_table_offset=ext_int(ext, "tranStateTableOffset"),
        commit_log_offset=ext_int(ext, "commitLogOffset"),
        state=state,
        from_transaction_check=ext.get("fromTransactionCheck", "false").lower() == "true",
        msg_id=ext.get("msgId", ""),
        transaction_id=ext.get("transactionId", ""),
    )


def process_end_transaction(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """END_TRANSACTION (37)."""
    header = parse_end_transaction(cmd.ext_fields)
    if header is None:
        return cmd.make_response(ResponseCode.SYSTEM_ERROR, "unknown commitOrRollback")
    reply = ctx.core.transactions.end(
        header, slave=ctx.core.is_slave, publish_refusal=ctx.publish_refusal
    )
    return cmd.make_response(reply.code, reply.remark)


TX_PROCESSORS: dict[int, Processor] = {RequestCode.END_TRANSACTION: process_end_transaction}
