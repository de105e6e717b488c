"""The SQL92 filter grammar (``SelectorParser.jj``) compiled to Python closures.

Grammar, loosest binding first (``*``: repeated, left-associative)::

    selector    := or
    or          := and ( OR and )*
    and         := equality ( AND equality )*
    equality    := comparison ( '=' comparison | '<>' comparison
                                | IS NULL | IS NOT NULL )*
    comparison  := unary ( ('>' | '>=' | '<' | '<=') unary
                         | [NOT] BETWEEN unary AND unary
                         | [NOT] IN '(' STRING ( ',' STRING )* ')'
                         | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) STRING )*   # 5.x only
    unary       := '+' unary | '-' unary | NOT unary | primary
    primary     := literal | ID | '(' or ')'
    literal     := STRING | DECIMAL | FLOAT | TRUE | FALSE | NULL

``NOT`` is a unary operator binding tighter than any comparison: ``NOT a = 1`` is
``(NOT a) = 1``. There is no end-of-input rule: ``a = 1 xyz`` is ``a = 1`` (but a
token that starts an operator of a loop above, such as ``NOT`` or ``IS``, commits to it:
``a = 1 NOT x`` is an error).

Compile-time checks (each a :class:`~mqstore.sql92.errors.SqlParseError`, as RocketMQ's
``MQFilterException``): an operand of ``AND``/``OR``/``NOT`` or the whole selector must be
boolean (a comparison, a logic expression, TRUE/FALSE/NULL, or a property, which is cast);
``>``, ``>=``, ``<``, ``<=`` take no string, boolean or NULL literal and no boolean
expression; ``=``/``<>`` take no NULL literal, nor a TRUE/FALSE literal on the left of a
non-boolean literal; ``IN`` needs a property on its left; ``BETWEEN`` of two literals
needs them non-null and in order; a decimal must fit a Java long and a float literal must
be finite and at least ``Double.MIN_VALUE`` (so ``0.0`` is refused, as in RocketMQ).

Evaluation follows RocketMQ's expression classes exactly, null (a missing property)
included; it is not SQL's three-valued logic (see ``docs/sql92.md``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from mqstore.message import NAME_VALUE_SEPARATOR
from mqstore.sql92 import values as jv
from mqstore.sql92.errors import SqlEvaluationError, SqlParseError
from mqstore.sql92.lexer import KEYWORDS_5, Kind, Lexer, Token
from mqstore.sql92.values import JavaValue, JInt

Props = Mapping[str, str]
Eval = Callable[[Props], JavaValue]
TAGS = "TAGS"


class Shape(enum.Enum):
    """What RocketMQ's parser knows of an expression (its Java class)."""

    CONST = "constant"  # ConstantExpression: a string or number literal
    BOOL_CONST = "boolean constant"  # TRUE, FALSE, NULL
    PROPERTY = "property"  # PropertyExpression
    BOOLEAN = "boolean"  # any other BooleanExpression
    VALUE = "value"  # a negation


@dataclass(frozen=True, slots=True)
class Node:
    """A compiled sub-expression: its shape, its literal value (constants) and its
    evaluator."""

    shape: Shape
    fn: Eval
    value: JavaValue = None
    name: str | None = None
    """A property's name."""
    tags: frozenset[str] | None = None
    """A boolean node that can be TRUE only for a message whose TAGS is one of these
    (None: no such bound). Sound, not tight: see :func:`required_tags`."""
    needles: frozenset[str] | None = None
    """A boolean node that can be TRUE only for a message whose serialized properties
    contain one of these substrings (None: no such bound). Sound, not tight: see
    :func:`required_substrings`."""

    @property
    def is_constant(self) -> bool:
        return self.shape in (Shape.CONST, Shape.BOOL_CONST)


def _const(value: JavaValue, shape: Shape = Shape.CONST) -> Node:
    return Node(shape, lambda _p: value, value)


def _as_boolean(n: Node) -> Node:
    """``asBooleanExpression``: booleans as they are, a property cast (not a Boolean,
    which a property never is, gives FALSE), anything else refused."""
    if n.shape in (Shape.BOOLEAN, Shape.BOOL_CONST):
        return n
    if n.shape is Shape.PROPERTY:
        f = n.fn

        def cast(p: Props) -> JavaValue:
            v = f(p)
            return None if v is None else (v if type(v) is bool else False)

        return Node(Shape.BOOLEAN, cast)
    raise SqlParseError(f"expression will not result in a boolean value: {n.value!r}")


def _or(a: Node, b: Node) -> Node:
    fa, fb = _as_boolean(a).fn, _as_boolean(b).fn
    tags = None if a.tags is None or b.tags is None else a.tags | b.tags
    needles = None if a.needles is None or b.needles is None else a.needles | b.needles

    def f(p: Props) -> JavaValue:
        lv = fa(p)
        if lv:
            return True
        rv = fb(p)
        if rv:
            return True
        return None if lv is None or rv is None else False

    return Node(Shape.BOOLEAN, f, tags=tags, needles=needles)


def _and(a: Node, b: Node) -> Node:
    fa, fb = _as_boolean(a).fn, _as_boolean(b).fn
    tags = b.tags if a.tags is None else a.tags if b.tags is None else a.tags & b.tags
    needles = _narrower(a.needles, b.needles)

    def f(p: Props) -> JavaValue:
        lv = fa(p)
        if lv is False:
            return False
        rv = fb(p)
        if rv is False:
            return False
        return None if lv is None or rv is None else True

    return Node(Shape.BOOLEAN, f, tags=tags, needles=needles)


def _narrower(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    """Of two substring bounds that must both hold, the likelier to skip a message: the
    one whose shortest substring is the longer (a property's value, not its name alone)."""
    if a is None or b is None:
        return b if a is None else a
    return b if min(map(len, b), default=0) > min(map(len, a), default=0) else a


def _present(n: Node, value: JavaValue = None) -> frozenset[str] | None:
    """The substring bound of a comparison that is null when property ``n`` is missing:
    ``name\x01`` (every serialized property is ``name\x01value\x02``), followed by
    ``value`` when the comparison is TRUE only for that exact string."""
    if n.shape is not Shape.PROPERTY or n.name is None:
        return None
    return frozenset({n.name + NAME_VALUE_SEPARATOR + (value if type(value) is str else "")})


def _not(a: Node) -> Node:
    fa = _as_boolean(a).fn

    def f(p: Props) -> JavaValue:
        v = fa(p)
        return None if v is None else not v

    return Node(Shape.BOOLEAN, f)


def _equal_unchecked(a: Node, b: Node) -> Node:
    fa, fb = a.fn, b.fn

    def f(p: Props) -> JavaValue:
        lv, rv = fa(p), fb(p)
        if lv is None or rv is None:
            if lv is None and rv is None:
                return True
            return None if lv is None else False
        return jv.java_equals(lv, rv) or jv.compare(lv, rv) == 0

    return Node(Shape.BOOLEAN, f)


def _equal(a: Node, b: Node) -> Node:
    for n in (a, b):
        if n.is_constant and n.value is None:
            raise SqlParseError("NULL cannot be compared with '='; use IS NULL")
    if a.shape is Shape.BOOL_CONST and b.shape is Shape.CONST:
        raise SqlParseError(f"{a.value!r} cannot be compared with {b.value!r}")
    eq = _equal_unchecked(a, b)
    for p, c in ((a, b), (b, a)):  # property = literal: null without the property
        if p.shape is Shape.PROPERTY and c.is_constant:
            tags = frozenset({c.value}) if p.name == TAGS and type(c.value) is str else None
            return replace(eq, tags=tags, needles=_present(p, c.value))
    return eq


def _check_orderable(n: Node) -> None:
    """``checkLessThanOperand``: only numeric literals among the constants, no booleans."""
    if n.is_constant:
        if type(n.value) in (JInt, int, float):
            return
        raise SqlParseError(f"value {n.value!r} cannot be compared with <, <=, > or >=")
    if n.shape is Shape.BOOLEAN:
        raise SqlParseError("a boolean expression cannot be compared with <, <=, > or >=")


_ORDER: dict[str, Callable[[int], bool]] = {
    ">": lambda c: c > 0,
    ">=": lambda c: c >= 0,
    "<": lambda c: c < 0,
    "<=": lambda c: c <= 0,
}


def _order(op: str, a: Node, b: Node) -> Node:
    _check_orderable(a)
    _check_orderable(b)
    fa, fb, test = a.fn, b.fn, _ORDER[op]

    def f(p: Props) -> JavaValue:
        lv = fa(p)
        if lv is None:
            return None
        rv = fb(p)
        if rv is None:
            return None
        if type(lv) is str and type(rv) is str:  # two strings order only as doubles
            lv, rv = jv.parse_double(lv), jv.parse_double(rv)
        return test(jv.compare(lv, rv))

    return Node(Shape.BOOLEAN, f, needles=_narrower(_present(a), _present(b)))


def _between(value: Node, low: Node, high: Node, negated: bool) -> Node:
    if negated:
        return _or(_order("<", value, low), _order(">", value, high))
    if low.is_constant and high.is_constant:
        if low.value is None or high.value is None:
            raise SqlParseError("the bounds of BETWEEN cannot be NULL")
        try:
            in_order = jv.compare(high.value, low.value) >= 0
        except SqlEvaluationError as e:
            raise SqlParseError(f"the bounds of BETWEEN do not compare: {e}") from None
        if not in_order:
            raise SqlParseError(
                f"the low bound of BETWEEN ({low.value}) is above the high one ({high.value})"
            )
    return _and(_order(">=", value, low), _order("<=", value, high))


def _in(value: Node, items: list[str], negated: bool) -> Node:
    if value.shape is not Shape.PROPERTY:
        raise SqlParseError("IN needs a property on its left")
    fv, members = value.fn, frozenset(items)

    def f(p: Props) -> JavaValue:
        v = fv(p)
        if type(v) is not str:
            return None
        return (v in members) is not negated

    tags = members if value.name == TAGS and not negated else None
    name = value.name or ""
    needles = (
        _present(value) if negated else frozenset(name + NAME_VALUE_SEPARATOR + m for m in members)
    )
    return Node(Shape.BOOLEAN, f, tags=tags, needles=needles)


_STRING_TESTS: dict[str, Callable[[str, str], bool]] = {
    "CONTAINS": lambda v, s: s in v,
    "STARTSWITH": str.startswith,
    "ENDSWITH": str.endswith,
}


def _string_test(op: str, value: Node, search: str, negated: bool) -> Node:
    """5.x CONTAINS/STARTSWITH/ENDSWITH: FALSE for an empty search string and for a
    missing or non-string value, whether negated or not."""
    fv, test = value.fn, _STRING_TESTS[op]

    def f(p: Props) -> JavaValue:
        v = fv(p)
        if not search or type(v) is not str:
            return False
        return test(v, search) is not negated

    prefix = search if op == "STARTSWITH" and not negated else None
    return Node(Shape.BOOLEAN, f, needles=_present(value, prefix))


def _negate(a: Node) -> Node:
    fa = a.fn
    return Node(Shape.VALUE, lambda p: jv.negate(fa(p)))


def _decimal(text: str) -> Node:
    digits = text.rstrip("lL")
    n = int(digits)
    if n > jv.LONG_MAX:
        raise SqlParseError(f"decimal literal {text} does not fit a long")
    return _const(JInt(n) if n <= jv.INT_MAX else n)


def _float(text: str) -> Node:
    d = float(text)
    if d > 1.7976931348623157e308:
        raise SqlParseError(f"{text} is greater than Double.MAX_VALUE")
    if d < jv.DOUBLE_MIN_VALUE:
        raise SqlParseError(f"{text} is less than Double.MIN_VALUE")
    return _const(d)


_STRING_OPS = frozenset(_STRING_TESTS)


class _Parser:
    """Recursive descent over :class:`Lexer`, one method per rule of the grammar."""

    def __init__(self, text: str, keywords: frozenset[str]) -> None:
        self.lex = Lexer(text, keywords)
        self.names: set[str] = set()
        """The property names the expression reads."""

    def _is(self, tok: Token, kind: Kind, *texts: str) -> bool:
        return tok.kind is kind and (not texts or tok.text in texts)

    def _expect(self, kind: Kind, text: str | None = None) -> Token:
        tok = self.lex.next()
        if tok.kind is not kind or (text is not None and tok.text != text):
            want = text or kind.value
            raise SqlParseError(f"expected {want} at column {tok.pos + 1}, found {tok.text!r}")
        return tok

    def selector(self) -> Node:
        return _as_boolean(self.or_())

    def or_(self) -> Node:
        left = self.and_()
        while self._is(self.lex.peek(), Kind.KEYWORD, "OR"):
            self.lex.next()
            left = _or(left, self.and_())
        return left

    def and_(self) -> Node:
        left = self.equality()
        while self._is(self.lex.peek(), Kind.KEYWORD, "AND"):
            self.lex.next()
            left = _and(left, self.equality())
        return left

    def equality(self) -> Node:
        left = self.comparison()
        while True:
            tok = self.lex.peek()
            if self._is(tok, Kind.OP, "=", "<>"):
                self.lex.next()
                eq = _equal(left, self.comparison())
                left = eq if tok.text == "=" else _not(eq)
            elif self._is(tok, Kind.KEYWORD, "IS"):
                self.lex.next()
                negated = self._is(self.lex.peek(), Kind.KEYWORD, "NOT")
                if negated:
                    self.lex.next()
                self._expect(Kind.KEYWORD, "NULL")
                is_null = _equal_unchecked(left, _const(None, Shape.BOOL_CONST))
                left = _not(is_null) if negated else is_null
            else:
                return left

    def comparison(self) -> Node:
        left = self.unary()
        while True:
            tok = self.lex.peek()
            negated = False
            if self._is(tok, Kind.KEYWORD, "NOT"):  # JavaCC enters the loop on NOT alone
                self.lex.next()
                tok, negated = self.lex.peek(), True
                if not self._is(tok, Kind.KEYWORD, "BETWEEN", "IN", *_STRING_OPS):
                    raise SqlParseError(
                        f"unexpected {tok.text!r} after NOT at column {tok.pos + 1}"
                    )
            if self._is(tok, Kind.OP, *_ORDER):
                self.lex.next()
                left = _order(tok.text, left, self.unary())
            elif self._is(tok, Kind.KEYWORD, "BETWEEN"):
                self.lex.next()
                low = self.unary()
                self._expect(Kind.KEYWORD, "AND")
                left = _between(left, low, self.unary(), negated)
            elif self._is(tok, Kind.KEYWORD, "IN"):
                self.lex.next()
                left = _in(left, self.string_list(), negated)
            elif self._is(tok, Kind.KEYWORD, *_STRING_OPS):
                self.lex.next()
                left = _string_test(tok.text, left, self._expect(Kind.STRING).text, negated)
            else:
                return left

    def string_list(self) -> list[str]:
        self._expect(Kind.OP, "(")
        items = [self._expect(Kind.STRING).text]
        while self._is(self.lex.peek(), Kind.OP, ","):
            self.lex.next()
            items.append(self._expect(Kind.STRING).text)
        self._expect(Kind.OP, ")")
        return items

    def unary(self) -> Node:
        tok = self.lex.peek()
        if self._is(tok, Kind.OP, "+"):
            self.lex.next()
            return self.unary()
        if self._is(tok, Kind.OP, "-"):
            self.lex.next()
            return _negate(self.unary())
        if self._is(tok, Kind.KEYWORD, "NOT"):
            self.lex.next()
            return _not(self.unary())
        return self.primary()

    def primary(self) -> Node:
        tok = self.lex.next()
        kind = tok.kind
        if kind is Kind.STRING:
            return _const(tok.text)
        if kind is Kind.DECIMAL:
            return _decimal(tok.text)
        if kind is Kind.FLOAT:
            return _float(tok.text)
        if kind is Kind.ID:
            name = tok.text
            self.names.add(name)
            return Node(Shape.PROPERTY, lambda p: p.get(name), name=name)
        if kind is Kind.KEYWORD and tok.text in ("TRUE", "FALSE", "NULL"):
            value = {"TRUE": True, "FALSE": False, "NULL": None}[tok.text]
            return _const(value, Shape.BOOL_CONST)
        if self._is(tok, Kind.OP, "("):
            inner = self.or_()
            self._expect(Kind.OP, ")")
            return inner
        raise SqlParseError(f"unexpected {tok.text!r} at column {tok.pos + 1}")


@dataclass(frozen=True, slots=True)
class Compiled:
    """A compiled selector: its evaluator and the bounds a TRUE result implies."""

    fn: Eval
    """A function of a message's properties answering True, False or None (RocketMQ's
    ``Boolean`` or ``null``)."""
    tags: frozenset[str] | None
    """:func:`required_tags`."""
    needles: frozenset[str] | None
    """:func:`required_substrings`."""
    names: frozenset[str]
    """The property names the expression reads (its result depends on nothing else)."""


def compile_expression(text: str, keywords: frozenset[str] = KEYWORDS_5) -> Compiled:
    """Compile ``text`` (RocketMQ 5.x's keywords by default).

    Raises:
        SqlParseError: ``text`` does not compile (RocketMQ ``MQFilterException``).
    """
    parser = _Parser(text, keywords)
    node = parser.selector()
    return Compiled(node.fn, node.tags, node.needles, frozenset(parser.names))


def required_tags(text: str) -> frozenset[str] | None:
    """The tags a message must have for ``text`` to be TRUE, None if any may do.

    Derived from ``TAGS = 'x'`` and ``TAGS IN (...)`` clauses through AND (intersection)
    and OR (union of bounded sides); anything else bounds nothing. A message without
    TAGS can never satisfy a bounded expression (its comparison is null). The broker
    uses it to skip consume-queue units by tag hash code before reading the message.

    >>> sorted(required_tags("(TAGS = 'A' OR TAGS IN ('B', 'C')) AND a > 1"))
    ['A', 'B', 'C']
    >>> required_tags("TAGS = 'A' OR a > 1") is None
    True

    Raises:
        SqlParseError: ``text`` does not compile.
    """
    return compile_expression(text).tags


def required_substrings(text: str) -> frozenset[str] | None:
    r"""Substrings one of which a message's serialized properties (``name\x01value\x02``
    each) must contain for ``text`` to be TRUE, None if there is no such bound.

    A comparison of a property with a literal, an ordering, ``BETWEEN``, ``IN`` and the
    5.x string tests are null (never TRUE) without their property, so they need
    ``name\x01``; ``name = 'v'`` and ``name IN ('v', ...)`` need ``name\x01v``, as
    ``name STARTSWITH 'v'`` does. AND keeps the bound of one side (the one with the longer
    substrings), OR the union of two bounded sides; NOT, ``<>``, ``IS [NOT] NULL`` and a
    comparison of two expressions bound nothing. The broker uses it to skip a record
    with one substring search of its bytes instead of decoding and evaluating it.

    >>> sorted(required_substrings("a > 1 AND (b = 'x' OR b IN ('y'))"))
    ['b\x01x', 'b\x01y']
    >>> required_substrings("a > 1 OR NOT (b = 'x')") is None
    True

    Raises:
        SqlParseError: ``text`` does not compile.
    """
    return compile_expression(text).needles
