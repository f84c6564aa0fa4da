"""The Python cells of scripts/bench-arrow: one way of loading Arrow-shaped
data into the benchmark's table, timed from the call to its commit.

    bench-arrow.py URL CELL PARQUET [ROWS]

CELL is one of:
  chute     chute.load(url, "bench", table) of a pyarrow Table
  adbc      ADBC's PostgreSQL driver, cursor.adbc_ingest("bench", table,
            mode="append") into the parent, then commit
  psycopg   psycopg 3, COPY bench FROM STDIN with copy.write_row per row
  to_sql    pandas DataFrame.to_sql("bench", engine, if_exists="append")
            through SQLAlchemy and psycopg 3 (INSERTs)

The Parquet file is read into memory first (its first ROWS rows when ROWS
is given); the clock covers only the load. Prints `rows seconds`.
"""
import sys
import time

import pyarrow.parquet as pq


def main():
    url, cell, path = sys.argv[1], sys.argv[2], sys.argv[3]
    table = pq.read_table(path)
    if len(sys.argv) > 4:
        table = table.slice(0, int(sys.argv[4]))
    rows = table.num_rows
    if cell == "chute":
        import chute

        began = time.perf_counter()
        report = chute.load(url, "bench", table, progress=False)
        took = time.perf_counter() - began
        assert report.rows_loaded == rows, report
    elif cell == "adbc":
        import adbc_driver_postgresql.dbapi as adbc

        with adbc.connect(url) as conn:
            began = time.perf_counter()
            with conn.cursor() as cur:
                cur.adbc_ingest("bench", table, mode="append")
            conn.commit()
            took = time.perf_counter() - began
    elif cell == "psycopg":
        import psycopg

        names = table.column_names
        with psycopg.connect(url) as conn:
            began = time.perf_counter()
            with conn.cursor() as cur:
                with cur.copy(f"COPY bench ({', '.join(names)}) FROM STDIN") as copy:
                    for batch in table.to_batches(65536):
                        columns = [c.to_pylist() for c in batch.columns]
                        for row in zip(*columns):
                            copy.write_row(row)
            conn.commit()
            took = time.perf_counter() - began
    elif cell == "to_sql":
        import sqlalchemy

        frame = table.to_pandas()
        engine = sqlalchemy.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
        began = time.perf_counter()
        frame.to_sql("bench", engine, if_exists="append", index=False, chunksize=10000)
        took = time.perf_counter() - began
        engine.dispose()
    else:
        sys.exit(f"bench-arrow.py: no cell {cell!r}")
    print(rows, f"{took:.3f}")


if __name__ == "__main__":
    main()
