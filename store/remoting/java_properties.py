"""Java ``Properties`` text, as RocketMQ's admin codes carry broker and name-server
configs in bodies (``MixAll.properties2String`` / ``string2Properties``). Pure."""

from __future__ import annotations

from collections.abc import Mapping


def properties_text(props: Mapping[str, object]) -> str:
    """``MixAll.properties2String``: one ``key=value`` line per entry."""
    out = []
    for key, value in props.items():
        text = "true" if value is True else "false" if value is False else str(value)
        out.append(f"{key}={text}\n")
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Java ``Properties.load`` of simple ``key=value`` (or ``key:value``) lines: blank
    lines and ``#`` / ``!`` comments skipped, whitespace around key and value dropped."""
    out = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        key, value = (line, "") if cut < 0 else (line[:cut], line[cut + 1 :])
        out[key.strip()] = value.strip()
    return out
