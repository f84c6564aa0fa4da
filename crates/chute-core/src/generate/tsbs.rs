//! The Time Series Benchmark Suite's `iot` and `cpu-only` use cases, written
//! as tsbs files (`--format=timescaledb`) for chute's tsbs loader.
//!
//! The published tsbs ingest figures come from files with a particular shape,
//! and that shape is what a loader is measured on: a tag set per device, a
//! random walk per value, and for iot the untidiness of a real fleet —
//! readings that never arrive, values and tags that are empty, and rows that
//! arrive late. These generators reproduce that shape (tags, value ranges,
//! walk steps, how often things go missing, as tsbs's own simulator does)
//! with chute's PRNG; they do not reproduce tsbs's bytes.
//!
//! A stream is made front to back: values are walks, so step `k` of a device
//! depends on step `k - 1`. What happens to one reading (missing, delayed,
//! an empty field or tag) is drawn from its own seed, so it does not depend
//! on any other reading's fate.

use std::collections::BTreeMap;

use super::text::{push_i64, push_rounded, push_u64};
use super::{FILL_BYTES, SplitMix64, StreamWorkload, derive_seed};

/// Time steps of a series: `from`, `from + step`, … before `to`, or without
/// end (then a row limit ends the stream).
#[derive(Debug, Clone, Copy)]
struct Clock {
    from_micros: i64,
    step_micros: i64,
    steps: Option<u64>,
}

impl Clock {
    fn new(from_micros: i64, to_micros: Option<i64>, step_micros: i64) -> Self {
        let step_micros = step_micros.max(1);
        let steps = to_micros.map(|to| (to.saturating_sub(from_micros).max(0) as u64).div_ceil(step_micros as u64));
        Clock { from_micros, step_micros, steps }
    }

    /// Unix time in nanoseconds of step `k`.
    #[inline]
    fn nanos(&self, k: u64) -> i64 {
        (self.from_micros + k as i64 * self.step_micros).saturating_mul(1000)
    }

    fn past_end(&self, k: u64) -> bool {
        self.steps.is_some_and(|s| k >= s)
    }
}

/// A tags line (`tags,k=v,…\n`); `empty` names a tag written without its value.
fn push_tags(out: &mut Vec<u8>, tags: &[(&'static str, String)], empty: Option<usize>) {
    out.extend_from_slice(b"tags");
    for (i, (key, value)) in tags.iter().enumerate() {
        out.push(b',');
        out.extend_from_slice(key.as_bytes());
        out.push(b'=');
        if empty != Some(i) {
            out.extend_from_slice(value.as_bytes());
        }
    }
    out.push(b'\n');
}

/// A value that walks in `[min, max]` by a uniform step in `[-step, step]`.
#[inline]
fn walk(v: &mut f64, rng: &mut SplitMix64, step: f64, min: f64, max: f64) {
    *v = (*v + rng.uniform(-step, step)).clamp(min, max);
}

// ---------------------------------------------------------------- iot

const IOT_HEADER: &str = "tags,name string,fleet string,driver string,model string,device_version string,\
load_capacity float32,fuel_capacity float32,nominal_fuel_consumption float32\n\
diagnostics,fuel_state,current_load,status\n\
readings,latitude,longitude,elevation,velocity,heading,grade,fuel_consumption\n\n";

const FLEETS: &[&str] = &["East", "West", "North", "South"];
const DRIVERS: &[&str] = &["Derek", "Rodney", "Albert", "Andy", "Seth", "Trish"];
const DEVICE_VERSIONS: &[&str] = &["v1.0", "v1.5", "v2.0", "v2.3"];
/// Model, load capacity, fuel capacity, nominal fuel consumption.
const MODELS: &[(&str, u32, u32, u32)] = &[("F-150", 2000, 200, 15), ("G-2000", 5000, 300, 19), ("H-2", 1500, 150, 12)];

/// How often a reading goes astray, per reading (tsbs's iot simulator uses
/// the same chances).
const MISSING_CHANCE: f64 = 0.10;
const EMPTY_FIELD_CHANCE: f64 = 0.10;
const EMPTY_TAG_CHANCE: f64 = 0.01;
/// A late reading arrives after the readings of 1..=MAX_DELAY later steps.
const LATE_CHANCE: f64 = 0.03;
const MAX_DELAY: u64 = 6;

const READINGS: usize = 0;
const DIAGNOSTICS: usize = 1;
const FIELDS: [usize; 2] = [7, 3];

#[derive(Debug, Clone)]
struct Truck {
    tags: Vec<(&'static str, String)>,
    /// The tags line with every value.
    tags_line: Vec<u8>,
    /// latitude, longitude, elevation, velocity, heading, grade, fuel_consumption.
    readings: [f64; 7],
    /// fuel_state, current_load, status.
    diagnostics: [f64; 3],
    walks: [SplitMix64; 2],
}

impl Truck {
    fn new(seed: u64, i: u64) -> Self {
        let mut r = SplitMix64::new(derive_seed(seed, &[10, i]));
        let mut pick = |choices: &[&'static str]| choices[r.below(choices.len() as u64) as usize].to_owned();
        let (fleet, driver) = (pick(FLEETS), pick(DRIVERS));
        let (model, load, fuel, consumption) = MODELS[r.below(MODELS.len() as u64) as usize];
        let version = DEVICE_VERSIONS[r.below(DEVICE_VERSIONS.len() as u64) as usize].to_owned();
        let tags = vec![
            ("name", format!("truck_{i}")),
            ("fleet", fleet),
            ("driver", driver),
            ("model", model.to_owned()),
            ("device_version", version),
            ("load_capacity", load.to_string()),
            ("fuel_capacity", fuel.to_string()),
            ("nominal_fuel_consumption", consumption.to_string()),
        ];
        let mut tags_line = Vec::new();
        push_tags(&mut tags_line, &tags, None);
        let readings = [r.uniform(0.0, 90.0), r.uniform(0.0, 180.0), r.uniform(0.0, 500.0), 0.0, r.uniform(0.0, 360.0), 0.0, 25.0];
        let walks = [SplitMix64::new(derive_seed(seed, &[11, i])), SplitMix64::new(derive_seed(seed, &[12, i]))];
        Truck { tags, tags_line, readings, diagnostics: [1.0, 0.0, 0.0], walks }
    }

    /// Appends measurement `m`'s data line, leaving field `empty` out.
    fn push_data(&self, out: &mut Vec<u8>, m: usize, nanos: i64, empty: Option<usize>) {
        out.extend_from_slice(if m == READINGS { b"readings," } else { b"diagnostics," });
        push_i64(out, nanos);
        for f in 0..FIELDS[m] {
            out.push(b',');
            if empty == Some(f) {
                continue;
            }
            match (m, f) {
                (READINGS, 0 | 1) => push_rounded(out, self.readings[f], 5),
                (READINGS, 6) => push_rounded(out, self.readings[f], 1),
                (READINGS, _) => push_rounded(out, self.readings[f], 0),
                (_, 0) => push_rounded(out, self.diagnostics[0], 1),
                (_, 1) => push_rounded(out, self.diagnostics[1], 0),
                // status is an integer that walks: its truncation.
                _ => push_i64(out, self.diagnostics[2] as i64),
            }
        }
        out.push(b'\n');
    }

    /// Moves measurement `m`'s values one step on.
    fn advance(&mut self, m: usize) {
        let r = &mut self.walks[m];
        if m == READINGS {
            let v = &mut self.readings;
            walk(&mut v[0], r, 0.005, -90.0, 90.0);
            walk(&mut v[1], r, 0.005, -180.0, 180.0);
            walk(&mut v[2], r, 10.0, 0.0, 5000.0);
            walk(&mut v[3], r, 10.0, 0.0, 100.0);
            walk(&mut v[4], r, 5.0, 0.0, 360.0);
            walk(&mut v[5], r, 5.0, 0.0, 100.0);
            walk(&mut v[6], r, 5.0, 0.0, 50.0);
        } else {
            let v = &mut self.diagnostics;
            // Fuel runs down slowly; an empty tank is refilled.
            v[0] = (v[0] - r.uniform(0.0, 0.001)).clamp(0.0, 1.0);
            if v[0] == 0.0 {
                v[0] = 1.0;
            }
            // The load changes now and then, to anything up to 5000.
            let change = r.next_f64() < 0.05;
            let load = r.uniform(0.0, 5000.0);
            if change {
                v[1] = load;
            }
            v[2] = (v[2] + r.normal()).clamp(0.0, 5.0);
        }
    }
}

/// Where an [`Iot`] stream is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum IotPhase {
    /// Measurement (readings, then diagnostics) of every truck at the step.
    Measure(usize),
    /// Late readings that arrive after the step's own.
    Late,
    /// After the last step: every reading still late.
    Drain,
}

/// tsbs's `iot` use case: `scale` trucks report `readings` (latitude,
/// longitude, elevation, velocity, heading, grade, fuel_consumption) and
/// `diagnostics` (fuel_state, current_load, status) every step, tagged with
/// name, fleet, driver, model, device_version, load_capacity, fuel_capacity
/// and nominal_fuel_consumption.
///
/// Per step the readings of every truck come first, then the diagnostics.
/// As in tsbs, 10% of readings never arrive, 10% have one empty (NULL) value
/// and 1% one tag without its value, and 3% arrive late: after the readings
/// of 1 to 6 later steps (or at the end of the file).
#[derive(Debug, Clone)]
pub struct Iot {
    seed: u64,
    clock: Clock,
    max_rows: u64,
    trucks: Vec<Truck>,
    header_done: bool,
    step: u64,
    phase: IotPhase,
    /// Next truck in a [`IotPhase::Measure`] phase.
    truck: usize,
    /// Late records by (step they arrive after, order of arrival).
    late: BTreeMap<(u64, u64), Vec<u8>>,
    late_count: u64,
    rows: u64,
}

impl Iot {
    /// `scale` trucks (at least 1) from `from_micros` every `step_micros`
    /// until `to_micros` (exclusive; `None`: no end) or `max_rows` rows.
    pub fn new(seed: u64, scale: u32, from_micros: i64, to_micros: Option<i64>, step_micros: i64, max_rows: u64) -> Self {
        Iot {
            seed,
            clock: Clock::new(from_micros, to_micros, step_micros),
            max_rows,
            trucks: (0..u64::from(scale.max(1))).map(|i| Truck::new(seed, i)).collect(),
            header_done: false,
            step: 0,
            phase: IotPhase::Measure(READINGS),
            truck: 0,
            late: BTreeMap::new(),
            late_count: 0,
            rows: 0,
        }
    }

    /// Decides the fate of truck `i`'s measurement `m` at the current step and
    /// moves its values on. Returns true when the record went to `out`.
    fn entry(&mut self, m: usize, i: usize, out: &mut Vec<u8>) -> bool {
        let k = self.step;
        let mut fate = SplitMix64::new(derive_seed(self.seed, &[20 + m as u64, i as u64, k]));
        let missing = fate.next_f64() < MISSING_CHANCE;
        let empty_field = (fate.next_f64() < EMPTY_FIELD_CHANCE).then(|| fate.below(FIELDS[m] as u64) as usize);
        let empty_tag = (fate.next_f64() < EMPTY_TAG_CHANCE).then(|| fate.below(8) as usize);
        let delay = (fate.next_f64() < LATE_CHANCE).then(|| 1 + fate.below(MAX_DELAY));
        let truck = &mut self.trucks[i];
        let mut sent = false;
        if !missing {
            let write = |out: &mut Vec<u8>| {
                match empty_tag {
                    None => out.extend_from_slice(&truck.tags_line),
                    Some(t) => push_tags(out, &truck.tags, Some(t)),
                }
                truck.push_data(out, m, self.clock.nanos(k), empty_field);
            };
            match delay {
                Some(d) => {
                    let mut record = Vec::with_capacity(256);
                    write(&mut record);
                    self.late.insert((k + d, self.late_count), record);
                    self.late_count += 1;
                }
                None => {
                    write(out);
                    sent = true;
                }
            }
        }
        truck.advance(m);
        sent
    }

    /// Appends the next record; false when there is none.
    fn next_record(&mut self, out: &mut Vec<u8>) -> bool {
        while self.rows < self.max_rows {
            match self.phase {
                IotPhase::Measure(_) if self.clock.past_end(self.step) => self.phase = IotPhase::Drain,
                IotPhase::Measure(m) if self.truck == self.trucks.len() => {
                    self.truck = 0;
                    self.phase = if m == READINGS { IotPhase::Measure(DIAGNOSTICS) } else { IotPhase::Late };
                }
                IotPhase::Measure(m) => {
                    let i = self.truck;
                    self.truck += 1;
                    if self.entry(m, i, out) {
                        self.rows += 1;
                        return true;
                    }
                }
                IotPhase::Late | IotPhase::Drain => {
                    let due = self.late.first_key_value().is_some_and(|((at, _), _)| self.phase == IotPhase::Drain || *at <= self.step);
                    if due {
                        let (_, record) = self.late.pop_first().expect("a due record");
                        out.extend_from_slice(&record);
                        self.rows += 1;
                        return true;
                    }
                    if self.phase == IotPhase::Drain {
                        return false;
                    }
                    self.step += 1;
                    self.phase = IotPhase::Measure(READINGS);
                }
            }
        }
        false
    }
}

impl StreamWorkload for Iot {
    fn format(&self) -> &'static str {
        "tsbs"
    }

    fn fill(&mut self, out: &mut Vec<u8>) -> bool {
        let start = out.len();
        if !self.header_done {
            out.extend_from_slice(IOT_HEADER.as_bytes());
            self.header_done = true;
        }
        while out.len() - start < FILL_BYTES && self.next_record(out) {}
        out.len() > start
    }

    fn rows(&self) -> u64 {
        self.rows
    }
}

// ---------------------------------------------------------------- devops

const DEVOPS_HEADER: &str = "tags,hostname string,region string,datacenter string,rack string,os string,arch string,\
team string,service string,service_version string,service_environment string\n\
cpu,usage_user,usage_system,usage_idle,usage_nice,usage_iowait,usage_irq,usage_softirq,usage_steal,usage_guest,usage_guest_nice\n\n";

/// Regions and their datacenters.
const REGIONS: &[(&str, &[&str])] = &[
    ("us-east-1", &["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1e"]),
    ("us-west-1", &["us-west-1a", "us-west-1b"]),
    ("us-west-2", &["us-west-2a", "us-west-2b", "us-west-2c"]),
    ("eu-west-1", &["eu-west-1a", "eu-west-1b", "eu-west-1c"]),
    ("eu-central-1", &["eu-central-1a", "eu-central-1b"]),
    ("ap-southeast-1", &["ap-southeast-1a", "ap-southeast-1b"]),
    ("ap-southeast-2", &["ap-southeast-2a", "ap-southeast-2b"]),
    ("ap-northeast-1", &["ap-northeast-1a", "ap-northeast-1c"]),
    ("sa-east-1", &["sa-east-1a", "sa-east-1b", "sa-east-1c"]),
];
const OSES: &[&str] = &["Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"];
const ARCHES: &[&str] = &["x64", "x86"];
const TEAMS: &[&str] = &["SF", "NYC", "LON", "CHI"];
const ENVIRONMENTS: &[&str] = &["production", "staging", "test"];

#[derive(Debug, Clone)]
struct Host {
    tags_line: Vec<u8>,
    /// usage_user … usage_guest_nice, each in [0, 100].
    cpu: [f64; 10],
    walk: SplitMix64,
}

impl Host {
    fn new(seed: u64, i: u64) -> Self {
        let mut r = SplitMix64::new(derive_seed(seed, &[30, i]));
        let (region, datacenters) = REGIONS[r.below(REGIONS.len() as u64) as usize];
        let mut pick = |choices: &[&'static str]| choices[r.below(choices.len() as u64) as usize].to_owned();
        let datacenter = pick(datacenters);
        let (os, arch, team, environment) = (pick(OSES), pick(ARCHES), pick(TEAMS), pick(ENVIRONMENTS));
        let (rack, service, version) = (r.below(100), r.below(20), r.below(2));
        let tags = vec![
            ("hostname", format!("host_{i}")),
            ("region", region.to_owned()),
            ("datacenter", datacenter),
            ("rack", rack.to_string()),
            ("os", os),
            ("arch", arch),
            ("team", team),
            ("service", service.to_string()),
            ("service_version", version.to_string()),
            ("service_environment", environment),
        ];
        let mut tags_line = Vec::new();
        push_tags(&mut tags_line, &tags, None);
        let cpu = std::array::from_fn(|_| r.uniform(0.0, 100.0));
        Host { tags_line, cpu, walk: SplitMix64::new(derive_seed(seed, &[31, i])) }
    }
}

/// tsbs's `cpu-only` use case (the `cpu` measurement of `devops`): `scale`
/// hosts tagged with hostname, region, datacenter, rack, os, arch, team,
/// service, service_version and service_environment report the ten usage_*
/// fields every step, as integer percentages that walk by normal steps.
/// Rows are in time order, hosts in order within a step; nothing is missing.
#[derive(Debug, Clone)]
pub struct Devops {
    clock: Clock,
    max_rows: u64,
    hosts: Vec<Host>,
    header_done: bool,
    step: u64,
    host: usize,
    rows: u64,
}

impl Devops {
    /// `scale` hosts (at least 1) from `from_micros` every `step_micros`
    /// until `to_micros` (exclusive; `None`: no end) or `max_rows` rows.
    pub fn new(seed: u64, scale: u32, from_micros: i64, to_micros: Option<i64>, step_micros: i64, max_rows: u64) -> Self {
        Devops {
            clock: Clock::new(from_micros, to_micros, step_micros),
            max_rows,
            hosts: (0..u64::from(scale.max(1))).map(|i| Host::new(seed, i)).collect(),
            header_done: false,
            step: 0,
            host: 0,
            rows: 0,
        }
    }

    fn next_record(&mut self, out: &mut Vec<u8>) -> bool {
        if self.host == self.hosts.len() {
            self.host = 0;
            self.step += 1;
        }
        if self.rows >= self.max_rows || self.clock.past_end(self.step) {
            return false;
        }
        let nanos = self.clock.nanos(self.step);
        let h = &mut self.hosts[self.host];
        out.extend_from_slice(&h.tags_line);
        out.extend_from_slice(b"cpu,");
        push_i64(out, nanos);
        for v in &mut h.cpu {
            out.push(b',');
            push_u64(out, *v as u64);
            *v = (*v + h.walk.normal()).clamp(0.0, 100.0);
        }
        out.push(b'\n');
        self.host += 1;
        self.rows += 1;
        true
    }
}

impl StreamWorkload for Devops {
    fn format(&self) -> &'static str {
        "tsbs"
    }

    fn fill(&mut self, out: &mut Vec<u8>) -> bool {
        let start = out.len();
        if !self.header_done {
            out.extend_from_slice(DEVOPS_HEADER.as_bytes());
            self.header_done = true;
        }
        while out.len() - start < FILL_BYTES && self.next_record(out) {}
        out.len() > start
    }

    fn rows(&self) -> u64 {
        self.rows
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::parse::tsbs::{TsbsParser, parse_tsbs_header};

    /// 2021-06-08T00:00:00Z
    const FROM: i64 = 1_623_110_400_000_000;
    const HOUR: i64 = 3_600_000_000;

    fn drain(s: &mut dyn StreamWorkload) -> Vec<u8> {
        let mut out = Vec::new();
        let mut calls = 0;
        while s.fill(&mut out) {
            calls += 1;
        }
        assert!(!s.fill(&mut out), "a finished stream stays finished");
        assert!(calls >= 1);
        out
    }

    /// A record's tags (NULL as `None`), measurement and time.
    type Key = (Vec<Option<Vec<u8>>>, usize, i64);

    /// What chute's tsbs parser reads from a file.
    #[derive(Debug, Default)]
    struct Parsed {
        /// Per measurement: rows, rows with an empty value, rows whose time
        /// is before one seen earlier.
        rows: BTreeMap<String, (u64, u64, u64)>,
        empty_tags: u64,
        /// (tags, measurement, time) in file order.
        keys: Vec<Key>,
    }

    fn parse(file: &[u8]) -> Parsed {
        let (header, consumed, lines) = parse_tsbs_header(file).unwrap().expect("a whole header");
        let p = TsbsParser::new(header.clone());
        let mut got = Parsed::default();
        let mut latest = i64::MIN;
        p.parse_records(
            &file[consumed..],
            lines + 1,
            consumed as u64,
            &mut |r, _| {
                let e = got.rows.entry(header.measurements[r.measurement].0.clone()).or_default();
                e.0 += 1;
                e.1 += u64::from(r.values.iter().any(|v| v.is_none()));
                e.2 += u64::from(r.time_ns < latest);
                latest = latest.max(r.time_ns);
                got.empty_tags += u64::from(r.tags.iter().any(|t| t.is_none()));
                assert!(r.additional_tags.is_none());
                got.keys.push((r.tags.iter().map(|t| t.map(<[u8]>::to_vec)).collect(), r.measurement, r.time_ns));
            },
            &mut |e| panic!("{e}"),
        );
        got
    }

    #[test]
    fn iot_parses_with_the_shape_of_tsbs() {
        let (trucks, steps) = (20, 360);
        let mut g = Iot::new(7, trucks, FROM, Some(FROM + HOUR), 10_000_000, u64::MAX);
        let file = drain(&mut g);
        assert!(file.starts_with(IOT_HEADER.as_bytes()));
        let got = parse(&file);
        assert_eq!(got.rows.keys().collect::<Vec<_>>(), ["diagnostics", "readings"]);
        let expected = f64::from(trucks) * steps as f64;
        let mut total = 0;
        for (m, (rows, with_null, late)) in &got.rows {
            total += rows;
            let arrived = *rows as f64 / expected;
            assert!((0.87..0.93).contains(&arrived), "{m}: {rows} of {expected}");
            let nulls = *with_null as f64 / *rows as f64;
            assert!((0.08..0.12).contains(&nulls), "{m}: {with_null} rows with NULL");
            assert!(*late > 0, "{m}: no row out of order");
        }
        assert_eq!(total, g.rows());
        assert!((80..=180).contains(&got.empty_tags), "{} tag sets with an empty tag", got.empty_tags);
        // Every reading of a truck is there at most once, late or not.
        let mut seen = std::collections::HashSet::new();
        for (tags, m, t) in &got.keys {
            assert!(*t >= FROM * 1000 && *t < (FROM + HOUR) * 1000);
            if tags[0].is_some() {
                assert!(seen.insert((tags[0].clone(), *m, *t)), "a reading twice");
            }
        }
    }

    #[test]
    fn iot_values_stay_in_tsbs_ranges() {
        let mut g = Iot::new(3, 5, FROM, Some(FROM + HOUR), 10_000_000, u64::MAX);
        let file = String::from_utf8(drain(&mut g)).unwrap();
        let mut checked = 0;
        for line in file.lines().skip(4) {
            let mut parts = line.split(',');
            let ranges: &[(f64, f64)] = match parts.next() {
                Some("readings") => &[(-90.0, 90.0), (-180.0, 180.0), (0.0, 5000.0), (0.0, 100.0), (0.0, 360.0), (0.0, 100.0), (0.0, 50.0)],
                Some("diagnostics") => &[(0.0, 1.0), (0.0, 5000.0), (0.0, 5.0)],
                _ => continue,
            };
            let values: Vec<&str> = parts.skip(1).collect();
            assert_eq!(values.len(), ranges.len(), "{line}");
            for (v, (lo, hi)) in values.iter().zip(ranges) {
                if !v.is_empty() {
                    let x: f64 = v.parse().unwrap();
                    assert!((*lo..=*hi).contains(&x), "{line}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 10_000);
        assert!(file.contains("tags,name=truck_0,fleet="));
        assert!(file.contains(",model=G-2000,") || file.contains(",model=F-150,"));
    }

    #[test]
    fn streams_are_the_same_bytes_for_the_same_seed() {
        let run = |seed| drain(&mut Iot::new(seed, 7, FROM, Some(FROM + HOUR / 2), 10_000_000, u64::MAX));
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
        let run = |seed| drain(&mut Devops::new(seed, 7, FROM, Some(FROM + HOUR / 2), 10_000_000, u64::MAX));
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
    }

    #[test]
    fn a_row_limit_ends_the_stream_and_the_prefix_is_the_same() {
        let full = drain(&mut Iot::new(5, 10, FROM, None, 10_000_000, 5000));
        let mut g = Iot::new(5, 10, FROM, None, 10_000_000, 1234);
        let part = drain(&mut g);
        assert_eq!(g.rows(), 1234);
        assert!(full.starts_with(&part));
        assert_eq!(parse(&part).keys.len(), 1234);
        let mut d = Devops::new(5, 3, FROM, Some(FROM + HOUR), 10_000_000, 10);
        let head = drain(&mut d);
        assert_eq!(d.rows(), 10);
        assert_eq!(parse(&head).keys.len(), 10);
        let mut empty = Devops::new(5, 3, FROM, Some(FROM + HOUR), 10_000_000, 0);
        assert_eq!(drain(&mut empty), DEVOPS_HEADER.as_bytes());
    }

    #[test]
    fn devops_is_ordered_complete_and_without_nulls() {
        let mut g = Devops::new(9, 12, FROM, Some(FROM + HOUR), 10_000_000, u64::MAX);
        let file = drain(&mut g);
        let got = parse(&file);
        assert_eq!(got.rows.len(), 1);
        assert_eq!(got.rows["cpu"], (12 * 360, 0, 0));
        assert_eq!(got.empty_tags, 0);
        for (n, (tags, _, t)) in got.keys.iter().enumerate() {
            assert_eq!(tags[0].as_deref(), Some(format!("host_{}", n % 12).as_bytes()));
            assert_eq!(*t, (FROM + (n / 12) as i64 * 10_000_000) * 1000);
            assert_eq!(tags.len(), 10);
        }
        let text = String::from_utf8(file).unwrap();
        let first = text.lines().nth(3).unwrap();
        assert!(first.starts_with("tags,hostname=host_0,region="), "{first}");
        for line in text.lines().skip(3).filter(|l| l.starts_with("cpu,")) {
            assert!(line.split(',').skip(2).all(|v| v.parse::<u8>().is_ok_and(|x| x <= 100)), "{line}");
        }
    }

    #[test]
    fn the_end_is_exclusive_and_rounds_up_to_a_whole_step() {
        let mut g = Devops::new(1, 2, FROM, Some(FROM + 25_000_000), 10_000_000, u64::MAX);
        drain(&mut g);
        assert_eq!(g.rows(), 2 * 3);
    }
}
