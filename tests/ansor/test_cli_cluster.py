"""``--cluster`` of ``ansor tune`` and ``ansor network tune``, and ``ansor worker``, against a
LocalCluster on loopback (two workers, one holding the ``measure`` resource)."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
from distributed import Client

from ansor.cli import main
from measure.cluster_address import ClusterAddressError, check_scheduler_address
from measure.host import this_host
from tests.dask_cluster import local_cluster


@pytest.fixture(scope="module")
def cluster():
    with local_cluster() as c:
        yield c


def records(path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def test_tune_on_a_cluster(cluster, tmp_path, capsys):
    log = tmp_path / "m.json"
    rc = main(["tune", "matmul", "--args", "16,16,16", "--trials", "4", "--per-round", "4",
               "--population", "64", "--seed", "0", "--log", str(log), "--cluster",
               cluster.scheduler_address])
    assert rc == 0, capsys.readouterr().err
    assert "[matmul(16, 16, 16)] trials 4/4" in capsys.readouterr().out
    recs = records(log)
    assert len(recs) == 4 and all(r["result"]["host"] == this_host() for r in recs)


def test_network_tune_on_a_cluster(cluster, tmp_path, capsys):
    from ansor.graph import GraphBuilder
    from ansor.graph.onnx_export import export_onnx

    rng = np.random.default_rng(0)
    b = GraphBuilder("tiny")
    x = b.input("x", (1, 6, 6, 4))
    w = b.constant(rng.standard_normal((3, 3, 4, 8)).astype(np.float32), "w")
    y = b.relu(b.conv2d(x, w, b.constant(rng.standard_normal(8).astype(np.float32), "b"),
                        padding=1))
    model = tmp_path / "tiny.onnx"
    export_onnx(b.build(y), model)
    log = tmp_path / "net.json"
    rc = main(["network", "tune", str(model), "--trials", "4", "--per-round", "2",
               "--population", "32", "--log", str(log), "--seed", "0", "--rounds", "0",
               "--cluster", cluster.scheduler_address])
    assert rc == 0, capsys.readouterr().err
    assert "measured latency of the compiled network" in capsys.readouterr().out
    assert len(records(log)) >= 4 and all(r["result"].get("host") for r in records(log))


def test_a_bad_cluster_address_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:  # argparse's usage error (exit 2)
        main(["tune", "matmul", "--args", "16,16,16", "--trials", "4", "--log",
              str(tmp_path / "x.json"), "--cluster", "tcp://a\nb"])
    assert info.value.code == 2 and "argument --cluster: " in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists() or (tmp_path / "x.json").stat().st_size == 0


@pytest.mark.parametrize("address, why", [
    ("not-an-address", "'not-an-address': no port"),
    ("tls://127.0.0.1:1", "the tls:// transport is not supported (only tcp://)"),
    ("inproc://x", "the inproc:// transport is not supported"),
    ("tcp://127.0.0.1:0", "the port must be a number in 1..65535, got '0'"),
    ("tcp://127.0.0.1:99999", "the port must be a number in 1..65535"),
    ("tcp://127.0.0.1", "no port"), ("tcp://a b:1", "is not a Dask scheduler address"),
    ("tcp://[zz]:1", "is not an IPv6 address"), ("tcp://-x-:1", "is not a host name"),
])
@pytest.mark.parametrize("command", [["tune", "matmul", "--args", "16,16,16", "--cluster"],
                                     ["network", "tune", "resnet-18", "--trials", "4", "--log",
                                      "x.json", "--cluster"], ["worker"]])
def test_cluster_addresses_are_checked_before_connecting(command, address, why, monkeypatch,
                                                         capsys):
    """Issue 40: these used to time out for 60 s and hang the exit for 60 s more, or raise a
    traceback from inside Dask; now argparse refuses them (exit 2) and nothing connects."""
    import distributed

    def no_client(*args, **kwargs):
        raise AssertionError("a bad address must be refused before connecting")

    monkeypatch.setattr(distributed, "Client", no_client)
    monkeypatch.setattr(os, "execv", no_client)  # ansor worker would become a dask worker
    with pytest.raises(SystemExit) as info:
        main(command + [address])
    err = capsys.readouterr().err
    assert info.value.code == 2 and why in err and "Traceback" not in err
    assert "argument --cluster: " in err or "argument address: " in err


def test_scheduler_addresses_are_normalised():
    assert check_scheduler_address("127.0.0.1:8786") == ("tcp://127.0.0.1:8786", "127.0.0.1", 8786)
    assert check_scheduler_address(" TCP://node-1.lan:1 ")[0] == "tcp://node-1.lan:1"
    assert check_scheduler_address("tcp://[::1]:8786") == ("tcp://[::1]:8786", "::1", 8786)
    with pytest.raises(ClusterAddressError, match="must be a string"):
        check_scheduler_address(None)


def _closed_port() -> int:
    with socket.socket() as s:  # a port nothing listens on: bound, then released
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_refused_port_fails_in_one_line_within_seconds(tmp_path):
    """Was 30 s of Dask's retries; also: the process exits at once (no lingering client)."""
    address = f"tcp://127.0.0.1:{_closed_port()}"
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "ansor.cli", "tune", "matmul", "--args",
                           "16,16,16", "--log", str(tmp_path / "x.json"), "--cluster", address],
                          capture_output=True, text=True, timeout=60)
    took = time.monotonic() - t0
    assert proc.returncode == 2 and took < 15, (took, proc.stderr)
    assert proc.stderr == (f"ansor tune: --cluster {address}: cannot reach the Dask scheduler at "
                           f"{address}: Connection refused (is a Dask scheduler running there? "
                           "`dask scheduler` starts one)\n")


def test_a_silent_listener_is_not_waited_for():
    """Something listening that is not a Dask scheduler (and says nothing) used to hold Dask's
    handshake until it closed the connection; now the probe gives up after its timeout."""
    import threading

    from measure.dask_builder import DaskBuilder
    from measure.measure import MeasureUnavailableError

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    done = threading.Event()

    def listen_silently() -> None:  # for 10 s at most: the old code waited until the close
        accepted, end = [], time.monotonic() + 10
        while not done.is_set() and time.monotonic() < end:
            try:
                accepted.append(server.accept()[0])
            except OSError:
                pass
        for c in accepted + [server]:
            c.close()

    thread = threading.Thread(target=listen_silently, daemon=True)
    thread.start()
    t0 = time.monotonic()
    with pytest.raises(MeasureUnavailableError, match=f"at tcp://127.0.0.1:{port}: no Dask "
                                                      "scheduler answered within 1 s"):
        DaskBuilder(f"tcp://127.0.0.1:{port}", connect_timeout=1)
    assert time.monotonic() - t0 < 5
    done.set()
    thread.join()


def test_worker_command(capsys):
    assert main(["worker", "tcp://10.0.0.1:8786", "--nthreads", "3", "--print-command"]) == 0
    out = capsys.readouterr().out
    assert "distributed.cli.dask_worker tcp://10.0.0.1:8786" in out
    assert "--nthreads 3" in out and "--resources measure=1" in out
    assert "--preload measure.cluster_worker" in out
    assert main(["worker", "tcp://10.0.0.1:8786", "--no-measure", "--print-command"]) == 0
    assert "--resources" not in capsys.readouterr().out


def test_ansor_worker_joins_the_cluster_as_a_measuring_worker(cluster):
    proc = subprocess.Popen([sys.executable, "-m", "ansor.cli", "worker", cluster.scheduler_address,
                             "--nthreads", "1", "--name", "ansor-cli-worker"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        with Client(cluster, set_as_default=False) as client:
            client.wait_for_workers(3, timeout=120)
            info = client.scheduler_info()["workers"]
            mine = [w for w in info.values() if w.get("name") == "ansor-cli-worker"]
            assert len(mine) == 1 and mine[0]["resources"] == {"measure": 1}
            assert mine[0]["nthreads"] == 1
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    # The preload said what the worker is, at start-up.
    assert "ansor worker on " in err and "measures" in err, err[-2000:]


def test_a_failed_runner_closes_the_builders_client(monkeypatch):
    """Any failure after the builder connected closes it: an open Dask client held the
    interpreter's exit for a minute."""
    import ansor.cli.cluster as cli_cluster

    closed = []

    class Builder:
        def __init__(self, address):
            pass

        def close(self):
            closed.append(True)

    def runner(address, **kw):
        raise RuntimeError("the runner broke")

    monkeypatch.setattr(cli_cluster, "DaskBuilder", Builder)
    monkeypatch.setattr(cli_cluster, "DaskRunner", runner)
    with pytest.raises(RuntimeError, match="the runner broke"):
        cli_cluster.open_cluster("tcp://127.0.0.1:1", "ansor tune")
    assert closed == [True]
