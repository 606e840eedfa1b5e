"""benchmarks/report.py: a section is replaced in place, others are kept, and each carries its stamp."""

from benchmarks.report import write_section


def test_sections_are_replaced_in_place_and_stamped(tmp_path):
    path = tmp_path / "benchmarks.md"
    write_section("a", "A", "| x |\n|---|\n| 1 |", "timerl bench a", path)
    write_section("b", "B", "body b", "timerl bench b", path)
    write_section("a", "A", "| x |\n|---|\n| 2 |", "timerl bench a", path)
    text = path.read_text()
    assert text.count("<!-- begin a -->") == 1 and "| 2 |" in text and "| 1 |" not in text
    assert text.index("<!-- begin a -->") < text.index("<!-- begin b -->")
    assert "body b" in text and "`timerl bench a`" in text and "commit" in text
