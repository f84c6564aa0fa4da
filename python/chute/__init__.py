"""chute from Python: load Arrow-shaped data into partitioned PostgreSQL tables.

``chute.load(url, table, data)`` takes anything with the Arrow PyCapsule
stream interface (``__arrow_c_stream__``): a pyarrow Table or
RecordBatchReader, a polars DataFrame, a pandas DataFrame (through pyarrow).
Its record batches are read through Arrow's C stream interface without a
copy, encoded straight into binary COPY rows and routed to the table's leaf
partitions; partitions are made just in time. The GIL is released while the
load runs, and Ctrl-C stops it cleanly: what is committed stays, and the same
call with the same ``load_id`` loads the rest, every row once.

Errors raise :class:`chute.Error`, whose ``sqlstate`` is the server's
SQLSTATE when it has one; a load that rejected rows raises
:class:`chute.RejectedRows` with its ``report``, ``reject_file`` and the first
reject's ``sqlstate``.
"""

from ._chute import Error, RejectedRows, Report, load, load_file, partition_create

__all__ = ["Error", "RejectedRows", "Report", "load", "load_file", "partition_create"]
