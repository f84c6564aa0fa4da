//! The password file (`~/.pgpass` or `PGPASSFILE`), matched as libpq does.

use std::path::Path;

use super::*;

/// Looks a password up in a pgpass file: the first line whose host, port,
/// database and user match (`*` matches anything; `\:` and `\\` escape).
/// Like libpq, a file readable by group or others is ignored.
pub fn pgpass_lookup(file: &Path, opts: &ConnectOptions) -> Option<String> {
    pgpass_read(file, opts).ok().flatten()
}

/// [`pgpass_lookup`], saying why a file that exists was not read.
pub(super) fn pgpass_read(file: &Path, opts: &ConnectOptions) -> Result<Option<String>, String> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(file) else { return Ok(None) };
    if !meta.is_file() {
        return Err(format!("the password file {} is not a plain file, so it was not read", file.display()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "the password file {} was ignored because group or others may read it (run chmod 0600 {})",
            file.display(),
            file.display()
        ));
    }
    let Ok(text) = std::fs::read_to_string(file) else { return Ok(None) };
    for (i, host) in opts.hosts.iter().enumerate() {
        let (host, port) = (host.pgpass_host(), opts.port_of(i).to_string());
        let want = [host.as_str(), port.as_str(), opts.dbname.as_str(), opts.user.as_str()];
        for line in text.lines() {
            if line.trim_start().starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let fields = split_pgpass_line(line);
            if fields.len() < 5 {
                continue;
            }
            if want.iter().zip(&fields).all(|(w, f)| f == "*" || f == w) {
                return Ok(Some(fields[4].clone()));
            }
        }
    }
    Ok(None)
}

fn split_pgpass_line(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    fields.last_mut().expect("never empty").push(n);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut().expect("never empty").push(c),
        }
    }
    fields
}
