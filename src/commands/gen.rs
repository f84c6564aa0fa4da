//! `chute gen`: generated data to stdout or a file, for benchmarks and for
//! loaders other than chute.
//!
//! The rows are the ones `chute load --gen` loads in-process, so a file and an
//! in-process load of the same workload and seed hold the same data. Row
//! workloads are cut into chunks that several threads write at once; the
//! chunks are written out in order, so the output does not depend on the
//! thread count. A closed pipe (`chute gen … | head`) ends the run quietly.

use std::io::Write;
use std::path::Path;
use std::sync::mpsc;
use std::time::Instant;

use anyhow::Context;
use chute_core::generate::{AnyWorkload, StreamWorkload, Workload, workload};
use chute_core::ident::QualifiedName;

use crate::Outcome;
use crate::args::{GenArg, GenArgs, GenFormatArg};
use crate::settings::generate::{check_options, default_table, params, rows, workload_name};

/// Bytes gathered before each write.
const WRITE_BYTES: usize = 1 << 20;
/// Rows one thread writes in one go.
const CHUNK_ROWS: u64 = 32_768;

pub fn run(a: GenArgs) -> anyhow::Result<Outcome> {
    let name = workload_name(a.workload);
    let stream = matches!(a.workload, GenArg::Iot | GenArg::Devops);
    check_options(&a.options, a.workload, a.interval.as_deref())?;
    anyhow::ensure!(!(a.header && stream), "--header does not apply to {name}: a tsbs file has its own header");
    check_format(a.format, name, stream)?;
    let rows = rows(&a.options, stream);
    let params = params(&a.options, a.interval.as_deref())?;
    let generator = workload(name, rows, &params).map_err(anyhow::Error::msg)?;

    if let Some(table) = &a.create {
        let AnyWorkload::Rows(w) = &generator else {
            anyhow::bail!("{name} files name their own tables: chute load --format tsbs FILE creates them");
        };
        let table = QualifiedName::parse(if table.is_empty() { default_table(a.workload) } else { table })?;
        println!("{};", w.create_table_sql(&table.quoted()));
        return Ok(Outcome::Ok);
    }

    let started = Instant::now();
    let (mut out, path) = open_output(a.out.as_deref(), name)?;
    let written = match generator {
        AnyWorkload::Rows(w) => {
            if a.header {
                let names: Vec<String> = w.columns().into_iter().map(|(n, _)| n).collect();
                writeln!(out, "{}", names.join(","))?;
            }
            write_rows(w.as_ref(), rows, &mut out)?;
            rows
        }
        AnyWorkload::Stream(mut s) => write_stream(s.as_mut(), &mut out)?,
    };
    out.flush()?;
    if let Some(path) = path {
        let seconds = started.elapsed().as_secs_f64();
        eprintln!("chute: wrote {written} rows to {} in {seconds:.2} s ({:.0} rows/s)", path.display(), written as f64 / seconds.max(1e-9));
    }
    Ok(Outcome::Ok)
}

fn check_format(format: Option<GenFormatArg>, name: &str, stream: bool) -> anyhow::Result<()> {
    match (format, stream) {
        (Some(GenFormatArg::Tsbs), false) => {
            anyhow::bail!("{name} writes CSV rows (--format csv); tsbs files come from iot and devops")
        }
        (Some(GenFormatArg::Csv), true) => {
            anyhow::bail!(
                "{name} writes a tsbs file (--format tsbs), whose header names the tables it fills; CSV rows come from conditions, lineitem, accounts and orders"
            )
        }
        _ => Ok(()),
    }
}

/// Stdout, or the file at `path` (`-` is stdout too), and the path to report.
fn open_output<'p>(path: Option<&'p Path>, name: &str) -> anyhow::Result<(Box<dyn Write>, Option<&'p Path>)> {
    let Some(path) = path.filter(|p| p.as_os_str() != "-") else {
        return Ok((Box::new(std::io::BufWriter::with_capacity(WRITE_BYTES, std::io::stdout().lock())), None));
    };
    let compressed = path.extension().is_some_and(|e| e == "gz" || e == "zst");
    anyhow::ensure!(
        !compressed,
        "chute gen writes plain files; compress through a pipe instead: chute gen {name} … | gzip > {}",
        path.display()
    );
    let file = std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    Ok((Box::new(std::io::BufWriter::with_capacity(WRITE_BYTES, file)), Some(path)))
}

/// Writes rows `0..rows` as CSV. Threads take every n-th chunk and hand
/// each over through their own small channel; reading the channels in turn
/// puts the chunks back in order and bounds the memory in flight.
fn write_rows(w: &dyn Workload, rows: u64, out: &mut dyn Write) -> std::io::Result<()> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(rows.div_ceil(CHUNK_ROWS).max(1) as usize);
    let chunks = rows.div_ceil(CHUNK_ROWS);
    std::thread::scope(|scope| {
        let receivers: Vec<mpsc::Receiver<Vec<u8>>> = (0..threads as u64)
            .map(|t| {
                let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(2);
                scope.spawn(move || {
                    for chunk in (t..chunks).step_by(threads) {
                        let from = chunk * CHUNK_ROWS;
                        let mut buf = Vec::with_capacity(WRITE_BYTES);
                        for seq in from..(from + CHUNK_ROWS).min(rows) {
                            w.write_csv(seq, &mut buf);
                        }
                        // The receiver is gone when writing failed: stop.
                        if tx.send(buf).is_err() {
                            return;
                        }
                    }
                });
                rx
            })
            .collect();
        for chunk in 0..chunks {
            let buf = receivers[(chunk % threads as u64) as usize].recv().expect("a generator thread ended early");
            out.write_all(&buf)?;
        }
        Ok(())
    })
}

/// Writes a stream to its end; returns its row count.
fn write_stream(s: &mut dyn StreamWorkload, out: &mut dyn Write) -> std::io::Result<u64> {
    let mut buf = Vec::with_capacity(2 * WRITE_BYTES);
    while s.fill(&mut buf) {
        if buf.len() >= WRITE_BYTES {
            out.write_all(&buf)?;
            buf.clear();
        }
    }
    out.write_all(&buf)?;
    Ok(s.rows())
}
