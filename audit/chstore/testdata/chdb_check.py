#!/usr/bin/env python3
"""Run audit/testdata/clickhouse.sql (every statement the ClickHouse store sends,
rendered by TestSQLGolden) on a ClickHouse engine and compare each result with
the Memory store's ('-- expect:'). Blocks marked '-- requires: ttl' (the
retention TTL) run only on engines with TTL (19.6+); 18.16 skips them.

  pip install chdb && python3 audit/testdata/chdb_check.py        # current ClickHouse, in-process
  python3 audit/testdata/chdb_check.py --port 9000               # a server, via clickhouse-client

The server mode drops and recreates the database audit_sqlcheck. Exits 1 on the
first mismatch or error. `make test` runs the chdb mode (TestCurrentEngineSQL,
audit/chstore/chdb_test.go) with the chdb that `make deps` installs into
.local/chdb.
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DB = "audit_sqlcheck"


def blocks(path):
    text = open(path, encoding="utf-8").read()
    for raw in text.split("\n;\n"):
        name, expect, sql, ttl = None, None, [], False
        for line in raw.strip("\n").split("\n"):
            if line == "-- requires: ttl":
                ttl = True
            elif line.startswith("-- check: "):
                name = line[len("-- check: "):]
            elif line.startswith("-- expect: "):
                expect = line[len("-- expect: "):]
            elif line == "-- expect:":
                expect = ""
            else:
                sql.append(line)
        sql = "\n".join(sql).strip()
        if sql and any(l.strip() and not l.strip().startswith("--") for l in sql.split("\n")):
            yield name, expect, sql, ttl


def run_chdb():
    from chdb import session
    s = session.Session(tempfile.mkdtemp(prefix="chdb-audit-"))
    version = str(s.query("SELECT version()", "TabSeparatedRaw")).strip()

    def q(sql):
        return str(s.query(sql, "TabSeparatedRaw"))
    return "chdb (ClickHouse %s)" % version, q


def run_client(port):
    def q(sql):
        p = subprocess.run(["clickhouse-client", "--port", str(port), "--format", "TabSeparatedRaw", "-q", sql],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise RuntimeError(p.stderr.strip())
        return p.stdout
    return "clickhouse-server %s on port %d" % (q("SELECT version()").strip(), port), q


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, help="use clickhouse-client against a server on this native port")
    args = ap.parse_args()
    engine, q = run_client(args.port) if args.port else run_chdb()
    print("engine:", engine)
    q("DROP DATABASE IF EXISTS " + DB)
    failed = 0
    try:
        major, minor = (int(x) for x in q("SELECT version()").strip().split(".")[:2])
        has_ttl = (major, minor) >= (19, 6)
        for name, expect, sql, ttl in blocks(os.path.join(HERE, "clickhouse.sql")):
            if ttl and not has_ttl:
                print("skip %s (needs TTL, ClickHouse 19.6+)" % (name or "TTL statement"))
                continue
            try:
                out = q(sql)
            except Exception as e:  # noqa: BLE001 - report and stop
                print("ERROR in %s:\n%s\n%s" % (name or "statement", sql[:300], e))
                return 1
            if name is None:
                continue
            rows = [r for r in out.split("\n") if r != ""]
            got = " | ".join(r if "\t" in expect else r.split("\t")[0] for r in rows)
            ok = got == expect
            failed += not ok
            print("%-4s %s%s" % ("ok" if ok else "FAIL", name, "" if ok else "\n  got:  %r\n  want: %r" % (got, expect)))
    finally:
        q("DROP DATABASE IF EXISTS " + DB)
    print("%d passed, %d failed" % (sum(1 for b in blocks(os.path.join(HERE, "clickhouse.sql")) if b[0]) - failed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
