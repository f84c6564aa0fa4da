"""chute from Python against a real server (issue 33). The server's URL is in
CHUTE_TEST_URL; tests/cli/python.rs starts the server, builds the wheel into
the venv and runs these with pytest."""

import datetime
import os

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import chute

URL = os.environ["CHUTE_TEST_URL"]
START = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)


def rows(n, first=0):
    """n readings 10 s apart from 2024-01-01 00:00 UTC: hours 00 to n/360."""
    return pa.table({
        "time": pa.array([START + datetime.timedelta(seconds=10 * (first + i)) for i in range(n)], pa.timestamp("us", tz="UTC")),
        "id": pa.array(range(first, first + n), pa.int64()),
        "value": pa.array([i * 0.5 for i in range(n)], pa.float64()),
    })


def sql(query):
    """A query's result as psql prints it (unaligned, tuples only)."""
    import subprocess

    out = subprocess.run(["psql", URL, "-XAtqc", query], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def test_a_pyarrow_table_into_an_hourly_partitioned_table_then_a_rerun_loads_nothing():
    chute.partition_create(URL, "pa_readings", key="time", interval="1h",
                           columns="time timestamptz not null, id bigint, value float8")
    data = rows(1080)  # three hours
    report = chute.load(URL, "pa_readings", data, load_id="pa1", progress=False)
    assert isinstance(report, chute.Report)
    assert report.rows_loaded == 1080 and report.rows_rejected == 0
    assert report.load_id == "pa1"
    assert sql("SELECT count(*), count(DISTINCT id), count(DISTINCT tableoid) FROM pa_readings") == "1080|1080|3"
    assert sql("SELECT count(*) FROM ONLY pa_readings") == "0"
    again = chute.load(URL, "pa_readings", data, load_id="pa1", progress=False)
    assert again.rows_loaded == 0 and again.rows_skipped == 1080
    assert sql("SELECT count(*) FROM pa_readings") == "1080"


def test_a_record_batch_reader_and_create():
    data = rows(720, first=5000)
    reader = pa.RecordBatchReader.from_batches(data.schema, data.to_batches(max_chunksize=100))
    report = chute.load(URL, "rbr", reader, create=True, key="time", interval="1h", progress=False)
    assert report.rows_loaded == 720
    assert sql("SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'rbr'::regclass AND attname = 'time'") == "timestamp with time zone"
    assert sql("SELECT count(*) FROM pg_partition_tree('rbr') WHERE isleaf AND level > 0") != "0"


def test_a_polars_dataframe():
    df = pl.from_arrow(rows(500))
    chute.partition_create(URL, "pl_readings", key="time", interval="1h",
                           columns="time timestamptz not null, id bigint, value float8")
    report = chute.load(URL, "pl_readings", df, progress=False)
    assert report.rows_loaded == 500
    assert sql("SELECT sum(id) FROM pl_readings") == str(sum(range(500)))


def test_a_pandas_dataframe():
    df = rows(400).to_pandas()
    assert isinstance(df, pd.DataFrame)
    chute.partition_create(URL, "pd_readings", key="time", interval="1h",
                           columns="time timestamptz not null, id bigint, value float8")
    report = chute.load(URL, "pd_readings", df, progress=False)
    assert report.rows_loaded == 400
    assert sql("SELECT min(time) = '2024-01-01 00:00:00+00' AND max(id) = 399 FROM pd_readings") == "t"


def test_a_bad_value_raises_with_its_sqlstate_and_the_reject_file(tmp_path):
    sql("CREATE TABLE small (id int, v smallint)")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int32()), "v": pa.array([1, 40000, 3], pa.int32())})
    rejects = tmp_path / "small.rejects"
    with pytest.raises(chute.RejectedRows) as e:
        chute.load(URL, "small", data, reject_file=str(rejects), progress=False)
    assert e.value.sqlstate == "22003"
    assert e.value.reject_file == str(rejects)
    assert e.value.report.rows_loaded == 2 and e.value.report.rows_rejected == 1
    assert "out of range for type smallint" in rejects.read_text()
    assert isinstance(e.value, chute.Error)


def test_errors_carry_the_sqlstate_and_keywords_are_named_as_python_writes_them():
    with pytest.raises(chute.Error) as e:
        chute.load(URL, "no_such_table", rows(1), progress=False)
    assert "no_such_table" in str(e.value)
    sql("CREATE TABLE typed (id int, value integer)")
    with pytest.raises(chute.Error) as e:
        chute.load(URL, "typed", pa.table({"id": pa.array([1], pa.int32()), "value": pa.array([0.5])}), progress=False)
    assert 'column "value" is integer' in str(e.value)
    with pytest.raises(chute.Error) as e:
        chute.load(URL, "typed", rows(1), progress=False)
    assert "columns=" in str(e.value), str(e.value)
    with pytest.raises(chute.Error) as e:
        chute.load(URL, "typed", rows(1), columns=["id"], on_conflict="update", progress=False)
    assert "no primary key and no unique index" in str(e.value), str(e.value)
    with pytest.raises(ValueError):
        chute.load(URL, "typed", rows(1), on_conflict="replace", progress=False)
    with pytest.raises(ValueError):
        chute.load(URL, "typed", rows(1), update_if="true", progress=False)
    with pytest.raises(TypeError):
        chute.load(URL, "typed", [1, 2, 3], progress=False)


def test_load_file_of_a_parquet_file(tmp_path):
    import pyarrow.parquet as pq

    path = tmp_path / "r.parquet"
    pq.write_table(rows(300, first=9000), path, row_group_size=100)
    report = chute.load_file(URL, "lf", str(path), create=True, key="time", interval="1h", progress=False)
    assert report.rows_loaded == 300
    again = chute.load_file(URL, "lf", str(path), progress=False)
    assert again.rows_loaded == 0


CTRL_C = r'''
import datetime, sys, time
import pyarrow as pa
import chute
url = sys.argv[1]
start = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
schema = pa.schema([("time", pa.timestamp("us", tz="UTC")), ("id", pa.int64())])
def batches():
    for b in range(200):
        ids = list(range(b * 1000, (b + 1) * 1000))
        yield pa.record_batch([pa.array([start + datetime.timedelta(seconds=i) for i in ids], schema.field("time").type), pa.array(ids, pa.int64())], schema=schema)
        if len(sys.argv) > 2:
            time.sleep(0.05)  # a slow producer: the load is still running when Ctrl-C comes
try:
    r = chute.load(url, "interrupted", pa.RecordBatchReader.from_batches(schema, batches()), load_id="ctrl-c", progress=False)
    print("DONE", r.rows_loaded, r.rows_skipped)
except KeyboardInterrupt:
    print("INTERRUPTED")
'''


def test_ctrl_c_stops_the_load_cleanly_and_the_same_call_loads_the_rest(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    chute.partition_create(URL, "interrupted", key="time", interval="1h", columns="time timestamptz not null, id bigint")
    script = tmp_path / "ctrl_c.py"
    script.write_text(CTRL_C)
    child = subprocess.Popen([sys.executable, str(script), URL, "slow"], stdout=subprocess.PIPE, text=True)
    began = time.monotonic()
    while sql("SELECT count(*) FROM interrupted") == "0":
        assert child.poll() is None, "the load ended before any row was committed"
        assert time.monotonic() - began < 60, "no row committed in 60 s"
        time.sleep(0.05)
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=60)
    assert "INTERRUPTED" in out, out
    partial = int(sql("SELECT count(*) FROM interrupted"))
    assert 0 < partial < 200_000
    out = subprocess.run([sys.executable, str(script), URL], capture_output=True, text=True, timeout=120).stdout
    assert out.startswith("DONE"), out
    assert sql("SELECT count(*), count(DISTINCT id) FROM interrupted") == "200000|200000"


def test_the_report_repr_shows_python_values():
    chute.partition_create(URL, "repr_readings", key="time", interval="1h",
                           columns="time timestamptz not null, id bigint, value float8")
    named = chute.load(URL, "repr_readings", rows(10), load_id="repr-1", progress=False)
    assert "table='public.repr_readings'" in repr(named) and "load_id='repr-1'" in repr(named), repr(named)
    unnamed = chute.load(URL, "repr_readings", rows(10, first=10), progress=False)
    assert "load_id=None" in repr(unnamed), repr(unnamed)
    assert "Some(" not in repr(named) + repr(unnamed)


def test_a_filtered_pandas_frame_loads_without_its_index():
    df = rows(100).to_pandas()
    # Its index (0, 1, 3, 4, 6, …: not a range) travels as a column __index_level_0__.
    filtered = df[df.id % 3 != 0]
    assert "__index_level_0__" in pa.Table.from_pandas(filtered).schema.names
    chute.partition_create(URL, "pd_filtered", key="time", interval="1h",
                           columns="time timestamptz not null, id bigint, value float8")
    assert chute.load(URL, "pd_filtered", filtered, progress=False).rows_loaded == 66
    assert sql("SELECT count(*), min(id), max(id) FROM pd_filtered") == "66|1|98"
    # A table with a column of the index's name gets it.
    sql("CREATE TABLE pd_keep (time timestamptz, id bigint, value float8, __index_level_0__ bigint)")
    assert chute.load(URL, "pd_keep", filtered, progress=False).rows_loaded == 66
    assert sql("SELECT count(*) FROM pd_keep WHERE __index_level_0__ = id") == "66"
    # Through a pyarrow table of the frame, its index the unnamed level and "value":
    # the table has a column "value", which is loaded, and none for the other.
    named = pa.Table.from_pandas(filtered.set_index("value", append=True))
    assert chute.load(URL, "pd_filtered", named, progress=False).rows_loaded == 66
    assert sql("SELECT count(*), count(value), sum(value) = 2 * (SELECT sum(value) FROM pd_keep) FROM pd_filtered") == "132|132|t"
    # create=True does not make the index a column.
    assert chute.load(URL, "pd_made", filtered, create=True, progress=False).rows_loaded == 66
    assert sql("SELECT count(*) FROM pg_attribute WHERE attrelid = 'pd_made'::regclass AND attname LIKE '__index%'") == "0"


def test_upserts_nothing_and_update():
    chute.partition_create(URL, "up_readings", key="time", interval="1h",
                           columns="time timestamptz not null, id bigint not null, value float8, primary key (id, time)")
    first = chute.load(URL, "up_readings", rows(100), progress=False)
    assert first.rows_loaded == 100 and first.rows_updated is None
    # The same rows again: a plain load rejects them (23505), an upsert leaves them.
    same = chute.load(URL, "up_readings", rows(100), on_conflict="nothing", progress=False)
    assert (same.rows_inserted, same.rows_updated, same.rows_unchanged) == (0, 0, 100), repr(same)
    changed = rows(100).set_column(2, "value", pa.array([1000.0 + i for i in range(100)], pa.float64()))
    kept = chute.load(URL, "up_readings", changed, on_conflict="nothing", conflict_key=["id", "time"], progress=False)
    assert kept.rows_unchanged == 100
    assert sql("SELECT max(value) FROM up_readings") == "49.5"
    # update, only where the incoming value is larger and only for ids below 10.
    up = chute.load(URL, "up_readings", changed.slice(0, 10), on_conflict="update", update_columns=["value"],
                    update_if="excluded.value > t.value", progress=False)
    assert (up.rows_inserted, up.rows_updated, up.rows_unchanged) == (0, 10, 0), repr(up)
    assert sql("SELECT count(*) FROM up_readings WHERE value >= 1000") == "10"
    more = chute.load(URL, "up_readings", rows(20, first=95), on_conflict="update", progress=False)
    assert more.rows_inserted == 15 and more.rows_updated + more.rows_unchanged == 5, repr(more)
    assert sql("SELECT count(*) FROM up_readings") == "115"


def closed_port_url():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"


def test_retry_for_bounds_the_wait_for_an_unreachable_server():
    import time

    began = time.monotonic()
    with pytest.raises(chute.Error) as e:
        chute.load(closed_port_url(), "anything", rows(1), retry_for=1, progress=False)
    assert time.monotonic() - began < 10, time.monotonic() - began
    assert "127.0.0.1" in str(e.value), str(e.value)
    with pytest.raises(ValueError):
        chute.load(URL, "anything", rows(1), retry_for=-1, progress=False)


WAITING = r"""
import sys
import pyarrow as pa
import chute
print("CALLING", flush=True)
try:
    chute.load(sys.argv[1], "t", pa.table({"id": [1]}), progress=True)
    print("LOADED")
except KeyboardInterrupt:
    print("INTERRUPTED")
except chute.Error as e:
    print("ERROR", e)
"""


def test_ctrl_c_while_waiting_for_an_unreachable_server_raises_keyboard_interrupt_at_once(tmp_path):
    import signal
    import subprocess
    import sys
    import threading
    import time

    script = tmp_path / "waiting.py"
    script.write_text(WAITING)
    child = subprocess.Popen([sys.executable, str(script), closed_port_url()], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # A child that never says it is waiting is killed after a minute, which ends the reads below.
    guard = threading.Timer(60, child.kill)
    guard.start()
    try:
        assert child.stdout.readline().strip() == "CALLING"
        # Once the load says it is retrying its connection (retry_for= is 300 s by default), not
        # after a fixed time: the call's imports alone may take seconds on a busy machine.
        waiting = child.stderr.readline()
        assert "retrying for up to" in waiting, waiting
        assert child.poll() is None
        child.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        out, err = child.communicate(timeout=30)
    finally:
        guard.cancel()
    assert time.monotonic() - signalled < 3, (time.monotonic() - signalled, out, err)
    assert "INTERRUPTED" in out, (out, err)


def test_load_file_refuses_a_compressed_parquet_file_and_jsonl_keys_the_table_lacks(tmp_path):
    with pytest.raises(ValueError) as e:
        chute.load_file(URL, "anything", str(tmp_path / "x.parquet.gz"), progress=False)
    assert "decompress it first" in str(e.value), str(e.value)
    sql("CREATE TABLE js (id int, v text)")
    path = tmp_path / "js.jsonl"
    path.write_text('{"id": 1, "v": "a"}\n{"id": 2, "vv": "typo"}\n')
    with pytest.raises(chute.RejectedRows) as e:
        chute.load_file(URL, "js", str(path), format="jsonl", reject_file=str(tmp_path / "js.rejects"), progress=False)
    assert e.value.report.rows_loaded == 1
    assert 'unknown column "vv"' in (tmp_path / "js.rejects").read_text()
    assert "ignore_unknown=" in (tmp_path / "js.rejects").read_text()
    report = chute.load_file(URL, "js", str(path), format="jsonl", ignore_unknown=True, load_id="js-2", progress=False)
    assert report.rows_loaded == 2
