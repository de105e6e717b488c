"""The admin requests operators send (``mqadmin``, the dashboard), answered from the
broker's own tables (docs/admin.md §1-9).

====  ===================================  ==========================================
code  request                              answer
====  ===================================  ==========================================
26    GET_BROKER_CONFIG                    properties text; header ``version``
40    NOTIFY_CONSUMER_IDS_CHANGED          relayed to the group's online clients (Rule 4)
28    GET_BROKER_RUNTIME_INFO              ``KVTable`` of the keys we can fill
200   UPDATE_AND_CREATE_SUBSCRIPTIONGROUP  body ``SubscriptionGroupConfig`` -> persisted
202   GET_TOPIC_STATS_INFO                 ``TopicStatsTable`` (per write queue)
203   GET_CONSUMER_CONNECTION_LIST         ``ConsumerConnection``
204   GET_PRODUCER_CONNECTION_LIST         ``ProducerConnection``
208   GET_CONSUME_STATS                    ``ConsumeStats`` (per read queue)
215   DELETE_TOPIC_IN_BROKER               config, offsets and consume queues removed
222   INVOKE_BROKER_TO_RESET_OFFSET        ``ResetOffsetBody``; RESET_CONSUMER_CLIENT_OFFSET
                                           pushed to the group's online clients
====  ===================================  ==========================================

Rules
-----
Rule 1. Queue ranges follow the upstream processor: topic stats walk
``[0, writeQueueNums)``, consume stats ``[0, readQueueNums)``. A missing offset (never
committed) counts as 0, and a last timestamp is the store time of the message just
before the offset (0 when the offset is 0 or the message is gone).

Rule 2. Reset by time: per write queue, the offset of the first message stored at or
after ``timestamp`` (``-1``: the queue's max offset); it replaces the committed offset
when ``isForce`` or when it is lower. With no online member the answer is
CONSUMER_NOT_ONLINE (``mqadmin`` then falls back to committing offsets itself, as it
does against a Java broker). With members the offsets are committed in the broker's
table too (our addition: ``consumerProgress`` shows them at once, and a client that
does not handle the push picks them up at its next rebalance) and pushed oneway.

Rule 3. Delete topic drops the topic config (persisted), the topic's committed
offsets, and its consume queues with their files. A pull in flight on a dropped queue
finishes on the mappings it holds; later pulls see TOPIC_NOT_EXIST. In dispatch-process
mode the child owns the queue files and the broker would learn the topic again from
them, so the request is refused (SYSTEM_ERROR) and nothing changes.

Rule 4. NOTIFY_CONSUMER_IDS_CHANGED is what RocketMQ brokers push to a group's clients
when its membership changes; sent *to* the broker (header ``consumerGroup``, by
``mqstore admin rebalance GROUP``) it is relayed, oneway, to every online member of the
group, whatever ``notifyConsumerIdsChangedEnable`` says (an operator asked), so each
member rebalances at once instead of at its next 20 s timer. A client connected to
several brokers hears it from this one. The answer lists the notified client ids
(``{"consumerGroup":..,"clientIds":[..]}``); with no online member it is
CONSUMER_NOT_ONLINE.

ACL: 200 and 215 are admin-only (``mqstore.broker.acl.UPSTREAM_ADMIN_CODES``), as
upstream's ``Permission.ADMIN_CODE``, and 222 too (ours); the read-only views need no
resource permission.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import replace
from pathlib import Path
from typing import Final, Protocol, runtime_checkable

from mqstore.broker.admin_bodies import (
    QueueProgress,
    TopicOffset,
    consume_stats_body,
    consumer_connection_body,
    kv_table_body,
    producer_connection_body,
    reset_offset_body,
    topic_stats_body,
)
from mqstore.broker.context import Processor, RequestContext
from mqstore.broker.core import BrokerCore
from mqstore.broker.offsets import TOPIC_GROUP_SEPARATOR
from mqstore.broker.subscriptions import SubscriptionGroupConfig
from mqstore.broker.traffic import GROUP_GET_NUMS
from mqstore.broker.wire import BadRequestError, ext_group
from mqstore.cleanup import disk_used_ratio
from mqstore.errors import IllegalTopicError
from mqstore.java_settings import (
    BROKER_DEFAULTS,
    broker_settings,
    processors,
    rocketmq_home,
    thread_defaults,
)
from mqstore.limits import ServerLimits
from mqstore.message import validate_topic
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import V4_9_8, RequestCode, ResponseCode
from mqstore.remoting.fastjson import FastjsonError, dumps, loads
from mqstore.remoting.headers import ext_int, ext_str
from mqstore.remoting.java_properties import properties_text
from mqstore.remoting.values import MessageQueue
from mqstore.store_view import StoreView

GET_BROKER_CONFIG = 26
INVOKE_BROKER_TO_RESET_OFFSET = 222
DELETE_TOPIC_IN_BROKER = 215


@runtime_checkable
class PushChannel(Protocol):
    """A client channel that can carry a broker-initiated oneway request."""

    def send_oneway(self, code: int, ext: dict[str, str], body: bytes) -> None:
        """Send a oneway request to the client (must not raise)."""
        ...


def _ok(
    cmd: RemotingCommand, body: bytes = b"", ext: dict[str, object] | None = None
) -> RemotingCommand:
    return cmd.make_response(ResponseCode.SUCCESS, None, ext, body)


def _last_time(core: BrokerCore, topic: str, queue_id: int, offset: int) -> int:
    if offset <= 0:
        return 0
    return max(0, core.store.message_store_timestamp(topic, queue_id, offset - 1))


# ------------------------------------------------------------------- stats views


def topic_stats(core: BrokerCore, topic: str) -> list[TopicOffset] | None:
    """Rule 1: per write queue of ``topic``; None if the topic is unknown."""
    config = core.topic_config(topic)
    if config is None:
        return None
    store, name = core.store, core.config.broker_name
    out = []
    for qid in range(config.write_queue_nums):
        max_off = max(0, store.max_offset_in_queue(topic, qid))
        out.append(
            TopicOffset(
                MessageQueue(topic, name, qid),
                store.min_offset_in_queue(topic, qid),
                max_off,
                _last_time(core, topic, qid, max_off),
            )
        )
    return out


def topics_of_group(core: BrokerCore, group: str) -> list[str]:
    """Topics the group has committed offsets for (``whichTopicByConsumer``)."""
    suffix = TOPIC_GROUP_SEPARATOR + group
    return sorted(k[: -len(suffix)] for k in core.offsets.table() if k.endswith(suffix))


def consume_stats(
    core: BrokerCore, group: str, topic: str | None, *, write_queues: bool = False
) -> list[QueueProgress]:
    """Rule 1: the group's progress per read queue (``write_queues``: per write queue,
    as GET_BROKER_CONSUME_STATS walks them) of ``topic`` (every topic it committed
    offsets for when None); unknown topics are skipped, and so are topics an online
    group with subscriptions does not subscribe."""
    store, name = core.store, core.config.broker_name
    out = []
    for t in [topic] if topic else topics_of_group(core, group):
        config = core.topic_config(t)
        if config is None or core.consumers.subscribes(group, t) is False:
            continue
        queues = config.write_queue_nums if write_queues else config.read_queue_nums
        for qid in range(queues):
            broker = max(0, store.max_offset_in_queue(t, qid))
            consumer = max(0, core.offsets.query(group, t, qid) or 0)
            out.append(
                QueueProgress(
                    MessageQueue(t, name, qid), broker, consumer, _last_time(core, t, qid, consumer)
                )
            )
    return out


# ---------------------------------------------------------------- processors


def process_topic_stats(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_TOPIC_STATS_INFO (202)."""
    topic = ext_str(cmd.ext_fields, "topic")
    stats = topic_stats(ctx.core, topic)
    if stats is None:
        return cmd.make_response(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
    return _ok(cmd, topic_stats_body(stats))


def process_consume_stats(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_CONSUME_STATS (208): header ``consumerGroup``, optional ``topic``."""
    ext = cmd.ext_fields
    group = ext_group(ext, "consumerGroup")
    stats = consume_stats(ctx.core, group, ext.get("topic") or None)
    return _ok(cmd, consume_stats_body(stats, consume_tps(ctx.core, group, stats)))


def consume_tps(core: BrokerCore, group: str, rows: list[QueueProgress]) -> float:
    """Messages per second the group pulled over the last minute from the rows'
    topics (RocketMQ ``tpsGroupGetNums``: the ``GROUP_GET_NUMS`` minute rate)."""
    tps = 0.0
    for topic in sorted({row.queue.topic for row in rows}):
        snaps = core.traffic.snapshots(GROUP_GET_NUMS, f"{topic}@{group}")
        if snaps is not None:
            tps += snaps[0].tps
    return tps


def process_consumer_connections(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_CONSUMER_CONNECTION_LIST (203)."""
    core = ctx.core
    group = ext_group(cmd.ext_fields, "consumerGroup")
    info = core.consumers.group_info(group)
    if info is None:
        return cmd.make_response(
            ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online"
        )
    conns = core.connections.clients(sorted(info.clients))
    version = max((c.last_update_ms for c in info.clients.values()), default=0)
    return _ok(cmd, consumer_connection_body(conns, info.data, version))


def process_producer_connections(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_PRODUCER_CONNECTION_LIST (204)."""
    group = ext_str(cmd.ext_fields, "producerGroup")
    conns = ctx.core.connections.producers(group)
    if not conns:
        return cmd.make_response(
            ResponseCode.SYSTEM_ERROR, f"the producer group[{group}] not exist"
        )
    return _ok(cmd, producer_connection_body(conns))


def _uptime(ms: int) -> str:
    s = ms // 1000
    return (
        f"[ {s // 86400} days, {s // 3600 % 24} hours, {s // 60 % 60} minutes, {s % 60} seconds ]"
    )


def human_bytes(n: int) -> str:
    """``MixAll.humanReadableByteCount(n, false)``: ``"0 B"``, ``"252.0 GiB"``."""
    if n < 1024:
        return f"{n} B"
    exp = min(int(math.log(n) / math.log(1024)), 6)
    return f"{n / 1024**exp:.1f} {'KMGTPE'[exp - 1]}iB"


def _dir_capacity(path: Path) -> str:
    """``commitLogDirCapacity``: the partition's size and free bytes (``File``'s total
    and free space: statvfs ``f_blocks`` and ``f_bfree``)."""
    try:
        st = os.statvfs(path)
    except OSError:
        return "Total : 0 B, Free : 0 B."
    total, free = st.f_blocks * st.f_frsize, st.f_bfree * st.f_frsize
    return f"Total : {human_bytes(total)}, Free : {human_bytes(free)}."


def earliest_time_as_498(store: StoreView) -> int:
    """``earliestMessageTimeStamp`` as 4.9.8 finds it: it reads ``2 * maxMessageSize``
    bytes from the CommitLog's first offset and gives -1 unless that many bytes are
    written in the file holding it (``CommitLog.pickupStoreTimestamp``), so a broker
    whose first file holds less answers -1 (docs/admin.md §6)."""
    cfg = store.cfg
    low, size = store.min_physical_offset, cfg.commitlog_file_size
    if low < 0 or store.max_physical_offset <= low:
        return -1
    file_end = (low // size + 1) * size
    if min(store.max_physical_offset, file_end) - low < 2 * cfg.max_message_size:
        return -1
    return store.earliest_message_time()


_IDLE_POOLS: Final = (
    ("sendThreadPoolQueue", "sendThreadPoolQueueCapacity"),
    ("pullThreadPoolQueue", "pullThreadPoolQueueCapacity"),
    ("queryThreadPoolQueue", "queryThreadPoolQueueCapacity"),
)


def runtime_info(core: BrokerCore) -> dict[str, str]:
    """GET_BROKER_RUNTIME_INFO's table: 4.9.8's keys (docs/admin.md §6)."""
    store = core.store
    now = int(time.time() * 1000)
    boot = core.boot_timestamp_ms
    put_tps, get_tps = core.traffic.tps_lines()
    puts, gets = core.traffic.totals()
    put_today, put_yesterday, get_today, get_yesterday = core.traffic.mornings()
    commitlog = store.cfg.commitlog_path
    ratio = str(store.check_disk())
    capacity = {**BROKER_DEFAULTS, **thread_defaults(processors())}
    table = {
        "putTps": put_tps,
        "getTransferedTps": get_tps,
        "msgPutTotalTodayNow": str(puts),
        "msgGetTotalTodayNow": str(gets),
        "msgPutTotalTodayMorning": str(put_today),
        "msgPutTotalYesterdayMorning": str(put_yesterday),
        "msgGetTotalTodayMorning": str(get_today),
        "msgGetTotalYesterdayMorning": str(get_yesterday),
        "bootTimestamp": str(boot),
        "runtime": _uptime(now - boot),
        "brokerVersion": str(V4_9_8),
        "brokerVersionDesc": "V4_9_8",  # the protocol version it speaks and sends
        "commitLogMinOffset": str(store.min_physical_offset),
        "commitLogMaxOffset": str(store.max_physical_offset),
        "commitLogDiskRatio": ratio,
        f"commitLogDiskRatio_{commitlog}": ratio,
        "consumeQueueDiskRatio": str(disk_used_ratio(store.cfg.root / "consumequeue")),
        "commitLogDirCapacity": _dir_capacity(commitlog),
        "dispatchBehindBytes": str(store.dispatch_behind_bytes),
        "dispatchMaxBuffer": "0",
        "earliestMessageTimeStamp": str(earliest_time_as_498(store)),
        "remainHowManyDataToFlush": human_bytes(
            max(0, store.max_physical_offset - store.flushed_physical_offset)
        ),
        "remainTransientStoreBufferNumbs": str(2**31 - 1),
        "startAcceptSendRequestTimeStamp": capacity["startAcceptSendRequestTimeStamp"],
        "pageCacheLockTimeMills": "0",
        "EndTransactionQueueSize": "0",
        "EndTransactionThreadPoolQueueCapacity": capacity["endTransactionPoolQueueCapacity"],
        **core.traffic.store_stats(),
    }
    for name, capacity_key in _IDLE_POOLS:
        table[f"{name}Size"] = "0"
        table[f"{name}HeadWaitTimeMills"] = "0"
        table[capacity_key] = capacity[capacity_key]
    return table


def process_runtime_info(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_BROKER_RUNTIME_INFO (28)."""
    return _ok(cmd, kv_table_body(runtime_info(ctx.core)))


def broker_properties(ctx: RequestContext) -> dict[str, object]:
    """The settings in force, under RocketMQ's ``BrokerConfig`` /
    ``MessageStoreConfig`` names, with 4.9.8's defaults for the keys naming settings
    mqstore does not have, in 4.9.8's order (``mqstore.java_settings``, docs/admin.md §7)."""
    return broker_settings(_own_properties(ctx))


def _own_properties(ctx: RequestContext) -> dict[str, object]:
    bc, sc = ctx.core.config, ctx.core.store.cfg
    host = ctx.broker_addr.rsplit(":", 1)[0]
    own: dict[str, object] = {
        "brokerName": bc.broker_name,
        "brokerClusterName": bc.cluster_name,
        "brokerId": bc.broker_id,
        "listenPort": ctx.broker_addr.rsplit(":", 1)[-1],
        "autoCreateTopicEnable": bc.auto_create_topic_enable,
        "defaultTopicQueueNums": bc.default_topic_queue_nums,
        "autoCreateSubscriptionGroup": bc.auto_create_subscription_group,
        "longPollingEnable": bc.long_polling_enable,
        "shortPollingTimeMills": bc.short_polling_time_ms,
        "notifyConsumerIdsChangedEnable": bc.notify_consumer_ids_changed_enable,
        "flushConsumerOffsetInterval": bc.consumer_offset_persist_interval_ms,
        "slaveReadEnable": bc.slave_read_enable,
        "enablePropertyFilter": bc.enable_property_filter,
        "storePathRootDir": str(sc.root_dir),
        "brokerRole": sc.broker_role.name,
        "flushDiskType": sc.flush_disk_type.name,
        "mappedFileSizeCommitLog": sc.commitlog_file_size,
        "mappedFileSizeConsumeQueue": sc.mapped_file_size_consume_queue,
        "maxMessageSize": sc.max_message_size,
        "syncFlushTimeout": sc.sync_flush_timeout_ms,
        "flushIntervalCommitLog": sc.flush_interval_commitlog_ms,
        "fileReservedTime": sc.file_reserved_time_hours,
        "deleteWhen": sc.delete_when,
        "diskMaxUsedSpaceRatio": sc.disk_max_used_space_ratio,
        "messageIndexEnable": sc.message_index_enable,
        "maxHashSlotNum": sc.max_hash_slot_num,
        "maxIndexNum": sc.max_index_num,
        "messageDelayLevel": sc.message_delay_level,
        "offsetCheckInSlave": sc.offset_check_in_slave,
        "accessMessageInMemoryMaxRatio": sc.access_message_in_memory_max_ratio,
        "haListenPort": sc.ha_listen_port,
        "brokerIP1": host,
        "brokerIP2": host,  # one address: the HA address is the remoting host's
        "storePathCommitLog": str(sc.commitlog_path),
        "rocketmqHome": rocketmq_home(),
        "aclEnable": ctx.checks_reads,
        "serverChannelMaxIdleTimeSeconds": int(ServerLimits().idle_timeout_s),
        "flushCommitLogLeastPages": sc.flush_commitlog_least_pages,
        "flushCommitLogThoroughInterval": sc.flush_commitlog_thorough_interval_ms,
        "flushIntervalConsumeQueue": sc.flush_interval_consume_queue_ms,
        "flushConsumeQueueLeastPages": sc.flush_consume_queue_least_pages,
        "flushConsumeQueueThoroughInterval": sc.flush_consume_queue_thorough_interval_ms,
        "flushDelayOffsetInterval": sc.flush_delay_offset_interval_ms,
        "checkCRCOnRecover": sc.check_crc_on_recover,
        "osPageCacheBusyTimeOutMills": sc.os_page_cache_busy_timeout_ms,
        "maxMsgsNumBatch": sc.max_msgs_num_batch,
        "maxTransferBytesOnMessageInMemory": sc.max_transfer_bytes_on_message_in_memory,
        "maxTransferCountOnMessageInMemory": sc.max_transfer_count_on_message_in_memory,
        "maxTransferBytesOnMessageInDisk": sc.max_transfer_bytes_on_message_in_disk,
        "maxTransferCountOnMessageInDisk": sc.max_transfer_count_on_message_in_disk,
        "cleanResourceInterval": sc.clean_resource_interval_ms,
        "cleanFileForciblyEnable": sc.clean_file_forcibly_enable,
        "haHousekeepingInterval": sc.ha_housekeeping_interval_ms,
        "haSendHeartbeatInterval": sc.ha_send_heartbeat_interval_ms,
        "haSlaveFallbehindMax": sc.ha_slave_fallbehind_max,
        "slaveTimeout": sc.slave_timeout_ms,
        "transactionTimeOut": bc.transaction_timeout_ms,
        "transactionCheckInterval": bc.transaction_check_interval_ms,
        "transactionCheckMax": bc.transaction_check_max,
        # what mqstore does not have, as the Java broker names it (exportConfigs reads them)
        "filterServerNums": 0,
        "msgTraceTopicName": "RMQ_SYS_TRACE_TOPIC",
        "traceTopicEnable": False,
        "traceOn": True,  # sends answer TRACE_ON=true (store.broker.processors)
        "useTLS": False,
    }
    if bc.namesrv_addr:  # Java leaves a null setting out
        own["namesrvAddr"] = bc.namesrv_addr
    return own


def process_broker_config(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """GET_BROKER_CONFIG (26): header ``version`` is a ``DataVersion`` JSON."""
    version = dumps({"counter": 0, "timestamp": ctx.core.boot_timestamp_ms})
    body = properties_text(broker_properties(ctx)).encode()
    return _ok(cmd, body, {"version": version})


def process_update_group(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200): body ``SubscriptionGroupConfig``."""
    try:
        obj = loads(cmd.body or b"null")
    except FastjsonError as e:
        raise BadRequestError(f"subscription group body: {e}") from None
    if not isinstance(obj, dict) or not obj.get("groupName"):
        raise BadRequestError("subscription group body names no groupName")
    try:
        cfg = SubscriptionGroupConfig.from_json(str(obj["groupName"]), obj)
    except (TypeError, ValueError) as e:
        raise BadRequestError(f"subscription group body: {e}") from None
    ext_group({"g": cfg.group_name}, "g")  # BadRequestError for an illegal name
    if cfg.retry_queue_nums < 0 or cfg.retry_max_times < -1:
        raise BadRequestError("retryQueueNums and retryMaxTimes must not be negative")
    ctx.core.groups.put(replace(cfg))
    return _ok(cmd)


DELETE_REFUSED_FOLLOWING = (
    "delete topic is not supported with dispatch_process: the dispatch child owns the "
    "consume queues"
)


def delete_topic(core: BrokerCore, topic: str) -> None:
    """Rule 3 (the caller has checked the store is not following a dispatch child)."""
    core.topics.delete(topic)
    core.offsets.drop_topic(topic)
    core.store.drop_topic(topic)


def process_delete_topic(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """DELETE_TOPIC_IN_BROKER (215)."""
    topic = ext_str(cmd.ext_fields, "topic")
    try:
        validate_topic(topic)
    except IllegalTopicError as e:
        return cmd.make_response(ResponseCode.SYSTEM_ERROR, str(e))
    if ctx.core.store.follows_dispatch_child:
        return cmd.make_response(ResponseCode.SYSTEM_ERROR, DELETE_REFUSED_FOLLOWING)
    delete_topic(ctx.core, topic)
    return _ok(cmd)


def reset_offsets(
    core: BrokerCore, topic: str, group: str, timestamp: int, force: bool
) -> dict[MessageQueue, int] | str:
    """Rule 2: the new offset per write queue, or the remark of a refusal."""
    config = core.topic_config(topic)
    if config is None:
        return f"[reset-offset] reset offset failed, no topic in this broker. topic={topic}"
    store, name = core.store, core.config.broker_name
    table: dict[MessageQueue, int] = {}
    for qid in range(config.write_queue_nums):
        committed = core.offsets.query(group, topic, qid)
        if committed is None:
            return f"THe consumer group <{group}> not exist"
        if timestamp == -1:
            target = store.max_offset_in_queue(topic, qid)
        else:
            target = store.offset_by_time(topic, qid, timestamp)
        target = max(0, target)
        table[MessageQueue(topic, name, qid)] = target if force or target < committed else committed
    return table


def process_reset_offset(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """INVOKE_BROKER_TO_RESET_OFFSET (222): header topic, group, timestamp, isForce."""
    ext = cmd.ext_fields
    core = ctx.core
    topic, group = ext_str(ext, "topic"), ext_group(ext, "group")
    timestamp, force = ext_int(ext, "timestamp"), ext.get("isForce", "false") == "true"
    table = reset_offsets(core, topic, group, timestamp, force)
    if isinstance(table, str):
        return cmd.make_response(ResponseCode.SYSTEM_ERROR, table)
    info = core.consumers.group_info(group)
    if info is None or not info.clients:
        remark = (
            f"Consumer not online, so can not reset offset, Group: {group} "
            f"Topic: {topic} Timestamp: {timestamp}"
        )
        return cmd.make_response(ResponseCode.CONSUMER_NOT_ONLINE, remark)
    for mq, offset in table.items():
        core.offsets.commit(group, topic, mq.queue_id, offset)
    body = reset_offset_body(table)
    header = {
        "topic": topic,
        "group": group,
        "timestamp": str(timestamp),
        "isForce": "true" if force else "false",
    }
    for client in list(info.clients.values()):
        if isinstance(client.channel, PushChannel):
            client.channel.send_oneway(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, header, body)
    return _ok(cmd, body)


def process_notify_group(ctx: RequestContext, cmd: RemotingCommand) -> RemotingCommand:
    """NOTIFY_CONSUMER_IDS_CHANGED (40) from an operator: Rule 4."""
    group = ext_group(cmd.ext_fields, "consumerGroup")
    info = ctx.core.consumers.group_info(group)
    clients = sorted(info.clients.items()) if info is not None else []
    if not clients:
        remark = f"the consumer group[{group}] not online"
        return cmd.make_response(ResponseCode.CONSUMER_NOT_ONLINE, remark)
    for _, client in clients:
        client.channel.notify_consumer_ids_changed(group)
    body = {"consumerGroup": group, "clientIds": [cid for cid, _ in clients]}
    return _ok(cmd, json.dumps(body).encode())


ADMIN_PROCESSORS: dict[int, Processor] = {
    RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: process_notify_group,
    GET_BROKER_CONFIG: process_broker_config,
    RequestCode.GET_BROKER_RUNTIME_INFO: process_runtime_info,
    RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: process_update_group,
    RequestCode.GET_TOPIC_STATS_INFO: process_topic_stats,
    RequestCode.GET_CONSUMER_CONNECTION_LIST: process_consumer_connections,
    RequestCode.GET_PRODUCER_CONNECTION_LIST: process_producer_connections,
    RequestCode.GET_CONSUME_STATS: process_consume_stats,
    DELETE_TOPIC_IN_BROKER: process_delete_topic,
    INVOKE_BROKER_TO_RESET_OFFSET: process_reset_offset,
}
"""The admin request codes (registered by ``mqstore.broker.processors``)."""
