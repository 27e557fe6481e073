"""The record line format and its writer: encoding, strict parsing, skipped lines, durability.

Parsing is strict (every field checked, JSON only), so a line from a bad disk, a killed writer or
a hostile file is rejected with a warning naming its line, and the rest of the file still loads.
The writer is tested against SIGKILL at a random moment from a separate process.
"""
from __future__ import annotations

import dataclasses
import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
import warnings

import pytest

from ansor.search_task import SearchTask
from measure.measure import MAX_FLOAT, MeasureErrorNo, MeasureInput, MeasureResult
from measure.record import (MAX_ERROR_MSG, RECORD_VERSION, RecordFormatError, RecordToFile,
                            RecordWarning, append_durably, decode_line, encode_record,
                            iter_lines, target_summary, truncate_msg)
from measure.host import clean_host, is_valid_host, this_host
from measure.target import toolchain_identity

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def task() -> SearchTask:
    return SearchTask(func="matmul", args=(17, 7, 9))


@pytest.fixture(scope="module")
def state(task):
    return task.compute_dag.init_state().split("matmul", "i", [4]).parallel("matmul", 0)


def _ok(t: float = 1e-3, ts: float = 1_700_000_000.25) -> MeasureResult:
    return MeasureResult((t, t * 1.1), MeasureErrorNo.NO_ERROR, "", 0.5, ts)


def test_line_layout_and_round_trip(task, state):
    line = encode_record(MeasureInput(task, state), _ok())
    assert "\n" not in line
    obj = json.loads(line)
    assert obj["v"] == RECORD_VERSION
    assert obj["input"]["workload_key"] == task.workload_key
    assert obj["input"]["task"] == {"workload": "matmul", "args": [17, 7, 9]}
    assert obj["input"]["steps"] == [["SP", 2, 0, 17, [4], True], ["AN", 2, 0, "parallel"]]
    assert obj["input"]["target"]["key"] == toolchain_identity()["key"]
    rec = decode_line(line, 7)
    assert rec.workload_key == task.workload_key and rec.lineno == 7
    assert rec.steps == state.steps
    assert rec.result == _ok()
    assert rec.flop == task.flop_count
    assert rec.target_key == toolchain_identity()["key"] and rec.is_valid


def test_the_host_that_timed_a_record_round_trips_and_old_records_have_none(task, state):
    line = encode_record(MeasureInput(task, state), dataclasses.replace(_ok(), host="node-7.lab"))
    obj = json.loads(line)
    assert obj["result"]["host"] == "node-7.lab"
    assert decode_line(line).result.host == "node-7.lab"
    # A line written before hosts were recorded (no field) still loads, with no host.
    del obj["result"]["host"]
    old = decode_line(json.dumps(obj))
    assert old.result.host == "" and old.result == _ok() and old.is_valid
    # No host, no field: such a line reads the same in a reader that predates the field.
    assert "host" not in json.loads(encode_record(MeasureInput(task, state), _ok()))["result"]
    # A name that breaks the rule never reaches a log, whoever made the result.
    with pytest.raises(ValueError, match="not a host name"):
        encode_record(MeasureInput(task, state), dataclasses.replace(_ok(), host="a\nb"))


def test_host_names_are_cleaned_to_the_rule():
    assert clean_host("node-7.lab") == "node-7.lab" and is_valid_host("[fe80::1%eth0]")
    assert clean_host("n\u00f6de 7\n") == "n_de_7_" and is_valid_host(clean_host("n\u00f6de 7\n"))
    assert clean_host("") == clean_host(None) == "unknown-host"
    assert len(clean_host("x" * 1000)) == 253 and is_valid_host(this_host())


def test_target_summary_identifies_the_toolchain_in_little_space():
    s = target_summary()
    ident = toolchain_identity()
    for k in ("key", "llvmlite", "llvm", "triple", "cpu"):
        assert s[k] == ident[k]
    assert "features" not in s and len(s["features_sha"]) == 12
    assert len(json.dumps(s)) < 250


def test_error_messages_are_truncated_keeping_head_and_tail(task, state):
    msg = "HEAD" + "x" * 5000 + "TAIL"
    t = truncate_msg(msg)
    assert len(t) <= MAX_ERROR_MSG + 10 and t.startswith("HEAD") and t.endswith("TAIL")
    res = MeasureResult((MAX_FLOAT,), MeasureErrorNo.COMPILE_HOST, msg, 1.0, 5.0)
    rec = decode_line(encode_record(MeasureInput(task, state), res))
    assert rec.result.error_msg == t and rec.result.error_no == MeasureErrorNo.COMPILE_HOST
    assert not rec.is_valid


def test_non_finite_costs_are_written_as_max_float(task, state):
    res = MeasureResult((float("inf"), float("nan")), MeasureErrorNo.NO_ERROR, "", 0.0, 1.0)
    line = encode_record(MeasureInput(task, state), res)
    assert "Infinity" not in line and "NaN" not in line
    assert decode_line(line).result.costs == (MAX_FLOAT, MAX_FLOAT)


def _line(task, state) -> dict:
    return json.loads(encode_record(MeasureInput(task, state), _ok()))


@pytest.mark.parametrize("mutate, message", [
    (lambda o: o.update(v=99), "version"),
    (lambda o: o.pop("result"), "result must be an object"),
    (lambda o: o["input"].pop("workload_key"), "workload_key"),
    (lambda o: o["input"].update(task="matmul"), "input.task"),
    (lambda o: o["input"].update(steps={"SP": 1}), "steps must be a list"),
    (lambda o: o["input"]["steps"].append(["XX", 1, 2]), "unknown step"),
    (lambda o: o["input"]["steps"].append(["SP", 2, 0, 17]), "expected 5 or 6 fields"),
    (lambda o: o["input"]["steps"].append(["SP", {"a": 1}, 0, 17, [4], True]), "bad value|field"),
    (lambda o: o["input"]["steps"].append(["SP", 2, 0, 17, [[4]], True]), "field lengths"),
    (lambda o: o["input"]["steps"].append(["SP", 2, 0, 17, [4], 1]), "field inner_to_outer"),
    (lambda o: o["input"]["steps"].append(["CA", "2", 3, 0]), "field stage_id"),
    (lambda o: o["input"]["steps"].append(["AN", True, 0, "parallel"]), "field stage_id"),
    (lambda o: o["result"].update(costs="fast"), "costs must be a list"),
    (lambda o: o["result"].update(costs=["1.0"]), "must be a number"),
    (lambda o: o["result"].update(error_no=True), "error code"),
    (lambda o: o["result"].update(error_no=42), "error code"),
    (lambda o: o["result"].update(error_msg=["x"]), "error_msg"),
    (lambda o: o["input"].update(flop="many"), "flop"),
    (lambda o: o["result"].update(host="node 7"), "result.host 'node 7' is not a host name"),
    (lambda o: o["result"].update(host="evil\x1b[2J"), "is not a host name"),
    (lambda o: o["result"].update(host="n" * 254), "is not a host name"),
    (lambda o: o["result"].update(host=["node"]), "result.host must be a string"),
])
def test_invalid_records_are_rejected_with_a_reason(task, state, mutate, message):
    obj = _line(task, state)
    mutate(obj)
    with pytest.raises(RecordFormatError, match=message):
        decode_line(json.dumps(obj))


@pytest.mark.parametrize("text, message", [
    ("not json at all", "not JSON"),
    ('{"v": 1, "input": ', "not JSON"),
    ("[1, 2, 3]", "record must be an object"),
    ('{"v": 1, "result": {"costs": [NaN]}}', "non-JSON number"),
    ("[" * 100000 + "]" * 100000, "not JSON"),
    ("\x80\x04\x95pickle", "not JSON"),
])
def test_garbage_is_rejected(text, message):
    with pytest.raises(RecordFormatError, match=message):
        decode_line(text.encode("latin-1") if text.startswith("\x80") else text)


def _write(path, lines: list[str | bytes], newline_at_end: bool = True) -> None:
    with open(path, "wb") as f:
        for k, line in enumerate(lines):
            f.write(line if isinstance(line, bytes) else line.encode())
            if k < len(lines) - 1 or newline_at_end:
                f.write(b"\n")


def test_iter_lines_skips_bad_lines_with_a_warning_naming_the_line(tmp_path, task, state):
    good = encode_record(MeasureInput(task, state), _ok())
    path = tmp_path / "log.json"
    _write(path, [good, "garbage", "", good, good.replace('"SP"', '"ZZ"'), good, good[:57]],
           newline_at_end=False)
    with pytest.warns(RecordWarning) as caught:
        lines = list(iter_lines(path))
    assert [r.lineno for r in lines] == [1, 4, 6]
    msgs = [str(w.message) for w in caught]
    assert len(msgs) == 3
    assert f"{path}:2:" in msgs[0] and "not JSON" in msgs[0]
    assert f"{path}:5:" in msgs[1] and "unknown step" in msgs[1]
    assert f"{path}:7:" in msgs[2] and "truncated last line" in msgs[2]


def test_a_complete_last_line_without_newline_is_kept(tmp_path, task, state):
    good = encode_record(MeasureInput(task, state), _ok())
    path = tmp_path / "log.json"
    _write(path, [good, good], newline_at_end=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(list(iter_lines(path))) == 2


def test_warnings_are_capped_per_file(tmp_path):
    path = tmp_path / "log.json"
    _write(path, ["junk"] * 100)
    with pytest.warns(RecordWarning) as caught:
        assert list(iter_lines(path)) == []
    assert len(caught) == 21
    assert "80 more record line(s) skipped (100 in all)" in str(caught[-1].message)


def test_record_to_file_appends_batches(tmp_path, task, state):
    path = tmp_path / "sub" / "log.json"
    cb = RecordToFile(path)
    cb([MeasureInput(task, state)] * 3, [_ok(1e-3), _ok(2e-3), _ok(3e-3)])
    cb([MeasureInput(task, state)], [_ok(4e-3)])
    cb([], [])
    assert cb.n_written == 4
    lines = list(iter_lines(path))
    assert [r.result.costs[0] for r in lines] == [1e-3, 2e-3, 3e-3, 4e-3]
    with pytest.raises(ValueError, match="2 inputs but 1 results"):
        cb([MeasureInput(task, state)] * 2, [_ok()])


def test_appending_after_a_partial_line_does_not_lose_the_next_record(tmp_path, task, state):
    good = encode_record(MeasureInput(task, state), _ok())
    path = tmp_path / "log.json"
    _write(path, [good, good[:40]], newline_at_end=False)  # a writer killed mid-line
    RecordToFile(path)([MeasureInput(task, state)], [_ok(5e-3)])
    with pytest.warns(RecordWarning, match=":2: .*not JSON"):
        lines = list(iter_lines(path))
    assert [r.lineno for r in lines] == [1, 3] and lines[1].result.costs[0] == 5e-3


def test_append_durably_fsyncs(tmp_path, monkeypatch):
    synced = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd)))
    append_durably(str(tmp_path / "x.json"), b"{}\n")
    assert synced


# ---- durability under SIGKILL ------------------------------------------------------------------

_WRITER = textwrap.dedent("""
    import sys
    from ansor.search_task import SearchTask
    from measure.measure import MeasureInput, MeasureResult
    from measure.record import RecordToFile

    path, batch = sys.argv[1], int(sys.argv[2])
    task = SearchTask(func="matmul", args=(17, 7, 9))
    state = task.compute_dag.init_state().split("matmul", "i", [4]).parallel("matmul", 0)
    cb = RecordToFile(path)
    k = 0
    while True:
        cb([MeasureInput(task, state)] * batch,
           [MeasureResult((1e-3 + k * 1e-6,), 0, "", 0.5) for _ in range(batch)])
        k += 1
        print(k, flush=True)  # this batch is on disk
""")


@pytest.mark.parametrize("seed", [1, 2])
def test_sigkill_at_a_random_moment_loses_at_most_the_batch_being_written(tmp_path, seed, state):
    rng = random.Random(seed)
    batch = 7
    path = tmp_path / "log.json"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path), str(batch)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        want = rng.randint(3, 40)
        acked = 0
        while acked < want:
            out = proc.stdout.readline()
            assert out, f"writer died: {proc.stderr.read()}"
            acked = int(out)
        time.sleep(rng.uniform(0, 0.005))
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate(timeout=30)
        acked = max([acked] + [int(x) for x in rest.split()])
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lines = list(iter_lines(path))
    # Every batch acknowledged is complete; at most the one in flight is (partly) there too.
    assert acked * batch <= len(lines) <= (acked + 1) * batch
    assert len(caught) <= 1  # at most one partial last line
    with open(path, "rb") as f:
        raw = f.read().split(b"\n")
    assert all(decode_line(r) for r in raw[:-1] if r)  # every complete line is intact
    assert all(r.steps == state.steps for r in lines)
    costs = [r.result.costs[0] for r in lines]
    assert costs == sorted(costs)
