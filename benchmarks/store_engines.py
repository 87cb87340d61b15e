"""Which embedded engine should read the results store: DuckDB, polars or pyarrow, measured (issue 44).

Issue 44 has the store's reads go through one embedded engine, chosen by measurement. This script
writes two stores of real-shaped cnnbench records into ``--data`` (kept there for the next run;
``--remove`` deletes them at the end):

- **varied**: ``--records`` records (default 100,000), each a real ``cnnbench run --model trivial
  --device cpu --num-batches 100`` record (run once here, or ``--template``) with 100 step times,
  varied over 8 models x 4 batch sizes x 4 device counts x 10 machine labels as a real store
  varies, every ``run_id`` and ``started_at`` its own, one JSON Lines file per machine label (the
  store's own file names, :func:`cnnbench.results.store.machine_file_name`);
- **uniform**: as many records, every one the same configuration and machine (one file), for
  comparison.

Then, each in a fresh process (interpreter start and imports included, as a user waits for it),
the order of the cases turned from round to round, over ``--rounds``:

- each engine's read of the **7 summary columns** of every record (``run_id``, ``status``,
  ``config.model``, ``config.batch_size``, ``config.num_devices``, ``environment.machine``,
  ``metrics.total_images_per_sec``) into Python rows, as ``results list`` would show them, and of
  **every column** (step-time lists included) into the engine's in-memory table: DuckDB
  ``read_json`` (``CREATE TABLE ... AS``), polars ``scan_ndjson`` (``.collect()``), pyarrow
  ``pyarrow.json.read_json`` (one table per file, concatenated; the summary read with an explicit
  schema of the 7 fields and the rest ignored); DuckDB's and polars' summary reads also with the 7
  fields' schema given (``read_json(..., columns={...})``, ``scan_ndjson(..., schema=...)``), and
  DuckDB's every-column read also with the types of the first file's first 100 records given
  (``DESCRIBE`` of a ``sample_size=100`` read, timed with the rest);
- today's reader as the baseline: ``read_records(store, step_times=False)`` and ``cnnbench
  results list --limit 1``;
- ``cnnbench results query`` (the checked reader, then DuckDB): the median images/sec per model
  (view ``runs``) and the five runs with the longest tail of step times (view ``steps``).

"cold": every file of the store dropped from the page cache first (``posix_fadvise(...,
POSIX_FADV_DONTNEED)`` on each; the script prints how much of the store was still resident
after the first drop, by ``mincore``), and for cnnbench its parsed-record caches (kept in
``--data``'s ``record-caches``, ``CNNBENCH_CACHE_DIR``) removed as well, so its cold read parses
and writes them again. "warm": the files read once
just before (and cnnbench's caches present). Wall time, CPU time (user + system of the process
and its threads) and peak memory (``ru_maxrss`` of the child, from ``wait4``) are printed per
round; the machine's load average before and after each measurement.

Also: each engine's installed size (the bytes of the files its wheel installed, and of the
wheels it requires: polars' runtime), its import time in a fresh interpreter (best and worst of
``--rounds`` + 2), and a probe of the features the issue needs: SQL over views, a sandbox
(DuckDB's ``enable_external_access`` / ``lock_configuration``), and reading a file handed over as
``/proc/self/fd/N``.

And (``behaviours``): how DuckDB's ``read_json`` reads the lines a shared store may hold
(:data:`HOSTILE_LINES`: numbers as text, a key given twice, a section that is not an object, NaN,
a lone surrogate, a torn last line...), with the contract's columns typed and as JSON leaves, beside
what cnnbench's checked reader makes of each line.
And (``sqlcosts``): what checking the record contract in SQL costs, each DuckDB read of the first
store in one process: typed summary columns, the contract's columns as JSON leaves, the lines as
text with ``json_extract``, line numbers per file, and the sections read as JSON.

An engine not installed is named in one line and skipped (none of them is a dependency of
cnnbench; install them with ``.venv/bin/pip install duckdb polars``).

    .venv/bin/python benchmarks/store_engines.py --rounds 3
    .venv/bin/python benchmarks/store_engines.py --records 2000 --rounds 1 --data /tmp/engines-small
    .venv/bin/python benchmarks/store_engines.py --stores varied --cases "7 summary" --skip sizes,features

This is a benchmark, not a test: it prints figures and asserts nothing about them.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime
import importlib.metadata
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from report_store_speed import drop_cache, record_caches, use_record_caches  # noqa: E402

MODELS = ["trivial", "resnet18", "resnet50", "vgg16", "inception3", "mobilenet_v2", "alexnet", "densenet121"]
BATCH_SIZES = [32, 64, 128, 256]
DEVICE_COUNTS = [1, 2, 4, 8]
MACHINES = [f"bench-{k:02d}" for k in range(10)]
STEP_TIMES = 100

ENGINES = {"duckdb": "duckdb", "polars": "polars", "pyarrow": "pyarrow"}
"""Engine name: the module to import (the distribution of the same name; polars' requires its runtime)."""

SUMMARY = ["run_id", "status", "config.model", "config.batch_size", "config.num_devices", "environment.machine",
           "metrics.total_images_per_sec"]

# Each child: argv[1] the store's folder, argv[2] the number of records it must find.
DUCKDB_SUMMARY = """
import sys, duckdb
con = duckdb.connect()
rows = con.execute("SELECT run_id, status, config.model, config.batch_size, config.num_devices, environment.machine, "
                   "metrics.total_images_per_sec FROM read_json(?, format='newline_delimited')",
                   [sys.argv[1] + '/*.jsonl']).fetchall()
assert len(rows) == int(sys.argv[2]), len(rows)
"""
DUCKDB_ALL = """
import sys, duckdb
con = duckdb.connect()
con.execute("CREATE TABLE runs AS SELECT * FROM read_json(?, format='newline_delimited')", [sys.argv[1] + '/*.jsonl'])
n = con.execute("SELECT count(*) FROM runs").fetchone()[0]
assert n == int(sys.argv[2]), n
"""
DUCKDB_SUMMARY_SCHEMA = """
import sys, duckdb
con = duckdb.connect()
rows = con.execute("SELECT run_id, status, config.model, config.batch_size, config.num_devices, environment.machine, "
                   "metrics.total_images_per_sec FROM read_json(?, format='newline_delimited', columns={"
                   "run_id: 'VARCHAR', status: 'VARCHAR', "
                   "config: 'STRUCT(model VARCHAR, batch_size BIGINT, num_devices BIGINT)', "
                   "environment: 'STRUCT(machine VARCHAR)', metrics: 'STRUCT(total_images_per_sec DOUBLE)'})",
                   [sys.argv[1] + '/*.jsonl']).fetchall()
assert len(rows) == int(sys.argv[2]) and rows[0][2] is not None, (len(rows), rows[:1])
"""
DUCKDB_ALL_SCHEMA = """
import sys, glob, duckdb
con = duckdb.connect()
files = sorted(glob.glob(sys.argv[1] + '/*.jsonl'))
described = con.execute("DESCRIBE SELECT * FROM read_json(?, format='newline_delimited', sample_size=100)",
                        [files[0]]).fetchall()
columns = "{" + ", ".join(f"'{name}': '{kind}'" for name, kind, *_ in described) + "}"
con.execute(f"CREATE TABLE runs AS SELECT * FROM read_json(?, format='newline_delimited', columns={columns})",
            [sys.argv[1] + '/*.jsonl'])
n = con.execute("SELECT count(*) FROM runs").fetchone()[0]
assert n == int(sys.argv[2]), n
"""
POLARS_SUMMARY = """
import sys, glob, polars as pl
files = sorted(glob.glob(sys.argv[1] + '/*.jsonl'))
c, e, m = pl.col('config').struct, pl.col('environment').struct, pl.col('metrics').struct
rows = pl.scan_ndjson(files).select(pl.col('run_id'), pl.col('status'), c.field('model'), c.field('batch_size'),
                                    c.field('num_devices'), e.field('machine'),
                                    m.field('total_images_per_sec')).collect().rows()
assert len(rows) == int(sys.argv[2]), len(rows)
"""
POLARS_ALL = """
import sys, glob, polars as pl
df = pl.scan_ndjson(sorted(glob.glob(sys.argv[1] + '/*.jsonl'))).collect()
assert df.height == int(sys.argv[2]), df.height
"""
POLARS_SUMMARY_SCHEMA = """
import sys, glob, polars as pl
files = sorted(glob.glob(sys.argv[1] + '/*.jsonl'))
schema = {"run_id": pl.String, "status": pl.String,
          "config": pl.Struct({"model": pl.String, "batch_size": pl.Int64, "num_devices": pl.Int64}),
          "environment": pl.Struct({"machine": pl.String}),
          "metrics": pl.Struct({"total_images_per_sec": pl.Float64})}
c, e, m = pl.col('config').struct, pl.col('environment').struct, pl.col('metrics').struct
rows = pl.scan_ndjson(files, schema=schema).select(
    pl.col('run_id'), pl.col('status'), c.field('model'), c.field('batch_size'), c.field('num_devices'),
    e.field('machine'), m.field('total_images_per_sec')).collect().rows()
assert len(rows) == int(sys.argv[2]) and rows[0][2] is not None, (len(rows), rows[:1])
"""
PYARROW_SUMMARY = """
import sys, glob, pyarrow as pa, pyarrow.json as pj
schema = pa.schema([("run_id", pa.string()), ("status", pa.string()),
                    ("config", pa.struct([("model", pa.string()), ("batch_size", pa.int64()),
                                          ("num_devices", pa.int64())])),
                    ("environment", pa.struct([("machine", pa.string())])),
                    ("metrics", pa.struct([("total_images_per_sec", pa.float64())]))])
opts = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
t = pa.concat_tables([pj.read_json(f, parse_options=opts) for f in sorted(glob.glob(sys.argv[1] + '/*.jsonl'))])
t = t.flatten()
rows = list(zip(*(t.column(name).to_pylist() for name in t.column_names)))
assert len(rows) == int(sys.argv[2]) and len(t.column_names) == 7, (len(rows), t.column_names)
"""
PYARROW_ALL = """
import sys, glob, pyarrow as pa, pyarrow.json as pj
t = pa.concat_tables([pj.read_json(f) for f in sorted(glob.glob(sys.argv[1] + '/*.jsonl'))],
                     promote_options="permissive")
assert t.num_rows == int(sys.argv[2]), t.num_rows
"""
CNNBENCH_READ = """
import sys
from cnnbench.results.store import read_records
r, problems = read_records(sys.argv[1], step_times=False)
assert len(r) == int(sys.argv[2]) and not problems, (len(r), problems[:1])
"""
IMPORT_TIME = "import time, importlib; t0 = time.perf_counter(); importlib.import_module({!r}); " \
              "print(time.perf_counter() - t0)"

FEATURES = {
    "duckdb": """
import os, sys, duckdb
path = sorted(__import__('glob').glob(sys.argv[1] + '/*.jsonl'))[0]
def probe(label, fn):
    try:
        print(f"{label}: {fn()}")
    except Exception as exc:
        print(f"{label}: refused ({type(exc).__name__}: {str(exc).splitlines()[0][:110]})")
con = duckdb.connect()
fd = os.open(path, os.O_RDONLY)
probe("read_json of /proc/self/fd/N", lambda: con.execute(
    f"SELECT count(*) FROM read_json('/proc/self/fd/{fd}', format='newline_delimited')").fetchone()[0])
con.execute(f"CREATE TABLE runs AS SELECT * FROM read_json('/proc/self/fd/{fd}', format='newline_delimited')")
con.execute("CREATE VIEW summary AS SELECT config.model AS model, count(*) AS n, "
            "median(metrics.total_images_per_sec) AS ips FROM runs GROUP BY ALL")
con.execute(f"CREATE VIEW live AS SELECT * FROM read_json('{path}', format='newline_delimited')")
probe("SQL over a view of a table", lambda: con.execute("SELECT count(*) FROM summary").fetchone()[0])
con.execute("SET enable_external_access = false")
con.execute("SET lock_configuration = true")
probe("sandboxed: the view over the in-memory table", lambda: con.execute("SELECT sum(n) FROM summary").fetchone()[0])
probe("sandboxed: a view over read_json of the file", lambda: con.execute("SELECT count(*) FROM live").fetchone()[0])
probe("sandboxed: read_csv('/etc/hostname')", lambda: con.execute(
    "SELECT * FROM read_csv('/etc/hostname')").fetchall())
probe("sandboxed: read of /proc/self/fd/N", lambda: con.execute(
    f"SELECT count(*) FROM read_json('/proc/self/fd/{fd}', format='newline_delimited')").fetchone()[0])
probe("sandboxed: COPY runs TO a file", lambda: con.execute("COPY runs TO '/tmp/engines-probe.csv'").fetchall())
probe("sandboxed: SET enable_external_access = true", lambda: con.execute(
    "SET enable_external_access = true").fetchall())
con2 = duckdb.connect()  # the store's files allowed by name, nothing else
con2.execute(f"SET allowed_paths = ['/proc/self/fd/{fd}']")
con2.execute("SET enable_external_access = false")
con2.execute("SET lock_configuration = true")
probe("allowed_paths ['/proc/self/fd/N'], then sandboxed: a read of it", lambda: con2.execute(
    f"SELECT count(*) FROM read_json('/proc/self/fd/{fd}', format='newline_delimited')").fetchone()[0])
probe("allowed_paths ['/proc/self/fd/N'], then sandboxed: read_csv('/etc/hostname')", lambda: con2.execute(
    "SELECT * FROM read_csv('/etc/hostname')").fetchall())
""",
    "polars": """
import os, sys, glob, polars as pl
path = sorted(glob.glob(sys.argv[1] + '/*.jsonl'))[0]
def probe(label, fn):
    try:
        print(f"{label}: {fn()}")
    except Exception as exc:
        print(f"{label}: refused ({type(exc).__name__}: {str(exc).splitlines()[0][:110]})")
fd = os.open(path, os.O_RDONLY)
probe("scan_ndjson of /proc/self/fd/N", lambda: pl.scan_ndjson(f'/proc/self/fd/{fd}').select(pl.len()).collect().item())
ctx = pl.SQLContext(runs=pl.scan_ndjson(path).select(pl.col('config').struct.field('model'),
                                                     pl.col('metrics').struct.field('total_images_per_sec')))
probe("SQL (SQLContext) over a frame", lambda: ctx.execute(
    "SELECT model, count(*) AS n FROM runs GROUP BY model").collect().height)
probe("SQL: CREATE VIEW", lambda: ctx.execute("CREATE VIEW v AS SELECT * FROM runs").collect().height)
probe("SQL reading a file of its own choosing (read_csv('/etc/hostname'))", lambda: "read, columns " + str(
    ctx.execute("SELECT * FROM read_csv('/etc/hostname')").collect().columns))
print("sandbox setting: none found in polars' SQLContext (probe above shows what its SQL may read)")
""",
    "pyarrow": """
import os, sys, glob, pyarrow.json as pj
path = sorted(glob.glob(sys.argv[1] + '/*.jsonl'))[0]
fd = os.open(path, os.O_RDONLY)
try:
    print(f"read_json of /proc/self/fd/N: {pj.read_json(f'/proc/self/fd/{fd}').num_rows}")
except Exception as exc:
    print(f"read_json of /proc/self/fd/N: refused ({exc})")
print("SQL: none (pyarrow.compute and Acero plans, no SQL front end); sandbox: none")
""",
}


HOSTILE_LINES: tuple[tuple[str, bytes], ...] = (
    ("a plain record", b'{"schema_version":2,"status":"ok","config":{"batch_size":32},"environment":{},'
                       b'"metrics":{"total_images_per_sec":1.5}}'),
    ("a number as text", b'{"schema_version":2,"status":"ok","config":{"batch_size":"32"},"environment":{},'
                         b'"metrics":{"total_images_per_sec":"2.5"}}'),
    ("a fraction and a boolean where numbers go", b'{"schema_version":2,"status":"ok","config":{"batch_size":1.5},'
                                                  b'"environment":{},"metrics":{"total_images_per_sec":true}}'),
    ("an integer beyond 64 bits, NaN", b'{"schema_version":2,"status":"ok","config":{"batch_size":'
                                       b'99999999999999999999999},"environment":{},"metrics":'
                                       b'{"total_images_per_sec":NaN}}'),
    ("1e400", b'{"schema_version":2,"status":"ok","config":{"batch_size":4},"environment":{},'
              b'"metrics":{"total_images_per_sec":1e400}}'),
    ("a key twice", b'{"schema_version":2,"status":"ok","status":"bad","config":{"batch_size":5},"environment":{},'
                    b'"metrics":{}}'),
    ("a section as text", b'{"schema_version":2,"status":"ok","config":"abc","environment":{},"metrics":{}}'),
    ("a section as null", b'{"schema_version":2,"status":"ok","config":null,"environment":{},"metrics":{}}'),
    ("nested 20 deep in a field no command reads", b'{"schema_version":2,"status":"ok","config":{},'
                                                   b'"environment":{},"metrics":{},"x":' + b'{"a":' * 20 + b'1'
                                                   + b'}' * 20 + b'}'),
    ("NaN in a field no command reads", b'{"schema_version":2,"status":"ok","config":{},"environment":'
                                        b'{"load":NaN},"metrics":{}}'),
    ("a lone surrogate", b'{"schema_version":2,"status":"ok","config":{"model":"\\ud800x"},"environment":{},'
                         b'"metrics":{}}'),
    ("not UTF-8", b'{"schema_version":2,"status":"ok","config":{"model":"r\xff"},"environment":{},"metrics":{}}'),
    ("a list, not an object", b"[1,2]"),
    ("malformed", b'{"status":"ok", broken'),
    ("blank (spaces)", b"   "),
    ("a stray \\r at the end", b'{"schema_version":2,"status":"ok","config":{"batch_size":7},"environment":{},'
                               b'"metrics":{}}\r'),
    ("torn: the last line, no newline", b'{"schema_version":2,"status":"ok","config":{"batch_size":10},"metr'),
)
"""Lines a shared store may hold, each read by the checked reader and by DuckDB (``behaviours``)."""

BEHAVIOURS = """
import json, os, sys, duckdb
from cnnbench.results.lines import loads, parse_line
lines = json.loads(sys.argv[1])
labels = [label for label, _ in lines]
raw = [bytes.fromhex(text) for _, text in lines]
path = sys.argv[2]
with open(path, "wb") as f:
    f.write(b"\\n".join(raw))  # the last line without its newline: torn
fd = os.open(path, os.O_RDONLY)
con = duckdb.connect()
source = (f"read_json('/proc/self/fd/{fd}', format='newline_delimited', records=true, ignore_errors=true, "
          "columns={{'status': '{s}', 'config': 'STRUCT(batch_size {n}, model VARCHAR)', "
          "'metrics': 'STRUCT(total_images_per_sec {d})'}})")
typed = con.execute("SELECT status, config, metrics FROM "
                    + source.format(s="VARCHAR", n="BIGINT", d="DOUBLE")).fetchall()
leaves = con.execute("SELECT status, config.batch_size, metrics.total_images_per_sec FROM "
                     + source.format(s="JSON", n="JSON", d="JSON")).fetchall()
try:
    strict = "read (" + str(con.execute("SELECT count(*) FROM " + source.format(s="VARCHAR", n="BIGINT", d="DOUBLE")
                                        .replace("ignore_errors=true", "ignore_errors=false")).fetchone()[0]) + " rows)"
except duckdb.Error as exc:
    strict = "refused: " + str(exc).splitlines()[0][:100]
try:
    text = con.execute(f"SELECT count(*) FROM read_csv('/proc/self/fd/{fd}', columns={{'line': 'VARCHAR'}}, "
                       "delim='\\\\x01', quote='', escape='', header=false, auto_detect=false, "
                       "new_line='\\\\n')").fetchone()[0]
    lines_as_text = f"read ({text} rows)"
except duckdb.Error as exc:
    lines_as_text = "refused: " + str(exc).splitlines()[0][:100]
print(f"{len(raw)} lines; read_json with ignore_errors gave {len(typed)} rows (one per line that is not blank, "
      "in file order: a line it cannot read is a row of nulls, not left out)")
print(f"read_json without ignore_errors: {strict}")
print(f"the lines as text (read_csv, one VARCHAR column): {lines_as_text}")
rows = iter(zip(typed, leaves))
for index, (label, line) in enumerate(zip(labels, raw)):
    if not line.strip():
        print(f"  {label}: skipped by DuckDB; by cnnbench too")
        continue
    (t, l) = next(rows)
    rec, why = parse_line(line, loads, truncated=index == len(raw) - 1)
    verdict = ("refused: " + why) if rec is None else ("kept" + (f" ({why})" if why else ""))
    if rec is not None:
        verdict += f" status={rec.get('status')!r} config={rec.get('config')!r}"
    print(f"  {label}:\\n    typed {t}\\n    JSON leaves {l}\\n    cnnbench: {verdict[:160]}")
"""


def behaviours(scratch: Path) -> None:
    """How DuckDB's ``read_json`` reads the lines a shared store may hold (:data:`HOSTILE_LINES`),
    typed and with JSON leaves, beside what cnnbench's checked reader makes of each: where the two
    disagree is where an engine-backed read must hand a line back to the reader (issue 44, item 4)."""
    print("\nbehaviours, duckdb read_json against cnnbench's checked reader:", flush=True)
    lines = json.dumps([(label, line.hex()) for label, line in HOSTILE_LINES])
    path = scratch / "hostile.jsonl"
    out = subprocess.run([sys.executable, "-c", BEHAVIOURS, lines, str(path)], env=child_env(),
                         capture_output=True, text=True)
    path.unlink(missing_ok=True)
    print("  " + "\n  ".join((out.stdout + out.stderr).strip().splitlines()), flush=True)


SQL_COSTS = """
import glob, json, os, sys, time, duckdb
paths = sorted(glob.glob(sys.argv[1] + '/*.jsonl'))
fds = [os.open(p, os.O_RDONLY) for p in paths]
files = ", ".join(f"'/proc/self/fd/{fd}'" for fd in fds)
con = duckdb.connect()
INTS = ['batch_size', 'image_size', 'num_batches', 'num_epochs', 'num_warmup_batches', 'display_every', 'seed',
        'num_devices', 'num_nodes', 'threads_per_worker', 'bucket_cap_mb', 'timeout', 'num_workers',
        'num_epochs_per_decay', 'num_learning_rate_warmup_epochs']
FLOATS = ['learning_rate', 'momentum', 'weight_decay', 'learning_rate_decay_factor', 'dali_hw_decoder_load']
METRICS = ['total_images_per_sec', 'images_per_sec_mean', 'images_per_sec_stderr', 'images_per_sec_jitter',
           'images_per_sec_median', 'wall_time_s', 'peak_device_memory_bytes', 'peak_host_memory_bytes',
           'input_wait_fraction', 'loss_first', 'loss_last']
LISTS = ['per_device_images_per_sec', 'step_times_s', 'warnings']
TOP = ['schema_version', 'tool_version', 'run_id', 'started_at', 'session_id', 'error', 'started_at_source', 'status']

def struct(names):
    return "STRUCT(" + ", ".join(f"{n} JSON" for n in names) + ")"

def read_json(columns):
    return (f"read_json([{files}], format='newline_delimited', records=true, ignore_errors=true, "
            f"maximum_object_size=1073741824, columns={{{', '.join(f'{k!r}: {v!r}' for k, v in columns.items())}}})")

def lines():
    return (f"read_csv([{files}], columns={{'line': 'VARCHAR'}}, delim='\\\\x01', quote='', escape='', "
            "header=false, auto_detect=false, new_line='\\\\n', max_line_size=1073741824)")

summary = {'run_id': 'VARCHAR', 'status': 'VARCHAR',
           'config': 'STRUCT(model VARCHAR, batch_size BIGINT, num_devices BIGINT)',
           'environment': 'STRUCT(machine VARCHAR)', 'metrics': 'STRUCT(total_images_per_sec DOUBLE)'}
contract = {**{n: 'JSON' for n in TOP}, 'config': struct(['model', *INTS, *FLOATS]),
            'environment': struct(['machine']), 'metrics': struct(METRICS + LISTS)}
as_json = {**contract, 'config': 'JSON', 'environment': 'JSON'}
paths52 = ([f'$.{n}' for n in [*TOP, 'config', 'environment', 'metrics', 'case_name', 'kind']]
           + [f'$.config.{n}' for n in ['model', 'precision', 'data_format', 'forward_only', *INTS, *FLOATS]]
           + ['$.environment.machine', '$.environment.hostname']
           + [f'$.metrics.{n}' for n in METRICS + LISTS[:1] + LISTS[2:]])
checks = ("json_type(status) = 'VARCHAR' and json_type(config.batch_size) in ('BIGINT', 'UBIGINT') "
          "and json_type(metrics.total_images_per_sec) = 'DOUBLE'")
cases = [
    ("read_json, 7 summary columns typed (count)", f"SELECT count(*) FROM {read_json(summary)}", False),
    ("the same, the rows fetched into Python", f"SELECT * FROM {read_json(summary)}", True),
    (f"read_json, {len(TOP) + 1 + len(INTS) + len(FLOATS) + 1 + len(METRICS) + len(LISTS)} contract columns as JSON "
     "leaves, json_type checks on 3", f"SELECT count(*) FILTER (WHERE {checks}) FROM {read_json(contract)}", False),
    ("lines as text (read_csv), json_extract of 9 paths",
     f"SELECT count(*) FILTER (WHERE e[1] IS NOT NULL) FROM (SELECT json_extract(line, {paths52[:9]!r}) e "
     f"FROM {lines()})", False),
    (f"lines as text, json_extract of {len(paths52)} paths",
     f"SELECT count(*) FILTER (WHERE e[1] IS NOT NULL) FROM (SELECT json_extract(line, {paths52!r}) e "
     f"FROM {lines()})", False),
    ("lines as text, numbered by row_number() OVER () per file, joined by UNION ALL",
     "SELECT count(*) FROM (" + " UNION ALL ".join(
         f"SELECT row_number() OVER () n, line FROM read_csv('/proc/self/fd/{fd}', columns={{'line': 'VARCHAR'}}, "
         "delim='\\\\x01', quote='', escape='', header=false, auto_detect=false, new_line='\\\\n', "
         "max_line_size=1073741824)" for fd in fds) + ")", False),
    ("read_json with config and environment as JSON, json_type object checks",
     f"SELECT count(*) FILTER (WHERE json_type(config) = 'OBJECT' AND json_type(environment) = 'OBJECT' "
     f"AND {checks.replace('config.batch_size', 'config->' + chr(39) + '$.batch_size' + chr(39))}) "
     f"FROM {read_json(as_json)}", False),
]
for label, sql, fetch in cases:
    t = time.perf_counter()
    result = con.execute(sql).fetchall()
    print(f"| {label} | {time.perf_counter() - t:.2f} s | {len(result) if fetch else result[0][0]} |", flush=True)
"""


def sql_costs(store: Path) -> None:
    """What checking the record contract in SQL costs (issue 44): DuckDB reads of the store's files
    handed over as ``/proc/self/fd/N``, in one process each, warm page cache; the last column is
    the rows counted (or fetched)."""
    print(f"\nsql costs, duckdb, {store.name} (load average {load()}):\n\n| read | time | rows |\n|--|--:|--:|",
          flush=True)
    into_page_cache(store)
    out = subprocess.run([sys.executable, "-c", SQL_COSTS, str(store)], env=child_env(), capture_output=True,
                         text=True)
    print((out.stdout + out.stderr).strip(), flush=True)


# --- the stores ------------------------------------------------------------------------------


def template_record(data: Path, given: Path | None) -> dict[str, Any]:
    """One real record: ``given`` (a JSONL file, its first line), else one ``cnnbench run`` made
    once and kept in ``data``."""
    if given is None:
        given = data / "template" / "template.jsonl"
        if not given.exists():
            given.parent.mkdir(parents=True, exist_ok=True)
            subprocess.run([sys.executable, "-m", "cnnbench", "run", "--model", "trivial", "--device", "cpu",
                            "--num-batches", str(STEP_TIMES), "--quiet", "--results-dir", str(given.parent),
                            "--machine-label", "template"], check=True, env=child_env())
    with open(given) as f:
        record: dict[str, Any] = json.loads(f.readline())
    if len(record["metrics"].get("step_times_s") or []) != STEP_TIMES:
        raise SystemExit(f"{given}: the template needs {STEP_TIMES} step times")
    return record


def varied_record(template: dict[str, Any], i: int, rng: random.Random, uniform: bool) -> dict[str, Any]:
    """Record ``i``: the template with its own run_id, started_at and step times, and (unless
    ``uniform``) its own model, batch size, device count and machine."""
    rec = json.loads(json.dumps(template))  # a deep copy of plain JSON
    config, env, metrics = rec["config"], rec["environment"], rec["metrics"]
    rec["run_id"] = f"{(i * 0x9E3779B97F4A7C15 + 0x1234) % (1 << 64):016x}"  # an odd multiplier: all distinct
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(seconds=37 * i)
    rec["started_at"] = start.isoformat(timespec="seconds")
    if uniform:
        model, batch, devices, machine = config["model"], config["batch_size"], config["num_devices"], env["machine"]
    else:
        model, batch = rng.choice(MODELS), rng.choice(BATCH_SIZES)
        devices, machine = rng.choice(DEVICE_COUNTS), rng.choice(MACHINES)
        config.update(model=model, batch_size=batch, num_devices=devices)
        env.update(machine=machine, hostname=machine)
        if isinstance(rec.get("model_cost"), dict):
            rec["model_cost"]["name"] = model
    base = 0.002 * (1 + MODELS.index(model) if model in MODELS else 1) * batch / 32
    steps = [base * rng.lognormvariate(0, 0.15) for _ in range(STEP_TIMES)]
    mean = sum(steps) / len(steps)
    per_device = batch / mean
    metrics.update(step_times_s=steps, total_images_per_sec=per_device * devices,
                   images_per_sec_mean=per_device * devices * rng.uniform(0.99, 1.01),
                   images_per_sec_median=per_device * devices * rng.uniform(0.99, 1.01),
                   per_device_images_per_sec=[per_device * rng.uniform(0.98, 1.02) for _ in range(devices)],
                   per_device_torch_threads=[1] * devices, wall_time_s=sum(steps) * 1.1)
    return rec


def write_store(folder: Path, template: dict[str, Any], n: int, uniform: bool) -> None:
    """``n`` records into ``folder``, one file per machine label (written once; kept)."""
    import orjson

    from cnnbench.results.store import machine_file_name

    done = folder / ".complete"
    if done.exists() and done.read_text() == str(n):
        return
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rng = random.Random(44)
    handles: dict[str, Any] = {}
    t0 = time.perf_counter()
    try:
        for i in range(n):
            rec = varied_record(template, i, rng, uniform)
            machine = rec["environment"]["machine"]
            if machine not in handles:
                handles[machine] = open(folder / machine_file_name(machine), "wb")  # noqa: SIM115
            handles[machine].write(orjson.dumps(rec) + b"\n")
    finally:
        for f in handles.values():
            f.close()
    done.write_text(str(n))
    size = sum(p.stat().st_size for p in folder.glob("*.jsonl"))
    print(f"wrote {folder}: {n:,} records in {len(handles)} file(s), {size / 1e6:,.0f} MB "
          f"({size / n / 1e3:.1f} KB a record), {time.perf_counter() - t0:.0f} s", flush=True)


# --- measuring -------------------------------------------------------------------------------


def child_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT / "src"))


def store_files(folder: Path) -> list[Path]:
    """The store's results files and cnnbench's parsed-record caches of them."""
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == ".jsonl") + record_caches(folder)


def drop_from_page_cache(folder: Path) -> None:
    for path in store_files(folder):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)  # dirty pages are not dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def into_page_cache(folder: Path) -> None:
    buf = bytearray(16 << 20)
    for path in store_files(folder):
        with open(path, "rb", buffering=0) as f:
            while f.readinto(buf):
                pass


def resident_fraction(folder: Path) -> float:
    """The part of the store's bytes in the page cache (``mincore`` over a mapping of each file)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    page = os.sysconf("SC_PAGE_SIZE")
    resident = total = 0
    for path in store_files(folder):
        size = path.stat().st_size
        if not size:
            continue
        pages = (size + page - 1) // page
        fd = os.open(path, os.O_RDONLY)
        try:
            addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
            if addr in (None, ctypes.c_void_p(-1).value):
                return float("nan")
            vec = (ctypes.c_ubyte * pages)()
            try:
                if libc.mincore(addr, size, vec) != 0:
                    return float("nan")
            finally:
                libc.munmap(addr, size)
        finally:
            os.close(fd)
        resident += sum(b & 1 for b in vec)
        total += pages
    return resident / total if total else 0.0


def timed(cmd: list[str]) -> tuple[float, float, float]:
    """Wall and CPU seconds of one command (user + system, its threads and children included) and
    its peak memory in MB (the largest resident set of it and of the processes it waited for)."""
    with tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, env=child_env(), stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        code = os.waitstatus_to_exitcode(status)
        if code:
            err.seek(0)
            raise RuntimeError(err.read().decode(errors="replace").strip().splitlines()[-1][:200])
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


Case = tuple[str, list[str], Callable[[], None]]


def cases(store: Path, n: int, engines: list[str], only: list[str]) -> list[Case]:
    """The reads of ``store``, a cold one and its warm partner after it (those whose label holds
    one of ``only``'s words, where it names any)."""
    py = sys.executable
    args = [str(store), str(n)]

    def cold() -> None:
        drop_from_page_cache(store)

    def cnnbench_cold() -> None:
        drop_cache(store)
        drop_from_page_cache(store)

    def warm() -> None:
        into_page_cache(store)

    def cnnbench_warm() -> None:
        if not record_caches(store):
            subprocess.run([py, "-c", CNNBENCH_READ, *args], check=True, env=child_env())
        into_page_cache(store)

    reads = {"duckdb": (DUCKDB_SUMMARY, DUCKDB_ALL), "polars": (POLARS_SUMMARY, POLARS_ALL),
             "pyarrow": (PYARROW_SUMMARY, PYARROW_ALL)}
    schemas = {"duckdb": DUCKDB_SUMMARY_SCHEMA, "polars": POLARS_SUMMARY_SCHEMA}  # pyarrow's is given already
    every_schema = {"duckdb": DUCKDB_ALL_SCHEMA}
    todo: list[Case] = []
    for engine in engines:
        summary, every = reads[engine]
        if engine in schemas:
            todo += [(f"{engine}: 7 summary columns, schema given, cold", [py, "-c", schemas[engine], *args], cold),
                     (f"{engine}: 7 summary columns, schema given, warm", [py, "-c", schemas[engine], *args], warm)]
        if engine in every_schema:
            todo += [(f"{engine}: every column, schema of 100 records given, cold",
                      [py, "-c", every_schema[engine], *args], cold),
                     (f"{engine}: every column, schema of 100 records given, warm",
                      [py, "-c", every_schema[engine], *args], warm)]
        todo += [(f"{engine}: 7 summary columns, cold", [py, "-c", summary, *args], cold),
                 (f"{engine}: 7 summary columns, warm", [py, "-c", summary, *args], warm),
                 (f"{engine}: every column into a table, cold", [py, "-c", every, *args], cold),
                 (f"{engine}: every column into a table, warm", [py, "-c", every, *args], warm)]
    listing = [py, "-m", "cnnbench", "results", "list", "--limit", "1", str(store)]
    by_model = [py, "-m", "cnnbench", "results", "query", 'SELECT "config.model", count(*), '
                'median("metrics.total_images_per_sec") FROM runs GROUP BY 1', str(store)]
    tails = [py, "-m", "cnnbench", "results", "query", "SELECT run_id, quantile_cont(seconds, 0.99) / median(seconds) "
             "FROM steps GROUP BY 1 ORDER BY 2 DESC LIMIT 5", str(store)]
    todo += [("cnnbench: results query over runs, cold", by_model, cnnbench_cold),
             ("cnnbench: results query over runs, warm", by_model, cnnbench_warm),
             ("cnnbench: results query over steps, cold", tails, cnnbench_cold),
             ("cnnbench: results query over steps, warm", tails, cnnbench_warm)]
    todo += [("cnnbench: read_records(step_times=False), cold", [py, "-c", CNNBENCH_READ, *args], cnnbench_cold),
             ("cnnbench: read_records(step_times=False), warm", [py, "-c", CNNBENCH_READ, *args], cnnbench_warm),
             ("cnnbench: results list --limit 1, cold", listing, cnnbench_cold),
             ("cnnbench: results list --limit 1, warm", listing, cnnbench_warm)]
    return [c for c in todo if not only or any(word in c[0] for word in only)]


def measure(stores: dict[str, Path], n: int, engines: list[str], rounds: int, only: list[str]) -> None:
    for name, store in stores.items():
        store_mb = sum(p.stat().st_size for p in store.glob("*.jsonl")) / 1e6
        drop_from_page_cache(store)
        print(f"\n{name} store ({n:,} records, {store_mb:,.0f} MB): {resident_fraction(store):.1%} of it in the "
              f"page cache after dropping it", flush=True)
        todo = cases(store, n, engines, only)
        results: dict[str, list[tuple[float, float, float, str]]] = {}
        for rnd in range(rounds):
            # the order turned each round (a cold case keeps its warm partner right after it)
            pairs = [todo[i:i + 2] for i in range(0, len(todo), 2)]
            k = rnd % len(pairs)
            order = [c for pair in pairs[k:] + pairs[:k] for c in (pair if rnd % 2 == 0 else pair[::-1])]
            for label, cmd, setup in order:
                setup()
                before = load()
                try:
                    wall, cpu, peak = timed(cmd)
                except RuntimeError as exc:
                    print(f"  {label}: failed: {exc}", flush=True)
                    continue
                loads = f"{before} -> {load()}"
                results.setdefault(label, []).append((wall, cpu, peak, loads))
                print(f"  round {rnd + 1} {label:<52} wall {wall:6.2f} s  CPU {cpu:6.2f} s  peak {peak:6,.0f} MB"
                      f"  load {loads}", flush=True)
        print(f"\n{name} store, {n:,} records ({store_mb:,.0f} MB), {rounds} round(s); load average now {load()}\n")
        print("| read | wall | CPU | peak memory |\n|--|--:|--:|--:|")
        for label, _, _ in todo:
            rs = results.get(label)
            if not rs:
                print(f"| {label} | failed | | |")
                continue
            print(f"| {label} | {span([r[0] for r in rs])} | {span([r[1] for r in rs])} | "
                  f"{max(r[2] for r in rs):,.0f} MB |")


def span(xs: list[float]) -> str:
    return f"{min(xs):.2f}–{max(xs):.2f} s" if len(xs) > 1 else f"{xs[0]:.2f} s"


def installed_bytes(dist: str) -> tuple[int, list[str]]:
    """Bytes of the files the distribution ``dist`` installed, with those of the distributions it
    requires (no extras), and their names."""
    seen: list[str] = []
    todo, total = [dist], 0
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.append(name)
        d = importlib.metadata.distribution(name)
        for f in d.files or []:
            p = Path(str(d.locate_file(f)))
            if p.is_file():
                total += p.stat().st_size
        for req in d.requires or []:
            if "extra ==" not in req:
                todo.append(req.split(";")[0].split("=")[0].split(">")[0].split("<")[0].split("!")[0].strip())
    return total, seen


def sizes_and_imports(engines: list[str], rounds: int) -> None:
    print("\n| engine | version | installed (wheel + what it requires) | import time, fresh interpreter |\n"
          "|--|--|--:|--:|")
    for engine in [*engines, "cnnbench.results.store"]:
        times = []
        for _ in range(rounds + 1):  # the first one untimed: the files into the page cache
            out = subprocess.run([sys.executable, "-c", IMPORT_TIME.format(engine)], check=True, env=child_env(),
                                 capture_output=True, text=True).stdout
            times.append(float(out))
        if engine in ENGINES:
            size, dists = installed_bytes(engine)
            version = importlib.metadata.version(engine)
            print(f"| {engine} | {version} | {size / 1e6:,.1f} MB ({', '.join(dists)}) | {span(times[1:])} |")
        else:
            print(f"| today's reader (`import {engine}`, baseline) | | | {span(times[1:])} |")


def features(engines: list[str], store: Path) -> None:
    for engine in engines:
        print(f"\nfeatures, {engine}:", flush=True)
        out = subprocess.run([sys.executable, "-c", FEATURES[engine], str(store)], env=child_env(),
                             capture_output=True, text=True)
        print("  " + "\n  ".join((out.stdout + out.stderr).strip().splitlines()[-20:]), flush=True)
    Path("/tmp/engines-probe.csv").unlink(missing_ok=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000, help="Records in each store (default 100,000).")
    ap.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "cnnbench-engines",
                    help="Folder of the stores (written once, kept for the next run unless --remove).")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--template", type=Path, help="A JSONL file whose first line is the real record to vary "
                    "(default: one `cnnbench run --model trivial --device cpu --num-batches 100`, made once).")
    ap.add_argument("--stores", default="varied,uniform", help="Comma-separated: varied, uniform.")
    ap.add_argument("--engines", default="duckdb,polars,pyarrow", help="Comma-separated engines to measure.")
    ap.add_argument("--skip", default="", help="Comma-separated parts to skip: reads, sizes, features, behaviours, "
                    "sqlcosts.")
    ap.add_argument("--cases", default="", help="Comma-separated words: only the reads whose label holds one "
                    "(e.g. 'schema given').")
    ap.add_argument("--remove", action="store_true", help="Delete the stores at the end.")
    args = ap.parse_args()
    engines = []
    for engine in args.engines.split(","):
        if importlib.util.find_spec(ENGINES[engine]) is None:
            print(f"{engine}: not installed, skipped (.venv/bin/pip install {engine})")
        else:
            engines.append(engine)
    skip = set(args.skip.split(","))
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; CPUs: {os.cpu_count()}; memory: "
          f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.1f} GiB; load average {load()}; "
          f"Python {sys.version.split()[0]}", flush=True)
    from startup import compiled

    compiled(ROOT / "src", keep=True)  # as installed: cnnbench's modules compiled once, not in every process
    args.data.mkdir(parents=True, exist_ok=True)
    use_record_caches(args.data)
    template = template_record(args.data, args.template)
    stores = {name: args.data / f"{name}-{args.records}" for name in args.stores.split(",")}
    for name, folder in stores.items():
        write_store(folder, template, args.records, uniform=name == "uniform")
    try:
        if "reads" not in skip:
            measure(stores, args.records, engines, args.rounds, [w for w in args.cases.split(',') if w])
        if "sizes" not in skip:
            sizes_and_imports(engines, args.rounds + 2)
        if "features" not in skip:
            features(engines, next(iter(stores.values())))
        if "behaviours" not in skip and "duckdb" in engines:
            behaviours(args.data)
        if "sqlcosts" not in skip and "duckdb" in engines:
            sql_costs(next(iter(stores.values())))
    finally:
        if args.remove:
            shutil.rmtree(args.data, ignore_errors=True)
    print(f"\nload average at the end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
