"""``store.client`` re-exports its public names lazily."""

from __future__ import annotations

import subprocess
import sys

import pytest

import store.client


def test_importing_the_package_loads_no_client_module():
    code = (
        "import sys, store.client; "
        "print(sorted(m for m in sys.modules if m.startswith('store.client.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_all_lists_exactly_the_lazy_exports():
    assert sorted(store.client.__all__) == sorted(store.client._EXPORTS)


@pytest.mark.parametrize("name", store.client.__all__)
def test_every_public_name_resolves_to_its_defining_class(name):
    value = getattr(store.client, name)
    assert value.__name__ == name
    assert value.__module__.startswith("store.client.")


def test_an_unknown_name_raises_attribute_error():
    with pytest.raises(AttributeError):
        store.client.NoSuchThing  # noqa: B018


def test_submodules_still_import_through_the_package():
    from store.client import allocate, wire

    assert allocate.MessageQueue and wire.__name__ == "store.client.wire"
