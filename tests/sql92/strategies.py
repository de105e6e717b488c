"""Hypothesis strategies for SQL92 filter expressions and message properties."""

from __future__ import annotations

from hypothesis import strategies as st

NAMES = ("a", "b", "TAGS", "Zz")
"""Property names the expressions use (one of them is never set: ``Zz`` often is not)."""

VALUE_POOL = (
    "0", "1", "2", "10", "-3", "+4", "2147483647", "2147483648", "-2147483649",
    "9223372036854775808", "1.5", "1e3", " 7 ", "NaN", "-0.0", "0x1p3", "true", "TRUE",
    "false", "abc", "TagA", "TagB", "", "a'b", "1L", "1.5f",
)  # fmt: skip

_INTS = st.sampled_from(["0", "1", "2", "3", "10", "2147483647", "2147483648", "5L"])
_FLOATS = st.sampled_from(["1.5", ".5", "2.", "1e3", "1E-2", "0.0", "3.0"])
_STRINGS = st.sampled_from(["'abc'", "'TagA'", "'1'", "'true'", "''", "'a''b'", "'10'"])


def props() -> st.SearchStrategy[dict[str, str]]:
    """A message's properties over :data:`NAMES`."""
    return st.dictionaries(
        st.sampled_from(NAMES), st.sampled_from(VALUE_POOL) | st.text(max_size=3), max_size=4
    )


def _atom() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(NAMES),
        _INTS,
        _FLOATS,
        _STRINGS,
        st.sampled_from(["TRUE", "FALSE", "NULL"]),
    )


def _extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    def binary(op: str) -> st.SearchStrategy[str]:
        return st.tuples(inner, inner).map(lambda t: f"{t[0]} {op} {t[1]}")

    strings = st.lists(_STRINGS, min_size=1, max_size=3).map(", ".join)
    return st.one_of(
        *(binary(op) for op in ("=", "<>", ">", ">=", "<", "<=", "AND", "OR")),
        inner.map(lambda s: f"({s})"),
        inner.map(lambda s: f"NOT {s}"),
        inner.map(lambda s: f"-{s}"),
        inner.map(lambda s: f"{s} IS NULL"),
        inner.map(lambda s: f"{s} IS NOT NULL"),
        st.tuples(inner, st.sampled_from(["", "NOT "]), inner, inner).map(
            lambda t: f"{t[0]} {t[1]}BETWEEN {t[2]} AND {t[3]}"
        ),
        st.tuples(inner, st.sampled_from(["", "NOT "]), strings).map(
            lambda t: f"{t[0]} {t[1]}IN ({t[2]})"
        ),
        st.tuples(
            inner,
            st.sampled_from(["", "NOT "]),
            st.sampled_from(["CONTAINS", "STARTSWITH", "ENDSWITH"]),
            _STRINGS,
        ).map(lambda t: f"{t[0]} {t[1]}{t[2]} {t[3]}"),
    )


def expressions() -> st.SearchStrategy[str]:
    """Expressions of the grammar, valid or not (type errors, bad bounds, ...)."""
    return st.recursive(_atom(), _extend, max_leaves=6)


def mutated_expressions() -> st.SearchStrategy[str]:
    """Expressions with a random cut or insertion: syntax errors and trailing text."""
    junk = st.sampled_from([")", "(", "!", "xyz", "'", "--", "/*", "*/", "\n", " ", "1", "AND"])
    return st.tuples(expressions(), st.integers(0, 40), junk).map(
        lambda t: t[0][: t[1]] + t[2] + t[0][t[1] :]
    )
