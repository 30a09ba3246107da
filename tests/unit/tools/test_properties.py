"""Java properties files, read as java.util.Properties reads them."""

from __future__ import annotations

import pytest

from kstreams.tools.properties import PropertiesError, load_properties, parse_properties


def test_separators_comments_and_whitespace():
    text = "# comment\n! also\n\na=1\nb : 2\nc 3\n  d\t=\t4  \ne=\nf\nl:=m\n"
    assert parse_properties(text) == {"a": "1", "b": "2", "c": "3", "d": "4  ", "e": "", "f": "", "l": "=m"}


def test_continuations_and_escapes():
    text = "long = one \\\n    two\\\nthree\nkey\\ with\\=sep = v\\tw\nu=\\u0041\\n\nlit=back\\\\\n"
    assert parse_properties(text) == {
        "long": "one twothree",
        "key with=sep": "v\tw",
        "u": "A\n",
        "lit": "back\\",
    }


def test_a_later_key_wins():
    assert parse_properties("a=1\na=2\n") == {"a": "2"}


def test_a_malformed_unicode_escape_names_the_line():
    with pytest.raises(PropertiesError, match=r"app.properties, line 2: malformed \\uXXXX"):
        parse_properties("ok=1\nbad=\\u12G4\n", "app.properties")


def test_load_reads_a_file_and_names_a_missing_one(tmp_path):
    path = tmp_path / "app.properties"
    path.write_text("application.id=app\nbootstrap.servers=127.0.0.1:9092\n", encoding="utf-8")
    assert load_properties(path) == {"application.id": "app", "bootstrap.servers": "127.0.0.1:9092"}
    with pytest.raises(PropertiesError, match=r"Cannot read the properties file .*missing"):
        load_properties(tmp_path / "missing")
