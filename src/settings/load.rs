//! `chute load`'s arguments become a validated [`LoadSpec`]: the input
//! chosen once (files, stdin, a tsbs file, generated rows), and every
//! combination of flags checked before a server is chosen, started or
//! connected to. Flag values arrive typed (see `args::values`); what is
//! checked here is what no single flag can know.

use chute_core::ident::QualifiedName;
use chute_core::parse::FileFormat;
use chute_core::value::EpochUnit;
use chute_engine::ConnectOptions;
use chute_engine::load::{Backfill, BatchStream, ColumnarInput, GeneratedInput, InputFormat, InputSpec, LoadInput, LoadSpec};

use super::generate;
use crate::args::{BackfillArg, EpochArg, FormatArg, GenArg, LoadArgs, OnConflictArg};

/// The load the arguments describe, without a server yet.
pub struct LoadPlan {
    table: QualifiedName,
    input: LoadInput,
}

/// Checks the arguments and chooses the input.
pub fn plan(a: &LoadArgs) -> anyhow::Result<LoadPlan> {
    let format = format(a)?;
    anyhow::ensure!(
        !a.ignore_unknown || format == FormatArg::Jsonl,
        "--ignore-unknown drops JSON keys the table has no column for: it goes with --format jsonl"
    );
    let tsbs = format == FormatArg::Tsbs;
    let columnar = matches!(format, FormatArg::Parquet | FormatArg::Arrow);
    let stream_gen = matches!(a.generate, Some(GenArg::Iot | GenArg::Devops));
    anyhow::ensure!(
        !a.create || (columnar && a.generate.is_none()),
        "--create makes the table from a Parquet or Arrow file's schema; for other formats make it with chute partition create --columns"
    );
    anyhow::ensure!(
        a.key.is_some() == a.interval.is_some() || !a.create,
        "--create partitions the table with both --key and --interval (or neither: a plain table)"
    );
    anyhow::ensure!(
        tsbs || stream_gen || a.create || a.interval.is_none(),
        "--interval goes with --format tsbs, --gen iot|devops and --create; for other formats make the table with chute partition create"
    );
    anyhow::ensure!(
        tsbs || stream_gen || a.schema.is_none(),
        "--schema goes with --format tsbs and --gen iot|devops, whose files name their own tables"
    );
    anyhow::ensure!(
        a.backfill_after.is_none() || a.backfill == BackfillArg::Auto,
        "--backfill-after says which partitions --backfill auto swaps; with --backfill on every empty one is swapped, with off none"
    );
    anyhow::ensure!(
        !a.lock_timeout.is_zero(),
        "--lock-timeout 0 would let a swap wait for its locks for ever, with the table's writers queued behind it: give a duration such as 1s"
    );
    match a.generate {
        None if columnar => read_columnar(a),
        None => read(a, format),
        Some(g) => generated(a, g),
    }
}

/// The format given, else parquet or arrow when every file's name says so
/// (`FileFormat::from_names`, which refuses a Parquet or Arrow file inside
/// gzip or zstd), else csv.
fn format(a: &LoadArgs) -> anyhow::Result<FormatArg> {
    if let Some(f) = a.format {
        return Ok(f);
    }
    let names: Vec<&str> = a.files.iter().map(String::as_str).collect();
    Ok(match FileFormat::from_names(&names).map_err(anyhow::Error::msg)? {
        Some(FileFormat::Parquet) => FormatArg::Parquet,
        Some(FileFormat::Arrow) => FormatArg::Arrow,
        None => FormatArg::Csv,
    })
}

/// Parquet and Arrow IPC files, or an Arrow IPC stream on stdin.
fn read_columnar(a: &LoadArgs) -> anyhow::Result<LoadPlan> {
    let given = a.gen_options.given();
    anyhow::ensure!(given.is_empty(), "{} go{} with --gen", given.join(", "), if given.len() == 1 { "es" } else { "" });
    for (flag, set) in
        [("--header", a.header), ("--delimiter", a.delimiter.is_some()), ("--null", a.null.is_some()), ("--epoch", a.epoch.is_some())]
    {
        anyhow::ensure!(!set, "{flag} is for text formats: Parquet and Arrow columns carry their names, types and NULLs");
    }
    let table = QualifiedName::parse(a.table.as_deref().expect("clap requires TABLE without --gen, --status or --forget"))?;
    let stdin = a.files.is_empty() || a.files.iter().any(|f| f == "-");
    anyhow::ensure!(!stdin || a.files.len() <= 1, "stdin (-) is read alone: an Arrow IPC stream on stdin cannot be mixed with files");
    let inputs = if stdin {
        anyhow::ensure!(
            a.format != Some(FormatArg::Parquet),
            "a Parquet file cannot be read from stdin (its metadata is at its end): name the file"
        );
        vec![ColumnarInput::Stream(BatchStream::stdin()?)]
    } else {
        a.files.iter().map(|f| ColumnarInput::File(f.into())).collect()
    };
    Ok(LoadPlan { table, input: LoadInput::Columnar { inputs } })
}

/// Files or stdin.
fn read(a: &LoadArgs, format: FormatArg) -> anyhow::Result<LoadPlan> {
    let tsbs = format == FormatArg::Tsbs;
    let given = a.gen_options.given();
    anyhow::ensure!(given.is_empty(), "{} go{} with --gen", given.join(", "), if given.len() == 1 { "es" } else { "" });
    let table_arg = a.table.clone().expect("clap requires TABLE without --gen, --status or --forget");
    // With tsbs the tables come from the file, so every argument is a file.
    let (table, files) = if tsbs {
        (QualifiedName::parse("tsbs")?, std::iter::once(table_arg).chain(a.files.iter().cloned()).collect::<Vec<_>>())
    } else {
        (QualifiedName::parse(&table_arg)?, a.files.clone())
    };
    let inputs: Vec<InputSpec> =
        if files.is_empty() { vec![InputSpec::Stdin] } else { files.iter().map(|f| InputSpec::parse(f)).collect() };
    anyhow::ensure!(inputs.iter().filter(|i| **i == InputSpec::Stdin).count() <= 1, "stdin (-) can be read only once");
    anyhow::ensure!(!(tsbs && inputs.contains(&InputSpec::Stdin)), "--format tsbs reads files (their headers name the tables), not stdin");
    let format = match format {
        FormatArg::Text => InputFormat::Text,
        FormatArg::Jsonl => InputFormat::Jsonl,
        FormatArg::Tsbs => InputFormat::Tsbs,
        FormatArg::Csv | FormatArg::Parquet | FormatArg::Arrow => InputFormat::Csv,
    };
    Ok(LoadPlan { table, input: LoadInput::Read { inputs, format } })
}

/// Generated data: rows of TABLE, or a tsbs stream that names its own tables.
fn generated(a: &LoadArgs, g: GenArg) -> anyhow::Result<LoadPlan> {
    let name = generate::workload_name(g);
    generate::check_options(&a.gen_options, g, None)?;
    let stream = matches!(g, GenArg::Iot | GenArg::Devops);
    let rows = generate::rows(&a.gen_options, stream);
    let params = generate::params(&a.gen_options, None)?;
    match chute_core::generate::workload(name, rows, &params).map_err(anyhow::Error::msg)? {
        chute_core::generate::AnyWorkload::Rows(workload) => {
            let table = a.table.as_deref().ok_or_else(|| {
                anyhow::anyhow!(
                    "{name} makes rows of one table: name it, e.g. chute gen {name} --create | psql && chute load {table} --gen {name}",
                    table = generate::default_table(g)
                )
            })?;
            Ok(LoadPlan { table: QualifiedName::parse(table)?, input: LoadInput::Generated { workload, rows } })
        }
        chute_core::generate::AnyWorkload::Stream(_) => {
            let tables = if g == GenArg::Iot { "tags, readings and diagnostics" } else { "tags and cpu" };
            anyhow::ensure!(
                a.table.is_none(),
                "{name} makes its own tables ({tables}): leave out {}; --schema NAME puts them in a schema of their own",
                a.table.as_deref().unwrap_or_default()
            );
            let input = GeneratedInput::stream(name, rows, &params).map_err(anyhow::Error::msg)?;
            let input = LoadInput::Read { inputs: vec![InputSpec::Generated(input)], format: InputFormat::Tsbs };
            Ok(LoadPlan { table: QualifiedName::parse("tsbs")?, input })
        }
    }
}

impl LoadPlan {
    /// The engine's spec for the load on `target`.
    pub fn spec(self, target: ConnectOptions, a: &LoadArgs) -> LoadSpec {
        let reads_stdin = match &self.input {
            LoadInput::Read { inputs, .. } => inputs.contains(&InputSpec::Stdin),
            LoadInput::Columnar { inputs } => inputs.iter().any(|i| matches!(i, ColumnarInput::Stream(_))),
            _ => false,
        };
        let mut spec = LoadSpec::new(target, self.table, self.input);
        spec.tsbs_interval = a.interval;
        spec.tsbs_schema = a.schema.clone();
        spec.header = a.header;
        spec.delimiter = a.delimiter;
        spec.null = a.null.clone();
        spec.columns = a.columns.clone();
        spec.ignore_unknown = a.ignore_unknown;
        spec.epoch = a.epoch.map(|e| match e {
            EpochArg::S => EpochUnit::Seconds,
            EpochArg::Ms => EpochUnit::Millis,
            EpochArg::Us => EpochUnit::Micros,
            EpochArg::Ns => EpochUnit::Nanos,
        });
        if let Some(w) = a.workers {
            spec.workers = w;
        }
        if let Some(p) = a.parse_threads {
            spec.parse_threads = p;
        }
        spec.memory_budget = (a.memory_mb as usize) << 20;
        spec.batch_bytes = (a.batch_mb << 20).min(spec.memory_budget / 4);
        spec.via_parent = a.via_parent;
        spec.no_create_partitions = a.no_create_partitions;
        spec.backfill = match a.backfill {
            BackfillArg::Auto => Backfill::Auto,
            BackfillArg::On => Backfill::On,
            BackfillArg::Off => Backfill::Off,
        };
        spec.backfill_index_memory = a.backfill_index_memory;
        spec.backfill_after = a.backfill_after;
        spec.lock_timeout = a.lock_timeout;
        spec.on_conflict = a.on_conflict.map(|action| {
            let mut o = chute_core::upsert::OnConflict::new(match action {
                OnConflictArg::Nothing => chute_core::upsert::ConflictAction::Nothing,
                OnConflictArg::Update => chute_core::upsert::ConflictAction::Update,
            });
            o.key = a.conflict_key.clone();
            o.update_columns = a.update_columns.clone();
            o.update_if = a.update_if.clone();
            o
        });
        spec.reject_file = a.reject_file.clone();
        spec.max_rejects = a.max_rejects;
        spec.report_every = a.report_every;
        spec.load_id = a.load_id.clone();
        spec.wait = a.wait;
        spec.retry_for = a.retry_for;
        spec.atomic = a.atomic;
        // A live stream's rows reach the table while it waits for more; files wait for full batches.
        spec.flush_every = match a.flush_every {
            Some(f) => f.duration(),
            None if reads_stdin => Some(std::time::Duration::from_secs(1)),
            None => None,
        };
        spec
    }
}
