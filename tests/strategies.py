"""Hypothesis strategies shared by the property tests: the wire's fixed-width integers.

RocketMQ's headers and records are written by Java, whose ``short``, ``int`` and ``long``
are signed: a codec must carry every value of the range, the negative ones included.
"""

from __future__ import annotations

from hypothesis import strategies as st

INT16 = st.integers(-(2**15), 2**15 - 1)
"""Every Java ``short``."""

INT32 = st.integers(-(2**31), 2**31 - 1)
"""Every Java ``int``."""

INT64 = st.integers(-(2**63), 2**63 - 1)
"""Every Java ``long``."""
