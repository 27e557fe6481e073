"""A Dask scheduler address, checked before anything connects to it.

Handed an address Dask cannot use, ``distributed.Client`` fails in its own ways: ``not-an-address``
and ``inproc://x`` time out after the connect timeout and then hang the interpreter's exit for a
minute more, ``tls://...`` without certificates raises from deep inside, and a refused port is
retried for the whole timeout (30 s) before it is reported (issue 40). So an address is parsed
here first - ``tcp://HOST:PORT`` (or ``HOST:PORT``), the only transport the tuning commands set
up - and the scheduler's port is tried with a plain TCP connect that fails within seconds, before
Dask is asked to connect. The probe also waits for the scheduler's greeting: a port where
something else listens and says nothing would otherwise hold Dask's handshake for ever.
"""
from __future__ import annotations

import ipaddress
import re
import socket
import threading
import time

from compute.errors import InputError

# How long the plain TCP probe may take (name lookup included): a refused port answers at once,
# a live scheduler within milliseconds on a LAN; only a silent (firewalled) host uses it all.
PROBE_S = 5.0
_HOSTNAME = re.compile(r"(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?")
_FORM = "tcp://HOST:PORT, e.g. tcp://10.0.0.1:8786 (`dask scheduler` prints it)"


class ClusterAddressError(InputError):
    """A scheduler address that is not ``tcp://HOST:PORT``."""


def check_scheduler_address(address: object) -> tuple[str, str, int]:
    """``(normalised address, host, port)`` of a scheduler address ``tcp://HOST:PORT`` (the
    scheme may be left out; HOST a name, an IPv4 address or a bracketed IPv6 one), or
    ``ClusterAddressError`` saying what is wrong with it."""
    if not isinstance(address, str):
        raise ClusterAddressError(f"a Dask scheduler address must be a string like {_FORM}, "
                                  f"got {type(address).__name__}")
    text = address.strip()
    shown = repr(text[:80]) + ("..." if len(text) > 80 else "")
    if not text or not text.isprintable() or any(c.isspace() for c in text):
        raise ClusterAddressError(f"{shown} is not a Dask scheduler address: expected {_FORM}")
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text
    if scheme.lower() != "tcp":
        raise ClusterAddressError(f"{shown}: the {scheme}:// transport is not supported (only "
                                  f"tcp://): expected {_FORM}")
    host, port_text = _split_host_port(rest, shown)
    if not port_text.isdigit() or not 1 <= int(port_text) <= 65535:
        raise ClusterAddressError(f"{shown}: the port must be a number in 1..65535, got "
                                  f"{port_text[:20]!r}")
    port = int(port_text)
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ClusterAddressError(f"{shown}: {host!r} is not an IPv6 address") from None
        return f"tcp://{host}:{port}", host[1:-1], port
    if not _HOSTNAME.fullmatch(host):
        raise ClusterAddressError(f"{shown}: {host[:80]!r} is not a host name or IP address")
    return f"tcp://{host}:{port}", host, port


def _split_host_port(rest: str, shown: str) -> tuple[str, str]:
    if rest.startswith("["):  # [IPv6]:port
        end = rest.find("]")
        if end < 0 or rest[end + 1:end + 2] != ":":
            raise ClusterAddressError(f"{shown}: expected [IPv6]:PORT after tcp://")
        return rest[:end + 1], rest[end + 2:]
    host, sep, port = rest.rpartition(":")
    if not sep or not host:
        raise ClusterAddressError(f"{shown}: no port: expected {_FORM}")
    return host, port


def probe(host: str, port: int, timeout: float = PROBE_S) -> str | None:
    """Try a TCP connection to ``host:port`` and wait for the greeting a Dask scheduler sends
    first on every connection (its handshake); ``None`` if it came, else why not (refused, no
    such host, silent or closed at once: not a scheduler - Dask itself would wait for that
    greeting forever). The name lookup runs in a daemon thread so that it too is bounded by
    ``timeout`` seconds."""
    outcome: list[str | None] = []
    deadline = time.monotonic() + timeout

    def attempt() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout) as conn:
                conn.settimeout(max(0.1, deadline - time.monotonic()))
                greeting = conn.recv(1)
            outcome.append(None if greeting else "the connection was closed at once: not a Dask "
                           "scheduler?")
        except TimeoutError:
            outcome.append(f"no Dask scheduler answered within {timeout:g} s")
        except socket.gaierror as err:
            outcome.append(f"cannot resolve the host name {host!r}: {err.strerror or err}")
        except OSError as err:
            why = err.strerror or str(err) or type(err).__name__
            outcome.append(f"{why} (is a Dask scheduler running there? `dask scheduler` starts "
                           "one)")

    worker = threading.Thread(target=attempt, name="ansor-cluster-probe", daemon=True)
    worker.start()
    worker.join(timeout + 1.0)  # its own timeouts end it first, but for a stalled name lookup
    if not outcome:
        return f"no answer within {timeout:g} s (the name lookup of {host!r} did not return)"
    return outcome[0]
