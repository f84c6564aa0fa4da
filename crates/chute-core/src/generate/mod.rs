//! Deterministic data generators.
//!
//! Benchmarks, the demo and `chute gen` need the same data on every run and
//! every machine, produced faster than a server can ingest it, so generators
//! are seeded and use a small PRNG (SplitMix64) instead of a system source.
//!
//! There are two kinds, because chute has two kinds of input:
//!
//! - A [`Workload`] makes rows of one table, each addressable by its sequence
//!   number: row `seq` is a pure function of the parameters and `seq`, so the
//!   loader can split the sequence into ranges, encode them on several threads
//!   straight into binary COPY, and regenerate any range on resume.
//!   [`Conditions`], [`Lineitem`], [`Accounts`] and [`Orders`].
//! - A [`StreamWorkload`] makes the bytes of an input file, front to back, for
//!   the loaders that read a format rather than rows of a known table. The tsbs
//!   use cases ([`Iot`], [`Devops`]) are of this kind: their values are random
//!   walks (each depends on the one before) and the file names its own tables.
//!
//! [`workload`] finds either kind by name, for the CLI and the bench.

mod accounts;
mod conditions;
mod lineitem;
mod orders;
mod text;
mod tsbs;

pub use accounts::Accounts;
pub use conditions::{Conditions, ConditionsRow};
pub use lineitem::Lineitem;
pub use orders::{LIFECYCLE, OrderRow, Orders, note, push_cents};
pub use tsbs::{Devops, Iot};

use crate::ident::quote_ident;
use crate::value::PgType;

/// SplitMix64: tiny, fast, and good enough for benchmark data.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A float in [0, 1) with 53 random bits.
    #[inline]
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// An integer in `[0, n)` (`n > 0`); the bias is below 2^-32 for the
    /// small ranges generators use.
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A float in `[lo, hi)`.
    #[inline]
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + self.next_f64() * (hi - lo)
    }

    /// A standard normal deviate (Box–Muller, one of the pair).
    #[inline]
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.next_f64();
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// A seed for one independent stream of a generator, derived from the user's
/// seed and the stream's coordinates (row, order, truck, time step, …), so
/// that each value can be made without making the ones before it.
#[inline]
pub(crate) fn derive_seed(seed: u64, parts: &[u64]) -> u64 {
    let mut h = seed ^ 0x6A09_E667_F3BC_C909;
    for &p in parts {
        h = SplitMix64::new(h ^ p.wrapping_mul(0xA24B_AED4_963E_E407)).next_u64();
    }
    h
}

/// A row generator the loader can use directly: it knows its columns and
/// writes row `seq` as a binary COPY row (and as CSV, for reject files and
/// `chute gen`). Row `seq` is always the same row for the same parameters, so
/// a range can be regenerated on resume, and the binary and CSV forms of a row
/// hold the same values.
///
/// Every method may be called from several threads at once, for any `seq` in
/// any order; none of them keeps state between calls.
pub trait Workload: Send + Sync + std::fmt::Debug {
    /// Column names and types, in row order.
    fn columns(&self) -> Vec<(String, PgType)>;
    /// Appends row `seq` as one binary COPY row.
    fn encode_row(&self, seq: u64, out: &mut Vec<u8>);
    /// Appends row `seq` as one CSV line (PostgreSQL's CSV: an unquoted empty
    /// field is NULL, `""` the empty string).
    fn write_csv(&self, seq: u64, out: &mut Vec<u8>);
    /// The partition key's value of row `seq`, for choosing partitions ahead
    /// of time: microseconds since the Unix epoch for a time key (the
    /// workload's documentation names the column), or the integer itself for
    /// a workload keyed by an integer.
    fn time_micros(&self, seq: u64) -> i64;
    /// What decides the rows, for the load journal: the workload's name, a
    /// version and every parameter by name, in a fixed order (`conditions v1
    /// start=… step=…`). Two workloads with the same identity make the same
    /// rows; a change to the rows a workload makes from the same parameters
    /// must bump its version. Never derived from `Debug`, which changes
    /// whenever a field is added.
    fn identity(&self) -> String;

    /// SQL column definitions (`"name" type`) of a table these rows fit, in
    /// row order. The default spells each [`PgType`] by name; workloads with a
    /// type modifier (`char(25)`) say so themselves.
    fn column_sql(&self) -> Vec<String> {
        self.columns().iter().map(|(name, ty)| format!("{} {}", quote_ident(name), ty.name())).collect()
    }

    /// `CREATE TABLE <table> (…)` for a table these rows fit. `table` is used
    /// as it is: quote it first (e.g. [`crate::ident::QualifiedName::quoted`]).
    fn create_table_sql(&self, table: &str) -> String {
        format!("CREATE TABLE {table} ({})", self.column_sql().join(", "))
    }
}

/// A generator of input bytes in a format chute loads (tsbs, CSV), written
/// front to back. The bytes depend only on the parameters — never on how big
/// the pieces are or when `fill` is called — so a byte offset names the same
/// record on every run (which is what resume relies on).
///
/// One thread owns a stream at a time (`Send`, not `Sync`).
pub trait StreamWorkload: Send + std::fmt::Debug {
    /// `"tsbs"` or `"csv"`: the format the bytes are in.
    fn format(&self) -> &'static str;
    /// Appends the next piece of input to `out`: the format's header first,
    /// then whole records (at least one per call while any are left), about
    /// [`FILL_BYTES`] at a time. Returns false, appending nothing, when the
    /// stream is done.
    fn fill(&mut self, out: &mut Vec<u8>) -> bool;
    /// Records (rows) appended so far.
    fn rows(&self) -> u64;
}

/// Roughly how many bytes one [`StreamWorkload::fill`] call appends.
pub const FILL_BYTES: usize = 256 << 10;

/// Parameters shared by every workload; each workload reads the ones it
/// needs (see [`workload`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GenParams {
    /// The same seed gives the same data.
    pub seed: u64,
    /// The workload's size, 0 for its default: devices (conditions, default
    /// 1000), the TPC-H scale factor (lineitem, default: enough for the row
    /// count, 6 million rows per unit), trucks (iot, default 10) or hosts
    /// (devops, default 10) or customers (orders, default 100,000). accounts has none (100,000 accounts per branch,
    /// as in pgbench).
    pub scale: u32,
    /// The first timestamp, in microseconds since the Unix epoch (conditions, orders, iot, devops).
    pub from_micros: i64,
    /// Where the time series end, exclusive (iot, devops). Without it they
    /// run until `rows` rows, or for one day if `rows` is `u64::MAX`.
    pub to_micros: Option<i64>,
    /// Time between readings of one device, or between two orders, in
    /// microseconds (conditions, orders, iot, devops).
    pub step_micros: i64,
    /// Float columns (conditions: data1..dataN), or wide text columns
    /// (orders: note1..noteN).
    pub fields: u16,
}

impl GenParams {
    /// Every parameter by name, in a fixed order, for the load journal (see
    /// [`Workload::identity`]); a parameter added later goes at the end and
    /// leaves the identity of inputs that do not set it as it was.
    pub fn identity(&self) -> String {
        let to = self.to_micros.map_or_else(|| "none".to_owned(), |t| t.to_string());
        format!(
            "seed={} scale={} from={} to={to} step={} fields={}",
            self.seed, self.scale, self.from_micros, self.step_micros, self.fields
        )
    }
}

impl Default for GenParams {
    fn default() -> Self {
        GenParams {
            seed: 42,
            scale: 0,
            // 2021-06-01T00:00:00Z
            from_micros: 1_622_505_600_000_000,
            to_micros: None,
            step_micros: 10_000_000,
            fields: 5,
        }
    }
}

/// A generator found by [`workload`].
#[derive(Debug)]
pub enum AnyWorkload {
    /// Rows of one table, addressable by sequence number.
    Rows(std::sync::Arc<dyn Workload>),
    /// Bytes of an input file.
    Stream(Box<dyn StreamWorkload>),
}

/// Every name [`workload`] knows, row workloads first.
pub const WORKLOADS: &[&str] = &["conditions", "lineitem", "accounts", "orders", "iot", "devops"];

/// A stream with neither an end time nor a row limit covers one day.
const DAY_MICROS: i64 = 86_400_000_000;

/// The workload `name` with parameters `p`.
///
/// `rows` is how many rows the caller will take from a row workload (the
/// lineitem scale factor follows from it, and accounts checks that `aid`
/// fits an int); a stream stops after that many rows (`u64::MAX`: at
/// `p.to_micros`). Parameters a workload cannot honour are errors, not
/// silently ignored: `to_micros` with a row workload, a step of zero, more
/// float columns than a table can have.
pub fn workload(name: &str, rows: u64, p: &GenParams) -> Result<AnyWorkload, String> {
    let timed = matches!(name, "conditions" | "orders" | "iot" | "devops");
    if timed && p.step_micros <= 0 {
        return Err(format!("{name}: the interval between readings must be positive"));
    }
    if !matches!(name, "iot" | "devops") && p.to_micros.is_some() {
        return Err(format!("{name} makes as many rows as asked for; an end time goes with iot and devops"));
    }
    let scale = |default: u32| if p.scale == 0 { default } else { p.scale };
    let to = match p.to_micros {
        Some(to) if to <= p.from_micros => return Err(format!("{name}: the end time must be after the start time")),
        Some(to) => Some(to),
        None if rows == u64::MAX => Some(p.from_micros.saturating_add(DAY_MICROS)),
        None => None,
    };
    Ok(match name {
        "conditions" => {
            // PostgreSQL allows 1600 columns; time and dev_id take two.
            if p.fields > 1598 {
                return Err(format!("conditions: {} float columns do not fit a table (at most 1598)", p.fields));
            }
            AnyWorkload::Rows(std::sync::Arc::new(Conditions {
                start_micros: p.from_micros,
                step_micros: p.step_micros,
                devices: scale(1000),
                fields: p.fields,
                seed: p.seed,
            }))
        }
        "lineitem" => {
            let derived = u32::try_from(rows.div_ceil(Lineitem::ROWS_PER_SCALE).max(1)).unwrap_or(u32::MAX);
            AnyWorkload::Rows(std::sync::Arc::new(Lineitem::new(p.seed, scale(derived))))
        }
        "accounts" => {
            if rows > i32::MAX as u64 {
                return Err(format!("accounts: aid is an int, so at most {} rows", i32::MAX));
            }
            AnyWorkload::Rows(std::sync::Arc::new(Accounts))
        }
        "orders" => {
            if p.fields > 1593 {
                return Err(format!("orders: {} text columns do not fit a table (at most 1593)", p.fields));
            }
            AnyWorkload::Rows(std::sync::Arc::new(Orders {
                start_micros: p.from_micros,
                step_micros: p.step_micros,
                customers: u64::from(scale(100_000)),
                text_columns: p.fields,
                seed: p.seed,
            }))
        }
        "iot" => AnyWorkload::Stream(Box::new(Iot::new(p.seed, scale(10), p.from_micros, to, p.step_micros, rows))),
        "devops" => AnyWorkload::Stream(Box::new(Devops::new(p.seed, scale(10), p.from_micros, to, p.step_micros, rows))),
        _ => return Err(format!("no workload named {name:?}; there are {}", WORKLOADS.join(", "))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_knows_every_name_and_refuses_what_cannot_be() {
        let p = GenParams::default();
        for name in WORKLOADS {
            let w = workload(name, 100, &p).unwrap();
            let rows = matches!(w, AnyWorkload::Rows(_));
            assert_eq!(rows, !matches!(*name, "iot" | "devops"), "{name}");
        }
        assert!(workload("nope", 1, &p).unwrap_err().contains("conditions, lineitem, accounts, orders, iot, devops"));
        assert!(workload("conditions", 1, &GenParams { step_micros: 0, ..p.clone() }).is_err());
        assert!(workload("conditions", 1, &GenParams { fields: 1599, ..p.clone() }).is_err());
        assert!(workload("lineitem", 1, &GenParams { to_micros: Some(p.from_micros + 1), ..p.clone() }).is_err());
        assert!(workload("iot", 1, &GenParams { to_micros: Some(p.from_micros), ..p.clone() }).is_err());
        assert!(workload("accounts", 1 << 31, &p).is_err());
        let AnyWorkload::Stream(s) = workload("devops", u64::MAX, &p).unwrap() else { panic!() };
        assert_eq!(s.format(), "tsbs");
    }

    #[test]
    fn derived_seeds_differ_by_every_part() {
        let a = derive_seed(1, &[2, 3]);
        assert_ne!(a, derive_seed(1, &[3, 2]));
        assert_ne!(a, derive_seed(2, &[2, 3]));
        assert_ne!(a, derive_seed(1, &[2, 3, 0]));
        assert_eq!(a, derive_seed(1, &[2, 3]));
    }

    #[test]
    fn helpers_stay_in_range() {
        let mut r = SplitMix64::new(3);
        let mut sum = 0.0;
        for _ in 0..10_000 {
            assert!(r.below(7) < 7);
            let u = r.uniform(-0.5, 0.5);
            assert!((-0.5..0.5).contains(&u));
            sum += r.normal();
        }
        assert!((sum / 10_000.0).abs() < 0.05, "mean {}", sum / 10_000.0);
    }
}

#[cfg(test)]
pub(crate) mod tests_support {
    /// The fields of one binary COPY row (NULL as `None`).
    pub(crate) fn decode_row(mut bin: &[u8]) -> Vec<Option<Vec<u8>>> {
        let count = i16::from_be_bytes([bin[0], bin[1]]);
        bin = &bin[2..];
        let mut fields = Vec::new();
        for _ in 0..count {
            let len = i32::from_be_bytes(bin[..4].try_into().unwrap());
            bin = &bin[4..];
            if len < 0 {
                fields.push(None);
            } else {
                fields.push(Some(bin[..len as usize].to_vec()));
                bin = &bin[len as usize..];
            }
        }
        assert!(bin.is_empty(), "bytes after the row");
        fields
    }

    /// The fields of one CSV line as the generators write it: commas inside
    /// quotes do not occur, `""` is the empty string.
    pub(crate) fn csv_fields(line: &[u8]) -> Vec<String> {
        let line = std::str::from_utf8(line).unwrap().strip_suffix('\n').expect("a whole line");
        line.split(',').map(|f| if f == "\"\"" { String::new() } else { f.to_owned() }).collect()
    }
}
