//! The columnar door: Parquet files, Arrow IPC files and streams, and
//! Arrow record batches handed over in process (a data frame through the
//! Arrow C stream interface), loaded through chute's load engine
//! (`chute_engine`). The input in `input`, its files and streams in `files`, the source that
//! numbers their rows in `source`, the kind that writes binary COPY rows
//! straight from Arrow arrays in `kind`, and `--create`'s table from the
//! data's schema in `create`. The CLI and the Python package link it.

pub mod create;
mod files;
mod input;
mod kind;
mod source;

pub use files::{BatchStream, ColumnarInput};
pub use input::Columnar;
