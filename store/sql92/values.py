"""Java's value rules as RocketMQ's filter expressions use them.

RocketMQ's filter (taken from ActiveMQ) evaluates over Java objects: property values are
always ``String``; literals are ``Integer`` (a decimal in int range), ``Long`` (a larger
decimal), ``Double`` or ``Boolean``; ``null`` is a missing property. Here they are Python
values of distinct types: :class:`JInt` (Integer), ``int`` (Long), ``float`` (Double),
``bool``, ``str`` and None.

:func:`compare` is ``ComparisonExpression.__compare`` with string conversion on (as
``SelectorParser.parse`` always sets it): operands of different types are converted toward
the left one's, a string to the other side's number type with Java's own parser
(``Integer.valueOf`` for an int literal: ``'3000000000' = 5`` fails), so a
property that is not a number compared with a number raises
:class:`~mqstore.sql92.errors.SqlEvaluationError` (RocketMQ throws; the broker logs it and
does not deliver). Types that do not convert (a boolean and a number) compare as -1.
"""

from __future__ import annotations

import math
import re
import struct
import unicodedata

from mqstore.sql92.errors import SqlEvaluationError

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
LONG_MIN, LONG_MAX = -(1 << 63), (1 << 63) - 1
DOUBLE_MIN_VALUE = 5e-324
"""Java ``Double.MIN_VALUE``: the smallest positive double."""


class JInt(int):
    """A Java ``Integer`` (an ``int`` is a Java ``Long`` here)."""

    __slots__ = ()


JavaValue = JInt | int | float | bool | str | None

_JAVA_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)\Z"
)
_JAVA_HEX_DOUBLE = re.compile(
    r"([+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?\Z"
)


def _parse_integral(s: str, low: int, high: int, what: str) -> int:
    """``Long.parseLong`` / ``Integer.parseInt``: an optional sign, then at least one
    decimal digit (any script's, as ``Character.digit``), within [low, high]."""
    body = s[1:] if s[:1] in ("+", "-") else s
    if not body:
        raise SqlEvaluationError(f"For input string: {s!r} (not {what})")
    n = 0
    for c in body:
        d = unicodedata.decimal(c, -1)
        if d < 0:
            raise SqlEvaluationError(f"For input string: {s!r} (not {what})")
        n = n * 10 + d
    if s[:1] == "-":
        n = -n
    if not low <= n <= high:
        raise SqlEvaluationError(f"For input string: {s!r} (out of {what} range)")
    return n


def parse_int(s: str) -> JInt:
    """Java ``Integer.valueOf(String)``."""
    return JInt(_parse_integral(s, INT_MIN, INT_MAX, "an int"))


def parse_long(s: str) -> int:
    """Java ``Long.valueOf(String)``."""
    return _parse_integral(s, LONG_MIN, LONG_MAX, "a long")


def parse_double(s: str) -> float:
    """Java ``Double.valueOf(String)``: trims characters <= space; decimal or hex forms,
    ``NaN``, ``Infinity``, an optional ``f``/``d`` suffix."""
    t = s.strip("".join(chr(i) for i in range(33)))
    if _JAVA_DOUBLE.match(t):
        return float(t.rstrip("fFdD"))
    m = _JAVA_HEX_DOUBLE.match(t)
    if m:
        return float.fromhex(m.group(1))
    raise SqlEvaluationError(f"For input string: {s!r} (not a double)")


def java_boolean(s: str) -> bool:
    """Java ``Boolean.valueOf(String)``: ``"true"`` in any case."""
    return s.lower() == "true"


def _double_bits(d: float) -> int:
    """Java ``Double.doubleToLongBits`` (one canonical NaN) as a signed long."""
    if math.isnan(d):
        return 0x7FF8000000000000
    return int(struct.unpack(">q", struct.pack(">d", d))[0])


def compare_doubles(a: float, b: float) -> int:
    """Java ``Double.compare``: -0.0 < 0.0 and NaN above everything, equal to itself."""
    if a < b:
        return -1
    if a > b:
        return 1
    x, y = _double_bits(a), _double_bits(b)
    return 0 if x == y else (-1 if x < y else 1)


def _natural(lv: JavaValue, rv: JavaValue) -> int:
    """``lv.compareTo(rv)`` for two values of one type."""
    if type(lv) is float:
        return compare_doubles(lv, rv)  # type: ignore[arg-type]
    return (lv > rv) - (lv < rv)  # type: ignore[operator]


def _convert(lv: JavaValue, rv: JavaValue) -> tuple[JavaValue, JavaValue] | None:
    """The type conversion of ``__compare`` for values of different types; None when they
    do not convert (the comparison answers -1)."""
    lt, rt = type(lv), type(rv)
    if lt is bool:
        if rt is str:  # RocketMQ casts the Boolean to String here: ClassCastException
            raise SqlEvaluationError("a boolean cannot be compared with a string")
        return None
    if lt is str:
        if rt is bool:
            return java_boolean(lv), rv  # type: ignore[arg-type]
        parse = _STRING_TO.get(rt)
        return None if parse is None else (parse(lv), rv)  # type: ignore[arg-type]
    if rt is str:  # a number on the left: the string takes its type
        return lv, _STRING_TO[lt](rv)  # type: ignore[arg-type]
    if rt is bool:
        return None
    if lt is float or rt is float:
        return float(lv), float(rv)  # type: ignore[arg-type]
    return int(lv), int(rv)  # type: ignore[arg-type]  # Integer and Long: both Long


_STRING_TO = {JInt: parse_int, int: parse_long, float: parse_double}


def compare(lv: JavaValue, rv: JavaValue) -> int:
    """``ComparisonExpression.__compare(lv, rv, true)`` for non-null values.

    Raises:
        SqlEvaluationError: a string does not parse as the other side's number type.
    """
    if type(lv) is not type(rv):
        pair = _convert(lv, rv)
        if pair is None:
            return -1
        lv, rv = pair
    return _natural(lv, rv)


def java_equals(lv: JavaValue, rv: JavaValue) -> bool:
    """Java ``lv.equals(rv)``: same type and value (doubles by their bits)."""
    if type(lv) is not type(rv):
        return False
    if type(lv) is float:
        return _double_bits(lv) == _double_bits(rv)  # type: ignore[arg-type]
    return lv == rv


def negate(v: JavaValue) -> JavaValue:
    """``UnaryExpression.createNegate``: numbers negate (ints wrap as in Java), anything
    else (a string property, a boolean) is null."""
    t = type(v)
    if t is JInt:
        n = -int(v)  # type: ignore[arg-type]
        return JInt(n - (1 << 32) if n > INT_MAX else n)
    if t is int:
        m = -int(v)  # type: ignore[arg-type]
        return m - (1 << 64) if m > LONG_MAX else m
    if t is float:
        return -v  # type: ignore[operator]
    return None
