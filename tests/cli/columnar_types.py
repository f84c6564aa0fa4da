# Writes the type test's files into the current directory (issue 33):
#   types.parquet (row groups of 2 rows), types.arrow (Arrow IPC file) and
#   types.arrows (Arrow IPC stream) of one table with a column of every type;
#   types.csv, pyarrow's CSV export of the columns CSV carries;
#   extra.csv, id and the text PostgreSQL reads for each other column (lists,
#   structs, maps, durations, bytes), for the server's own cast of it;
#   columns.json, [name, PostgreSQL type, "csv" | "extra"] per column.
import datetime
import decimal
import json

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.feather as feather
import pyarrow.parquet as pq

N = 6  # rows; row 5 is all NULL but id

D = decimal.Decimal


def col(values, ty):
    return pa.array(values + [None] * (N - len(values)), ty)


cols = []  # (name, array, pg type, how)


def add(name, values, ty, pg, how="csv"):
    cols.append((name, col(values, ty), pg, how))


I8, I16, I32, I64 = 2**7, 2**15, 2**31, 2**63
add("i8", [-I8, I8 - 1, 0, -1, 7], pa.int8(), "smallint")
add("i16", [-I16, I16 - 1, 0, -1, 7], pa.int16(), "smallint")
add("i32", [-I32, I32 - 1, 0, -1, 7], pa.int32(), "integer")
add("i64", [-I64, I64 - 1, 0, -1, 7], pa.int64(), "bigint")
add("u8", [0, 255, 1, 2, 3], pa.uint8(), "smallint")
add("u16", [0, 65535, 1, 2, 3], pa.uint16(), "integer")
add("u32", [0, 2**32 - 1, 1, 2, 3], pa.uint32(), "bigint")
add("u64", [0, 2**64 - 1, 1, 2, 3], pa.uint64(), "numeric(20,0)")
add("i64_num", [-I64, I64 - 1, 0, 12345, 7], pa.int64(), "numeric")
add("i32_f8", [-I32, I32 - 1, 0, 3, 7], pa.int32(), "double precision")
add("f32", [0.1, float("nan"), float("inf"), float("-inf"), 3.4028234663852886e38], pa.float32(), "real")
add("f64", [0.1, float("nan"), float("-inf"), 1.7976931348623157e308, 5e-324], pa.float64(), "double precision")
add("f32_f8", [0.1, float("nan"), 1.5, -2.25, 1e-45], pa.float32(), "double precision")
add("f64_f4", [0.1, float("nan"), 1.5, 3.4e38, -1e-40], pa.float64(), "real")
add("f64_num", [0.1, 1.5, -2.25, 1e20, 123.456], pa.float64(), "numeric")
add("dec", [D("1.50"), D("-99999999.99"), D("0.00"), D("0.01"), D("12.30")], pa.decimal128(10, 2), "numeric(10,2)")
add("dec_round", [D("1.005"), D("-2.675"), D("0.125"), D("9.995"), D("0.000")], pa.decimal128(12, 3), "numeric(10,2)")
add("dec38", [D("12345678901234567890.123456789012345678"), D("-1"), D("0"), D("1e-18"), D("3.1")], pa.decimal128(38, 18), "numeric")
add("dec256", [D("-" + "9" * 60 + ".12345"), D("1"), D("0"), D("2"), D("3")], pa.decimal256(65, 5), "numeric")
add("b", [True, False, True, False, True], pa.bool_(), "boolean")
add("s", ["plain", "", "with,comma \"quote\"\nnewline", "tab\there", "ünïcödé"], pa.string(), "text")
add("ls", ["a", "bb", "", "x", "y"], pa.large_string(), "varchar(10)")
add("d32", [-719162, 0, 2932896, 10957, 19000], pa.date32(), "date")
add("d64", [0, 86_400_000, -86_400_000, 946_684_800_000, 1_700_000_000_000], pa.date64(), "date")
add("t32s", [0, 86399, 3661, 45296, 1], pa.time32("s"), "time")
add("t32ms", [0, 86_399_999, 3_661_001, 45_296_500, 1], pa.time32("ms"), "time")
add("t64us", [0, 86_399_999_999, 3_661_000_001, 45_296_500_000, 1], pa.time64("us"), "time")
add("t64ns", [0, 86_399_999_999_999, 3_661_000_000_500, 3_661_000_001_500, 1_499], pa.time64("ns"), "time")
add("t64ns_t0", [0, 500_000_000, 1_500_000_000, 86_399_600_000_000, 1_499], pa.time64("ns"), "time(0)")
MIN_US = -62135596800 * 10**6  # 0001-01-01
MAX_US = 253402300799 * 10**6 + 999_999  # 9999-12-31 23:59:59.999999
add("ts_s", [-62135596800, 253402300799, 0, -1, 1_700_000_000], pa.timestamp("s"), "timestamp")
add("ts_ms", [-62135596800_000, 253402300799_999, 0, -1, 1_700_000_000_123], pa.timestamp("ms"), "timestamp")
add("ts_us", [MIN_US, MAX_US, 0, -1, 1_700_000_000_123_456], pa.timestamp("us"), "timestamp")
add("ts_ns", [-2**63 + 1, 2**63 - 1, 0, -1, 1_700_000_000_123_456_789], pa.timestamp("ns"), "timestamp")
add("ts_ns_half", [500, 1_500, 2_500, -500, 1_700_000_000_999_999_500], pa.timestamp("ns"), "timestamp")
add("ts_ns_t0", [500_000_000, 1_500_000_000, 2_500_000_000, -500_000_000, 1_700_000_000_999_999_500], pa.timestamp("ns"), "timestamp(0)")
add("tstz_s", [-62135596800, 253402300799, 0, -1, 1_700_000_000], pa.timestamp("s", tz="UTC"), "timestamptz")
add("tstz_us", [MIN_US, MAX_US, 0, -1, 1_700_000_000_123_456], pa.timestamp("us", tz="UTC"), "timestamptz")
add("tstz_ns", [-2**63 + 1, 2**63 - 1, 0, -1, 1_700_000_000_123_456_789], pa.timestamp("ns", tz="UTC"), "timestamptz")
add("tstz_ny", [0, 1_700_000_000_123, -1, 1_710_054_000_000, 1_699_164_000_000], pa.timestamp("ms", tz="America/New_York"), "timestamptz")
add("tstz_ts", [0, 1_700_000_000_123_456, -1, 1, 2], pa.timestamp("us", tz="UTC"), "timestamp")
add("ts_tstz", [0, 1_700_000_000_123_456, 1_710_054_000_000_000, 1_699_164_000_000_000, 2], pa.timestamp("us"), "timestamptz")
add("dict", ["a", "b", "a", "", "c"], pa.dictionary(pa.int32(), pa.string()), "text")
add("dict_i", [1, 2, 1, 3, 2], pa.dictionary(pa.int8(), pa.int64()), "bigint")


# Columns CSV cannot carry: the text PostgreSQL reads for each value.
def secs(n, per):
    sign = "-" if n < 0 else ""
    n = abs(n)
    digits = len(str(per)) - 1
    frac = f".{n % per:0{digits}d}" if digits else ""
    return f"{sign}{n // per}{frac} seconds"


extra = []  # (name, array, pg type, texts)


def add_extra(name, values, ty, pg, texts):
    extra.append((name, col(values, ty), pg, texts + [None] * (N - len(texts))))


add_extra("dur_s", [1, -86401, 0, 2**40, 7], pa.duration("s"), "interval",
          [secs(v, 1) for v in [1, -86401, 0, 2**40, 7]])
add_extra("dur_ms", [1, -1500, 0, 86_400_001, 7], pa.duration("ms"), "interval",
          [secs(v, 1000) for v in [1, -1500, 0, 86_400_001, 7]])
add_extra("dur_us", [1, -1_500_000, 0, 2**62, 7], pa.duration("us"), "interval",
          [secs(v, 10**6) for v in [1, -1_500_000, 0, 2**62, 7]])
add_extra("dur_ns", [1_500, -1_500_000_001, 2_500, -500, 999], pa.duration("ns"), "interval",
          [secs(v, 10**9) for v in [1_500, -1_500_000_001, 2_500, -500, 999]])
add_extra("bin", [b"\x00\xff", b"", b"abc", b"\\", b"\n"], pa.binary(), "bytea",
          ["\\x00ff", "\\x", "\\x616263", "\\x5c", "\\x0a"])
add_extra("uuid", [bytes(range(16)), b"\xff" * 16, b"\x00" * 16, bytes(range(16, 32)), bytes(range(32, 48))],
          pa.binary(16), "uuid",
          ["00010203-0405-0607-0809-0a0b0c0d0e0f", "ffffffff-ffff-ffff-ffff-ffffffffffff", "00000000-0000-0000-0000-000000000000",
           "10111213-1415-1617-1819-1a1b1c1d1e1f", "20212223-2425-2627-2829-2a2b2c2d2e2f"])
add_extra("li", [[1, 2, 3], [], [None, -1], [2**62], [0]], pa.list_(pa.int64()), "bigint[]",
          ["{1,2,3}", "{}", "{NULL,-1}", "{4611686018427387904}", "{0}"])
add_extra("lls", [[["a", "b"], ["c", None]], [["x,y"]], [], [["\"q\""]], [["", " "]]], pa.list_(pa.list_(pa.string())), "text[]",
          ['{{a,b},{c,NULL}}', '{{"x,y"}}', "{}", '{{"\\"q\\""}}', '{{""," "}}'])
add_extra("lf", [[0.5, float("nan")], [float("inf")], [], [1e300], [None]], pa.large_list(pa.float64()), "double precision[]",
          ["{0.5,NaN}", "{Infinity}", "{}", "{1e300}", "{NULL}"])
add_extra("lts", [[0, 1_700_000_000_123_456], [], [None], [-1], [1]], pa.list_(pa.timestamp("us", tz="UTC")), "timestamptz[]",
          ['{"1970-01-01 00:00:00+00","2023-11-14 22:13:20.123456+00"}', "{}", "{NULL}", '{"1969-12-31 23:59:59.999999+00"}', '{"1970-01-01 00:00:00.000001+00"}'])
add_extra("st", [{"a": 1, "b": "x"}, {"a": None, "b": "y\"z"}, {"a": -5, "b": None}, {"a": 0, "b": ""}, {"a": 2**40, "b": "é"}],
          pa.struct([("a", pa.int64()), ("b", pa.string())]), "jsonb",
          ['{"a": 1, "b": "x"}', '{"a": null, "b": "y\\"z"}', '{"a": -5, "b": null}', '{"a": 0, "b": ""}', '{"a": 1099511627776, "b": "é"}'])
add_extra("mp", [[("k", 1)], [], [("a", None), ("b", 2)], [("x y", -1)], [("z", 0)]], pa.map_(pa.string(), pa.int32()), "jsonb",
          ['{"k": 1}', "{}", '{"a": null, "b": 2}', '{"x y": -1}', '{"z": 0}'])
add_extra("st_nested", [{"l": [1, 2], "t": 0}, {"l": [], "t": 1_500}, {"l": None, "t": -1}, {"l": [3], "t": None}, {"l": [0], "t": 0}],
          pa.struct([("l", pa.list_(pa.int32())), ("t", pa.timestamp("ms", tz="UTC"))]), "json",
          ['{"l":[1,2],"t":"1970-01-01T00:00:00+00:00"}', '{"l":[],"t":"1970-01-01T00:00:01.5+00:00"}',
           '{"l":null,"t":"1969-12-31T23:59:59.999+00:00"}', '{"l":[3],"t":null}', '{"l":[0],"t":"1970-01-01T00:00:00+00:00"}'])

ids = pa.array(range(1, N + 1), pa.int32())
table = pa.table([ids] + [c[1] for c in cols] + [e[1] for e in extra], names=["id"] + [c[0] for c in cols] + [e[0] for e in extra])
pq.write_table(table, "types.parquet", row_group_size=2)
feather.write_feather(table, "types.arrow", compression="uncompressed")
with pa.OSFile("types.arrows", "wb") as sink:
    with pa.ipc.new_stream(sink, table.schema) as w:
        for b in table.to_batches(max_chunksize=4):
            w.write_batch(b)
pcsv.write_csv(table.select(["id"] + [c[0] for c in cols]), "types.csv")
with open("extra.csv", "w", encoding="utf-8") as f:
    w = __import__("csv").writer(f, lineterminator="\n")
    for i in range(N):
        w.writerow([i + 1] + [("" if e[3][i] is None else e[3][i]) for e in extra])
with open("columns.json", "w") as f:
    json.dump([[c[0], c[2], "csv"] for c in cols] + [[e[0], e[2], "extra"] for e in extra], f)
