//! The format a load's file names say, when no format is given.
//!
//! `chute load` and the Python package's `load_file` read Parquet and Arrow
//! IPC files when every name says so, and CSV otherwise; one function
//! decides that for both, so the two never disagree about a name. A name
//! is looked at through a `.gz` or `.zst` ending (text inputs are
//! decompressed as they are read), and a Parquet or Arrow file inside one
//! is refused rather than read as compressed CSV: it would load rows of
//! garbage and reject the rest.

/// A columnar format a file name says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileFormat {
    Parquet,
    /// Arrow IPC: a file (`.arrow`, `.feather`) or a stream (`.arrows`, `.ipc`).
    Arrow,
}

/// Endings of a whole-file compression that text inputs are read through.
const COMPRESSIONS: &[(&str, &str)] = &[("gz", "gzip -d"), ("zst", "zstd -d"), ("zstd", "zstd -d")];

impl FileFormat {
    /// What a name's extension (its last, lowercased) says, if it is columnar.
    fn of_extension(ext: &str) -> Option<FileFormat> {
        match ext {
            "parquet" | "pq" => Some(FileFormat::Parquet),
            "arrow" | "feather" | "arrows" | "ipc" => Some(FileFormat::Arrow),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            FileFormat::Parquet => "Parquet",
            FileFormat::Arrow => "Arrow IPC",
        }
    }

    /// "a Parquet file", "an Arrow IPC file".
    fn a_file(self) -> &'static str {
        match self {
            FileFormat::Parquet => "a Parquet file",
            FileFormat::Arrow => "an Arrow IPC file",
        }
    }

    /// The columnar format every name says (`-` is stdin, which says
    /// nothing), or `None` when no name is a Parquet or Arrow file's (the
    /// caller's default, CSV). Refused, with what to do: a Parquet or Arrow
    /// name under `.gz`/`.zst`, and Parquet or Arrow names mixed with others.
    pub fn from_names(names: &[&str]) -> Result<Option<FileFormat>, String> {
        let mut found: Vec<(&str, Option<FileFormat>)> = Vec::with_capacity(names.len());
        for &name in names {
            let (stem, ext) = split_extension(name);
            if let Some((_, undo)) = COMPRESSIONS.iter().find(|(c, _)| *c == ext) {
                let (_, inner) = split_extension(stem);
                if let Some(f) = FileFormat::of_extension(&inner) {
                    return Err(format!(
                        "{name} is {a_file} inside {ext} compression, which chute does not read through: decompress it first \
                         ({undo} {name}) and load {stem}; {kind} compresses inside the file{extra}",
                        a_file = f.a_file(),
                        kind = f.name(),
                        extra = match f {
                            FileFormat::Parquet => " (write it with compression='zstd' for smaller files)",
                            FileFormat::Arrow => " (its buffers may be lz4 or zstd)",
                        },
                    ));
                }
            }
            found.push((name, FileFormat::of_extension(&ext)));
        }
        let first = match found.iter().find_map(|(_, f)| *f) {
            None => return Ok(None),
            Some(f) => f,
        };
        if let Some((other, f)) = found.iter().find(|(n, f)| *f != Some(first) && *n != "-") {
            let is = match f {
                Some(f) => format!("is {}, not", f.a_file()),
                None => "is not".to_owned(),
            };
            return Err(format!("{other} {is} {} like the others: load each format with a command of its own", first.a_file()));
        }
        Ok(Some(first))
    }
}

/// A name's stem and its last extension, lowercased (`("a.parquet", "gz")`
/// for `a.parquet.gz`; an empty extension when there is none).
fn split_extension(name: &str) -> (&str, String) {
    let file = name.rsplit(['/', '\\']).next().unwrap_or(name);
    match file.rfind('.') {
        Some(dot) if dot > 0 => {
            let cut = name.len() - file.len() + dot;
            (&name[..cut], name[cut + 1..].to_ascii_lowercase())
        }
        _ => (name, String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_say_parquet_or_arrow_through_nothing_else() {
        let f = FileFormat::from_names;
        assert_eq!(f(&["a.parquet", "dir.v2/B.PQ"]), Ok(Some(FileFormat::Parquet)));
        assert_eq!(f(&["a.arrow", "b.feather", "c.arrows", "d.ipc"]), Ok(Some(FileFormat::Arrow)));
        assert_eq!(f(&["a.csv", "b.csv.gz", "c.tsv.zst", "-", "noext", ".parquet", "dir.parquet/x"]), Ok(None));
        assert_eq!(f(&[]), Ok(None));
    }

    #[test]
    fn a_columnar_file_inside_gzip_or_zstd_is_refused_with_what_to_do() {
        let e = FileFormat::from_names(&["ok.csv", "data/x.parquet.gz"]).unwrap_err();
        assert!(e.starts_with("data/x.parquet.gz is a Parquet file inside gz compression"), "{e}");
        assert!(e.contains("decompress it first (gzip -d data/x.parquet.gz) and load data/x.parquet"), "{e}");
        assert!(e.contains("Parquet compresses inside the file"), "{e}");
        let e = FileFormat::from_names(&["x.feather.ZST"]).unwrap_err();
        assert!(e.starts_with("x.feather.ZST is an Arrow IPC file inside zst compression"), "{e}");
        assert!(e.contains("zstd -d x.feather.ZST"), "{e}");
    }

    #[test]
    fn columnar_names_mixed_with_others_are_refused() {
        let e = FileFormat::from_names(&["a.parquet", "b.csv"]).unwrap_err();
        assert_eq!(e, "b.csv is not a Parquet file like the others: load each format with a command of its own");
        let e = FileFormat::from_names(&["a.csv", "b.arrow", "c.parquet"]).unwrap_err();
        assert!(e.starts_with("a.csv is not an Arrow IPC file like the others"), "{e}");
        let e = FileFormat::from_names(&["a.arrow", "c.parquet"]).unwrap_err();
        assert!(e.starts_with("c.parquet is a Parquet file, not an Arrow IPC file like the others"), "{e}");
    }
}
