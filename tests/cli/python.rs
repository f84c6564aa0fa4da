//! The Python package (`python/`, issue 33) against a real server: the wheel
//! is built with maturin into the venv of target/pyarrow (pyarrow, pandas,
//! polars and pytest from PyPI, made by scripts/ensure-deps) and
//! `python/tests` run under pytest. The build shares this checkout's
//! `target/` (debug profile), so after the first it only relinks what changed.

use std::path::PathBuf;
use std::process::Command;

use chute_testkit::shared;

use crate::columnar::python;

#[tokio::test]
async fn the_python_package_loads_pyarrow_polars_and_pandas_data() {
    let db = shared().fresh_db("python_pkg").await;
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let py = python();
    let venv = py.parent().and_then(|b| b.parent()).expect("the venv of target/pyarrow").to_owned();
    let bin = venv.join("bin");
    let path =
        std::env::join_paths(std::iter::once(bin.clone()).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())))
            .unwrap();
    // No __pycache__ left in the checkout's python/ (its sources are what the
    // venv imports): PYTHONDONTWRITEBYTECODE on everything that runs Python here.
    let built = Command::new(bin.join("maturin"))
        .current_dir(root.join("python"))
        .args(["develop", "--quiet"])
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("VIRTUAL_ENV", &venv)
        .env("PATH", &path)
        .env("CARGO_TARGET_DIR", root.join("target"))
        .output()
        .unwrap();
    assert!(built.status.success(), "maturin develop failed:\n{}", String::from_utf8_lossy(&built.stderr));
    let dir = crate::common::open_tempdir();
    let out = Command::new(&py)
        .current_dir(dir.path())
        .args(["-m", "pytest", "-v", "-p", "no:cacheprovider"])
        .arg(root.join("python/tests"))
        .env("CHUTE_TEST_URL", db.url())
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("PATH", &path)
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "pytest failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("passed") && !stdout.contains("skipped"), "{stdout}");
    eprintln!("{stdout}");
}
