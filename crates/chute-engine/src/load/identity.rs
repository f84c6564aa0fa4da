//! Load identities: the journal's name for a load, built from explicit,
//! versioned fields (never from `Debug` output, which changes whenever a
//! struct gains a field, so an upgraded chute would start an interrupted
//! load over and load its committed rows twice). The unit tests pin the
//! ids of known inputs: a change to them is a change to every user's
//! journal and must be deliberate.

use super::journal::stable_hash;

/// A file's identity: its canonical path, size and modification time (ns).
pub(crate) fn file(canonical: &std::path::Path, len: u64, mtime_nanos: u128) -> String {
    format!("{}:{len}:{mtime_nanos}", canonical.display())
}

/// A generated stream's identity (`chute load --gen iot`): the workload's
/// name, the row limit and every parameter by name.
pub(crate) fn stream(name: &str, rows: u64, p: &chute_core::generate::GenParams) -> String {
    format!("v1 {name} rows={rows} {}", p.identity())
}

/// The id of a load of generated rows of `table`.
pub(crate) fn generated_load(table: &str, workload: &dyn chute_core::generate::Workload, rows: u64) -> String {
    format!("gen-{:016x}", stable_hash(&["v1", table, &workload.identity(), &rows.to_string()]))
}

/// The id of a load of `inputs` (their identities, in order) into `table`;
/// `generated` when every input is a generated stream.
pub(crate) fn inputs_load(table: &str, inputs: &[&str], generated: bool) -> String {
    let mut parts = vec![table];
    parts.extend(inputs);
    let kind = if generated { "gen" } else { "file" };
    format!("{kind}-{:016x}", stable_hash(&parts))
}

#[cfg(test)]
mod tests {
    use chute_core::generate::{Conditions, GenParams, Workload};

    use super::*;

    #[test]
    fn the_ids_of_known_inputs_are_pinned() {
        // A file's id is what version 2 of the journal used: loads begun by
        // an older chute resume.
        let f = file(std::path::Path::new("/data/c.csv"), 1234, 1_700_000_000_000_000_000);
        assert_eq!(f, "/data/c.csv:1234:1700000000000000000");
        assert_eq!(inputs_load("public.p", &[&f], false), "file-420ac062846059e7");

        let w = Conditions { start_micros: 1_622_505_600_000_000, step_micros: 10_000_000, devices: 1000, fields: 5, seed: 42 };
        assert_eq!(w.identity(), "conditions v1 start=1622505600000000 step=10000000 devices=1000 fields=5 seed=42");
        assert_eq!(generated_load("public.c", &w, 1_000_000), "gen-211acfce87f3f316");

        let s = stream("iot", 5000, &GenParams::default());
        assert_eq!(s, "v1 iot rows=5000 seed=42 scale=0 from=1622505600000000 to=none step=10000000 fields=5");
        let g = format!("generated:{s}");
        assert_eq!(inputs_load("public.readings", &[&g], true), "gen-e2f286a0907e00a8");
    }
}
