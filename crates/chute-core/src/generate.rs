//! Deterministic row generators.
//!
//! Benchmarks and the demo need the same rows on every run and every machine,
//! produced faster than a server can ingest them, so generators are seeded
//! and use a small PRNG (SplitMix64) instead of a system source.

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
}

/// One row of the `conditions` workload: time, dev_id, data1..dataN.
#[derive(Debug, Clone, PartialEq)]
pub struct ConditionsRow {
    /// Microseconds since the Unix epoch.
    pub time_micros: i64,
    pub dev_id: i32,
    pub data: Vec<f64>,
}

/// The `conditions` workload (time timestamptz, dev_id int, data1..dataN
/// float8): `devices` devices each report every `step_micros`, in time order,
/// starting at `start_micros`.
#[derive(Debug, Clone)]
pub struct Conditions {
    pub start_micros: i64,
    pub step_micros: i64,
    pub devices: u32,
    pub fields: u16,
    pub seed: u64,
}

impl Conditions {
    /// Calls `emit` for rows `from..to` in sequence order; row `i` is always
    /// the same row for the same parameters, so a range can be regenerated.
    pub fn for_each_row(&self, from: u64, to: u64, mut emit: impl FnMut(i64, i32, &[f64])) {
        let mut data = vec![0.0; usize::from(self.fields)];
        for i in from..to {
            let tick = i / u64::from(self.devices);
            let dev = (i % u64::from(self.devices)) as i32;
            let mut rng = SplitMix64::new(self.seed ^ i.wrapping_mul(0xA24B_AED4_963E_E407));
            for d in data.iter_mut() {
                *d = rng.next_f64() * 100.0;
            }
            emit(self.start_micros + tick as i64 * self.step_micros, dev, &data);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_reproducible_by_index() {
        let g = Conditions { start_micros: 0, step_micros: 10_000_000, devices: 3, fields: 2, seed: 9 };
        let mut all = Vec::new();
        g.for_each_row(0, 7, |t, d, v| all.push((t, d, v.to_vec())));
        let mut tail = Vec::new();
        g.for_each_row(4, 7, |t, d, v| tail.push((t, d, v.to_vec())));
        assert_eq!(&all[4..], &tail[..]);
        assert_eq!(all[3].0, 10_000_000);
        assert_eq!(all[3].1, 0);
        assert!(all.iter().all(|(_, _, v)| v.iter().all(|x| (0.0..100.0).contains(x))));
    }
}

/// A row generator the loader can use directly: it knows its columns and
/// writes row `seq` as a binary COPY row (and as CSV, for reject files and
/// `chute gen`). Row `seq` is always the same row, so a range can be
/// regenerated on resume.
pub trait Workload: Send + Sync + std::fmt::Debug {
    /// Column names and types, in row order.
    fn columns(&self) -> Vec<(String, crate::value::PgType)>;
    /// Appends row `seq` as one binary COPY row.
    fn encode_row(&self, seq: u64, out: &mut Vec<u8>);
    /// Appends row `seq` as one CSV line.
    fn write_csv(&self, seq: u64, out: &mut Vec<u8>);
    /// The key column's value of row `seq` in microseconds (time keys), for
    /// choosing partitions ahead of time.
    fn time_micros(&self, seq: u64) -> i64;
}

impl Conditions {
    #[inline]
    fn row_parts(&self, seq: u64) -> (i64, i32, SplitMix64) {
        let tick = seq / u64::from(self.devices);
        let dev = (seq % u64::from(self.devices)) as i32;
        (self.start_micros + tick as i64 * self.step_micros, dev, SplitMix64::new(self.seed ^ seq.wrapping_mul(0xA24B_AED4_963E_E407)))
    }
}

impl Workload for Conditions {
    fn columns(&self) -> Vec<(String, crate::value::PgType)> {
        let mut c = vec![("time".to_owned(), crate::value::PgType::Timestamptz), ("dev_id".to_owned(), crate::value::PgType::Int4)];
        c.extend((1..=self.fields).map(|i| (format!("data{i}"), crate::value::PgType::Float8)));
        c
    }

    fn encode_row(&self, seq: u64, out: &mut Vec<u8>) {
        let (time, dev, mut rng) = self.row_parts(seq);
        let mut w = crate::encode::CopyWriter::resume(out);
        w.row(2 + self.fields as i16);
        w.timestamp_unix_micros(time);
        w.int4(dev);
        for _ in 0..self.fields {
            w.float8(rng.next_f64() * 100.0);
        }
    }

    fn write_csv(&self, seq: u64, out: &mut Vec<u8>) {
        use std::io::Write;
        let (time, dev, mut rng) = self.row_parts(seq);
        let ts = jiff::Timestamp::from_microsecond(time).map(|t| t.to_string()).unwrap_or_default();
        let _ = write!(out, "{ts},{dev}");
        for _ in 0..self.fields {
            let _ = write!(out, ",{}", rng.next_f64() * 100.0);
        }
        out.push(b'\n');
    }

    fn time_micros(&self, seq: u64) -> i64 {
        self.row_parts(seq).0
    }
}

#[cfg(test)]
mod workload_tests {
    use super::*;

    #[test]
    fn binary_and_csv_rows_agree_with_for_each_row() {
        let g = Conditions { start_micros: 1_000_000, step_micros: 10_000_000, devices: 3, fields: 2, seed: 5 };
        let mut seen = Vec::new();
        g.for_each_row(4, 5, |t, d, v| seen.push((t, d, v.to_vec())));
        let mut bin = Vec::new();
        g.encode_row(4, &mut bin);
        let (t, d, v) = &seen[0];
        assert_eq!(bin.len(), 2 + 12 + 8 + 2 * 12);
        assert_eq!(&bin[18..22], &d.to_be_bytes());
        assert_eq!(&bin[26..34], &v[0].to_bits().to_be_bytes());
        assert_eq!(g.time_micros(4), *t);
        let mut csv = Vec::new();
        g.write_csv(4, &mut csv);
        let line = String::from_utf8(csv).unwrap();
        assert!(line.starts_with("1970-01-01T00:00:11Z,1,"), "{line}");
        assert_eq!(line.trim_end().split(',').nth(2).unwrap().parse::<f64>().unwrap(), v[0]);
    }
}
