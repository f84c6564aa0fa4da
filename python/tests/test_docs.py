"""Every ```python example of docs/python.md runs as written, in order, in one
namespace, with `url` the test server's URL (tests/cli/python.rs)."""

import os
import pathlib
import re

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "python.md"


def test_every_python_example_of_the_book_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"^```python\n(.*?)^```", DOC.read_text(), flags=re.S | re.M)
    assert len(blocks) >= 3, "the page lost its examples"
    monkeypatch.chdir(tmp_path)
    namespace = {"url": os.environ["CHUTE_TEST_URL"]}
    for i, code in enumerate(blocks):
        exec(compile(code, f"{DOC}:block {i + 1}", "exec"), namespace)
