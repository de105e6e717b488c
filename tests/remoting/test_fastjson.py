"""fastjson-compatible JSON and RocketMQ-style config files, on real broker output too."""

from __future__ import annotations

import contextlib
import doctest
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqstore import _platform
from mqstore.errors import StoreError
from mqstore.remoting import fastjson
from mqstore.remoting.fastjson import (
    MAX_DEPTH,
    Bean,
    FastjsonError,
    dumps,
    loads,
    read_config_file,
    write_config_file,
)


def test_docstring_examples() -> None:
    assert doctest.testmod(fastjson, raise_on_error=True).failed == 0


def test_error_is_a_store_error_and_a_value_error() -> None:
    assert issubclass(FastjsonError, StoreError) and issubclass(FastjsonError, ValueError)


# --- reading -------------------------------------------------------------------------


def test_unquoted_integer_keys_become_ints() -> None:
    assert loads("{0:250,1:250,-1:3}") == {0: 250, 1: 250, -1: 3}


def test_unquoted_keys_nested_inside_quoted_ones() -> None:
    assert loads('{"a":{0:1},"b":{"c":{7:{8:[1,2]}}}}') == {
        "a": {0: 1},
        "b": {"c": {7: {8: [1, 2]}}},
    }


def test_quoted_numeric_key_stays_a_string() -> None:
    value = loads('{"0":"a",0:"b"}')
    assert value == {"0": "a", 0: "b"} and list(value) == ["0", 0]


def test_unquoted_identifier_key_is_a_string() -> None:
    assert loads("{name:1, $x_2 : 2}") == {"name": 1, "$x_2": 2}


def test_key_order_is_kept() -> None:
    assert list(loads('{"z":1,"a":2,5:3}')) == ["z", "a", 5]


def test_standard_json_values() -> None:
    text = ' {"s":"a\\"\\u00e9\\n","f":-1.5e3,"i":-0,"t":true,"n":null,"l":[],"o":{}} '
    assert loads(text) == {
        "s": 'a"é\n',
        "f": -1500.0,
        "i": 0,
        "t": True,
        "n": None,
        "l": [],
        "o": {},
    }


def test_bytes_input_is_utf8() -> None:
    assert loads('{"é":{0:"ü"}}'.encode()) == {"é": {0: "ü"}}
    with pytest.raises(FastjsonError, match="UTF-8"):
        loads(b'{"\xff":1}')


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "{",
        "{0:}",
        "{0 1}",
        "{0:1,}",
        "{:1}",
        "{1.5:2}",
        "[1 2]",
        "[1,]",
        "{'a':1}",
        '"unterminated',
        "tru",
        "01",
        "1 2",
        "NaN",
        "-",
        "{0:1}}",
        "[" * (MAX_DEPTH + 5),
        "{0:" * (MAX_DEPTH + 5),
        "9" * 5000,
        "{" + "9" * 5000 + ":1}",
    ],
)
def test_malformed_text_raises_fastjson_error(text: str) -> None:
    with pytest.raises(FastjsonError):
        loads(text)


def test_error_message_gives_the_position() -> None:
    with pytest.raises(FastjsonError, match="char 5"):
        loads('{"a":x}')


# --- writing -------------------------------------------------------------------------


def test_compact_form_quotes_only_string_keys() -> None:
    assert dumps({"a": {0: 1, 1: 2}, "b": [1, "x", None, True]}) == (
        '{"a":{0:1,1:2},"b":[1,"x",null,true]}'
    )


def test_bean_fields_are_alphabetical_and_maps_keep_their_order() -> None:
    value = {"z": Bean(writeQueueNums=8, perm=6, topicName="z"), "a": {2: 1, 1: 1}}
    assert dumps(value) == '{"z":{"perm":6,"topicName":"z","writeQueueNums":8},"a":{2:1,1:1}}'


def test_none_values_of_objects_are_left_out() -> None:
    assert dumps(Bean(remark=None, code=1)) == '{"code":1}'
    assert dumps({"a": None}) == "{}"
    assert dumps({"a": None}, pretty=True) == "{}"


def test_a_standard_json_body_quotes_int_keys_in_the_same_order_without_nones() -> None:
    doc = Bean(brokerAddrs={0: "h:1", 1: "h:2"}, remark=None, brokerName="b", lst=({2: "x"},))
    assert (
        fastjson.dumps_body(doc)
        == b'{"brokerAddrs":{0:"h:1",1:"h:2"},"brokerName":"b","lst":[{2:"x"}]}'
    )
    assert fastjson.dumps_body(doc, standard_json=True) == (
        b'{"brokerAddrs":{"0":"h:1","1":"h:2"},"brokerName":"b","lst":[{"2":"x"}]}'
    )


def test_pretty_format_quirks() -> None:
    value = {"offsetTable": {"t@g": {0: 250, 1: 250}}, "empty": {}, "list": [Bean(), Bean()]}
    assert dumps(value, pretty=True) == (
        '{\n\t"offsetTable":{\n\t\t"t@g":{0:250,1:250\n\t\t}\n\t},'
        '\n\t"empty":{},\n\t"list":[\n\t\t{},\n\t\t{}\n\t]\n}'
    )


def test_pretty_array_matches_fastjson_vector() -> None:
    # fastjson's own PrettyFormatTest: two empty beans in an array.
    assert dumps([Bean(), Bean()], pretty=True) == "[\n\t{},\n\t{}\n]"
    assert dumps([], pretty=True) == "[]"


def test_strings_keep_non_ascii_and_escape_controls() -> None:
    assert dumps({"k": 'é"\\\n\x01/'}) == '{"k":"é\\"\\\\\\n\\u0001/"}'


@pytest.mark.parametrize("bad", [{1.5: 1}, {(1,): 1}, {True: 1}, {"a": object()}, b"x"])
def test_unsupported_types_raise_type_error(bad: object) -> None:
    with pytest.raises(TypeError):
        dumps(bad)


def test_non_finite_float_raises_value_error() -> None:
    with pytest.raises(ValueError):
        dumps({"a": math.inf})


# --- properties ----------------------------------------------------------------------

KEYS = st.text(max_size=8) | st.integers(-(2**40), 2**40)
SCALARS = (
    st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
VALUES = st.recursive(
    SCALARS | st.none(),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(KEYS, inner.filter(lambda v: v is not None), max_size=4)
    ),
    max_leaves=20,
)


@given(VALUES, st.booleans())
def test_round_trip(value: Any, pretty: bool) -> None:
    assert loads(dumps(value, pretty=pretty)) == value


@given(VALUES)
def test_pretty_and_compact_differ_only_in_whitespace(value: Any) -> None:
    assert loads(dumps(value, pretty=True)) == loads(dumps(value))


JSON_VALUES = st.recursive(
    SCALARS | st.none(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@given(JSON_VALUES, st.sampled_from([None, 1, "\t"]))
def test_standard_json_reads_as_json_does(value: Any, indent: int | str | None) -> None:
    assert loads(json.dumps(value, indent=indent)) == value


@given(
    st.text(alphabet='{}[]:,"0123456789-.eEtrufalsn \t\nab\\', max_size=40) | st.text(max_size=40)
)
def test_garbage_text_gives_a_value_or_fastjson_error(text: str) -> None:
    with contextlib.suppress(FastjsonError):
        loads(text)


@given(st.binary(max_size=40))
def test_garbage_bytes_give_a_value_or_fastjson_error(data: bytes) -> None:
    with contextlib.suppress(FastjsonError):
        loads(data)


# --- the real RocketMQ config files --------------------------------------------------


def real_config_files(real_fixtures: Path) -> list[Path]:
    files = sorted(real_fixtures.glob("*/config/*.json"))
    if not files:
        pytest.skip(f"no config/*.json under {real_fixtures}")
    return files


def test_real_consumer_offsets_have_int_queue_ids(real_fixtures: Path) -> None:
    path = real_fixtures / "shaoxubao-c4dcaab0" / "config" / "consumerOffset.json"
    if not path.is_file():
        pytest.skip(f"{path} absent")
    assert read_config_file(path) == {
        "offsetTable": {
            "TopicTest@please_rename_unique_group_name_4": {0: 250, 1: 250, 2: 250, 3: 250},
            "%RETRY%please_rename_unique_group_name_4@please_rename_unique_group_name_4": {0: 0},
        }
    }


def test_real_topics_and_groups_parse(real_fixtures: Path) -> None:
    config = real_fixtures / "shaoxubao-c4dcaab0" / "config"
    if not (config / "topics.json").is_file():
        pytest.skip(f"{config} absent")
    topics = loads((config / "topics.json").read_bytes())
    assert topics["dataVersion"]["counter"] == 3
    assert topics["topicConfigTable"]["TopicTest"] == {
        "order": False,
        "perm": 6,
        "readQueueNums": 4,
        "topicFilterType": "SINGLE_TAG",
        "topicName": "TopicTest",
        "topicSysFlag": 0,
        "writeQueueNums": 4,
    }
    groups = loads((config / "subscriptionGroup.json").read_bytes())["subscriptionGroupTable"]
    assert groups["SELF_TEST_C_GROUP"]["retryMaxTimes"] == 16
    assert loads((config / "delayOffset.json").read_bytes()) == {"offsetTable": {}}
    assert loads((config / "consumerFilter.json").read_bytes()) == {"filterDataByTopic": {}}


def test_real_files_rewrite_byte_for_byte(real_fixtures: Path) -> None:
    for path in real_config_files(real_fixtures):
        text = path.read_text()
        assert dumps(loads(text), pretty=True) == text, path


def test_real_files_rewrite_as_beans_byte_for_byte(real_fixtures: Path) -> None:
    # RocketMQ's beans are written sorted; a writer that marks them Bean matches too.
    for path in real_config_files(real_fixtures):
        value = loads(path.read_text())
        if "topicConfigTable" in value:
            table = value["topicConfigTable"]
            value["topicConfigTable"] = {k: Bean(reversed(v.items())) for k, v in table.items()}
            assert dumps(value, pretty=True) == path.read_text()


def test_update_a_copy_of_the_real_consumer_offsets(real_fixtures: Path, tmp_path: Path) -> None:
    src = real_fixtures / "shaoxubao-c4dcaab0" / "config" / "consumerOffset.json"
    if not src.is_file():
        pytest.skip(f"{src} absent")
    path = tmp_path / "consumerOffset.json"
    path.write_bytes(src.read_bytes())
    offsets = read_config_file(path)
    assert offsets is not None
    offsets["offsetTable"]["TopicTest@please_rename_unique_group_name_4"][2] = 300
    write_config_file(path, dumps(offsets, pretty=True))
    updated = read_config_file(path)
    assert updated is not None
    assert updated["offsetTable"]["TopicTest@please_rename_unique_group_name_4"] == {
        0: 250,
        1: 250,
        2: 300,
        3: 250,
    }
    assert "{0:250,1:250,2:300,3:250\n" in path.read_text()
    assert (tmp_path / "consumerOffset.json.bak").read_bytes() == src.read_bytes()


# --- config files --------------------------------------------------------------------


def test_first_write_creates_the_file_without_bak(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    write_config_file(path, '{"a":{0:1}}')
    assert path.read_text() == '{"a":{0:1}}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topics.json"]


def test_second_write_keeps_the_previous_text_as_bak(tmp_path: Path) -> None:
    path = tmp_path / "topics.json"
    write_config_file(path, "{0:1}")
    write_config_file(path, "{0:2}")
    assert path.read_text() == "{0:2}"
    assert (tmp_path / "topics.json.bak").read_text() == "{0:1}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["topics.json", "topics.json.bak"]


def test_read_missing_file_and_bak_is_none(tmp_path: Path) -> None:
    assert read_config_file(tmp_path / "absent.json") is None


@pytest.mark.parametrize("content", [b"", b"  \n", b'{"offsetTable":{0:', b"\xff\xfe"])
def test_empty_or_torn_file_falls_back_to_bak(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "consumerOffset.json"
    path.write_bytes(content)
    (tmp_path / "consumerOffset.json.bak").write_text('{"offsetTable":{"t@g":{0:5}}}')
    assert read_config_file(path) == {"offsetTable": {"t@g": {0: 5}}}
    assert path.read_bytes() == content  # reading never repairs


def test_missing_file_falls_back_to_bak(tmp_path: Path) -> None:
    (tmp_path / "c.json.bak").write_text("{1:2}")
    assert read_config_file(tmp_path / "c.json") == {1: 2}


def test_empty_file_without_bak_is_none(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_bytes(b"")
    assert read_config_file(tmp_path / "c.json") is None


def test_corrupt_file_without_bak_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text("{0:")
    with pytest.raises(FastjsonError, match=r"no usable \.bak"):
        read_config_file(tmp_path / "c.json")


def test_corrupt_file_and_corrupt_bak_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "c.json").write_text("{0:")
    (tmp_path / "c.json.bak").write_text("[")
    with pytest.raises(FastjsonError, match=r"\.bak"):
        read_config_file(tmp_path / "c.json")


def test_failed_fsync_leaves_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.json"
    write_config_file(path, "{0:1}")

    def failing(fd: int, *, what: str = "") -> None:
        raise OSError(5, "EIO")

    monkeypatch.setattr(_platform, "fdatasync", failing)
    with pytest.raises(OSError):
        write_config_file(path, "{0:2}")
    assert read_config_file(path) == {0: 1}


def test_crash_before_rename_leaves_old_file_readable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.json"
    write_config_file(path, "{0:1}")
    real_replace = os.replace

    def crash_on_main_rename(src: Any, dst: Any) -> None:
        if Path(dst) == path:
            raise OSError(28, "ENOSPC")
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", crash_on_main_rename)
    with pytest.raises(OSError):
        write_config_file(path, "{0:2}")
    assert path.read_text() == "{0:1}"
    assert read_config_file(path) == {0: 1}


def test_writes_unicode_as_utf8(tmp_path: Path) -> None:
    path = tmp_path / "c.json"
    write_config_file(path, dumps({"topic": "é"}))
    assert path.read_bytes() == '{"topic":"é"}'.encode()
    assert read_config_file(path) == {"topic": "é"}
