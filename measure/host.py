"""The host name a measurement carries: this machine's, cleaned, and the check of one read back.

Records name the machine that timed each candidate, so that a log written by a cluster says where
every cost comes from (and a suspicious one can be traced to its machine). Host names reach
records from Dask workers and from record files, both untrusted, so they follow one rule: 1 to
253 ASCII letters, digits and ``. - _ : [ ] %`` (DNS names, IPv4 and bracketed IPv6 addresses,
zone ids) - nothing that a terminal, a shell or a JSON reader could take for anything else.
``clean_host`` makes any reported name follow it (a worker never fails a measurement over its
name); ``check_host`` rejects a name in a record file that does not.
"""
from __future__ import annotations

import re
import socket
from functools import lru_cache

MAX_HOST_LEN = 253  # the longest DNS name
HOST_RULE = f"1 to {MAX_HOST_LEN} ASCII letters, digits and . - _ : [ ] %"
_HOST = re.compile(r"[A-Za-z0-9._:\[\]%%-]{1,%d}" % MAX_HOST_LEN)
_BAD = re.compile(r"[^A-Za-z0-9._:\[\]%-]")
UNKNOWN_HOST = "unknown-host"


def is_valid_host(host: object) -> bool:
    return isinstance(host, str) and _HOST.fullmatch(host) is not None


def check_host(host: object, what: str = "host") -> str:
    """``host`` if it follows the rule, else ValueError/TypeError naming ``what``."""
    if not isinstance(host, str):
        raise TypeError(f"{what} must be a string, got {type(host).__name__}")
    if not is_valid_host(host):
        shown = repr(host[:60]) + ("..." if len(host) > 60 else "")
        raise ValueError(f"{what} {shown} is not a host name: use {HOST_RULE}")
    return host


def clean_host(host: object) -> str:
    """A name that follows the rule, made from whatever a machine reported: characters outside
    it become ``_``, the length is capped, and an empty or non-string name is ``unknown-host``."""
    if not isinstance(host, str) or not host:
        return UNKNOWN_HOST
    return _BAD.sub("_", host[:MAX_HOST_LEN])


@lru_cache(maxsize=1)
def this_host() -> str:
    """This machine's name as records carry it."""
    return clean_host(socket.gethostname())
