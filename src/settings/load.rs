//! `chute load`'s arguments become a validated [`LoadSpec`]: the input
//! chosen once (files, stdin, a tsbs file, generated rows), and every
//! combination of flags checked before a server is chosen, started or
//! connected to. Flag values arrive typed (see `args::values`); what is
//! checked here is what no single flag can know.

use chute_core::ident::QualifiedName;
use chute_core::parse::FileFormat;
use chute_core::value::EpochUnit;
use chute_engine::ConnectOptions;
use std::sync::Arc;

use chute_arrow::{BatchStream, Columnar, ColumnarInput};
use chute_engine::load::{Backfill, Files, Generated, GeneratedInput, Input, InputSpec, LoadSpec, TextFormat, TsbsFiles};

use super::generate;
use crate::args::{BackfillArg, EpochArg, FormatArg, GenArg, LoadArgs, OnConflictArg};

/// The load the arguments describe, without a server yet.
pub struct LoadPlan {
    table: QualifiedName,
    input: Arc<dyn Input>,
    /// Parquet and Arrow inputs, which `--create` reads the table's columns from.
    columnar: Option<Columnar>,
}

impl LoadPlan {
    /// The columnar inputs, when the load reads Parquet or Arrow.
    pub fn columnar(&self) -> Option<&Columnar> {
        self.columnar.as_ref()
    }
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
    let columnar = Columnar::new(inputs)?;
    Ok(LoadPlan { table, input: Arc::new(columnar.clone()), columnar: Some(columnar) })
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
    anyhow::ensure!(!(tsbs && inputs.contains(&InputSpec::Stdin)), "--format tsbs reads files (their headers name the tables), not stdin");
    let input: Arc<dyn Input> = match format {
        FormatArg::Tsbs => Arc::new(TsbsFiles::new(inputs)?),
        FormatArg::Text => Arc::new(Files::new(inputs, TextFormat::Text)?),
        FormatArg::Jsonl => Arc::new(Files::new(inputs, TextFormat::Jsonl)?),
        FormatArg::Csv | FormatArg::Parquet | FormatArg::Arrow => Arc::new(Files::new(inputs, TextFormat::Csv)?),
    };
    Ok(LoadPlan { table, input, columnar: None })
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
            Ok(LoadPlan { table: QualifiedName::parse(table)?, input: Arc::new(Generated::new(workload, rows)), columnar: None })
        }
        chute_core::generate::AnyWorkload::Stream(_) => {
            let tables = if g == GenArg::Iot { "tags, readings and diagnostics" } else { "tags and cpu" };
            anyhow::ensure!(
                a.table.is_none(),
                "{name} makes its own tables ({tables}): leave out {}; --schema NAME puts them in a schema of their own",
                a.table.as_deref().unwrap_or_default()
            );
            let input = GeneratedInput::stream(name, rows, &params).map_err(anyhow::Error::msg)?;
            let input = Arc::new(TsbsFiles::new(vec![InputSpec::Generated(input)])?);
            Ok(LoadPlan { table: QualifiedName::parse("tsbs")?, input, columnar: None })
        }
    }
}

impl LoadPlan {
    /// The engine's spec for the load on `target`, its settings checked together.
    pub fn spec(&self, target: ConnectOptions, a: &LoadArgs) -> anyhow::Result<LoadSpec> {
        let mut b = LoadSpec::builder(target, self.table.clone())
            .tsbs_interval(a.interval)
            .tsbs_schema(a.schema.clone())
            .header(a.header)
            .delimiter(a.delimiter)
            .null(a.null.clone())
            .columns(a.columns.clone())
            .ignore_unknown(a.ignore_unknown)
            .epoch(a.epoch.map(|e| match e {
                EpochArg::S => EpochUnit::Seconds,
                EpochArg::Ms => EpochUnit::Millis,
                EpochArg::Us => EpochUnit::Micros,
                EpochArg::Ns => EpochUnit::Nanos,
            }))
            .memory_budget((a.memory_mb as usize) << 20)
            .batch_bytes(a.batch_mb << 20)
            .via_parent(a.via_parent)
            .no_create_partitions(a.no_create_partitions)
            .backfill(match a.backfill {
                BackfillArg::Auto => Backfill::Auto,
                BackfillArg::On => Backfill::On,
                BackfillArg::Off => Backfill::Off,
            })
            .backfill_index_memory(a.backfill_index_memory)
            .backfill_after(a.backfill_after)
            .lock_timeout(a.lock_timeout)
            .on_conflict(a.on_conflict.map(|action| {
                let mut o = chute_core::upsert::OnConflict::new(match action {
                    OnConflictArg::Nothing => chute_core::upsert::ConflictAction::Nothing,
                    OnConflictArg::Update => chute_core::upsert::ConflictAction::Update,
                });
                o.key = a.conflict_key.clone();
                o.update_columns = a.update_columns.clone();
                o.update_if = a.update_if.clone();
                o
            }))
            .reject_file(a.reject_file.clone())
            .max_rejects(a.max_rejects)
            .report_every(a.report_every)
            .load_id(a.load_id.clone())
            .wait(a.wait)
            .retry_for(a.retry_for)
            .atomic(a.atomic)
            // A live stream's rows reach the table while it waits for more; files wait for full batches.
            .flush_every(match a.flush_every {
                Some(f) => f.duration(),
                None if self.input.is_live() => Some(std::time::Duration::from_secs(1)),
                None => None,
            });
        if let Some(w) = a.workers {
            b = b.workers(w);
        }
        if let Some(p) = a.parse_threads {
            b = b.parse_threads(p);
        }
        Ok(b.build(self.input.clone())?)
    }
}
