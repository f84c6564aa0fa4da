"""Type stubs of the chute package (the extension module chute._chute)."""

from os import PathLike
from typing import Any, Optional, Sequence, Union

__all__ = ["Error", "RejectedRows", "Report", "load", "load_file", "partition_create"]

class Error(Exception):
    """A load or partition call failed."""

    sqlstate: Optional[str]
    """The server's SQLSTATE (e.g. ``"42P01"``), when the failure has one."""

class RejectedRows(Error):
    """The load finished, but some rows were rejected (the others are committed)."""

    report: "Report"
    reject_file: Optional[str]
    """Where the rejected rows are, each with its row number and reason."""
    sqlstate: Optional[str]
    """The first rejected row's SQLSTATE (e.g. ``"22003"`` for a number out of range)."""

class Report:
    """What a load did."""

    table: str
    rows_loaded: int
    rows_rejected: int
    rows_skipped: int
    """Rows an earlier run of the same load had committed (a resumed load skips them)."""
    partitions_created: int
    seconds: float
    rows_per_second: float
    reject_file: Optional[str]
    load_id: Optional[str]
    """The journal's name for the load: the same call with it loads only what is left."""
    interrupted: bool
    rows_inserted: Optional[int]
    """An upsert (``on_conflict=``): rows that were new; ``None`` for a plain load."""
    rows_updated: Optional[int]
    """An upsert: rows that overwrote one in the table; ``None`` for a plain load."""
    rows_unchanged: Optional[int]
    """An upsert: rows whose key was in the table and that changed nothing there; ``None`` for a plain load."""

def load(
    url: Optional[str],
    table: str,
    data: Any,
    *,
    load_id: Optional[str] = None,
    create: bool = False,
    key: Optional[str] = None,
    interval: Optional[str] = None,
    on_conflict: Optional[str] = None,
    conflict_key: Optional[Sequence[str]] = None,
    update_columns: Optional[Sequence[str]] = None,
    update_if: Optional[str] = None,
    workers: Optional[int] = None,
    columns: Optional[Sequence[str]] = None,
    reject_file: Optional[str] = None,
    memory_mb: Optional[int] = None,
    retry_for: float = 300.0,
    progress: bool = True,
) -> Report:
    """Load ``data`` into ``table`` and return the report.

    ``url``: a ``postgres://`` URL or a ``key=value`` string; ``None`` uses the
    ``PG*`` environment variables. ``data``: anything with
    ``__arrow_c_stream__`` (pyarrow Table or RecordBatchReader, polars
    DataFrame, pandas DataFrame). Its columns are matched to the table's by
    name (``columns`` loads a subset); a pandas index pyarrow kept as a
    column (``__index_level_0__`` of a filtered frame) is left out unless the
    table has a column of its name. ``load_id`` names the load in chute's
    journal: a data frame has no identity of its own, so only a load with a
    ``load_id`` is resumable, and the same call with it again loads 0 rows.
    ``create=True`` makes the table from the data's schema if it does not
    exist, partitioned by ``key`` every ``interval`` (``"1h"``, ``"1d"``) when
    both are given. ``on_conflict="nothing"`` keeps a row whose key is in
    the table already, ``"update"`` overwrites it (``update_columns``: which
    columns, default every loaded one not in the key; ``update_if``: only
    where this SQL over ``t`` and ``excluded`` holds); ``conflict_key``: the
    columns that identify a row (default: the primary key, or the one unique
    index), as ``chute load --on-conflict``. ``workers``: COPY connections
    (default: the number of cores). ``retry_for``: seconds to keep retrying
    an unreachable or restarting server. ``progress``: a line on stderr
    every two seconds.

    Raises :class:`Error` (with ``sqlstate``), :class:`RejectedRows`, or
    ``KeyboardInterrupt`` after a clean stop on Ctrl-C (also while waiting
    for the server; a second Ctrl-C raises it without waiting for batches in
    flight).
    """

def load_file(
    url: Optional[str],
    table: str,
    path: Union[str, "PathLike[str]"],
    *,
    format: Optional[str] = None,
    header: bool = False,
    ignore_unknown: bool = False,
    load_id: Optional[str] = None,
    create: bool = False,
    key: Optional[str] = None,
    interval: Optional[str] = None,
    on_conflict: Optional[str] = None,
    conflict_key: Optional[Sequence[str]] = None,
    update_columns: Optional[Sequence[str]] = None,
    update_if: Optional[str] = None,
    workers: Optional[int] = None,
    columns: Optional[Sequence[str]] = None,
    reject_file: Optional[str] = None,
    memory_mb: Optional[int] = None,
    retry_for: float = 300.0,
    progress: bool = True,
) -> Report:
    """Load a file into ``table``: Parquet or Arrow IPC (told by its name, or
    ``format="parquet"``/``"arrow"``), or CSV, text or JSON lines
    (``format="csv"``, the default otherwise, ``"text"``, ``"jsonl"``).
    A Parquet or Arrow file compressed whole (``x.parquet.gz``) is refused
    (``ValueError``): decompress it first. A JSON key the table has no
    column for rejects its line, unless ``ignore_unknown=True`` drops such
    keys. A file's load is resumable by itself (its path, size and
    modification time name it). The other arguments are those of
    :func:`load`."""

def partition_create(
    url: Optional[str],
    table: str,
    *,
    key: str,
    interval: str,
    columns: Optional[str] = None,
    like: Optional[str] = None,
    premake: int = 4,
    start: Optional[str] = None,
) -> int:
    """Partition ``table`` by ``key`` every ``interval``, as ``chute partition
    create`` does; a new table is defined by ``columns`` (``"time timestamptz
    not null, dev_id int"``) or ``like`` another table. Returns the number of
    partitions made."""
