"""The name server's admin requests (docs/admin.md §17), as RocketMQ 4.9.8's
``DefaultRequestProcessor`` answers them:

====  ===================================  ==========================================
code  request                              answer
====  ===================================  ==========================================
100   PUT_KV_CONFIG                        header ``namespace``, ``key``, ``value``
101   GET_KV_CONFIG                        header ``value``; QUERY_NOT_FOUND if absent
102   DELETE_KV_CONFIG                     header ``namespace``, ``key``
205   WIPE_WRITE_PERM_OF_BROKER            header ``wipeTopicCount``
216   DELETE_TOPIC_IN_NAMESRV              header ``topic``, optional ``clusterName``
219   GET_KVLIST_BY_NAMESPACE              ``KVTable``; QUERY_NOT_FOUND if empty
318   UPDATE_NAMESRV_CONFIG                body: properties text
319   GET_NAMESRV_CONFIG                   properties text of the settings
327   ADD_WRITE_PERM_OF_BROKER             header ``addTopicCount``
====  ===================================  ==========================================

Rules
-----
Rule 1. DELETE_TOPIC_IN_NAMESRV forgets the topic's queue data (of the named cluster's
brokers only, when ``clusterName`` is given) and answers SUCCESS whether the topic was
known or not. It is ``mqadmin deleteTopic``'s second half, after DELETE_TOPIC_IN_BROKER
on every master: a broker that still has the topic brings it back at its next
registration, as with RocketMQ.

Rule 2. GET_NAMESRV_CONFIG answers ``key=value`` lines (``MixAll.properties2String``)
under RocketMQ's ``NamesrvConfig`` / ``NettyServerConfig`` names, for the settings this
name server has (:class:`NamesrvSettings`): ``listenPort``,
``serverChannelMaxIdleTimeSeconds`` (the idle timeout of its connections),
``orderMessageEnable`` (routes carry ``orderTopicConf`` from the KV table, Rule 4),
``clusterTest`` (kept and shown; no test-cluster route lookup is done) and
``configBlackList``, ``rocketmqHome`` (``mqstore.java_settings.rocketmq_home``), and
``kvConfigPath`` / ``configStorePath`` where 4.9.8 would put them under the user's home
(this name server keeps its KV table and settings in memory and writes neither file).
The Java name server's other keys (thread counts, socket buffer sizes, semaphores, the
Netty allocator) name nothing here and are shown at 4.9.8's defaults, in the Java
process's order, so that ``getNamesrvConfig`` prints the same table against both.

Rule 3. UPDATE_NAMESRV_CONFIG reads ``key=value`` lines. A key of ``configBlackList``
is NO_PERMISSION "Can not update config in black list." and nothing changes. Otherwise
the updatable settings named (``orderMessageEnable``, ``clusterTest``) take the new
values and every other key is ignored, as Java's ``Configuration.update`` ignores a
key no config object has or a value it cannot convert; SUCCESS.

Rule 4. The KV table (:class:`~mqstore.namesrv.kv.KvTable`): PUT and DELETE always
answer SUCCESS; GET of a missing key is QUERY_NOT_FOUND "No config item, Namespace: N
Key: K", GET_KVLIST of an empty namespace QUERY_NOT_FOUND "No config item, Namespace:
N". With ``orderMessageEnable`` a route's ``orderTopicConf`` is the topic's value in the
``ORDER_TOPIC_CONFIG`` namespace, and a REGISTER_BROKER answer carries that namespace.

Rule 5. WIPE_WRITE_PERM_OF_BROKER takes the write bit off the queue data of every topic
the named broker holds, ADD_WRITE_PERM_OF_BROKER sets read and write; each answers how
many topics it touched. A broker's later registration with a new data version
replaces its queue data (and so its perm), as with RocketMQ.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from mqstore.java_settings import namesrv_settings, rocketmq_home
from mqstore.namesrv import bodies
from mqstore.namesrv.kv import ORDER_TOPIC_CONFIG as ORDER_TOPIC_NAMESPACE
from mqstore.namesrv.kv import KvTable
from mqstore.namesrv.routes import RouteInfoManager
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode
from mqstore.remoting.headers import ext_str
from mqstore.remoting.java_properties import parse_properties, properties_text

CONFIG_BLACK_LIST: Final = "configBlackList;configStorePath;kvConfigPath"
"""RocketMQ 4.9.8's ``NamesrvConfig.configBlackList``: keys an update may not set."""
UPDATABLE: Final = ("orderMessageEnable", "clusterTest")
"""Settings UPDATE_NAMESRV_CONFIG changes (Rule 3)."""


@dataclass(slots=True)
class NamesrvSettings:
    """What GET_NAMESRV_CONFIG shows and UPDATE_NAMESRV_CONFIG changes (Rules 2-3);
    loop thread only."""

    order_message_enable: bool = False
    cluster_test: bool = False

    def properties(self, port: int, idle_timeout_s: float) -> dict[str, object]:
        """The settings under RocketMQ's names, with 4.9.8's defaults for the keys
        naming settings mqstore does not have, in 4.9.8's order (Rule 2)."""
        home = os.path.join(os.path.expanduser("~"), "namesrv")
        return namesrv_settings({
            "listenPort": port,
            "serverChannelMaxIdleTimeSeconds": int(idle_timeout_s),
            "orderMessageEnable": self.order_message_enable,
            "clusterTest": self.cluster_test,
            "configBlackList": CONFIG_BLACK_LIST,
            "kvConfigPath": os.path.join(home, "kvConfig.json"),
            "configStorePath": os.path.join(home, "namesrv.properties"),
            "rocketmqHome": rocketmq_home(),
        })  # fmt: skip

    def update(self, props: dict[str, str]) -> None:
        """Rule 3 (the black list checked by the caller)."""
        for key in UPDATABLE:
            value = props.get(key, "").strip().lower()
            if value in ("true", "false"):
                attr = "order_message_enable" if key == "orderMessageEnable" else "cluster_test"
                setattr(self, attr, value == "true")


class NamesrvAdmin:
    """The handlers of this module's codes over one name server's tables."""

    def __init__(
        self, routes: RouteInfoManager, port: Callable[[], int], idle_timeout_s: float
    ) -> None:
        self.routes = routes
        self.kv = KvTable()
        self.settings = NamesrvSettings()
        self._port = port
        self._idle_timeout_s = idle_timeout_s

    def delete_topic(self, cmd: RemotingCommand) -> RemotingCommand:
        """DELETE_TOPIC_IN_NAMESRV (216): Rule 1."""
        topic = ext_str(cmd.ext_fields, "topic")
        self.routes.delete_topic(topic, cmd.ext_fields.get("clusterName") or None)
        return cmd.make_response(ResponseCode.SUCCESS)

    def get_config(self, cmd: RemotingCommand) -> RemotingCommand:
        """GET_NAMESRV_CONFIG (319): Rule 2."""
        props = self.settings.properties(self._port(), self._idle_timeout_s)
        return cmd.make_response(ResponseCode.SUCCESS, body=properties_text(props).encode())

    def update_config(self, cmd: RemotingCommand) -> RemotingCommand:
        """UPDATE_NAMESRV_CONFIG (318): Rule 3."""
        props = parse_properties((cmd.body or b"").decode("utf-8", "replace"))
        if set(props) & set(CONFIG_BLACK_LIST.split(";")):
            remark = "Can not update config in black list."
            return cmd.make_response(ResponseCode.NO_PERMISSION, remark)
        self.settings.update(props)
        return cmd.make_response(ResponseCode.SUCCESS)

    def put_kv(self, cmd: RemotingCommand) -> RemotingCommand:
        """PUT_KV_CONFIG (100): Rule 4."""
        ext = cmd.ext_fields
        self.kv.put(ext_str(ext, "namespace"), ext_str(ext, "key"), ext_str(ext, "value"))
        return cmd.make_response(ResponseCode.SUCCESS)

    def get_kv(self, cmd: RemotingCommand) -> RemotingCommand:
        """GET_KV_CONFIG (101): Rule 4."""
        namespace, key = ext_str(cmd.ext_fields, "namespace"), ext_str(cmd.ext_fields, "key")
        value = self.kv.get(namespace, key)
        if value is None:
            remark = f"No config item, Namespace: {namespace} Key: {key}"
            return cmd.make_response(ResponseCode.QUERY_NOT_FOUND, remark)
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields={"value": value})

    def delete_kv(self, cmd: RemotingCommand) -> RemotingCommand:
        """DELETE_KV_CONFIG (102): Rule 4."""
        self.kv.delete(ext_str(cmd.ext_fields, "namespace"), ext_str(cmd.ext_fields, "key"))
        return cmd.make_response(ResponseCode.SUCCESS)

    def kv_list(self, cmd: RemotingCommand) -> RemotingCommand:
        """GET_KVLIST_BY_NAMESPACE (219): Rule 4."""
        namespace = ext_str(cmd.ext_fields, "namespace")
        table = self.kv.namespace(namespace)
        if table is None:
            remark = f"No config item, Namespace: {namespace}"
            return cmd.make_response(ResponseCode.QUERY_NOT_FOUND, remark)
        return cmd.make_response(ResponseCode.SUCCESS, body=bodies.kv_table_body(table))

    def write_perm(self, cmd: RemotingCommand, *, writable: bool) -> RemotingCommand:
        """WIPE_WRITE_PERM_OF_BROKER (205) / ADD_WRITE_PERM_OF_BROKER (327): Rule 5."""
        count = self.routes.set_write_perm(ext_str(cmd.ext_fields, "brokerName"), writable)
        header = "addTopicCount" if writable else "wipeTopicCount"
        return cmd.make_response(ResponseCode.SUCCESS, ext_fields={header: count})

    def order_topic_conf(self, topic: str) -> str | None:
        """Rule 4: the route's ``orderTopicConf`` (None without ``orderMessageEnable``)."""
        if not self.settings.order_message_enable:
            return None
        return self.kv.get(ORDER_TOPIC_NAMESPACE, topic)

    def handlers(self) -> dict[int, Callable[[object, RemotingCommand], RemotingCommand]]:
        """The name server's handler table entries of this module (connection unused)."""
        return {
            RequestCode.PUT_KV_CONFIG: lambda _c, cmd: self.put_kv(cmd),
            RequestCode.GET_KV_CONFIG: lambda _c, cmd: self.get_kv(cmd),
            RequestCode.DELETE_KV_CONFIG: lambda _c, cmd: self.delete_kv(cmd),
            RequestCode.GET_KVLIST_BY_NAMESPACE: lambda _c, cmd: self.kv_list(cmd),
            RequestCode.WIPE_WRITE_PERM_OF_BROKER: lambda _c, cmd: self.write_perm(
                cmd, writable=False
            ),
            RequestCode.ADD_WRITE_PERM_OF_BROKER: lambda _c, cmd: self.write_perm(
                cmd, writable=True
            ),
            RequestCode.DELETE_TOPIC_IN_NAMESRV: lambda _c, cmd: self.delete_topic(cmd),
            RequestCode.UPDATE_NAMESRV_CONFIG: lambda _c, cmd: self.update_config(cmd),
            RequestCode.GET_NAMESRV_CONFIG: lambda _c, cmd: self.get_config(cmd),
        }
