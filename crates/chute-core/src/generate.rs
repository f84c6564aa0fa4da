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
