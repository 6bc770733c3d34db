"""Converters that misbehave on purpose, run inside ki's conversion workers by tests of the per-file budget.

A worker imports them by name (``tests.helpers.hostile:allocate``), so the test puts the repository on the
worker's ``PYTHONPATH``. Each has a converter's signature ``(data, filename, **kwargs)``.
"""

from __future__ import annotations

import os
import signal
import time

from ki.adapters.convert.model import StructuredDocument
from ki.core.errors import UnsupportedDocument


def allocate(data: bytes, filename: str, *, megabytes: int) -> StructuredDocument:
    """Allocate (and touch) ``megabytes`` MiB, as a parser inflating a bomb would."""
    blocks = [bytearray(1 << 20) for _ in range(megabytes)]
    return StructuredDocument(text=f"allocated {len(blocks)} MiB", format="txt", converter="hostile")


def sleep(data: bytes, filename: str, *, seconds: float) -> StructuredDocument:
    """Take ``seconds`` of wall-clock time, as a parser stuck in a pathological loop would."""
    time.sleep(seconds)
    return StructuredDocument(text="woke up", format="txt", converter="hostile")


def crash(data: bytes, filename: str) -> StructuredDocument:
    """Die of SIGSEGV, as a C library crashing on malformed input would."""
    os.kill(os.getpid(), signal.SIGSEGV)
    raise AssertionError("unreachable")


def echo(data: bytes, filename: str) -> StructuredDocument:
    """Return the bytes as text, with the worker's pid (to see reuse)."""
    return StructuredDocument(text=data.decode(), format="txt", converter="hostile", metadata={"pid": os.getpid()})


def allocate_then_fail(data: bytes, filename: str, *, megabytes: int) -> StructuredDocument:
    """Allocate ``megabytes`` MiB, then report damage, as libxml2 does when its buffer cannot grow."""
    blocks = [bytearray(1 << 20) for _ in range(megabytes)]
    raise UnsupportedDocument(f"{filename}: not well-formed XML (unknown error) after {len(blocks)} MiB",
                              reason="corrupt")
