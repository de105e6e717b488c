"""Admin requests that change or show the broker's settings and group table
(docs/admin.md §12):

====  ===================================  ==========================================
code  request                              answer
====  ===================================  ==========================================
21    GET_ALL_TOPIC_CONFIG                 ``TopicConfigSerializeWrapper`` (the table)
25    UPDATE_BROKER_CONFIG                 body: properties text; live keys applied
305   GET_SYSTEM_TOPIC_LIST_FROM_BROKER    ``TopicList``: the system topics
201   GET_ALL_SUBSCRIPTIONGROUP_CONFIG     ``SubscriptionGroupWrapper`` (the table)
207   DELETE_SUBSCRIPTIONGROUP             header ``groupName``, ``removeOffset``
306   CLEAN_EXPIRED_CONSUMEQUEUE           queues wholly below the CommitLog dropped
316   CLEAN_UNUSED_TOPIC                   SUCCESS (Rule 4)
328   GET_ALL_PRODUCER_INFO                ``ProducerTableInfo``: producers by group
329   DELETE_EXPIRED_COMMITLOG             a manual cleanup round, in the background
====  ===================================  ==========================================

Rules
-----
Rule 1. UPDATE_BROKER_CONFIG reads its body as ``key=value`` lines (Java
``Properties``). A Java broker sets every key that names a field of its config objects
and ignores the rest, answering SUCCESS either way. Ours applies the keys of
:data:`LIVE_KEYS`, the settings its broker reads on every use, so they take effect at
once and GET_BROKER_CONFIG shows them; other keys are ignored, as a Java broker ignores
keys it does not know (a Java broker also writes its broker.conf; ours keeps the values
until it stops). A value that does not parse as its key's type is SYSTEM_ERROR naming
the key, and nothing changes.

Rule 2. DELETE_SUBSCRIPTIONGROUP drops the group's config (persisted) whether or not it
existed, as the Java broker; with ``removeOffset=true`` the group's committed offsets go
too. Its ``%RETRY%`` / ``%DLQ%`` topics are left alone here: ``mqadmin deleteSubGroup``
deletes them with separate DELETE_TOPIC requests when asked to (``-r``).

Rule 3. CLEAN_EXPIRED_CONSUMEQUEUE drops every consume queue whose last unit ends at
or below the CommitLog's first offset (every message it indexes is gone), as
``DefaultMessageStore.cleanExpiredConsumerQueue`` (``SCHEDULE_TOPIC_XXXX``'s queues
are kept); DELETE_EXPIRED_COMMITLOG runs one cleanup round as at the delete hour
(``MessageStore.clean_expired_files(force=True)``: files past their reserved time go)
on a thread of its own, as 4.9.8 marks its next rounds manual and answers at once.
Both answer SUCCESS; in dispatch-process mode the child owns the queues and 306 drops
none.

Rule 4. CLEAN_UNUSED_TOPIC: a 4.9.8 broker drops the consume queues of topics its
topic table does not hold. Here a topic the store has queues for is a topic
(``mqstore.broker.topics`` Rule 3: learned on first use), and deleting a topic
drops its queues at once (DELETE_TOPIC_IN_BROKER), so no queue is ever unused: the
answer is SUCCESS and nothing changes.

Rule 5. GET_ALL_PRODUCER_INFO answers ``{"data":{group:[ProducerInfo]}}`` (``clientId``,
``remoteIP``, ``language``, ``version``, ``lastUpdateTimestamp``) from the producer
groups the live clients announced. (4.9.8's own ``mqadmin producer`` cannot read its
broker's answer either: fastjson finds no default constructor for ``ProducerTableInfo``.)
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import replace
from typing import Final

from mqstore.broker.context import Processor, RequestContext
from mqstore.broker.topics import system_topics
from mqstore.broker.wire import BadRequestError
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode
from mqstore.remoting.fastjson import Bean, dumps
from mqstore.remoting.headers import ext_str
from mqstore.remoting.java_properties import parse_properties
from mqstore.system_topics import SCHEDULE_TOPIC

log = logging.getLogger(__name__)

GET_SYSTEM_TOPIC_LIST_FROM_BROKER: Final = 305

LIVE_KEYS: Final[dict[str, str]] = {
    "notifyConsumerIdsChangedEnable": "notify_consumer_ids_changed_enable",
    "longPollingEnable": "long_polling_enable",
    "shortPollingTimeMills": "short_polling_time_ms",
    "slaveReadEnable": "slave_read_enable",
    "enablePropertyFilter": "enable_property_filter",
}
"""RocketMQ ``BrokerConfig`` names -> our ``BrokerConfig`` fields read on every use."""


def _typed(key: str, value: str, current: object) -> object:
    if isinstance(current, bool):
        if value.lower() not in ("true", "false"):
            raise BadRequestError(f"{key}: not a boolean: {value}")
        return value.lower() == "true"
    try:
        return int(value)
    except ValueError:
        raise BadRequestError(f"{key}: not an integer: {value}") from None


def process_update_broker_config(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """UPDATE_BROKER_CONFIG (25): Rule 1."""
    try:
        props = parse_properties((cmd.body or b"").decode())
    except UnicodeDecodeError:
        return cmd.make_response(ResponseCode.SYSTEM_ERROR, "string2Properties error")
    core = ctx.core
    changes = {
        LIVE_KEYS[k]: _typed(k, v, getattr(core.config, LIVE_KEYS[k]))
        for k, v in props.items()
        if k in LIVE_KEYS
    }
    if changes:
        core.config = replace(core.config, **changes)  # type: ignore[arg-type]
    return cmd.make_response(ResponseCode.SUCCESS)


def process_all_topics(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_ALL_TOPIC_CONFIG (21): ``{"dataVersion":..,"topicConfigTable":{name:
    TopicConfig}}`` (``mqadmin exportMetadata`` / ``exportMetrics``)."""
    return cmd.make_response(ResponseCode.SUCCESS, body=ctx.core.topics.wrapper_body())


def process_system_topics(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305): ``{"topicList":[..]}``, the topics the
    broker starts with (``TopicConfigManager.getSystemTopic``; ``mqadmin
    exportMetadata`` leaves them out)."""
    cfg = ctx.core.config
    names = [t.topic_name for t in system_topics(cfg.cluster_name, cfg.broker_name, True)]
    return cmd.make_response(
        ResponseCode.SUCCESS, body=dumps({"topicList": sorted(names)}).encode()
    )


def process_all_groups(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201): ``{"dataVersion":..,
    "subscriptionGroupTable":{name: SubscriptionGroupConfig}}``."""
    return cmd.make_response(ResponseCode.SUCCESS, body=ctx.core.groups.wrapper_body())


def process_delete_group(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """DELETE_SUBSCRIPTIONGROUP (207): Rule 2."""
    ext = cmd.ext_fields
    group = ext_str(ext, "groupName")
    ctx.core.groups.delete(group)
    if ext.get("removeOffset", "false").lower() == "true":
        ctx.core.offsets.drop_group(group)
    return cmd.make_response(ResponseCode.SUCCESS)


def process_clean_expired_queues(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """CLEAN_EXPIRED_CONSUMEQUEUE (306): Rule 3."""
    store = ctx.core.store
    dropped = store.drop_expired_queues(keep={SCHEDULE_TOPIC})
    if dropped:
        log.info("clean expired consume queues: %d dropped", dropped)
    return cmd.make_response(ResponseCode.SUCCESS)


def process_clean_unused_topic(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """CLEAN_UNUSED_TOPIC (316): Rule 4."""
    return cmd.make_response(ResponseCode.SUCCESS)


def process_delete_expired_log(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """DELETE_EXPIRED_COMMITLOG (329): Rule 3."""
    store = ctx.core.store

    def clean() -> None:
        try:
            result = store.clean_expired_files(force=True)
        except Exception as e:  # a closed store, a file that would not go: logged
            log.warning("manual cleanup failed: %s", e)
            return
        log.info("manual cleanup: %s", result)

    threading.Thread(target=clean, name="manual-cleanup", daemon=True).start()
    return cmd.make_response(ResponseCode.SUCCESS)


def process_all_producers(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_ALL_PRODUCER_INFO (328): Rule 5."""
    conns = ctx.core.connections
    now_ms, now_mono = int(time.time() * 1000), conns.now_ms()
    data: dict[str, list[Bean]] = {}
    for group in conns.producer_groups():
        data[group] = [
            Bean(clientId=c.client_id, remoteIP=c.client_addr, language=c.language,
                 version=c.version, lastUpdateTimestamp=now_ms - (now_mono - c.last_update_ms))
            for c in conns.producers(group)
        ]  # fmt: skip
    return cmd.make_response(ResponseCode.SUCCESS, body=dumps(Bean(data=data)).encode())


TABLE_PROCESSORS: dict[int, Processor] = {
    RequestCode.GET_ALL_TOPIC_CONFIG: process_all_topics,
    GET_SYSTEM_TOPIC_LIST_FROM_BROKER: process_system_topics,
    RequestCode.UPDATE_BROKER_CONFIG: process_update_broker_config,
    RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG: process_all_groups,
    RequestCode.DELETE_SUBSCRIPTIONGROUP: process_delete_group,
    RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE: process_clean_expired_queues,
    RequestCode.CLEAN_UNUSED_TOPIC: process_clean_unused_topic,
    RequestCode.GET_ALL_PRODUCER_INFO: process_all_producers,
    RequestCode.DELETE_EXPIRED_COMMITLOG: process_delete_expired_log,
}
"""The codes of this module (registered by ``mqstore.broker.processors``)."""
