//! The `conditions` workload: device readings as in the published
//! "conditions" ingest runs (time timestamptz, dev_id int, data1..dataN
//! float8, batches of 10,000).

use super::text::{push_i64, push_timestamp};
use super::{SplitMix64, Workload};
use crate::value::PgType;

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
/// starting at `start_micros`; the data are uniform in [0, 100). Its
/// partition key is `time`.
#[derive(Debug, Clone)]
pub struct Conditions {
    pub start_micros: i64,
    pub step_micros: i64,
    /// At least 1.
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
            let (time, dev, mut rng) = self.row_parts(i);
            for d in data.iter_mut() {
                *d = rng.next_f64() * 100.0;
            }
            emit(time, dev, &data);
        }
    }

    #[inline]
    fn row_parts(&self, seq: u64) -> (i64, i32, SplitMix64) {
        let tick = seq / u64::from(self.devices);
        let dev = (seq % u64::from(self.devices)) as i32;
        (self.start_micros + tick as i64 * self.step_micros, dev, SplitMix64::new(self.seed ^ seq.wrapping_mul(0xA24B_AED4_963E_E407)))
    }
}

impl Workload for Conditions {
    fn identity(&self) -> String {
        format!(
            "conditions v1 start={} step={} devices={} fields={} seed={}",
            self.start_micros, self.step_micros, self.devices, self.fields, self.seed
        )
    }

    fn columns(&self) -> Vec<(String, PgType)> {
        let mut c = vec![("time".to_owned(), PgType::Timestamptz), ("dev_id".to_owned(), PgType::Int4)];
        c.extend((1..=self.fields).map(|i| (format!("data{i}"), PgType::Float8)));
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
        push_timestamp(out, time);
        out.push(b',');
        push_i64(out, i64::from(dev));
        for _ in 0..self.fields {
            // The shortest text that reads back as the same float8.
            let _ = write!(out, ",{}", rng.next_f64() * 100.0);
        }
        out.push(b'\n');
    }

    fn time_micros(&self, seq: u64) -> i64 {
        self.row_parts(seq).0
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

    #[test]
    fn fields_and_devices_shape_the_rows() {
        let g = Conditions { start_micros: 0, step_micros: 1_500_000, devices: 4, fields: 9, seed: 1 };
        assert_eq!(g.columns().len(), 11);
        assert_eq!(g.columns()[10], ("data9".to_owned(), PgType::Float8));
        assert_eq!(g.create_table_sql("c").split(", ").count(), 11);
        assert!(g.create_table_sql("\"c\"").starts_with("CREATE TABLE \"c\" (\"time\" timestamptz, \"dev_id\" int4, \"data1\" float8"));
        let mut csv = Vec::new();
        g.write_csv(9, &mut csv);
        let line = String::from_utf8(csv).unwrap();
        assert!(line.starts_with("1970-01-01T00:00:03Z,1,"), "{line}");
        assert_eq!(line.trim_end().split(',').count(), 11);
        let mut bin = Vec::new();
        g.encode_row(9, &mut bin);
        assert_eq!(bin.len(), 2 + 12 + 8 + 9 * 12);
        assert_eq!(i16::from_be_bytes([bin[0], bin[1]]), 11);
    }
}
