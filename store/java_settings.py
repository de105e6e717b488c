"""The settings a RocketMQ 4.9.8 broker and name server list (GET_BROKER_CONFIG,
GET_NAMESRV_CONFIG): every key, in the order the Java process writes them, and the
default value of each setting mqstore does not have (docs/admin.md §7, §17).

mqstore answers those two codes with the same key set as the Java process, so that
``mqadmin getBrokerConfig`` / ``getNamesrvConfig`` and the dashboard show the same table
against both. A key names either a setting mqstore has (the caller fills it with the
value in force) or one it does not have (thread pools, Netty options, features it lacks):
those are shown at 4.9.8's default, computed as 4.9.8 computes it (thread counts from the
processors this process may run on), and change nothing here.

Order matters: the client reads the body into a ``java.util.Properties`` (hash table)
and prints that table; the same keys inserted in the same order print in the same order
(a different order may swap keys that share a bucket). The order is the one a 4.9.8
process writes (its own ``Properties`` hash order), taken from the real process
(``tests/oracle/test_mqadmin_differential.py`` compares the tables).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Final

BROKER_KEYS: Final = (
    "shortPollingTimeMills",
    "serverSocketBacklog",
    "clientWorkerThreads",
    "clientAsyncSemaphoreValue",
    "channelNotActiveInterval",
    "enableConsumeQueueExt",
    "clientSocketSndBufSize",
    "haHousekeepingInterval",
    "consumerManageThreadPoolNums",
    "transactionCheckInterval",
    "storePathRootDir",
    "autoCreateTopicEnable",
    "syncFlushTimeout",
    "clientChannelMaxIdleTimeSeconds",
    "autoDeleteUnusedStats",
    "maxIndexNum",
    "defaultTopicQueueNums",
    "clientSocketRcvBufSize",
    "clientManagerThreadPoolQueueCapacity",
    "writeBufferLowWaterMark",
    "debugLockEnable",
    "notifyConsumerIdsChangedEnable",
    "enableDetailStat",
    "brokerFastFailureEnable",
    "transientStorePoolEnable",
    "queryMessageThreadPoolNums",
    "maxMessageSize",
    "useReentrantLockWhenPutMessage",
    "waitTimeMillsInTransactionQueue",
    "messageIndexEnable",
    "commercialBaseCount",
    "diskFallRecorded",
    "scheduleAsyncDeliverMaxResendNum2Blocked",
    "endTransactionThreadPoolNums",
    "filterSupportRetry",
    "brokerTopicEnable",
    "destroyMapedFileIntervalForcibly",
    "messageDelayLevel",
    "offsetCheckInSlave",
    "deleteConsumeQueueFilesInterval",
    "flushCommitLogTimed",
    "isolateLogEnable",
    "haSlaveFallbehindMax",
    "waitTimeMillsInSendQueue",
    "defaultQueryMaxNum",
    "namesrvAddr",
    "clientCloseSocketIfTimeout",
    "haSendHeartbeatInterval",
    "serverCallbackExecutorThreads",
    "brokerName",
    "fetchNamesrvAddrByAddressServer",
    "longPollingEnable",
    "enableCalcFilterBitMap",
    "redeleteHangedFileInterval",
    "diskMaxUsedSpaceRatio",
    "transactionCheckMax",
    "maxTransferBytesOnMessageInMemory",
    "enableScheduleMessageStats",
    "flushCommitLogLeastPages",
    "maxHashSlotNum",
    "configBlackList",
    "sendMessageThreadPoolNums",
    "serverSocketRcvBufSize",
    "putMsgIndexHightWater",
    "accessMessageInMemoryMaxRatio",
    "slaveReadEnable",
    "fileReservedTime",
    "enableDLegerCommitLog",
    "commercialTransCount",
    "replyThreadPoolQueueCapacity",
    "consumerFallbehindThreshold",
    "maxErrorRateOfBloomFilter",
    "storeReplyMessageEnable",
    "heartbeatThreadPoolNums",
    "startAcceptSendRequestTimeStamp",
    "traceOn",
    "flushDiskType",
    "maxLmqConsumeQueueNum",
    "rejectTransactionMessage",
    "flushIntervalConsumeQueue",
    "clientOnewaySemaphoreValue",
    "isEnableBatchPush",
    "highSpeedMode",
    "adminBrokerThreadPoolNums",
    "flushConsumeQueueThoroughInterval",
    "sendThreadPoolQueueCapacity",
    "putThreadPoolQueueCapacity",
    "commercialTimerCount",
    "pullThreadPoolQueueCapacity",
    "haListenPort",
    "commitIntervalCommitLog",
    "serverSocketSndBufSize",
    "enableMultiDispatch",
    "flushConsumeQueueLeastPages",
    "mappedFileSizeConsumeQueue",
    "transientStorePoolSize",
    "registerNameServerPeriod",
    "writeBufferHighWaterMark",
    "disableConsumeIfConsumerReadSlowly",
    "serverChannelMaxIdleTimeSeconds",
    "commercialBigCount",
    "mappedFileSizeCommitLog",
    "maxTransferBytesOnMessageInDisk",
    "serverOnewaySemaphoreValue",
    "checkCRCOnRecover",
    "forceRegister",
    "transferMsgByHeap",
    "flushConsumerOffsetInterval",
    "flushDelayOffsetInterval",
    "endTransactionPoolQueueCapacity",
    "flushIntervalCommitLog",
    "waitTimeMillsInPullQueue",
    "deleteWhen",
    "flushCommitLogThoroughInterval",
    "aclEnable",
    "cleanResourceInterval",
    "serverAsyncSemaphoreValue",
    "connectTimeoutMillis",
    "storePathCommitLog",
    "clientPooledByteBufAllocatorEnable",
    "commitCommitLogThoroughInterval",
    "rocketmqHome",
    "useEpollNativeSelector",
    "maxTransferCountOnMessageInMemory",
    "serverPooledByteBufAllocatorEnable",
    "autoCreateSubscriptionGroup",
    "flushLeastPagesWhenWarmMapedFile",
    "filterDataCleanTimeSpan",
    "warmMapedFileEnable",
    "traceTopicEnable",
    "clientManageThreadPoolNums",
    "consumerManagerThreadPoolQueueCapacity",
    "cleanFileForciblyEnable",
    "serverSelectorThreads",
    "enableScheduleAsyncDeliver",
    "compressedRegister",
    "brokerIP2",
    "enableLmq",
    "commitCommitLogLeastPages",
    "brokerRole",
    "brokerIP1",
    "brokerPermission",
    "maxDelayTime",
    "transactionTimeOut",
    "maxTransferCountOnMessageInDisk",
    "clientCallbackExecutorThreads",
    "filterServerNums",
    "fastFailIfNoBufferInStorePool",
    "useTLS",
    "duplicationEnable",
    "pullMessageThreadPoolNums",
    "brokerId",
    "registerBrokerTimeoutMills",
    "mappedFileSizeConsumeQueueExt",
    "msgTraceTopicName",
    "osPageCacheBusyTimeOutMills",
    "expectConsumerNumUseFilter",
    "scheduleAsyncDeliverMaxPendingLimit",
    "serverWorkerThreads",
    "slaveTimeout",
    "queryThreadPoolQueueCapacity",
    "maxMsgsNumBatch",
    "flushConsumerOffsetHistoryInterval",
    "bitMapLengthConsumeQueueExt",
    "processReplyMessageThreadPoolNums",
    "clusterTopicEnable",
    "regionId",
    "putMessageFutureThreadPoolNums",
    "brokerClusterName",
    "commercialEnable",
    "haTransferBatchSize",
    "messageStorePlugIn",
    "listenPort",
    "waitTimeMillsInHeartbeatQueue",
    "messageIndexSafe",
    "heartbeatThreadPoolQueueCapacity",
    "enablePropertyFilter",
    "deleteCommitLogFilesInterval",
)

BROKER_DEFAULTS: Final[dict[str, str]] = {
    "serverSocketBacklog": "1024",
    "clientWorkerThreads": "4",
    "clientAsyncSemaphoreValue": "65535",
    "channelNotActiveInterval": "60000",
    "enableConsumeQueueExt": "false",
    "clientSocketSndBufSize": "0",
    "consumerManageThreadPoolNums": "32",
    "clientChannelMaxIdleTimeSeconds": "120",
    "autoDeleteUnusedStats": "false",
    "clientSocketRcvBufSize": "0",
    "clientManagerThreadPoolQueueCapacity": "1000000",
    "writeBufferLowWaterMark": "0",
    "debugLockEnable": "false",
    "enableDetailStat": "true",
    "brokerFastFailureEnable": "true",
    "transientStorePoolEnable": "false",
    "useReentrantLockWhenPutMessage": "true",
    "waitTimeMillsInTransactionQueue": "3000",
    "commercialBaseCount": "1",
    "diskFallRecorded": "true",
    "scheduleAsyncDeliverMaxResendNum2Blocked": "3",
    "filterSupportRetry": "false",
    "brokerTopicEnable": "true",
    "destroyMapedFileIntervalForcibly": "120000",
    "deleteConsumeQueueFilesInterval": "100",
    "flushCommitLogTimed": "true",
    "isolateLogEnable": "false",
    "waitTimeMillsInSendQueue": "200",
    "defaultQueryMaxNum": "32",
    "clientCloseSocketIfTimeout": "true",
    "serverCallbackExecutorThreads": "0",
    "fetchNamesrvAddrByAddressServer": "false",
    "enableCalcFilterBitMap": "false",
    "redeleteHangedFileInterval": "120000",
    "enableScheduleMessageStats": "true",
    "configBlackList": "configBlackList;brokerConfigPath",
    "serverSocketRcvBufSize": "0",
    "putMsgIndexHightWater": "600000",
    "enableDLegerCommitLog": "false",
    "commercialTransCount": "1",
    "replyThreadPoolQueueCapacity": "10000",
    "consumerFallbehindThreshold": "17179869184",
    "maxErrorRateOfBloomFilter": "20",
    "storeReplyMessageEnable": "true",
    "startAcceptSendRequestTimeStamp": "0",
    "maxLmqConsumeQueueNum": "20000",
    "rejectTransactionMessage": "false",
    "clientOnewaySemaphoreValue": "65535",
    "isEnableBatchPush": "false",
    "highSpeedMode": "false",
    "adminBrokerThreadPoolNums": "16",
    "sendThreadPoolQueueCapacity": "10000",
    "putThreadPoolQueueCapacity": "10000",
    "commercialTimerCount": "1",
    "pullThreadPoolQueueCapacity": "100000",
    "commitIntervalCommitLog": "200",
    "serverSocketSndBufSize": "0",
    "enableMultiDispatch": "false",
    "transientStorePoolSize": "5",
    "registerNameServerPeriod": "30000",
    "writeBufferHighWaterMark": "0",
    "disableConsumeIfConsumerReadSlowly": "false",
    "commercialBigCount": "1",
    "serverOnewaySemaphoreValue": "256",
    "forceRegister": "true",
    "transferMsgByHeap": "true",
    "endTransactionPoolQueueCapacity": "100000",
    "waitTimeMillsInPullQueue": "5000",
    "serverAsyncSemaphoreValue": "64",
    "connectTimeoutMillis": "3000",
    "clientPooledByteBufAllocatorEnable": "false",
    "commitCommitLogThoroughInterval": "200",
    "useEpollNativeSelector": "false",
    "serverPooledByteBufAllocatorEnable": "true",
    "flushLeastPagesWhenWarmMapedFile": "4096",
    "filterDataCleanTimeSpan": "86400000",
    "warmMapedFileEnable": "false",
    "clientManageThreadPoolNums": "32",
    "consumerManagerThreadPoolQueueCapacity": "1000000",
    "serverSelectorThreads": "3",
    "enableScheduleAsyncDeliver": "false",
    "compressedRegister": "false",
    "enableLmq": "false",
    "commitCommitLogLeastPages": "4",
    "brokerPermission": "6",
    "maxDelayTime": "40",
    "fastFailIfNoBufferInStorePool": "false",
    "duplicationEnable": "false",
    "registerBrokerTimeoutMills": "6000",
    "mappedFileSizeConsumeQueueExt": "50331648",
    "expectConsumerNumUseFilter": "32",
    "scheduleAsyncDeliverMaxPendingLimit": "2000",
    "serverWorkerThreads": "8",
    "queryThreadPoolQueueCapacity": "20000",
    "flushConsumerOffsetHistoryInterval": "60000",
    "bitMapLengthConsumeQueueExt": "112",
    "clusterTopicEnable": "true",
    "regionId": "DefaultRegion",
    "commercialEnable": "true",
    "haTransferBatchSize": "32768",
    "messageStorePlugIn": "",
    "waitTimeMillsInHeartbeatQueue": "31000",
    "messageIndexSafe": "false",
    "heartbeatThreadPoolQueueCapacity": "50000",
    "deleteCommitLogFilesInterval": "100",
}

NAMESRV_KEYS: Final = (
    "serverSocketBacklog",
    "writeBufferHighWaterMark",
    "serverWorkerThreads",
    "serverSelectorThreads",
    "serverChannelMaxIdleTimeSeconds",
    "configBlackList",
    "writeBufferLowWaterMark",
    "serverSocketRcvBufSize",
    "serverAsyncSemaphoreValue",
    "kvConfigPath",
    "configStorePath",
    "clusterTest",
    "orderMessageEnable",
    "serverSocketSndBufSize",
    "serverOnewaySemaphoreValue",
    "serverCallbackExecutorThreads",
    "listenPort",
    "rocketmqHome",
    "productEnvName",
    "useEpollNativeSelector",
    "serverPooledByteBufAllocatorEnable",
)
NAMESRV_DEFAULTS: Final[dict[str, str]] = {
    "serverSocketBacklog": "1024",
    "writeBufferHighWaterMark": "0",
    "serverWorkerThreads": "8",
    "serverSelectorThreads": "3",
    "writeBufferLowWaterMark": "0",
    "serverSocketRcvBufSize": "0",
    "serverAsyncSemaphoreValue": "64",
    "serverSocketSndBufSize": "0",
    "serverOnewaySemaphoreValue": "256",
    "serverCallbackExecutorThreads": "0",
    "productEnvName": "center",
    "useEpollNativeSelector": "false",
    "serverPooledByteBufAllocatorEnable": "true",
}


def processors() -> int:
    """The processors this process may run on, as Java's ``availableProcessors`` counts
    them in a container: the CPUs of its affinity mask, at most its cgroup CPU quota
    (rounded up). Java may also weigh cgroup CPU shares; this does not."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    quota = _cgroup_quota()
    return max(1, min(cpus, quota) if quota else cpus)


def _cgroup_quota() -> int | None:
    """The cgroup's CPU quota in whole CPUs (rounded up), None without one."""
    for path, read in (("/sys/fs/cgroup/cpu.max", _v2_quota), ("/sys/fs/cgroup/cpu", _v1_quota)):
        try:
            return read(path)
        except (OSError, ValueError):
            continue
    return None


def _v2_quota(path: str) -> int | None:
    with open(path) as f:
        quota, period = f.read().split()[:2]
    return None if quota == "max" else -(-int(quota) // int(period))


def _v1_quota(folder: str) -> int | None:
    with open(os.path.join(folder, "cpu.cfs_quota_us")) as f:
        quota = int(f.read())
    with open(os.path.join(folder, "cpu.cfs_period_us")) as f:
        period = int(f.read())
    return None if quota <= 0 or period <= 0 else -(-quota // period)


def thread_defaults(cpus: int) -> dict[str, str]:
    """4.9.8's thread-count defaults that depend on the processor count
    (``BrokerConfig``, ``NettyClientConfig``)."""
    send = min(cpus, 4)
    return {
        "sendMessageThreadPoolNums": str(send),
        "putMessageFutureThreadPoolNums": str(min(cpus, 4)),
        "pullMessageThreadPoolNums": str(16 + cpus * 2),
        "processReplyMessageThreadPoolNums": str(16 + cpus * 2),
        "queryMessageThreadPoolNums": str(8 + cpus),
        "heartbeatThreadPoolNums": str(min(32, cpus)),
        "endTransactionThreadPoolNums": str(max(8 + cpus * 2, send * 4)),
        "clientCallbackExecutorThreads": str(cpus),
    }


def ordered(keys: tuple[str, ...], *layers: Mapping[str, object]) -> dict[str, object]:
    """``keys`` in order, each with its value from the first layer that has it; a key
    no layer has is left out (as Java leaves out a null setting)."""
    out: dict[str, object] = {}
    for key in keys:
        for layer in layers:
            if key in layer:
                out[key] = layer[key]
                break
    return out


def broker_settings(own: Mapping[str, object]) -> dict[str, object]:
    """A broker's GET_BROKER_CONFIG table: ``own`` (the settings mqstore has) over the
    defaults, in 4.9.8's order. Keys of ``own`` that 4.9.8 does not list are dropped."""
    return ordered(BROKER_KEYS, own, BROKER_DEFAULTS, thread_defaults(processors()))


def namesrv_settings(own: Mapping[str, object]) -> dict[str, object]:
    """A name server's GET_NAMESRV_CONFIG table: ``own`` over the defaults, in order."""
    return ordered(NAMESRV_KEYS, own, NAMESRV_DEFAULTS)


def rocketmq_home() -> str:
    """``rocketmqHome``: ``ROCKETMQ_HOME`` as the Java process reads it, else the folder
    mqstore is installed in (its nearest counterpart)."""
    return os.environ.get("ROCKETMQ_HOME") or os.path.dirname(os.path.abspath(__file__))
