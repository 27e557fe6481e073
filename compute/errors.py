"""The one base class for errors in what a user gave us (a model file, a record, a shape, an
option), as opposed to a bug of ours.

Every layer raises its own subclass (``OnnxImportError``, ``RecordFormatError``,
``OutOfBoundsError``, ...) so callers can catch what they expect; the command line catches this
base class and prints its message as one line with exit status 2, and anything else as an
internal error with status 1 (``--debug`` or ``ANSOR_DEBUG=1`` shows the traceback). It lives in
``compute`` because every package may raise one and ``compute`` is the lowest layer.
"""
from __future__ import annotations


class InputError(ValueError):
    """Bad input: the message names the problem (the file and line, the node and its op, the
    tensor and its shape, the option and its bound). A ``ValueError`` so older ``except
    ValueError`` callers keep working."""
