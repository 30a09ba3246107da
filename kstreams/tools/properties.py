"""Java ``.properties`` files, read as ``java.util.Properties.load`` reads them.

What is honoured: comment lines starting with ``#`` or ``!``; ``key=value``, ``key:value`` and
``key value`` (the first unescaped ``=``, ``:`` or whitespace ends the key; whitespace around the
separator is dropped); a line ending in an odd number of backslashes continues on the next line,
whose leading whitespace is dropped; escapes ``\\t \\n \\r \\f \\uXXXX`` and ``\\<char>`` for any
other character (so ``\\=``, ``\\:``, ``\\ `` and ``\\\\`` are literal). A later key wins.

Guarantee: a malformed ``\\u`` escape raises ``PropertiesError`` naming the file and line, as
Java raises IllegalArgumentException, rather than loading a value nobody wrote.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

__all__ = ["PropertiesError", "load_properties", "parse_properties"]

logger = logging.getLogger(__name__)

_WHITESPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class PropertiesError(ValueError):
    """A properties file cannot be read: the message names the file, line and problem."""


def load_properties(path: str | Path) -> dict[str, str]:
    """The properties of a file (UTF-8, as Java 9+ reads them). PropertiesError when it cannot be
    read or is malformed."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise PropertiesError(f"Cannot read the properties file {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise PropertiesError(f"The properties file {path} is not UTF-8 text: {exc}") from exc
    return parse_properties(text, str(path))


def parse_properties(text: str, source: str = "<properties>") -> dict[str, str]:
    """The properties in ``text``; ``source`` names it in errors."""
    result: dict[str, str] = {}
    for number, line in _logical_lines(text):
        key, value = _split(line)
        result[_unescape(key, source, number)] = _unescape(value, source, number)
    return result


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first physical line number, logical line) without comments, blanks and continuations."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        number = i + 1
        line = lines[i].lstrip(_WHITESPACE)
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(_WHITESPACE)
            i += 1
        if _continues(line):
            line = line[:-1]  # a continuation on the last line continues into nothing
        yield number, line


def _continues(line: str) -> bool:
    backslashes = len(line) - len(line.rstrip("\\"))
    return backslashes % 2 == 1


def _split(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WHITESPACE:
            break
        i += 1
    key = line[:i]
    rest = line[i:].lstrip(_WHITESPACE)
    # One '=' or ':' may follow whitespace after the key ("key = value").
    if rest[:1] in ("=", ":") and (i >= len(line) or line[i] in _WHITESPACE or line[i] in "=:"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def _unescape(text: str, source: str, number: int) -> str:
    if "\\" not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 >= len(text):
            out.append(c)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) != 4 or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise PropertiesError(
                    f"{source}, line {number}: malformed \\uXXXX escape {text[i : i + 6]!r}: write four "
                    "hexadecimal digits after \\u, or \\\\u for a literal backslash and u"
                )
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
