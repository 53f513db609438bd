"""CSV text values as Spark's own CSV writer writes them, so that Spark's reader reads them back.

Spark's CSV writer (univocity, default options: quote ``"``, escape ``\\``, escapeQuotes=true,
quoteAll=false) escapes a quote as ``\\"``, never by doubling it (RFC 4180's ``""``, which
Spark's reader keeps as two quote characters). These tests write odd values with the sink and
with ``df.write.csv`` and compare the bytes, and what Spark's reader (and the manifest oracle)
reads back from both.

Where Spark's reader cannot give a value back, the tests expect what it gives (``expected``):
an empty string reads back as null (it is written ``""``, null as nothing), and a value holding
a line break reads back whole only with ``multiLine=true`` (the default reader splits the file
into lines first). Where Spark's writer changes a value, the sink does not: Spark's writer trims
every character up to ``' '`` off both ends (``ignoreLeading/TrailingWhiteSpace``, true on
write; ``spark_expected``), the sink quotes such a value, which Spark's reader reads unchanged.
"""

from __future__ import annotations

import glob
import os

import pyarrow as pa
import pytest
from eosink_files.sink import FilesSink
from files_helpers import run
from spark_manifest_oracle import OracleError, read_committed

ODD = [
    "plain",
    'a"b',
    '"',
    '""',
    '"quoted"',
    'x"',
    "a\\b",
    "\\",
    "x\\",
    '\\"',
    'a\\"b',
    "\\\\",
    "\\n",
    "a,b",
    ",",
    "a\\,b",
    "a\nb",
    "a\r\nb",
    "a\rb",
    "x\n",
    " lead",
    "trail ",
    "  both  ",
    "\tx\t",
    "   ",
    "",
    None,
    "ü€😀",
    "\u2028",
    "a\tb",
    "#x",
    " #y",
    "it's",
    'mix "a,b"\\c\n',
]
BREAKS = ("\n", "\r")
BLANK = "".join(map(chr, range(33)))  # what Spark's CSV writer trims off both ends
DDL = "s string, id long, t string, n long"


def spark_quotes(value: str) -> bool:
    """Whether Spark's writer quotes the value (as a field past the first)."""
    return value == "" or any(c in value for c in ',"\r\n')


#: The values Spark's writer writes unchanged (nothing to trim) and quotes when they hold a
#: backslash (the sink quotes every such value): the sink writes their bytes.
SPARK_KEEPS = [
    v for v in ODD if v is None or (v == v.strip(BLANK) and ("\\" not in v or spark_quotes(v)))
]


def expected(value: str | None) -> str | None:
    """What Spark's reader (multiLine=true) gives back from the sink's file: ``""`` is null."""
    return value or None


def spark_expected(value: str | None) -> str | None:
    """What Spark's reader (multiLine=true) gives back from Spark's own writer's file."""
    return None if value is None else value.strip(BLANK) or None


def odd_table(values=ODD) -> pa.Table:
    """``s`` (first: Spark quotes a first field starting with ``#``) and ``t`` hold the values,
    ``n`` a null every third row."""
    return pa.table(
        {
            "s": pa.array(values, pa.string()),
            "id": pa.array(range(len(values)), pa.int64()),
            "t": pa.array(values, pa.string()),
            "n": pa.array([None if i % 3 == 0 else i for i in range(len(values))], pa.int64()),
        }
    )


def part_file(folder: str) -> bytes:
    (path,) = glob.glob(os.path.join(folder, "part-*.csv"))
    with open(path, "rb") as f:
        return f.read()


def write_both(spark, tmp_path, table: pa.Table, header: bool) -> tuple[str, str]:
    """The sink's folder (one task, one file) and Spark's own ``df.write.csv`` folder."""
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "spark")
    sink = FilesSink(path=ours, format="csv", csv_header=header)
    assert run(sink, 0, [table.to_batches()]).status == "committed"
    df = spark.createDataFrame(table).coalesce(1)
    df.write.option("header", str(header).lower()).csv(theirs)
    return ours, theirs


def spark_rows(spark, folder: str, ddl: str, header: bool, multiline: bool) -> list[tuple]:
    df = (
        spark.read.schema(ddl)
        .option("header", str(header).lower())
        .option("multiLine", str(multiline).lower())
        .csv(folder)
    )
    return sorted((tuple(r) for r in df.collect()), key=repr)


@pytest.mark.parametrize("header", [True, False])
def test_sink_writes_the_bytes_spark_writes(spark, tmp_path, header):
    ours, theirs = write_both(spark, tmp_path, odd_table(SPARK_KEEPS), header)
    assert part_file(ours).split(b"\n") == part_file(theirs).split(b"\n")


@pytest.mark.parametrize("header", [True, False])
def test_spark_reads_every_value_back(spark, tmp_path, header):
    """With multiLine=true, every value (line breaks too) comes back as it was written, but
    "" (null); from Spark's own files, the values with blank ends come back trimmed."""
    ours, theirs = write_both(spark, tmp_path, odd_table(), header)
    for folder, want in ((ours, expected), (theirs, spark_expected)):
        read = spark_rows(spark, folder, DDL, header, multiline=True)
        by_id = {r[1]: r for r in read}
        assert [by_id[i][0] for i in range(len(ODD))] == [want(v) for v in ODD]
        assert [by_id[i][2] for i in range(len(ODD))] == [want(v) for v in ODD]
        assert [by_id[i][3] for i in range(len(ODD))] == odd_table().column("n").to_pylist()


def test_blank_ends_are_kept_quoted(spark, tmp_path):
    """Where Spark's writer trims (``lead`` for `` lead``, ``""`` for a blank value), the sink
    quotes the value whole."""
    ours, theirs = write_both(spark, tmp_path, odd_table([" lead", "\tx\t", "   ", "x\n"]), False)
    assert part_file(ours) == (
        b'" lead",0," lead",\n"\tx\t",1,"\tx\t",1\n"   ",2,"   ",2\n"x\n",3,"x\n",\n'
    )
    assert part_file(theirs) == b'lead,0,lead,\nx,1,x,1\n"",2,"",2\n"x",3,"x",\n'


def test_values_without_line_breaks_read_back_by_spark_and_the_oracle(spark, tmp_path):
    """With default reader options (multiLine=false), every value without a line break comes
    back; the oracle reads what Spark reads."""
    values = [v for v in ODD if v is None or not any(b in v for b in BREAKS)]
    table = odd_table(values)
    ours, _ = write_both(spark, tmp_path, table, True)
    read = spark.read.schema(DDL).option("header", "true").csv(ours).toArrow().sort_by("id")
    assert read.column("s").to_pylist() == [expected(v) for v in values]
    assert read.column("t").to_pylist() == [expected(v) for v in values]
    assert read.column("n").to_pylist() == table.column("n").to_pylist()
    oracle, _ = read_committed(ours, table.schema, format="csv")
    assert oracle.sort_by("id").to_pylist() == read.to_pylist()


def test_oracle_refuses_a_value_spark_reads_cut_at_a_line_break(tmp_path):
    """Spark's default reader splits a quoted value holding a line break into two records:
    the oracle raises rather than guess (read such folders with multiLine=true)."""
    out = str(tmp_path / "out")
    table = odd_table(["a\nb"])
    assert run(FilesSink(path=out, format="csv"), 0, [table.to_batches()]).status == "committed"
    with pytest.raises(OracleError, match="line break"):
        read_committed(out, table.schema, format="csv")


def test_a_null_alone_in_its_row_is_kept(spark, tmp_path):
    """A one-column row holding null: Spark's writer writes an empty line, which its reader
    skips (the row is lost); the sink writes ``""``, which Spark reads back as null."""
    out = str(tmp_path / "out")
    table = pa.table({"s": pa.array(["a", None, "", "b"], pa.string())})
    assert run(FilesSink(path=out, format="csv"), 0, [table.to_batches()]).status == "committed"
    read = spark.read.schema("s string").option("header", "true").csv(out).collect()
    assert sorted((r.s for r in read), key=repr) == sorted(["a", None, None, "b"], key=repr)
    oracle, _ = read_committed(out, table.schema, format="csv")
    assert sorted(oracle.column("s").to_pylist(), key=repr) == sorted(
        ["a", None, None, "b"], key=repr
    )


def test_header_names_are_quoted_as_spark_quotes_them(spark, tmp_path):
    table = pa.table({"#a": ["1"], "b,c": ["2"], 'd"e': ["3"], "ü": ["5"]})
    ours, theirs = write_both(spark, tmp_path, table, True)
    assert part_file(ours) == part_file(theirs)


def test_a_backslash_is_always_escaped_inside_quotes(spark, tmp_path):
    """Spark's writer leaves ``a\\b`` unquoted, its backslash bare (its reader takes it
    literally there; a reader that takes a backslash for an escape everywhere, pyarrow's, drops
    it); the sink quotes it, ``"a\\\\b"``, which Spark's reader reads back the same."""
    values = ["a\\b", "\\", "x\\"]
    table = pa.table({"id": pa.array([0, 1, 2], pa.int64()), "s": pa.array(values)})
    ours, theirs = write_both(spark, tmp_path, table, False)
    assert part_file(ours) == b'0,"a\\\\b"\n1,"\\\\"\n2,"x\\\\"\n'
    assert part_file(theirs) == b"0,a\\b\n1,\\\n2,x\\\n"
    for folder in (ours, theirs):
        read = spark_rows(spark, folder, "id long, s string", False, multiline=False)
        assert read == [(0, "a\\b"), (1, "\\"), (2, "x\\")]
