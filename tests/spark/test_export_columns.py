"""Export batches built with numpy/Arrow hold, record after record, what the codec reads."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings

from mqstore.commitlog import bulk
from mqstore.commitlog import format as fmt
from mqstore.compression import decompress
from mqstore.message import (
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    bytes_host,
    string_to_properties,
)
from mqstore.tools.spark.byterange import ByteRange
from mqstore.tools.spark.export import EXPORT_SCHEMA, export_batch
from tests.commitlog.test_bulk import segments

_TYPES = {
    "string": pa.string(), "int": pa.int32(), "long": pa.int64(), "boolean": pa.bool_(),
    "timestamp": pa.timestamp("us", tz="UTC"), "binary": pa.binary(),
    "array<string>": pa.list_(pa.string()), "map<string,string>": pa.map_(pa.string(), pa.string()),
}  # fmt: skip
SCHEMA = pa.schema([(f.split()[0], _TYPES[f.split()[1]]) for f in EXPORT_SCHEMA.split(", ")])


COMPARED = ["born_host", "store_host", "msg_id", "properties", "uniq_key", "tags", "keys", "body",
            "body_error", "physical_offset"]  # fmt: skip


def _host(raw: bytes) -> str:
    ip, port = bytes_host(raw)
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def expected_row(buf: bytes, info: fmt.RecordInfo) -> dict[str, object]:
    """The text and body columns of one record, from the codec and the per-record rules."""
    props = string_to_properties(info.properties_string)
    raw = buf[info.body_pos : info.body_pos + info.body_len]
    try:
        body, error = decompress(raw, info.sys_flag), None
    except ValueError as e:
        body, error = None, str(e)
    return {
        "born_host": _host(info.born_host_raw), "store_host": _host(info.store_host_raw),
        "msg_id": info.msg_id, "properties": list(props.items()),
        "uniq_key": props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
        "tags": props.get(PROPERTY_TAGS),
        "keys": [k for k in props.get(PROPERTY_KEYS, "").split(" ") if k],
        "body": body, "body_error": error, "physical_offset": info.physical_offset,
    }  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(buf=segments())
def test_export_batch_equals_the_codec_record_by_record(buf: bytes):
    """Hosts (IPv4/IPv6), msg ids, properties maps (duplicates, stray separators,
    non-ASCII), UNIQ_KEY, TAGS, KEYS tokens and bodies (empty, short, compressed, not
    inflatable) of every record with a right CRC."""
    rng = ByteRange("seg", "00000000000000000000", 0, 0, len(buf), True)
    got: list[dict[str, object]] = []
    want: list[dict[str, object]] = []
    pos = 0
    while pos < len(buf):
        b = bulk.scan(buf, pos, len(buf), check_crc=True)
        if len(b.records):
            got += export_batch(buf, rng, b.records, SCHEMA).select(COMPARED).to_pylist()
            for p, ok in zip(b.records.position.tolist(), b.records.crc_ok.tolist(), strict=True):
                info = fmt.scan(buf, p, len(buf), check_crc=False)
                assert isinstance(info, fmt.RecordInfo)
                if ok:
                    want.append(expected_row(buf, info))
        if b.stop is not None or b.end <= pos:
            break
        pos = b.end
    assert got == want
