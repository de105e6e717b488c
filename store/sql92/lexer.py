"""Tokens of RocketMQ's SQL92 filter language (``filter/.../parser/SelectorParser.jj``).

The token rules, as the JavaCC token manager applies them (longest match; on a tie the
rule declared first, so a keyword beats an identifier of the same length):

==================  =====================================================================
whitespace          space, tab, CR, LF, form feed (skipped)
comments            ``--`` up to and including a line end (no line end: not a comment,
                    two ``-`` tokens); ``/* ... */`` (skipped)
keywords            NOT AND OR BETWEEN IN TRUE FALSE NULL IS, and in 5.x CONTAINS
                    STARTSWITH ENDSWITH; case-insensitive
DECIMAL             ``0`` or ``[1-9][0-9]*``, optional ``l``/``L``
FLOAT               ``5.``, ``5.5``, ``.5``, ``5E10``, each with an optional exponent
                    ``E[+-]digits`` (case-insensitive)
STRING              ``'...'`` with ``''`` for a quote
ID                  ``[A-Za-z_$][A-Za-z0-9_$]*``
operators           ``= <> > >= < <= ( ) , + -``
==================  =====================================================================

Anything else (``!=``, ``"``, a non-ASCII letter outside a string) is a lexical error.
Tokens are read on demand: the parser never asks past the end of the expression it
recognises, so (as in RocketMQ, whose grammar has no end-of-input rule) text after a
complete expression is not read at all, and a bad character there is no error.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass

from mqstore.sql92.errors import SqlParseError


class Kind(enum.Enum):
    """Token kinds."""

    KEYWORD = "keyword"
    DECIMAL = "decimal"
    FLOAT = "float"
    STRING = "string"
    ID = "id"
    OP = "op"
    EOF = "eof"


KEYWORDS_4 = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS"})
"""The keywords of RocketMQ 4.x (4.9.8)."""
KEYWORDS_5 = KEYWORDS_4 | {"CONTAINS", "STARTSWITH", "ENDSWITH"}
"""The keywords of RocketMQ 5.x (5.3.3): 4.x's and the three string tests."""


@dataclass(frozen=True, slots=True)
class Token:
    """One token; ``text`` is upper-cased for keywords, decoded for strings."""

    kind: Kind
    text: str
    pos: int


EOF_TEXT = "<EOF>"
_SPACE = " \t\n\r\f"
_EXP = r"(?:[eE][+-]?[0-9]+)"
_FLOAT = re.compile(rf"[0-9]+\.[0-9]*{_EXP}?|\.[0-9]+{_EXP}?|[0-9]+{_EXP}")
_DECIMAL = re.compile(r"(?:0|[1-9][0-9]*)[lL]?")
_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_STRING = re.compile(r"'(?:''|[^'])*'", re.DOTALL)
_LINE_COMMENT = re.compile(r"--[^\n\r]*(?:\r\n|\n|\r)")
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.DOTALL)
_OPS2 = ("<>", ">=", "<=")
_OPS1 = "=><(),+-"


class Lexer:
    """Reads tokens of ``text`` on demand (:meth:`peek`, :meth:`next`).

    Raises:
        SqlParseError: from :meth:`peek`/:meth:`next` when the next token is malformed.
    """

    def __init__(self, text: str, keywords: frozenset[str] = KEYWORDS_5) -> None:
        self._text = text
        self._pos = 0
        self._keywords = keywords
        self._ahead: list[Token] = []

    def peek(self, k: int = 1) -> Token:
        """The ``k``-th token ahead (1: the next one), read if need be."""
        while len(self._ahead) < k:
            self._ahead.append(self._read())
        return self._ahead[k - 1]

    def next(self) -> Token:
        """Consume and return the next token."""
        tok = self.peek()
        self._ahead.pop(0)
        return tok

    def _skip(self) -> None:
        text = self._text
        while self._pos < len(text):
            c = text[self._pos]
            if c in _SPACE:
                self._pos += 1
                continue
            m = _LINE_COMMENT.match(text, self._pos) or _BLOCK_COMMENT.match(text, self._pos)
            if m is None:
                return
            self._pos = m.end()

    def _read(self) -> Token:
        self._skip()
        text, pos = self._text, self._pos
        if pos >= len(text):
            return Token(Kind.EOF, EOF_TEXT, pos)
        # longest match over the rules; a float is never the same length as a decimal
        best: tuple[int, Kind] | None = None
        for rx, kind in ((_FLOAT, Kind.FLOAT), (_DECIMAL, Kind.DECIMAL)):
            m = rx.match(text, pos)
            if m is not None and (best is None or m.end() > best[0]):
                best = (m.end(), kind)
        if best is not None:
            self._pos = best[0]
            return Token(best[1], text[pos : best[0]], pos)
        m = _WORD.match(text, pos)
        if m is not None:
            self._pos = m.end()
            word = m.group()
            if word.upper() in self._keywords:
                return Token(Kind.KEYWORD, word.upper(), pos)
            return Token(Kind.ID, word, pos)
        if text[pos] == "'":
            m = _STRING.match(text, pos)
            if m is None:
                raise SqlParseError(f"unterminated string literal at column {pos + 1}")
            self._pos = m.end()
            return Token(Kind.STRING, m.group()[1:-1].replace("''", "'"), pos)
        two = text[pos : pos + 2]
        if two in _OPS2:
            self._pos = pos + 2
            return Token(Kind.OP, two, pos)
        if text[pos] in _OPS1:
            self._pos = pos + 1
            return Token(Kind.OP, text[pos], pos)
        raise SqlParseError(f"lexical error at column {pos + 1}: unexpected {text[pos]!r}")
