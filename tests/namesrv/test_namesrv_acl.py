"""A name server with ACL (``NameServer(acl=...)``, ``mqstore namesrv --acl``): only an
admin account's signature registers or unregisters a broker, reads need a signature,
so no client can register a known broker name and make its routes vanish."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mqstore.broker.acl import AccessControl
from mqstore.broker.topics import TopicConfig
from mqstore.client.acl_hook import AclSigner
from mqstore.client.registration import BrokerRegistrar
from mqstore.client.remoting_client import RemotingClient
from mqstore.namesrv.server import NameServer
from mqstore.remoting.codec import RemotingCommand
from mqstore.remoting.codes import RequestCode, ResponseCode

ACL = {
    "accounts": [
        {"accessKey": "admin-key", "secretKey": "admin-secret", "admin": True},
        {"accessKey": "app-key", "secretKey": "app-secret", "defaultTopicPerm": "PUB|SUB"},
    ]
}
ADMIN = AclSigner("admin-key", "admin-secret")
APP = AclSigner("app-key", "app-secret")


@pytest.fixture
def namesrv() -> Iterator[NameServer]:
    ns = NameServer("127.0.0.1", 0, acl=AccessControl.from_dict(ACL))
    ns.port = ns.start()
    yield ns
    ns.stop()


def _registrar(ns: NameServer, signer: AclSigner | None) -> BrokerRegistrar:
    return BrokerRegistrar(
        [ns.address], cluster="c", broker_name="b1", broker_id=0,
        broker_addr="127.0.0.1:10911", ha_server_addr="127.0.0.1:10912",
        topics=lambda: {"T": TopicConfig("T")}, rpc_hook=signer,
    )  # fmt: skip


def _route(ns: NameServer, signer: AclSigner | None) -> RemotingCommand:
    with RemotingClient(rpc_hook=signer) as client:
        cmd = RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": "T"})
        return client.invoke(ns.address, cmd, 5)


@pytest.mark.parametrize("signer", [None, APP], ids=["unsigned", "not admin"])
def test_a_registration_without_an_admin_signature_is_refused(
    namesrv: NameServer, signer: AclSigner | None
) -> None:
    reg = _registrar(namesrv, signer)
    try:
        assert reg.register_once() == 0
    finally:
        reg.client.close()
    assert _route(namesrv, ADMIN).code == ResponseCode.TOPIC_NOT_EXIST


def test_an_admin_signed_registration_is_served_to_signed_readers(namesrv: NameServer) -> None:
    reg = _registrar(namesrv, ADMIN)
    try:
        assert reg.register_once() == 1
        assert _route(namesrv, APP).code == ResponseCode.SUCCESS
        assert _route(namesrv, None).code == ResponseCode.NO_PERMISSION
    finally:
        reg.client.close()


@pytest.mark.parametrize("signer", [None, APP], ids=["unsigned", "not admin"])
def test_an_impostor_cannot_make_a_registered_brokers_routes_vanish(
    namesrv: NameServer, signer: AclSigner | None
) -> None:
    reg = _registrar(namesrv, ADMIN)
    impostor = _registrar(namesrv, signer)
    try:
        assert reg.register_once() == 1
        assert impostor.register_once() == 0  # re-registering the name over its connection
        impostor.shutdown()  # UNREGISTER_BROKER, then its connection closes
        assert _route(namesrv, APP).code == ResponseCode.SUCCESS
    finally:
        reg.client.close()
