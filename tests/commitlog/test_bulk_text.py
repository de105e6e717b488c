"""The span helpers of mqstore.commitlog._bulk_text against plain Python on the same bytes.

The bulk scanner's hypothesis tests hold whole records to the codec; these pin the span
primitives on the shapes the scanner's records rarely produce: spans ending at the very
end of the buffer, spans of very different lengths, empty spans, and names cut short.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from mqstore.commitlog import _bulk_text as text
from mqstore.index.format import key_hash
from mqstore.message import java_string_hash, string_to_properties


@st.composite
def buffer_and_spans(draw: st.DrawFn) -> tuple[bytes, list[tuple[int, int]]]:
    """A buffer and sorted spans in it: any lengths, or similar long ones (properties
    strings, copied as fixed-width rows), the last one possibly ending at the very end."""
    size = draw(st.integers(0, 3000))
    data = draw(st.binary(min_size=size, max_size=size))
    n = draw(st.integers(0, 12))
    similar = draw(st.booleans())
    base = draw(st.integers(48, 160))
    spans = []
    for _ in range(n):
        if similar and len(data) >= base:
            length = base - draw(st.integers(0, base // 3))
            start = draw(st.integers(0, len(data) - length))
            if draw(st.integers(0, 3)) == 0:
                start = len(data) - length  # ends with the buffer
        else:
            start = draw(st.integers(0, len(data)))
            length = draw(st.integers(0, len(data) - start))
        spans.append((start, length))
    spans.sort()
    return data, spans


def _arrays(spans: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    starts = np.array([s for s, _ in spans], np.int64)
    lens = np.array([n for _, n in spans], np.int64)
    return starts, lens


@settings(max_examples=300)
@given(buffer_and_spans())
def test_gather_concatenates_any_spans_including_ones_at_the_buffer_end(case):
    data, spans = case
    starts, lens = _arrays(spans)
    flat, offs = text.gather(data, starts, lens)
    assert flat.tobytes() == b"".join(data[s : s + n] for s, n in spans)
    assert offs.tolist() == [sum(n for _, n in spans[:i]) for i in range(len(spans))]


@given(st.binary(min_size=1, max_size=200), st.integers(1, 40), st.data())
def test_gather_of_spans_all_of_one_length_concatenates_them(data, length, draw):
    length = min(length, len(data))
    starts = draw.draw(st.lists(st.integers(0, len(data) - length), min_size=1, max_size=12))
    if draw.draw(st.booleans()):
        starts.append(len(data) - length)  # one ends with the buffer
    flat, offs = text.gather(data, np.array(starts, np.int64), np.full(len(starts), length))
    assert flat.tobytes() == b"".join(data[s : s + length] for s in starts)
    assert offs.tolist() == [i * length for i in range(len(starts))]


@settings(max_examples=300)
@given(st.lists(st.text(alphabet=st.characters(max_codepoint=127), max_size=80), max_size=12))
def test_java_hash_of_ascii_spans_is_string_hashcode(words):
    flat = np.frombuffer("".join(words).encode(), np.uint8)
    lens = np.array([len(w) for w in words], np.int64)
    starts = np.cumsum(lens) - lens
    got = text.java_hash(flat, starts, lens).tolist()
    assert got == [java_string_hash(w) & 0xFFFFFFFF for w in words]


_NAMES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "T", "TAG", "KEYSX", "LONGER_NAME_9", ""])
_VALUES = st.text(alphabet="ab \x01", max_size=6)


@settings(max_examples=300)
@given(st.lists(st.lists(st.tuples(_NAMES, _VALUES), max_size=4), min_size=1, max_size=6))
def test_property_values_follow_string_to_properties(records):
    strings = ["".join(f"{k}\x01{v}\x02" for k, v in rec) for rec in records]
    flat = np.frombuffer("".join(strings).encode(), np.uint8)
    lens = np.array([len(s) for s in strings], np.int64)
    offs = np.cumsum(lens) - lens
    props = text.Properties(flat, offs, lens)
    for name in ("TAGS", "KEYS", "UNIQ_KEY", "LONGER_NAME_9"):
        start, length = props.value(name)
        got = text.value_strings(flat, start, length, range(len(strings)))
        assert got == [string_to_properties(s).get(name) for s in strings]


@settings(max_examples=300)
@given(
    st.lists(
        st.tuples(
            st.binary(max_size=40), st.text(alphabet=st.characters(max_codepoint=127), max_size=70)
        ),
        max_size=10,
    )
)
def test_java_hash_of_spans_behind_other_bytes_is_string_hashcode(parts):
    """Spans anywhere in a buffer (after any junk, possibly none at its front): the
    hashed rows must not take the bytes before a span."""
    data = b"".join(junk + w.encode() for junk, w in parts)
    starts, pos = [], 0
    for junk, w in parts:
        starts.append(pos + len(junk))
        pos += len(junk) + len(w)
    lens = np.array([len(w) for _, w in parts], np.int64)
    flat = np.frombuffer(data, np.uint8)
    got = text.java_hash(flat, np.array(starts, np.int64), lens).tolist()
    assert got == [java_string_hash(w) & 0xFFFFFFFF for _, w in parts]


_PIECES = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "a", "bc", " ", "\x01", "\x02", "\x01\x01"])


@st.composite
def property_strings(draw: st.DrawFn, closed: bool) -> list[str]:
    """Properties strings of any shape (stray, doubled and missing separators, empty
    strings); with ``closed`` every non-empty one ends in 0x02 as RocketMQ writes them."""
    out = []
    for _ in range(draw(st.integers(1, 8))):
        s = "".join(draw(st.lists(_PIECES, max_size=10)))
        if closed and s and not s.endswith("\x02"):
            s += "\x02"
        out.append(s)
    return out


def _values_agree(strings: list[str]) -> None:
    flat = np.frombuffer("".join(strings).encode(), np.uint8)
    lens = np.array([len(s) for s in strings], np.int64)
    offs = np.cumsum(lens) - lens
    props = text.Properties(flat, offs, lens)
    for name in ("TAGS", "KEYS", "UNIQ_KEY", "a", "bc"):
        start, length = props.value(name)
        got = text.value_strings(flat, start, length, range(len(strings)))
        assert got == [string_to_properties(s).get(name) for s in strings]


@settings(max_examples=300)
@given(property_strings(closed=True))
def test_property_values_of_strings_each_ending_in_a_separator(strings):
    _values_agree(strings)


@settings(max_examples=300)
@given(property_strings(closed=False))
def test_property_values_of_strings_with_or_without_a_final_separator(strings):
    _values_agree(strings)


@settings(max_examples=200)
@given(
    st.lists(
        st.lists(st.sampled_from(["KEYS", "TAGS", "UNIQ_KEY"]), max_size=3).flatmap(
            lambda names: st.tuples(
                st.just(names),
                st.lists(
                    st.text(alphabet="k  x\x01", max_size=7),
                    min_size=len(names),
                    max_size=len(names),
                ),
            )
        ),
        min_size=1,
        max_size=6,
    ),
    st.booleans(),
)
def test_index_keys_split_keys_on_spaces_and_ignore_spaces_elsewhere(records, closed):
    """Spaces in TAGS and UNIQ_KEY values (and in names) never split KEYS tokens."""
    strings = []
    for names, values in records:
        s = "\x02".join(f"{n}\x01{v}" for n, v in zip(names, values, strict=True))
        strings.append(s + "\x02" if closed and s else s)
    flat = np.frombuffer("".join(strings).encode(), np.uint8)
    lens = np.array([len(s) for s in strings], np.int64)
    offs = np.cumsum(lens) - lens
    props = text.Properties(flat, offs, lens)
    want = np.ones(len(strings), np.bool_)
    rec, hashes = text.index_keys(flat, props, np.zeros(len(strings), np.int64), ["t"], want)
    expected = []
    for i, s in enumerate(strings):
        p = string_to_properties(s)
        keys = [p["UNIQ_KEY"]] if p.get("UNIQ_KEY") else []
        keys += [k for k in p.get("KEYS", "").split(" ") if k]
        expected += [(i, key_hash("t#" + k)) for k in keys]
    assert list(zip(rec.tolist(), hashes.tolist(), strict=True)) == expected


@settings(max_examples=300)
@given(st.sets(st.integers(0, 70), min_size=1, max_size=6), st.data())
def test_java_hash_of_spans_of_few_lengths_is_string_hashcode(sizes, data):
    """Spans of one to six distinct lengths (hashed per length, or as a masked matrix)."""
    words = data.draw(
        st.lists(
            st.sampled_from(sorted(sizes)).flatmap(
                lambda n: st.text(alphabet=st.characters(max_codepoint=127), min_size=n, max_size=n)
            ),
            min_size=1,
            max_size=12,
        )
    )
    flat = np.frombuffer("".join(words).encode(), np.uint8)
    lens = np.array([len(w) for w in words], np.int64)
    starts = np.cumsum(lens) - lens
    got = text.java_hash(flat, starts, lens).tolist()
    assert got == [java_string_hash(w) & 0xFFFFFFFF for w in words]


@settings(max_examples=200)
@given(
    st.lists(
        st.one_of(
            st.integers(0, 2**32 - 1), st.sampled_from([0, 2**31, 2**31 - 1, 2**31 + 1, 2**32 - 1])
        ),
        max_size=20,
    )
)
def test_index_hash_is_abs_of_the_int_with_min_value_mapped_to_zero(values):
    signed = [v - 2**32 if v >= 2**31 else v for v in values]
    expected = [0 if x == -(2**31) else abs(x) for x in signed]
    assert text.index_hash(np.array(values, np.uint32)).tolist() == expected
