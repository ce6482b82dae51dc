"""Columns of many rows as PostgreSQL arrays in binary form, packed with `struct`.

A transaction's history goes in one statement, a column an array (`unnest`); psycopg's own list
dumper spends a few microseconds an element in Python (a batch of a few dozen events took longer
to send than its commit took to run on the server). Here each array is packed at once: its header
(`array_send`'s: one dimension, whether it holds NULLs, the element type, the length, lower bound
1), then each element's length and bytes, big-endian; a NULL element is its length, -1, alone.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from psycopg import pq
from psycopg.adapt import AdaptersMap, Dumper

_HEAD = struct.Struct(">iiIii")


class Packed:
    """A one-dimensional array already in binary form; its subclass says its type."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data


class _Bigints(Packed):
    __slots__ = ()


class _Integers(Packed):
    __slots__ = ()


class _Smallints(Packed):
    __slots__ = ()


class _Texts(Packed):
    __slots__ = ()


class _Instants(Packed):
    __slots__ = ()


class _Floats(Packed):
    __slots__ = ()


# By the SQL type a column is cast to: (the array's class, its OID, its element's OID, the
# element's struct format (its length's and its own) and size, or None for text).
_KINDS: dict[str, tuple[type[Packed], int, int, tuple[str, int] | None]] = {
    "bigint": (_Bigints, 1016, 20, ("iq", 8)),
    "integer": (_Integers, 1007, 23, ("ii", 4)),
    "smallint": (_Smallints, 1005, 21, ("ih", 2)),
    "text": (_Texts, 1009, 25, None),
    "timestamptz": (_Instants, 1185, 1184, ("iq", 8)),
    "float8": (_Floats, 1022, 701, ("id", 8)),
}
_LENGTH = struct.Struct(">i")
_NULL = _LENGTH.pack(-1)
# A timestamptz is sent as integer microseconds since PostgreSQL's epoch.
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def pack(kind: str, values: Sequence[Any]) -> Packed:
    """`values` (ints, floats for float8, str for text, aware datetimes for timestamptz; None
    for NULL) as an array of `kind` ("bigint", "integer", "smallint", "float8", "text",
    "timestamptz")."""
    cls, _, element, fixed = _KINDS[kind]
    count = len(values)
    if kind == "timestamptz":
        values = [None if value is None else (value - _EPOCH) // _MICROSECOND
                  for value in values]
    nulls = None in values
    head = _HEAD.pack(1, nulls, element, count, 1)
    if fixed is None:
        if nulls:
            parts = [head]
            for value in values:
                if value is None:
                    parts.append(_NULL)
                else:
                    data = value.encode()
                    parts += (_LENGTH.pack(len(data)), data)
            return cls(b"".join(parts))
        parts = [head] * (2 * count + 1)
        encoded = list(map(str.encode, values))
        parts[1::2] = map(_LENGTH.pack, map(len, encoded))
        parts[2::2] = encoded
        return cls(b"".join(parts))
    fmt, size = fixed
    if nulls:
        formats, arguments = [">"], []
        for value in values:
            if value is None:
                formats.append("i")
                arguments.append(-1)
            else:
                formats.append(fmt)
                arguments += (size, value)
        return cls(head + struct.pack("".join(formats), *arguments))
    interleaved: list[int] = [size, 0] * count
    interleaved[1::2] = values
    return cls(head + struct.pack(">" + fmt * count, *interleaved))


def columns(rows: Sequence[Sequence[Any]], kinds: Sequence[str]) -> list[Packed]:
    """The columns of `rows` (all of `kinds`' length), each packed as its kind."""
    return [pack(kind, column) for kind, column in zip(kinds, zip(*rows, strict=True),
                                                       strict=True)]


class _PackedDumper(Dumper):
    format = pq.Format.BINARY

    def dump(self, obj: Packed) -> bytes:
        return obj.data


_DUMPERS = [(cls, type(f"{cls.__name__}Dumper", (_PackedDumper,), {"oid": oid}))
            for cls, oid, _, _ in _KINDS.values()]


def register(adapters: AdaptersMap) -> None:
    """Teach a connection's adapters to send packed arrays as they are."""
    for cls, dumper in _DUMPERS:
        adapters.register_dumper(cls, dumper)
