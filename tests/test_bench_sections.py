"""`timerl bench` writes each table it prints into its own section of docs/benchmarks.md (here a scratch copy)."""

from benchmarks.__main__ import section


def test_a_benchmark_section_is_printed_and_written(tmp_path, capsys):
    path = tmp_path / "benchmarks.md"
    section("demo", "A demo table", "timerl bench demo", lambda rows: print(f"| rows |\n|---|\n| {rows} |"), 3,
            path=path)
    section("demo", "A demo table", "timerl bench demo", lambda rows: print(f"| rows |\n|---|\n| {rows} |"), 4,
            path=path)
    text = path.read_text()
    assert "| 4 |" in text and "| 3 |" not in text and text.count("## A demo table") == 1
    assert "`timerl bench demo`" in text and "commit" in text
    assert "| 4 |" in capsys.readouterr().out


def test_no_write_leaves_the_page_alone(tmp_path):
    path = tmp_path / "benchmarks.md"
    section("demo", "A demo table", "timerl bench demo", lambda: print("| x |"), write=False, path=path)
    assert not path.exists()
