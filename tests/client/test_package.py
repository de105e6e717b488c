"""``mqstore.client`` re-exports its public names lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import mqstore.client


def test_importing_the_package_loads_no_client_module():
    code = (
        "import sys, mqstore.client; "
        "print(sorted(m for m in sys.modules if m.startswith('mqstore.client.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_all_lists_exactly_the_lazy_exports():
    assert sorted(mqstore.client.__all__) == sorted(mqstore.client._EXPORTS)


@pytest.mark.parametrize("name", mqstore.client.__all__)
def test_every_public_name_resolves_to_its_defining_class(name):
    value = getattr(mqstore.client, name)
    assert value.__name__ == name
    assert value.__module__.startswith(("mqstore.client.", "mqstore.remoting."))


def test_an_unknown_name_raises_attribute_error():
    with pytest.raises(AttributeError):
        mqstore.client.NoSuchThing  # noqa: B018


def test_submodules_still_import_through_the_package():
    from mqstore.client import allocate, wire

    assert allocate.MessageQueue and wire.__name__ == "mqstore.client.wire"
