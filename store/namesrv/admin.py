"""The name server's admin requests (docs/admin.md §17), as RocketMQ 4.9.8's
``DefaultRequestProcessor`` answers them:

====  ===================================  ==========================================
code  request                              answer
====  ===================================  ==========================================
216   DELETE_TOPIC_IN_NAMESRV              header ``topic``, optional ``clusterName``
319   GET_NAMESRV_CONFIG                   properties text of the settings
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
name server has: ``listenPort``, and ``orderMessageEnable`` / ``clusterTest`` (false:
no order-topic configuration and no test clusters are kept). The Java name server's
other keys (thread counts, buffer sizes, file paths) name nothing here and are left out.
"""

from __future__ import annotations

from collections.abc import Callable

from mqstore.broker.admin_bodies import properties_text
from mqstore.broker.wire import ext_str
from mqstore.namesrv.routes import RouteInfoManager
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode


def delete_topic(routes: RouteInfoManager, cmd: RemotingCommand) -> RemotingCommand:
    """DELETE_TOPIC_IN_NAMESRV (216): Rule 1."""
    topic = ext_str(cmd.ext_fields, "topic")
    routes.delete_topic(topic, cmd.ext_fields.get("clusterName") or None)
    return cmd.make_response(ResponseCode.SUCCESS)


def namesrv_config(port: int, cmd: RemotingCommand) -> RemotingCommand:
    """GET_NAMESRV_CONFIG (319): Rule 2."""
    props = {"listenPort": port, "orderMessageEnable": False, "clusterTest": False}
    return cmd.make_response(ResponseCode.SUCCESS, body=properties_text(props).encode())


def handlers(
    routes: RouteInfoManager, port: Callable[[], int]
) -> dict[int, Callable[[object, RemotingCommand], RemotingCommand]]:
    """The name server's handler table entries of this module (connection unused)."""
    return {
        RequestCode.DELETE_TOPIC_IN_NAMESRV: lambda _conn, cmd: delete_topic(routes, cmd),
        RequestCode.GET_NAMESRV_CONFIG: lambda _conn, cmd: namesrv_config(port(), cmd),
    }
