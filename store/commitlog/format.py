"""The CommitLog record codec: the public facade of :mod:`mqstore.commitlog`'s format.

Import every record name from here. The byte layout (the field table, the derived
positions, the ``struct`` formats, the blank record, the worked example and the
compatibility notes) is specified once, in :mod:`mqstore.commitlog._layout`; no other
module restates it. The code lives in private modules with one job each, and every
public name is re-exported here:

- ``_layout.py``: the specification, its constants and the length/CRC formulas;
- ``_record.py``: :class:`MessageRecord` (a record field for field) and
  :func:`make_record`;
- ``_encode.py``: :func:`encode`, :func:`encode_raw`, :func:`encode_blank`,
  :func:`topic_field` (the reference encoder; the put path packs records in
  ``commitlog.py`` with :func:`header_struct`, and is tested against it);
- ``_results.py``: what decoding returns, ``Record | EndOfSegment | Corrupt`` and
  :class:`RecordInfo`;
- ``_decode.py``: :func:`scan` (the single validation path) and :func:`decode`;
- ``_trusted.py``: :func:`unpack_trusted`, the fast path over records validated once.

This codec does no I/O: ``decode`` reads any buffer (bytes, bytearray, mmap,
memoryview) and returns a :class:`Record`, an :class:`EndOfSegment` or a
:class:`Corrupt`: never a sentinel size, never an exception for bad bytes.
"""

from __future__ import annotations

from mqstore.commitlog._decode import (
    decode,
    decode_all,
    info_to_record,
    peek_size,
    scan,
)
from mqstore.commitlog._encode import (
    EncodeError,
    encode,
    encode_blank,
    encode_raw,
    host_to_bytes,
    topic_field,
)
from mqstore.commitlog._layout import (
    BLANK_MAGIC,
    BODY_CRC_POS,
    BORN_HOST_POS,
    BORN_TIMESTAMP_POS,
    BORNHOST_V6_FLAG,
    COMPRESSED_FLAG,
    END_FILE_MIN_BLANK_LENGTH,
    FLAG_POS,
    INNER_BATCH_FLAG,
    IPV4_HOST_LEN,
    IPV6_HOST_LEN,
    MAGIC_POS,
    MAGIC_V1,
    MAGIC_V2,
    MAX_PROPERTIES_LENGTH,
    MAX_TOPIC_LENGTH_V1,
    MIN_RECORD_SIZE,
    MULTI_TAGS_FLAG,
    NEED_UNWRAP_FLAG,
    PHYSICAL_OFFSET_POS,
    QUEUE_ID_POS,
    QUEUE_OFFSET_POS,
    STOREHOST_V6_FLAG,
    SYSFLAG_POS,
    TOTAL_SIZE_POS,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_MASK,
    TRANSACTION_NOT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TransactionType,
    body_crc,
    header_length,
    header_struct,
    record_length,
    store_timestamp_pos,
)
from mqstore.commitlog._record import MessageRecord, make_record
from mqstore.commitlog._results import (
    Corrupt,
    CorruptKind,
    DecodeResult,
    EndOfSegment,
    Record,
    RecordInfo,
    ScanResult,
)
from mqstore.commitlog._trusted import (
    MESSAGE_FIELDS,
    MessageFields,
    unpack_trusted,
)

__all__ = [
    "BLANK_MAGIC",
    "BODY_CRC_POS",
    "BORNHOST_V6_FLAG",
    "BORN_HOST_POS",
    "BORN_TIMESTAMP_POS",
    "COMPRESSED_FLAG",
    "END_FILE_MIN_BLANK_LENGTH",
    "FLAG_POS",
    "INNER_BATCH_FLAG",
    "IPV4_HOST_LEN",
    "IPV6_HOST_LEN",
    "MAGIC_POS",
    "MAGIC_V1",
    "MAGIC_V2",
    "MAX_PROPERTIES_LENGTH",
    "MAX_TOPIC_LENGTH_V1",
    "MESSAGE_FIELDS",
    "MIN_RECORD_SIZE",
    "MULTI_TAGS_FLAG",
    "NEED_UNWRAP_FLAG",
    "PHYSICAL_OFFSET_POS",
    "QUEUE_ID_POS",
    "QUEUE_OFFSET_POS",
    "STOREHOST_V6_FLAG",
    "SYSFLAG_POS",
    "TOTAL_SIZE_POS",
    "TRANSACTION_COMMIT_TYPE",
    "TRANSACTION_MASK",
    "TRANSACTION_NOT_TYPE",
    "TRANSACTION_PREPARED_TYPE",
    "TRANSACTION_ROLLBACK_TYPE",
    "Corrupt",
    "CorruptKind",
    "DecodeResult",
    "EncodeError",
    "EndOfSegment",
    "MessageFields",
    "MessageRecord",
    "Record",
    "RecordInfo",
    "ScanResult",
    "TransactionType",
    "body_crc",
    "decode",
    "decode_all",
    "encode",
    "encode_blank",
    "encode_raw",
    "header_length",
    "header_struct",
    "host_to_bytes",
    "info_to_record",
    "make_record",
    "peek_size",
    "record_length",
    "scan",
    "store_timestamp_pos",
    "topic_field",
    "unpack_trusted",
]
