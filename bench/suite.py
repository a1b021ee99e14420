#!/usr/bin/python3
"""The benchmark suite behind scripts/bench.sh (run it through that script).

On a private durable mesh (scripts/run-local.sh: PostgreSQL fsync and
synchronous commit on, Redis AOF) and, in the same run on the same
PostgreSQL, the reference: pgbench running the same business transaction
shape (bench/reference_*.sql). Phases:

  reference  pgbench, N clients (closed loop)
  closed     ulticode-loadgen, N calls in flight: the maximum; CPU per
             mutation of the whole machine and by process; commits, WAL bytes
             per event and index entries read per claim (pg_stat_*)
  open       fixed rates at 25/50/75/100 % of that maximum: achieved rate,
             RPC latency, commit -> audit row lag
  drain      Admin frozen (SIGSTOP) while DRAIN_EVENTS events queue up, then
             resumed: events per second until the backlog is gone
  original   the original system's settings (2 s polls, batches of 50, no
             NOTIFY, every event through the lease consumer): lag at 50 % of
             the maximum and the drain, as ratios to ours
  soak       (ULTICODE_BENCH_SOAK_SECONDS > 0) the mesh restarted with short
             retention (outbox and idempotency keys 2 min, runs every 10 s;
             streams trimmed every 10 s), then 50 % of the maximum for that
             long: Redis used memory, stream lengths and every table's size
             sampled every 30 s

  replication (ULTICODE_BENCH_PHASES=replication) a streaming standby of
             the mesh's PostgreSQL (pg_basebackup), then the closed loop
             again with it asynchronous and with it synchronous: throughput,
             CPU and commit -> audit row lag, what synchronous replication
             costs

  sequence   (ULTICODE_BENCH_PHASES=sequence) the reference with and
             without event numbering's nextval round trip, alternated, as a
             share of the closed loop's CPU per audited mutation

  notify     (with model) the reference with and without a NOTIFY per
             transaction while a session LISTENs, alternated: what the
             wake-up the owners no longer use cost

  model      (ULTICODE_BENCH_PHASES=model, and in every full run) after the
             reference and the closed loop, ulticode-costmodel runs each
             stage of an audited mutation alone: a gRPC call to a no-op
             server built like ours, Ed25519 and SHA-256, our business
             transaction, the dispatcher's cycle and the floor of its XADD,
             XREADGROUP + XACK, Admin's inbox and audit rows, the log's
             sequencing, the witness feed's proofs, the owner's
             confirmation. The stages are summed per process (MODEL) and
             set beside what each process spent per mutation in the closed
             loop; then the targets with their status, perf profiles of
             each process and pg_stat_statements' costliest statements

  calibrate  (ULTICODE_BENCH_PHASES=calibrate) the batched stages of the
             cost model at batches of 1, 3 and 256, and the closed loop
             again with fewer pool connections and threads (LEAN)

  growth     (ULTICODE_BENCH_PHASES=growth) reads on the closed loop's
             database (every QueryAuditLogs filter, GetAuditLog and every
             proof RPC, one caller, p50/p99), then ULTICODE_BENCH_GROWTH_ROWS
             (5 million) rows loaded in SQL into audit_logs and the log (and
             as many outbox rows kept in the owners), then the reference, the
             closed loop and the reads again: throughput and latency against
             the small database

  forward    (ULTICODE_BENCH_PHASES=forward, and in every full run)
             ulticode-forward over the closed loop's log, one sink of each
             kind alone (webhook in our schema and in OCSF, syslog over TCP
             and TLS) to real receivers: rows per second and CPU per row,
             beside ulticode-tail --verify reading the same rows

  personal   (ULTICODE_BENCH_PHASES=personal) the closed loop with
             personal values committed to (schema_version 2, the default)
             and embedded (--personal-data-commitments=false), alternated
             off, on, on, off: CPU per mutation and throughput, on / off
             (docs/personal-data.md)

  watch      (ULTICODE_BENCH_PHASES=watch) WatchAuditLogs: commit ->
             delivered latency at half the maximum with 1, 10 and 100
             watchers; Admin's memory and CPU per idle watcher (1,000 of
             them)

ULTICODE_BENCH_PHASES=soak runs only the closed loop (for the maximum) and
the soak; ULTICODE_BENCH_PHASES=replication the closed loop and the
replication phase; ULTICODE_BENCH_PHASES=sequence the closed loop and the
sequence phase; ULTICODE_BENCH_PHASES=log the closed loop and the
transparency log's phase (the closed loop with the log off and on,
alternated; checkpoint and cosignature freshness at half the maximum;
storage per entry; GetInclusionProof latency on a log grown to
ULTICODE_BENCH_LOG_ENTRIES leaves, 5 million by default);
ULTICODE_BENCH_PHASES=proofs the closed loop and that last part alone;
ULTICODE_BENCH_PHASES=drain the closed loop and the two drains (ours and
the original settings').

Every figure comes from this run. Writes bench/results/<run>.json and PNG
plots beside it (python3-matplotlib, when installed).
"""
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PG_BIN = os.environ.get("ULTICODE_PG_BIN", "/usr/lib/postgresql/15/bin")
OFF = 300  # port offset: runs beside a developer's own mesh
PG_PORT = 55432 + OFF
HZ = os.sysconf("SC_CLK_TCK")
SERVICES = ("ulticode-auth", "ulticode-app", "ulticode-admin")
# The cost model: which stage of ulticode-costmodel (and whose CPU in it) each
# process of the mesh spends per audited mutation. "owners" is Auth and App.
MODEL = {
    "ulticode-loadgen": [("grpc", "client")],
    "owners": [("grpc", "server"), ("txn", "client"), ("publish", "client"),
               ("confirm", "client")],
    "ulticode-admin": [("xread", "client"), ("inbox", "client"), ("log", "client"),
                       ("prove", "client")],
    "postgres": [("txn", "postgres"), ("publish", "postgres"), ("inbox", "postgres"),
                 ("log", "postgres"), ("prove", "postgres"), ("confirm", "postgres")],
    "redis-server": [("publish", "redis-server"), ("xread", "redis-server")],
}

# The original system's settings (2 s polls, batches of 50), for the side-by-side phase.
ORIGINAL = {
    "ULTICODE_DISPATCH_POLL_INTERVAL": "2s",
    "ULTICODE_DISPATCH_BATCH_SIZE": "50",
    "ULTICODE_DISPATCH_NOTIFY": "false",
    "ULTICODE_DISPATCH_LINGER": "0s",
    "ULTICODE_INBOX_BATCH_SIZE": "50",
    "ULTICODE_INBOX_WRITE_AUDIT_LOGS": "false",
    "ULTICODE_CONSUMER_POLL_INTERVAL": "2s",
    "ULTICODE_CONSUMER_BATCH_SIZE": "50",
    "ULTICODE_CONSUMER_NOTIFY": "false",
}

# The soak's housekeeping: short enough that retention reaches its steady
# state within the run. The inbox keeps its 48 h floor (the re-send rule), so
# consumer_inbox, like audit_logs, grows during any soak shorter than that.
SOAK = {
    "ULTICODE_OUTBOX_RETENTION": "2m",
    "ULTICODE_IDEMPOTENCY_RETENTION": "2m",
    "ULTICODE_RETENTION_INTERVAL": "10s",
    "ULTICODE_STREAM_TRIM_INTERVAL": "10s",
}


def log(msg):
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


class Mesh:
    """scripts/run-local.sh on a private state directory."""

    def __init__(self, state, build_dir):
        self.state, self.build_dir, self.proc = state, build_dir, None
        self.env = dict(os.environ, PGPASSFILE=os.path.join(state, "secrets", "pgpass"))

    def start(self, overrides=None):
        env = dict(os.environ, ULTICODE_STATE_DIR=self.state,
                   ULTICODE_LOCAL_PORT_OFFSET=str(OFF), ULTICODE_SKIP_DEPS="1",
                   ULTICODE_LOG_LEVEL="warn", ULTICODE_ACCESS_LOG="false",
                   ULTICODE_LOCAL_PROMETHEUS="0", **(overrides or {}))
        out = open(os.path.join(self.state, "mesh.log"), "w")
        self.proc = subprocess.Popen([os.path.join(REPO, "scripts/run-local.sh"), "--no-build"],
                                     env=env, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        for _ in range(480):
            if "is up" in open(os.path.join(self.state, "mesh.log")).read():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.5)
        sys.exit("[bench] the mesh did not come up:\n" +
                 open(os.path.join(self.state, "mesh.log")).read())

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=120)
        self.proc = None

    def psql(self, db, sql):
        return subprocess.run(
            [f"{PG_BIN}/psql", "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
             "-p", str(PG_PORT), "-U", "postgres", "-d", db, "-c", sql],
            env=self.env, check=True, capture_output=True, text=True).stdout.strip()

    def pid(self, service):
        port = {"ulticode-auth": 50051, "ulticode-app": 50052, "ulticode-admin": 50053}[service]
        out = subprocess.run(["pgrep", "-f", f"{service} --grpc-listen=127.0.0.1:{port + OFF}"],
                             capture_output=True, text=True).stdout.split()
        return int(out[0])


def tree_levels_sql(base, end):
    """A DO block storing the interior nodes (RFC 9162: SHA-256 of 0x01 and
    the two children) that a log of `end` leaves has and one of `base`
    leaves had not, level by level; the leaves' hashes (level 0) must be
    stored first. Only complete subtrees are stored, as the sequencer does."""
    return f"""DO $$ DECLARE l int := 1; lo bigint; hi bigint;
      BEGIN
        LOOP
          lo := {base}::bigint >> l;
          hi := {end}::bigint >> l;
          EXIT WHEN hi = 0;
          INSERT INTO log_nodes (level, idx, hash)
            SELECT l, c.idx / 2, sha256('\\x01'::bytea || c.hash || d.hash)
            FROM log_nodes c JOIN log_nodes d ON d.level = c.level AND d.idx = c.idx + 1
            WHERE c.level = l - 1 AND c.idx >= 2 * lo AND c.idx < 2 * hi AND c.idx % 2 = 0
            ON CONFLICT (level, idx) DO NOTHING;
          l := l + 1;
        END LOOP;
      END $$"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def busy_jiffies():
    with open("/proc/stat") as f:
        v = f.readline().split()[1:]
    return sum(int(v[i]) for i in (0, 1, 2, 5, 6))


def cpu_by_comm():
    """utime + stime jiffies per command name, summed over live processes."""
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                s = f.read()
        except OSError:
            continue
        name = s[s.index("(") + 1:s.rindex(")")]
        fields = s[s.rindex(")") + 2:].split()
        out[name] = out.get(name, 0) + int(fields[11]) + int(fields[12])
    return out


def peak_rss_mib():
    out = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = open(f"/proc/{pid}/status").read()
        except OSError:
            continue
        name = re.search(r"^Name:\s+(\S+)", status, re.M).group(1)
        if name in SERVICES:
            out[name] = round(int(re.search(r"^VmHWM:\s+(\d+)", status, re.M).group(1)) / 1024, 1)
    return out


class Suite:
    # pg_stat_statements in the mesh's PostgreSQL: the cost model's view of
    # where PostgreSQL's time goes (the reference runs with it too).
    # wal_level=logical for the logical replication reference (the same
    # server for every phase, so the mesh's WAL carries it too).
    PG_OPTIONS = ("-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.max=1000"
                  " -c wal_level=logical")

    def __init__(self, seconds, clients, drain_events, build_dir, out_dir, soak_seconds=0,
                 phases="all"):
        self.seconds, self.clients, self.drain_events = seconds, clients, drain_events
        self.soak_seconds, self.phases = soak_seconds, phases
        self.build_dir, self.out_dir = build_dir, out_dir
        self.state = tempfile.mkdtemp(prefix="ulticode-bench.")
        self.mesh = Mesh(self.state, build_dir)
        self.run_id = f"bench-{int(time.time())}"
        self.result = {"run_id": self.run_id, "seconds": seconds, "clients": clients,
                       "drain_events": drain_events, "soak_seconds": soak_seconds,
                       "phases": phases}
        self.token = os.path.join(self.state, "token")

    # --- helpers -----------------------------------------------------------
    def rid(self, tag):
        """The request id prefix of one load phase: 8 and 4 hex digits
        (request ids are UUIDs; ulticode-loadgen --run-id)."""
        h = hashlib.sha256(f"{self.run_id}-{tag}".encode()).hexdigest()
        return f"{h[:8]}-{h[8:12]}"

    def loadgen(self, tag, mode, clients=0, rate=0, seconds=None):
        args = [os.path.join(self.build_dir, "bench/ulticode-loadgen"),
                f"--auth=127.0.0.1:{50051 + OFF}", f"--app=127.0.0.1:{50052 + OFF}",
                f"--token-file={self.token}", f"--mode={mode}",
                f"--duration={seconds or self.seconds}s", f"--run-id={self.rid(tag)}"]
        args += [f"--clients={clients}"] if mode == "closed" else [f"--rate={rate}",
                                                                   "--max-in-flight=4096"]
        return json.loads(subprocess.run(args, check=True, capture_output=True,
                                         text=True).stdout)

    def landed(self, tag):
        return int(self.mesh.psql("ulticode_admin", "SELECT count(*) FROM audit_logs WHERE "
                                  f"request_id LIKE '{self.rid(tag)}-%'"))

    def wait_landed(self, tag, n, timeout=600):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.landed(tag) >= n:
                return True
            time.sleep(0.25)
        return False

    def lag_ms(self, tag):
        p = self.mesh.psql("ulticode_admin", f"""SELECT
          round(1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY
            extract(epoch FROM ingested_at - occurred_at))::numeric, 1) || ',' ||
          round(1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY
            extract(epoch FROM ingested_at - occurred_at))::numeric, 1)
          FROM audit_logs WHERE request_id LIKE '{self.rid(tag)}-%'""").split(",")
        return {"p50": float(p[0]), "p99": float(p[1])}

    def pg_stats(self):
        """Cluster-wide commits and WAL, and the queue indexes' scans."""
        commits = int(self.mesh.psql("postgres", "SELECT sum(xact_commit) FROM pg_stat_database "
                                     "WHERE datname LIKE 'ulticode_%'"))
        wal = int(self.mesh.psql("postgres", "SELECT pg_current_wal_lsn() - '0/0'"))
        idx = {}
        for db in ("ulticode_auth", "ulticode_app", "ulticode_admin"):
            rows = self.mesh.psql(db, "SELECT indexrelname, idx_scan, idx_tup_read FROM "
                                  "pg_stat_user_indexes WHERE indexrelname IN "
                                  "('audit_outbox_due', 'audit_outbox_unconfirmed', "
                                  "'consumer_inbox_due', 'consumer_inbox_leased')")
            for line in filter(None, rows.splitlines()):
                name, scans, reads = line.split("|")
                key = f"{db.removeprefix('ulticode_')}.{name}"
                idx[key] = (int(scans), int(reads))
        return {"commits": commits, "wal": wal, "idx": idx}

    # --- phases ------------------------------------------------------------
    def reference_db(self):
        self.mesh.psql("postgres", "DROP DATABASE IF EXISTS bench_ref")
        self.mesh.psql("postgres", "CREATE DATABASE bench_ref")
        subprocess.run([f"{PG_BIN}/psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                        "-p", str(PG_PORT), "-U", "postgres", "-d", "bench_ref", "-f",
                        os.path.join(REPO, "bench/reference_schema.sql")],
                       env=self.mesh.env, check=True, capture_output=True)

    def pgbench(self, script, seconds, settle=None):
        """pgbench on bench_ref; CPU until settle() (if given) returns too."""
        b0 = busy_jiffies()
        out = subprocess.run([f"{PG_BIN}/pgbench", "-n", "-h", "127.0.0.1", "-p", str(PG_PORT),
                              "-U", "postgres", "-c", str(self.clients), "-j", "2", "-T",
                              str(seconds), "-f", os.path.join(REPO, script), "bench_ref"],
                             env=self.mesh.env, check=True, capture_output=True, text=True).stdout
        if settle:
            settle()
        b1 = busy_jiffies()
        tps = float(re.search(r"^tps = ([0-9.]+)", out, re.M).group(1))
        txns = int(re.search(r"actually processed: (\d+)", out).group(1))
        return {"tps": tps, "transactions": txns,
                "cpu_ms_per_txn": round((b1 - b0) * 1000 / HZ / txns, 3)}

    def reference(self, replication=True):
        log(f"reference: pgbench, {self.clients} clients, {self.seconds}s")
        self.reference_db()
        self.result["reference"] = self.pgbench("bench/reference_txn.sql", self.seconds)
        if replication:
            self.result["logical_replication"] = self.logical_replication()

    def bracket_reference(self):
        """pgbench again after the closed loop: this machine's speed drifts
        within a run (pgbench from 1,750 to 3,130 tps in one afternoon), so
        the ratios use the mean of the runs before and after the mesh's."""
        before = self.result["reference"]
        log(f"reference again after the closed loop: pgbench, {self.seconds}s")
        self.reference_db()
        after = self.pgbench("bench/reference_txn.sql", self.seconds)
        self.result["reference"] = {
            "tps": round((before["tps"] + after["tps"]) / 2, 1),
            "cpu_ms_per_txn": round((before["cpu_ms_per_txn"] + after["cpu_ms_per_txn"]) / 2, 3),
            "transactions": before["transactions"] + after["transactions"],
            "runs": [before, after]}

    def logical_replication(self):
        """PostgreSQL's own "copy each outbox row into another database":
        the reference again while a publication of its audit_outbox and a
        subscription in a second database on the same server copy every row,
        nothing else. CPU runs until the copy has every row."""
        log(f"reference with logical replication of audit_outbox, {self.seconds}s")
        self.reference_db()
        self.mesh.psql("postgres", "DROP DATABASE IF EXISTS bench_sub")
        self.mesh.psql("postgres", "CREATE DATABASE bench_sub")
        subprocess.run([f"{PG_BIN}/psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
                        "-p", str(PG_PORT), "-U", "postgres", "-d", "bench_sub", "-f",
                        os.path.join(REPO, "bench/reference_schema.sql")],
                       env=self.mesh.env, check=True, capture_output=True)
        # A subscription to the same server must not create its slot itself
        # (CREATE SUBSCRIPTION would wait for its own transaction); it
        # connects over the trusted private socket, so no password travels.
        socket_dir = self.mesh.psql("postgres", "SHOW unix_socket_directories").split(",")[0]
        self.mesh.psql("bench_ref", "CREATE PUBLICATION bench_outbox FOR TABLE audit_outbox")
        self.mesh.psql("bench_ref", "SELECT pg_create_logical_replication_slot("
                                    "'bench_outbox', 'pgoutput')")
        self.mesh.psql("bench_sub", "CREATE SUBSCRIPTION bench_outbox CONNECTION "
                       f"'host={socket_dir} port={PG_PORT} user=postgres dbname=bench_ref' "
                       "PUBLICATION bench_outbox WITH (create_slot = false, "
                       "slot_name = 'bench_outbox', copy_data = false)")

        def copied():
            return int(self.mesh.psql("bench_sub", "SELECT count(*) FROM audit_outbox"))

        def settle():
            want = int(self.mesh.psql("bench_ref", "SELECT count(*) FROM audit_outbox"))
            deadline = time.time() + 300
            while copied() < want and time.time() < deadline:
                time.sleep(0.1)
        try:
            run = self.pgbench("bench/reference_txn.sql", self.seconds, settle=settle)
            rows = copied()
        finally:
            self.mesh.psql("bench_sub", "ALTER SUBSCRIPTION bench_outbox DISABLE")
            self.mesh.psql("bench_sub", "ALTER SUBSCRIPTION bench_outbox SET (slot_name = NONE)")
            self.mesh.psql("bench_sub", "DROP SUBSCRIPTION bench_outbox")
            self.mesh.psql("bench_ref", "SELECT pg_drop_replication_slot('bench_outbox')")
        ref = self.result["reference"]
        run.update({"rows_copied": rows, "complete": rows == run["transactions"],
                    "tps_vs_reference": round(run["tps"] / ref["tps"], 3),
                    "cpu_vs_reference": round(run["cpu_ms_per_txn"] / ref["cpu_ms_per_txn"], 2),
                    "added_cpu_ms_per_txn": round(run["cpu_ms_per_txn"] - ref["cpu_ms_per_txn"],
                                                  3)})
        log(f"  logical replication: {run['tps']:.0f} tps ({run['tps_vs_reference']} x), "
            f"{run['cpu_ms_per_txn']} ms CPU per transaction ({run['cpu_vs_reference']} x), "
            f"{rows} of {run['transactions']} rows copied")
        return run

    def sequence(self, closed_cpu_ms):
        """What event numbering costs: the reference with and without the
        nextval round trip, alternated twice each in this run."""
        log(f"sequence: pgbench with and without nextval, 2 x 2 x {self.seconds}s")
        self.reference_db()
        runs = {"plain": [], "numbered": []}
        for _ in range(2):
            runs["plain"].append(self.pgbench("bench/reference_txn.sql", self.seconds))
            runs["numbered"].append(self.pgbench("bench/reference_txn_numbered.sql", self.seconds))
        tps = {k: sum(r["tps"] for r in v) / len(v) for k, v in runs.items()}
        cpu = {k: sum(r["cpu_ms_per_txn"] for r in v) / len(v) for k, v in runs.items()}
        return {"runs": runs,
                "tps_numbered_vs_plain": round(tps["numbered"] / tps["plain"], 3),
                "cpu_ms_added_per_txn": round(cpu["numbered"] - cpu["plain"], 3),
                "share_of_audited_mutation_cpu": round((cpu["numbered"] - cpu["plain"]) /
                                                       closed_cpu_ms, 3)}

    NOTIFY_TRIGGER = """CREATE OR REPLACE FUNCTION bench_notify() RETURNS trigger
      LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_notify('audit_outbox', ''); RETURN NULL; END $$;
      CREATE TRIGGER bench_notify AFTER INSERT ON audit_outbox
        FOR EACH STATEMENT EXECUTE FUNCTION bench_notify()"""

    def notify(self):
        """What a NOTIFY per business transaction costs, the wake-up the
        owners used before Dispatcher::Wake: the reference with and without
        a statement trigger that NOTIFYs on its outbox insert while a
        session LISTENs (psql, draining what it hears every 10 ms),
        alternated twice each in this run."""
        log(f"notify: pgbench with and without a NOTIFY per transaction, 2 x 2 x {self.seconds}s")
        self.reference_db()
        runs = {"plain": [], "notify": []}
        for _ in range(2):
            runs["plain"].append(self.pgbench("bench/reference_txn.sql", self.seconds))
            self.mesh.psql("bench_ref", self.NOTIFY_TRIGGER)
            listener = subprocess.Popen(
                [f"{PG_BIN}/psql", "-X", "-q", "-h", "127.0.0.1", "-p", str(PG_PORT), "-U",
                 "postgres", "-d", "bench_ref"], env=self.mesh.env, stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
            listener.stdin.write("LISTEN audit_outbox;\n")
            stop = threading.Event()

            def drain():
                while not stop.wait(0.01):
                    listener.stdin.write("SELECT 1;\n")
                    listener.stdin.flush()
            t = threading.Thread(target=drain)
            t.start()
            try:
                runs["notify"].append(self.pgbench("bench/reference_txn.sql", self.seconds))
            finally:
                stop.set()
                t.join()
                listener.stdin.close()
                listener.wait(timeout=30)
            self.mesh.psql("bench_ref", "DROP TRIGGER bench_notify ON audit_outbox")
        tps = {k: sum(r["tps"] for r in v) / len(v) for k, v in runs.items()}
        cpu = {k: sum(r["cpu_ms_per_txn"] for r in v) / len(v) for k, v in runs.items()}
        return {"runs": runs, "tps_notify_vs_plain": round(tps["notify"] / tps["plain"], 3),
                "cpu_ms_added_per_txn": round(cpu["notify"] - cpu["plain"], 3)}

    def unsequenced(self):
        return int(self.mesh.psql("ulticode_admin",
                                  "SELECT count(*) FROM log_queue"))

    def unconfirmed(self):
        return sum(int(self.mesh.psql(db, "SELECT count(*) FROM audit_outbox"
                                      " WHERE state <> 'CONFIRMED'"))
                   for db in ("ulticode_auth", "ulticode_app"))

    def freshness_ms(self, tag):
        """Per audit row of `tag`: from its insert to the first checkpoint
        covering it, and to the last of the two owners' cosignatures of a
        checkpoint covering it (p50, p99, in ms)."""
        p = self.mesh.psql("ulticode_admin", f"""WITH t AS (
          SELECT extract(epoch FROM (SELECT min(signed_at) FROM log_checkpoints c
                   WHERE c.size > l.log_index) - a.ingested_at) AS signed,
                 extract(epoch FROM (SELECT max(first) FROM (SELECT min(w.received_at) AS first
                   FROM log_cosignatures w WHERE w.size > l.log_index GROUP BY w.witness) f
                   HAVING count(*) = 2) - a.ingested_at) AS cosigned
          FROM audit_logs a JOIN log_leaves l USING (event_id)
          WHERE request_id LIKE '{self.rid(tag)}-%')
          SELECT round(1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY signed)::numeric, 1)
            || ',' || round(1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY signed)::numeric, 1)
            || ',' || round(1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY cosigned)::numeric, 1)
            || ',' || round(1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY cosigned)::numeric, 1)
            || ',' || count(*) FILTER (WHERE signed IS NULL OR cosigned IS NULL)
          FROM t""").split(",")
        return {"checkpoint_p50": float(p[0]), "checkpoint_p99": float(p[1]),
                "cosigned_p50": float(p[2]), "cosigned_p99": float(p[3]),
                "rows_not_covered": int(p[4])}

    def checkpoint_lag_ms(self, tag, timeout=60):
        """Per audit row of `tag`: from the owner's commit (occurred_at) to
        the signing of the first checkpoint that covers it, once every row
        of the tag is covered (p50, p99 in ms; None if that never came)."""
        covered = f"""SELECT count(*) FROM audit_logs a LEFT JOIN log_leaves l USING (event_id)
          WHERE a.request_id LIKE '{self.rid(tag)}-%' AND (l.log_index IS NULL OR
            NOT EXISTS (SELECT 1 FROM log_checkpoints c WHERE c.size > l.log_index))"""
        deadline = time.time() + timeout
        while int(self.mesh.psql("ulticode_admin", covered)) > 0:
            if time.time() > deadline:
                return None
            time.sleep(0.25)
        p = self.mesh.psql("ulticode_admin", f"""WITH t AS (
          SELECT extract(epoch FROM (SELECT min(signed_at) FROM log_checkpoints c
                   WHERE c.size > l.log_index) - a.occurred_at) AS signed
          FROM audit_logs a JOIN log_leaves l USING (event_id)
          WHERE request_id LIKE '{self.rid(tag)}-%')
          SELECT round(1000 * percentile_cont(0.5) WITHIN GROUP (ORDER BY signed)::numeric, 1)
            || ',' || round(1000 * percentile_cont(0.99) WITHIN GROUP (ORDER BY signed)::numeric, 1)
          FROM t""").split(",")
        return {"p50": float(p[0]), "p99": float(p[1])}

    def transparency(self, max_rate):
        """What the transparency log costs: the closed loop with the log's
        sequencer (and signer, and witness feed) off, on, on and off in this
        run; how fresh its checkpoints and cosignatures are at
        half the maximum; its storage per entry."""
        def settle():  # every row so far logged and confirmed (the log is on)
            deadline = time.time() + 600
            while (self.unsequenced() > 0 or self.unconfirmed() > 0) and \
                    time.time() < deadline:
                time.sleep(0.5)

        runs = {"off": [], "on": []}
        # Off, on, on, off: a machine that slows down (or speeds up) through
        # the run weighs on both modes alike.
        running = "on"
        for i, mode in enumerate(("off", "on", "on", "off")):
            if running == "on":
                settle()  # this run starts with nothing left of the last
            self.mesh.stop()
            self.mesh.start({"ULTICODE_LOG_SEQUENCER": "false"} if mode == "off" else None)
            if mode == "on" and running == "off":
                settle()  # the "off" run's rows first
            running = mode
            log(f"transparency: closed loop with the log {mode} ({i + 1}/4)")
            self.closed(tag=f"log{mode}{i}")
            runs[mode].append({k: self.result["closed"][k] for k in
                               ("cpu_ms_per_mutation", "commit_to_audit_row_ms")} |
                              {"ok_per_second": self.result["closed"]["loadgen"]["ok_per_second"]})
        self.mesh.stop()
        self.mesh.start()
        settle()
        tps = {k: sum(r["ok_per_second"] for r in v) / len(v) for k, v in runs.items()}
        rate = max(1, int(max_rate * 0.5))
        log(f"transparency: freshness at {rate}/s (half the maximum), {self.seconds}s")
        run = self.loadgen("logfresh", "open", rate=rate)
        self.wait_landed("logfresh", run["ok"])
        deadline = time.time() + 60
        while self.unsequenced() > 0 and time.time() < deadline:
            time.sleep(0.5)
        time.sleep(3)  # the last checkpoint's cosignatures
        entries = int(self.mesh.psql("ulticode_admin", "SELECT count(*) FROM audit_logs"))
        storage = int(self.mesh.psql("ulticode_admin", "SELECT pg_total_relation_size('log_nodes')"
                                     " + pg_total_relation_size('log_checkpoints')"
                                     " + pg_total_relation_size('log_cosignatures')"))
        return {"runs": runs,
                "throughput_on_vs_off": round(tps["on"] / tps["off"], 3),
                "freshness_ms": self.freshness_ms("logfresh"),
                "offered_per_second": rate, "achieved_per_second": run["ok_per_second"],
                "entries": entries,
                "log_storage_bytes_per_entry": round(storage / max(entries, 1))}

    def personal(self):
        """What committing to personal data costs: the closed loop with the
        services committing to personal values and embedding them instead,
        off, on, on, off in this run."""
        def settle():
            deadline = time.time() + 600
            while (self.unsequenced() > 0 or self.unconfirmed() > 0) and \
                    time.time() < deadline:
                time.sleep(0.5)

        runs = {"off": [], "on": []}
        for i, mode in enumerate(("off", "on", "on", "off")):
            settle()
            self.mesh.stop()
            self.mesh.start({"ULTICODE_PERSONAL_DATA_COMMITMENTS": "false"} if mode == "off"
                            else None)
            log(f"personal: closed loop with commitments {mode} ({i + 1}/4)")
            self.closed(tag=f"pd{mode}{i}")
            runs[mode].append({k: self.result["closed"][k] for k in
                               ("cpu_ms_per_mutation", "cpu_ms_per_mutation_by_process")} |
                              {"ok_per_second": self.result["closed"]["loadgen"]["ok_per_second"]})
        settle()
        self.mesh.stop()
        self.mesh.start()

        def mean(key, mode):
            return sum(r[key] for r in runs[mode]) / len(runs[mode])
        return {"runs": runs,
                "cpu_ms_per_mutation": {m: round(mean("cpu_ms_per_mutation", m), 3)
                                        for m in runs},
                "cpu_per_mutation_on_vs_off": round(mean("cpu_ms_per_mutation", "on") /
                                                    mean("cpu_ms_per_mutation", "off"), 3),
                "throughput_on_vs_off": round(mean("ok_per_second", "on") /
                                              mean("ok_per_second", "off"), 3)}

    def proofs(self, entries):
        """GetInclusionProof on a log of `entries` leaves: the mesh restarted
        with the sequencer off (nothing else writes the log), synthetic
        leaves appended to its log up to that size (their subtree hashes
        computed in SQL with RFC 9162 hashing) and a checkpoint of that size
        stored; then ulticode-readbench (GetInclusionProof) against it. Also
        the storage of the tree hashes per entry at that size."""
        self.mesh.stop()
        self.mesh.start({"ULTICODE_LOG_SEQUENCER": "false"})
        start = int(self.mesh.psql("ulticode_admin",
                                   "SELECT coalesce(max(idx) + 1, 0) FROM log_nodes WHERE level = 0"))
        log(f"proofs: appending leaves {start}..{entries - 1} to the log")
        self.mesh.psql("ulticode_admin", f"""INSERT INTO log_nodes (level, idx, hash)
          SELECT 0, i, sha256('\\x00'::bytea || int8send(i))
          FROM generate_series({start}, {entries - 1}) i""")
        self.mesh.psql("ulticode_admin", tree_levels_sql(start, entries))
        self.mesh.psql("ulticode_admin", f"""INSERT INTO log_checkpoints (size, root, note)
          VALUES ({entries}, sha256('synthetic'), 'synthetic checkpoint (benchmark)')""")
        storage = int(self.mesh.psql("ulticode_admin",
                                     "SELECT pg_total_relation_size('log_nodes')"))
        log(f"proofs: GetInclusionProof on {entries} leaves, 4 clients, {self.seconds}s")
        run = self.readbench("inclusion", seconds=self.seconds)
        run["node_bytes_per_entry"] = round(storage / entries)
        return run

    def reader_token(self):
        token = os.path.join(self.state, "auditor.token")
        if not os.path.exists(token):
            with open(token, "w", opener=lambda p, f: os.open(p, f, 0o600)) as tok:
                subprocess.run([os.path.join(REPO, "scripts/dev-token.sh"), "bench",
                                "audit.reader"],
                               env=dict(os.environ, ULTICODE_STATE_DIR=self.state), stdout=tok,
                               check=True)
        return token

    def readbench(self, call, seconds, query_filter=None, values=None, clients=4):
        """One of Admin's read RPCs, `clients` back to back (ulticode-readbench)."""
        args = [os.path.join(self.build_dir, "bench/ulticode-readbench"),
                f"--admin=127.0.0.1:{50053 + OFF}", f"--token-file={self.reader_token()}",
                f"--clients={clients}", f"--duration={seconds}s", f"--call={call}"]
        args += [f"--filter={query_filter}"] if query_filter else []
        args += [f"--values-file={values}"] if values else []
        out = subprocess.run(args, capture_output=True, text=True)
        if not out.stdout:
            sys.exit(f"[bench] ulticode-readbench {call} {query_filter or ''}: {out.stderr}")
        return json.loads(out.stdout)

    # What the growth phase's reads draw their arguments from: a random
    # sample of audit rows, one file per column.
    SAMPLE = {"event_id": "event_id::text", "actor": "actor", "action": "action",
              "entity_type": "entity_type", "entity": "entity_type || '/' || entity_id",
              "window": "(extract(epoch FROM occurred_at) - 1800)::bigint"}
    READS = [("query", "none", None), ("query", "owner", None), ("query", "actor", "actor"),
             ("query", "action", "action"), ("query", "entity_type", "entity_type"),
             ("query", "entity", "entity"), ("query", "window", "window"),
             ("query", "next_page", None), ("get", None, "event_id"),
             ("inclusion", None, None), ("inclusion-by-id", None, "event_id"),
             ("consistency", None, None), ("checkpoint", None, None), ("entries", None, None),
             ("tile", None, None)]

    def reads(self, tag):
        """Every QueryAuditLogs filter and every proof RPC: p50/p99 over a few
        seconds each, arguments drawn from a sample of the rows. One caller at
        a time: the latency of an answer, not of a queue (on two cores, more
        callers back to back measure the CPU's queue)."""
        cols = ", ".join(self.SAMPLE.values())
        rows = self.mesh.psql("ulticode_admin", f"SELECT {cols} FROM audit_logs "
                              "ORDER BY random() LIMIT 2000").splitlines()
        files = {}
        for i, name in enumerate(self.SAMPLE):
            files[name] = os.path.join(self.state, f"sample-{tag}-{name}")
            with open(files[name], "w") as f:
                f.write("\n".join(r.split("|")[i] for r in rows) + "\n")
        out = []
        seconds = min(self.seconds, 5)
        for call, query_filter, values in self.READS:
            run = self.readbench(call, seconds, query_filter, files.get(values), clients=1)
            log(f"  {call} {query_filter or ''}: p50/p99 {run['p50_ms']}/{run['p99_ms']} ms, "
                f"{run['errors']} errors")
            out.append(run)
        return out

    def log_settled(self):
        """Every audit row a leaf, every checkpoint proved to both witnesses."""
        return self.mesh.psql("ulticode_admin", """SELECT (SELECT count(*) FROM log_queue) = 0
          AND coalesce((SELECT bool_and(proved_size >= (SELECT max(size) FROM log_checkpoints)
                                        AND cosigned_size >= (SELECT max(size) FROM log_checkpoints))
                        FROM log_witnesses), false)""") == "t"

    def load_growth(self, rows):
        """`rows` audit rows appended to audit_logs and to the log (leaves,
        tree hashes), and as many outbox rows kept (CONFIRMED) in the owners,
        in batches of GROWTH_BATCH: generated in SQL from the rows the closed
        loop wrote (their sizes and values), with their own ids (UUIDv7
        shaped, 100 ms apart, ending now), actors (10,000) and entity ids.
        Each batch is one transaction holding the sequencer's and the witness
        feed's locks: the log is whole between batches, the witnesses are
        told they were proved up to its end (their own rows were before it)."""
        deadline = time.time() + 300
        while not self.log_settled():
            if time.time() > deadline:
                sys.exit("[bench] growth: the log did not settle before the load")
            time.sleep(0.5)
        now_ms = int(time.time() * 1000)
        self.mesh.psql("ulticode_admin", """DROP TABLE IF EXISTS bench_growth_template;
          CREATE TABLE bench_growth_template AS SELECT row_number() OVER () - 1 AS k, *
            FROM (SELECT * FROM audit_logs ORDER BY event_id LIMIT 1000) t""")
        templates = int(self.mesh.psql("ulticode_admin",
                                       "SELECT count(*) FROM bench_growth_template"))
        ident = ("(substr(lpad(to_hex({ms}), 12, '0'), 1, 8) || '-' || "
                 "substr(lpad(to_hex({ms}), 12, '0'), 9, 4) || '-7000-{variant}-' || "
                 "lpad(to_hex(i), 12, '0'))::uuid")
        ms = f"({now_ms}::bigint - ({rows}::bigint - i) * 100)"
        t0 = time.time()
        for lo in range(0, rows, self.GROWTH_BATCH):
            hi = min(rows, lo + self.GROWTH_BATCH)
            base = int(self.mesh.psql("ulticode_admin",
                                      "SELECT coalesce(max(log_index) + 1, 0) FROM log_leaves"))
            end = base + hi - lo
            self.mesh.psql("ulticode_admin", f"""BEGIN;
              SELECT pg_advisory_xact_lock(hashtextextended('ulticode.log.sequencer', 0));
              SELECT pg_advisory_xact_lock(hashtextextended('ulticode.log.witness', 0));
              SET LOCAL session_replication_role = replica;  -- not queued: leaves already
              INSERT INTO audit_logs (event_id, owner, event_type, actor, subject, action,
                  entity_type, entity_id, old_value, new_value, client_ip, user_agent, request_id,
                  trace_id, occurred_at, ingested_at, envelope, seal, key_id)
                SELECT {ident.format(ms=ms, variant='8000')}, t.owner, t.event_type,
                  'user-' || (i % 10000), t.subject, t.action, t.entity_type, 'g' || i,
                  t.old_value, t.new_value, t.client_ip, t.user_agent, 'growth-' || i, t.trace_id,
                  to_timestamp({ms} / 1000.0), to_timestamp({ms} / 1000.0 + 0.005), t.envelope,
                  t.seal, t.key_id
                FROM generate_series({lo}, {hi - 1}) i
                JOIN bench_growth_template t ON t.k = i % {templates};
              INSERT INTO log_leaves (log_index, event_id)
                SELECT {base} + i - {lo}, {ident.format(ms=ms, variant='8000')}
                FROM generate_series({lo}, {hi - 1}) i;
              INSERT INTO log_nodes (level, idx, hash)
                SELECT 0, {base} + i - {lo}, sha256('\\x00'::bytea || int8send(i))
                FROM generate_series({lo}, {hi - 1}) i;
              {tree_levels_sql(base, end)};
              UPDATE log_witnesses SET proved_size = {end}, sent_at = now();
              COMMIT;""")
            log(f"growth: {hi} of {rows} audit rows and leaves ({time.time() - t0:.0f} s)")
        self.mesh.psql("ulticode_admin", "DROP TABLE bench_growth_template")
        half = rows // 2
        for i, db in enumerate(("ulticode_auth", "ulticode_app")):
            self.mesh.psql(db, f"""CREATE TEMP TABLE t AS SELECT row_number() OVER () - 1 AS k, *
                FROM (SELECT * FROM audit_outbox ORDER BY event_id LIMIT 500) s;
              INSERT INTO audit_outbox (event_id, event_type, payload, state, attempts,
                  next_attempt_at, stream_entry_id, created_at, published_at, confirmed_at,
                  mac, key_id, publication, publication_floor)
                SELECT {ident.format(ms=ms, variant='900' + str(i))}, t.event_type, t.payload,
                  'CONFIRMED', 1, now(), '0-1', to_timestamp({ms} / 1000.0), now(), now(),
                  t.mac, t.key_id, 1, 0
                FROM generate_series(0, {half - 1}) i
                JOIN t ON t.k = i % (SELECT count(*) FROM t)""")
            log(f"growth: {half} outbox rows kept in {db} ({time.time() - t0:.0f} s)")
        for db, tables in (("ulticode_admin", "audit_logs, log_leaves, log_nodes"),
                           ("ulticode_auth", "audit_outbox"), ("ulticode_app", "audit_outbox")):
            self.mesh.psql(db, f"VACUUM (ANALYZE) {tables}")
        self.mesh.psql("postgres", "CHECKPOINT")
        return round(time.time() - t0)

    GROWTH_BATCH = 500000

    def growth(self, closed, reference):
        """Throughput and reads on the closed loop's database, then the same
        with GROWTH rows in audit_logs, the log and the outbox. pgbench runs
        beside each closed loop: a machine that changes speed between the two
        shows in the reference too."""
        rows = int(os.environ.get("ULTICODE_BENCH_GROWTH_ROWS", "5000000"))
        log(f"growth: reads on the database of the closed loop "
            f"({self.mesh.psql('ulticode_admin', 'SELECT count(*) FROM audit_logs')} rows)")
        small = {"reference": reference, "closed": closed, "reads": self.reads("small")}
        loaded_in = self.load_growth(rows)
        self.reference(replication=False)
        grown = {"reference": self.result["reference"]}
        self.closed(tag="grown")
        grown["closed"] = self.result["closed"]
        log(f"growth: reads with {rows} more rows")
        grown["reads"] = self.reads("grown")
        # The loaded tree is the log's own: both owners, who check every new
        # checkpoint's consistency with the one they cosigned before the
        # load, cosign the latest one (a wrong stored node is a fork to them).
        deadline = time.time() + 120
        while not self.log_settled() and time.time() < deadline:
            time.sleep(0.5)
        witnessed = self.log_settled()
        sizes = self.mesh.psql("ulticode_admin", "SELECT pg_total_relation_size('audit_logs') || ','"
                               " || pg_total_relation_size('log_nodes') || ','"
                               " || pg_total_relation_size('log_leaves') || ','"
                               " || (SELECT count(*) FROM audit_logs)").split(",")
        t = {k: v["closed"]["loadgen"]["ok_per_second"] for k, v in (("small", small),
                                                                      ("grown", grown))}
        return {"rows": rows, "load_seconds": loaded_in, "small": small, "grown": grown,
                "witnesses_cosigned_after_load": witnessed,
                "audit_rows": int(sizes[3]),
                "bytes": {"audit_logs": int(sizes[0]), "log_nodes": int(sizes[1]),
                          "log_leaves": int(sizes[2])},
                "throughput_grown_vs_small": round(t["grown"] / t["small"], 3),
                "reference_grown_vs_small": round(grown["reference"]["tps"] /
                                                  small["reference"]["tps"], 3)}

    def proc_rss_and_jiffies(self, pid):
        with open(f"/proc/{pid}/status") as f:
            rss = int(re.search(r"^VmRSS:\s+(\d+)", f.read(), re.M).group(1)) * 1024
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return rss, int(fields[11]) + int(fields[12])

    def forward(self):
        """ulticode-forward (docs/forwarding.md) over the log the closed loop
        left, each kind of sink alone from the log's beginning to its end:
        the forwarder's rows per second and CPU per row, beside the
        reference in the same run, `ulticode-tail --verify` reading the same
        rows to /dev/null (the verified follow every sink does, without
        delivering). Receivers: tests/support/webhook_receiver.py and
        rsyslogd (TCP and TLS); their own CPU is not counted."""
        secrets = os.path.join(self.state, "secrets")
        rows = 0
        for _ in range(600):  # every row in a checkpoint both owners cosigned
            rows = int(self.mesh.psql("ulticode_admin", "SELECT count(*) FROM log_leaves"))
            cosigned = self.mesh.psql("ulticode_admin", """SELECT count(*) || ',' ||
              coalesce(min(s), 0) FROM (SELECT max(size) s FROM log_cosignatures
              GROUP BY witness) w""").split(",")
            queued = int(self.mesh.psql("ulticode_admin", "SELECT count(*) FROM log_queue"))
            if queued == 0 and cosigned[0] == "2" and int(cosigned[1]) >= rows:
                break
            time.sleep(0.5)
        keys = [f"--log-keys-file={secrets}/log.vkey",
                f"--witness-keys-file={secrets}/witnesses.vkey",
                f"--owner-keys-file={secrets}/public-keys.txt"]
        common = [f"--admin=127.0.0.1:{50053 + OFF}", f"--token-file={self.reader_token()}"]
        out = {"rows": rows, "sinks": {}}
        log(f"forward: the reference, ulticode-tail --verify over {rows} rows")
        tail = subprocess.Popen([os.path.join(self.build_dir, "tools/tail/ulticode-tail"),
                                 *common, "--from-beginning", "--verify", *keys,
                                 f"--max-rows={rows}", "--idle-timeout=30s"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        t0 = time.time()
        _, status, usage = os.wait4(tail.pid, 0)
        seconds = time.time() - t0
        if status != 0:
            sys.exit(f"[bench] ulticode-tail: {tail.stderr.read()}")
        cpu = usage.ru_utime + usage.ru_stime
        out["reference"] = {"rows_per_second": round(rows / seconds),
                            "cpu_us_per_row": round(1e6 * cpu / rows, 1)}
        work = tempfile.mkdtemp(prefix="forward.", dir=self.state)
        receivers = self.forward_receivers(work)
        try:
            for name, sink in receivers["sinks"].items():
                out["sinks"][name] = self.forward_sink(work, name, sink, common + keys, rows)
                got, ref = out["sinks"][name], out["reference"]
                got["rows_per_second_vs_reference"] = round(
                    got["rows_per_second"] / ref["rows_per_second"], 2)
                got["cpu_per_row_vs_reference"] = round(
                    got["cpu_us_per_row"] / ref["cpu_us_per_row"], 2)
        finally:
            for p in receivers["processes"]:
                p.terminate()
                p.wait(timeout=30)
        return out

    def forward_receivers(self, work):
        """A webhook receiver and rsyslogd (TCP and TLS inputs), and the
        sinks that deliver to them."""
        secret = os.path.join(work, "webhook.secret")
        with open(secret, "w", opener=lambda p, f: os.open(p, f, 0o600)) as f:
            f.write(os.urandom(16).hex())
        hook = subprocess.Popen(["python3", os.path.join(REPO, "tests/support/webhook_receiver.py"),
                                 f"--port-file={work}/hook.port", f"--secret-file={secret}",
                                 f"--out={work}/hook.jsonl", f"--control={work}/hook.control"])
        subprocess.run(["bash", "-c", f"source {REPO}/scripts/lib/servers.sh && ulticode_tls_ca "
                        f"{work} && ulticode_tls_cert {work} rsyslog IP:127.0.0.1"], check=True)
        with open(f"{work}/rsyslog.conf", "w") as f:
            f.write(f"""global(workDirectory="{work}" maxMessageSize="256k"
  DefaultNetstreamDriverCAFile="{work}/ca.pem" DefaultNetstreamDriverCertFile="{work}/rsyslog.pem"
  DefaultNetstreamDriverKeyFile="{work}/rsyslog.key")
module(load="imtcp")
ruleset(name="rows") {{ action(type="omfile" file="{work}/syslog.log") }}
input(type="imtcp" port="0" listenPortFileName="{work}/tcp.port" ruleset="rows")
input(type="imtcp" port="0" listenPortFileName="{work}/tls.port" ruleset="rows"
  streamDriver.name="ossl" streamDriver.mode="1" streamDriver.authMode="anon")
""")
        syslog = subprocess.Popen(["/usr/sbin/rsyslogd", "-n", "-f", f"{work}/rsyslog.conf", "-i",
                                   f"{work}/rsyslog.pid"])
        ports = {}
        for _ in range(100):
            for name in ("hook", "tcp", "tls"):
                try:
                    ports[name] = int(open(f"{work}/{name}.port").read())
                except (OSError, ValueError):
                    pass
            if len(ports) == 3:
                break
            time.sleep(0.2)
        else:
            sys.exit("[bench] the forwarder's receivers did not come up")
        hook_url = f"http://127.0.0.1:{ports['hook']}/ingest"
        return {"processes": [hook, syslog], "sinks": {
            "webhook-ulticode": {"webhook": {"url": hook_url, "secretFile": secret}},
            "webhook-ocsf": {"webhook": {"url": hook_url, "secretFile": secret,
                                         "schema": "SCHEMA_OCSF"}},
            "syslog-tcp": {"syslog": {"address": f"127.0.0.1:{ports['tcp']}"}},
            "syslog-tls": {"syslog": {"address": f"127.0.0.1:{ports['tls']}", "tls": True,
                                      "caFile": f"{work}/ca.pem"}}}}

    def forward_sink(self, work, name, sink, args, rows):
        """One forwarder with one sink from the log's beginning until it
        delivered `rows`: its rows per second and CPU per row."""
        with open(f"{work}/{name}.json", "w") as f:
            json.dump({"sinks": [{"name": name} | sink]}, f)
        metrics = free_port()
        log(f"forward: {name}, {rows} rows (batches of 100)")
        proc = subprocess.Popen([os.path.join(self.build_dir, "forward/ulticode-forward"), *args,
                                 f"--sinks-file={work}/{name}.json",
                                 f"--state-dir={work}/{name}.state",
                                 f"--metrics-listen=127.0.0.1:{metrics}",
                                 f"--health-listen=127.0.0.1:{free_port()}",
                                 "--batch-linger=100ms"], stderr=subprocess.DEVNULL)
        t0, done = time.time(), 0
        while done < rows and proc.poll() is None and time.time() - t0 < 900:
            time.sleep(0.1)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics",
                                            timeout=5) as page:
                    m = re.search(r'^ulticode_forward_rows_delivered_total\{sink="[^"]*"\} '
                                  r"([0-9.e+]+)$", page.read().decode(), re.M)
                done = int(float(m.group(1))) if m else 0
            except OSError:
                pass
        seconds = time.time() - t0
        _, jiffies = self.proc_rss_and_jiffies(proc.pid)
        proc.terminate()
        proc.wait(timeout=60)
        if done < rows:
            sys.exit(f"[bench] ulticode-forward {name}: {done} of {rows} rows delivered")
        return {"rows_per_second": round(rows / seconds),
                "cpu_us_per_row": round(1e6 * jiffies / HZ / rows, 1)}

    def watchbench(self, watchers, seconds, idle=False):
        # Each watcher on its own connection, as separate followers are;
        # idle ones ten to a connection (1,000 connections would pass the
        # usual limit of 1,024 open files).
        args = [os.path.join(self.build_dir, "bench/ulticode-watchbench"),
                f"--admin=127.0.0.1:{50053 + OFF}", f"--token-file={self.reader_token()}",
                f"--watchers={watchers}", f"--duration={seconds}s"]
        args += ["--idle", "--per-connection=10"] if idle else []
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    WATCH = {"ULTICODE_WATCH_MAX_WATCHERS": "5000", "ULTICODE_WATCH_MAX_PER_PRINCIPAL": "5000"}

    def wait_watchers(self, n, timeout=120):
        """Until Admin counts `n` open watches (its ulticode_admin_watchers)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{9103 + OFF}/metrics",
                                            timeout=5) as page:
                    m = re.search(r"^ulticode_admin_watchers ([0-9.e+]+)$", page.read().decode(),
                                  re.M)
                if m and float(m.group(1)) >= n:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        sys.exit(f"[bench] Admin never counted {n} watchers")

    def watch(self, max_rate, idle_watchers=1000):
        """WatchAuditLogs (docs/watching.md): commit -> delivered latency at
        half the maximum with 1, 10 and 100 watchers from the head (each row's
        occurred_at to its arrival); then Admin's memory and CPU per idle
        watcher: `idle_watchers` streams whose filter matches nothing, Admin's
        RSS before and after they opened and its CPU while they wait, less
        its CPU while nothing watched."""
        self.mesh.stop()
        self.mesh.start(self.WATCH)
        rate = max(1, int(max_rate * 0.5))
        out = {"rate": rate, "latency": []}
        admin = self.mesh.pid("ulticode-admin")
        for n in (1, 10, 100):
            log(f"watch: {n} watchers from the head, load at {rate}/s, {self.seconds}s")
            bench = self.watchbench(n, self.seconds + 3)
            self.wait_watchers(n)
            _, j0 = self.proc_rss_and_jiffies(admin)
            self.loadgen(f"watch{n}", "open", rate=rate)
            _, j1 = self.proc_rss_and_jiffies(admin)
            got, err = bench.communicate()
            if not got:
                sys.exit(f"[bench] ulticode-watchbench: {err}")
            # Admin's CPU while the load ran: the pipeline's and the watches'.
            out["latency"].append(json.loads(got) | {
                "admin_cpu_cores": round((j1 - j0) / HZ / self.seconds, 3),
                "first_error": err.strip()})
        quiet = 10
        rss0, j0 = self.proc_rss_and_jiffies(admin)
        time.sleep(quiet)
        _, j1 = self.proc_rss_and_jiffies(admin)
        log(f"watch: {idle_watchers} idle watchers")
        hold = max(20, self.seconds)
        bench = self.watchbench(idle_watchers, hold + 30, idle=True)
        self.wait_watchers(idle_watchers)
        time.sleep(1)  # their first progress frames sent
        rss1, j2 = self.proc_rss_and_jiffies(admin)
        time.sleep(hold)
        _, j3 = self.proc_rss_and_jiffies(admin)
        if bench.poll() is not None:
            sys.exit("[bench] the idle watchers closed before the measurement ended")
        got, err = bench.communicate()
        if not got:
            sys.exit(f"[bench] ulticode-watchbench --idle: {err}")
        idle = json.loads(got)
        base = (j1 - j0) / HZ / quiet
        held = (j3 - j2) / HZ / hold
        out["idle"] = idle | {
            "admin_rss_before_mib": round(rss0 / 2**20, 1), "admin_rss_with_mib": round(rss1 / 2**20, 1),
            "rss_bytes_per_watcher": round((rss1 - rss0) / idle_watchers),
            "admin_cpu_quiet": round(base, 4), "admin_cpu_with": round(held, 4),
            "cpu_us_per_watcher_second": round(1e6 * (held - base) / idle_watchers, 2)}
        return out

    def statements(self, mutations, top=20):
        """Where PostgreSQL's time went in the closed loop
        (pg_stat_statements): the statements with the most execution time,
        with their calls and rows per audited mutation."""
        rows = self.mesh.psql("postgres", f"""SELECT d.datname, round(s.total_exec_time::numeric, 1),
            s.calls, s.rows, regexp_replace(left(s.query, 110), '\\s+', ' ', 'g')
          FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
          WHERE d.datname LIKE 'ulticode_%'
          ORDER BY s.total_exec_time DESC LIMIT {top}""")
        out = []
        for line in rows.splitlines():
            db, ms, calls, n, query = line.split("|", 4)
            out.append({"database": db.removeprefix("ulticode_"),
                        "exec_us_per_mutation": round(1000 * float(ms) / mutations, 1),
                        "calls_per_mutation": round(int(calls) / mutations, 3),
                        "rows_per_call": round(int(n) / max(int(calls), 1), 1), "query": query})
        return out

    def model(self):
        """The cost model (docs/performance.md, "Cost model"): each stage of an
        audited mutation run alone by ulticode-costmodel, summed per process
        (MODEL), beside what each process spent per mutation in the closed
        loop of this run."""
        secrets = os.path.join(self.state, "secrets")
        log("cost model: each stage alone (ulticode-costmodel)")
        stages = self.costmodel(secrets, min(self.seconds, 10))
        measured_ms = self.result["closed"]["cpu_ms_per_mutation_by_process"]
        processes = []
        for process, parts in MODEL.items():
            model_us = sum(stages[stage]["cpu_us_per_op"].get(who, 0) for stage, who in parts)
            names = ("ulticode-auth", "ulticode-app") if process == "owners" else (process,)
            got_us = 1000 * sum(measured_ms.get(n, 0) for n in names)
            processes.append({"process": process, "model_us": round(model_us, 1),
                              "measured_us": round(got_us, 1),
                              "measured_vs_model": round(got_us / model_us, 2) if model_us else None})
        return {"stages": stages, "processes": processes,
                "model_us": round(sum(p["model_us"] for p in processes), 1),
                "measured_us": round(sum(p["measured_us"] for p in processes), 1),
                "machine_measured_us": round(1000 * self.result["closed"]["cpu_ms_per_mutation"], 1)}

    def costmodel(self, secrets, seconds, batch=256):
        return json.loads(subprocess.run(
            [os.path.join(self.build_dir, "bench/ulticode-costmodel"), "--pg-host=127.0.0.1",
             f"--pg-port={PG_PORT}", f"--redis-addr=127.0.0.1:{56379 + OFF}", "--redis-user=ops",
             f"--redis-password-file={secrets}/redis-ops.password", f"--grpc-port={50099 + OFF}",
             f"--seconds={seconds}s", f"--batch={batch}"],
            env=self.mesh.env, check=True, capture_output=True, text=True).stdout)

    # Fewer connections and threads than the defaults: does the pipeline
    # spend less with less parallel machinery?
    LEAN = {"ULTICODE_PG_POOL_SIZE": "4", "ULTICODE_GRPC_THREADS": "8",
            "ULTICODE_DISPATCH_THREADS": "1"}
    BATCHED = ("publish", "xadd", "xread", "inbox", "log", "prove", "confirm")

    def calibrate(self):
        """The closed loop again with LEAN settings, and the batched stages
        of the cost model at batches of 1, 3 and 256: which end of that
        range each stage of the live pipeline is on."""
        secrets = os.path.join(self.state, "secrets")
        by_batch = {}
        for batch in (1, 3, 256):
            log(f"calibrate: the cost model's batched stages at batches of {batch}")
            stages = self.costmodel(secrets, 1, batch)
            by_batch[batch] = {k: stages[k]["cpu_us_per_op"] for k in self.BATCHED}
        default = self.result["closed"]
        log(f"calibrate: the closed loop with {self.LEAN}")
        self.mesh.stop()
        self.mesh.start(self.LEAN)
        self.closed(tag="lean")
        lean = self.result["closed"]
        self.result["closed"] = default
        self.mesh.stop()
        self.mesh.start()
        return {"model_by_batch": by_batch, "lean_settings": self.LEAN,
                "lean": {"ok_per_second": lean["loadgen"]["ok_per_second"],
                         "cpu_ms_per_mutation": lean["cpu_ms_per_mutation"],
                         "cpu_ms_per_mutation_by_process": lean["cpu_ms_per_mutation_by_process"],
                         "commit_to_audit_row_ms": lean["commit_to_audit_row_ms"]},
                "default": {"ok_per_second": default["loadgen"]["ok_per_second"],
                            "cpu_ms_per_mutation": default["cpu_ms_per_mutation"],
                            "cpu_ms_per_mutation_by_process":
                                default["cpu_ms_per_mutation_by_process"]}}

    def calibrate_summary(self):
        c = self.result["calibrate"]
        log("calibrate: CPU us per operation, by batch size (client / postgres / redis-server):")
        for stage in self.BATCHED:
            log(f"  {stage:8} " + "   ".join(
                f"{b:>3}: " + " / ".join(f"{c['model_by_batch'][b][stage].get(w, 0):.1f}"
                                         for w in ("client", "postgres", "redis-server"))
                for b in (1, 3, 256)))
        for name in ("default", "lean"):
            x = c[name]
            log(f"  closed loop, {name}: {x['ok_per_second']:.0f}/s, "
                f"{x['cpu_ms_per_mutation']} ms CPU per mutation, by process "
                f"{x['cpu_ms_per_mutation_by_process']}")

    def profile(self, top=12):
        """CPU profiles at the maximum: `perf record` (cpu-clock, 499 Hz), one
        recording per service and one each for all of PostgreSQL and Redis,
        during a closed loop; per recording, the functions with the most
        samples (self time)."""
        seconds = max(5, self.seconds)
        log(f"profiles: perf record during a closed loop, {seconds}s")
        targets = {s: str(self.mesh.pid(s)) for s in SERVICES}
        for name in ("postgres", "redis-server"):
            targets[name] = subprocess.run(["pgrep", "-d", ",", "-x", name], capture_output=True,
                                           text=True).stdout.strip()
        loop = threading.Thread(target=self.loadgen, args=("profile", "closed"),
                                kwargs={"clients": self.clients, "seconds": seconds + 4})
        loop.start()
        time.sleep(2)
        recorders = {name: subprocess.Popen(
            ["perf", "record", "-q", "-e", "cpu-clock", "-F", "499", "-o",
             os.path.join(self.state, f"perf-{name}.data"), "-p", pids, "--", "sleep",
             str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for name, pids in targets.items() if pids}
        for p in recorders.values():
            p.wait()
        loop.join()
        out = {}
        for name in recorders:
            report = subprocess.run(
                ["perf", "report", "-i", os.path.join(self.state, f"perf-{name}.data"),
                 "--no-children", "--stdio", "-q", "--sort", "dso,symbol", "--percent-limit", "0.5"],
                capture_output=True, text=True).stdout
            rows = []
            for line in report.splitlines():
                m = re.match(r"\s*([\d.]+)%\s+(\S+)\s+\[.\]\s+(.*)$", line)
                if m:
                    symbol = re.sub(r"(\s+-)+\s*$", "", m.group(3)).strip()
                    rows.append({"self_pct": float(m.group(1)), "symbol": symbol[:120],
                                 "dso": m.group(2)})
            by_dso = subprocess.run(
                ["perf", "report", "-i", os.path.join(self.state, f"perf-{name}.data"),
                 "--no-children", "--stdio", "-q", "--sort", "dso", "--percent-limit", "1"],
                capture_output=True, text=True).stdout
            dsos = [{"self_pct": float(m.group(1)), "dso": m.group(2)} for m in
                    (re.match(r"\s*([\d.]+)%\s+(\S+)", line) for line in by_dso.splitlines()) if m]
            out[name] = {"functions": rows[:top], "libraries": dsos}
        return out

    def closed(self, tag="closed"):
        log(f"closed loop ({tag}): {self.clients} in flight, {self.seconds}s")
        c0, s0, b0 = cpu_by_comm(), self.pg_stats(), busy_jiffies()
        run = self.loadgen(tag, "closed", clients=self.clients)
        ok = run["ok"]
        all_in = self.wait_landed(tag, ok)
        b1, s1, c1 = busy_jiffies(), self.pg_stats(), cpu_by_comm()
        by_process = {n: round((c1[n] - c0.get(n, 0)) * 1000 / HZ / ok, 3)
                      for n in c1 if c1[n] - c0.get(n, 0) > 0}
        # The load generator has exited: its CPU is what it reported.
        by_process["ulticode-loadgen"] = round(run["cpu_seconds"] * 1000 / ok, 3)
        by_process = dict(sorted(by_process.items(), key=lambda kv: -kv[1]))
        per_claim = {}
        for k, (scans, reads) in s1["idx"].items():
            d_scans = scans - s0["idx"].get(k, (0, 0))[0]
            d_reads = reads - s0["idx"].get(k, (0, 0))[1]
            per_claim[k] = round(d_reads / d_scans, 1) if d_scans else 0
        self.result["closed"] = {
            "loadgen": run, "audit_rows": self.landed(tag), "all_landed": all_in,
            "cpu_ms_per_mutation": round((b1 - b0) * 1000 / HZ / ok, 3),
            "cpu_ms_per_mutation_by_process": by_process,
            "commits_per_event": round((s1["commits"] - s0["commits"]) / ok, 2),
            "wal_bytes_per_event": round((s1["wal"] - s0["wal"]) / ok),
            "index_entries_read_per_scan": per_claim,
            "peak_rss_mib": peak_rss_mib(),
            "commit_to_audit_row_ms": self.lag_ms(tag)}
        return run["ok_per_second"]

    def open_loop(self, max_rate, fractions=(0.25, 0.5, 0.75, 1.0), tag="open"):
        points = []
        for f in fractions:
            rate = max(1, int(max_rate * f))
            log(f"open loop: {rate}/s ({int(f * 100)}% of the maximum), {self.seconds}s")
            t = f"{tag}{int(f * 100)}"
            run = self.loadgen(t, "open", rate=rate)
            self.wait_landed(t, run["ok"])
            points.append({"fraction": f, "offered_per_second": rate,
                           "achieved_per_second": run["ok_per_second"],
                           "dropped": run["dropped"], "errors": run["errors_by_code"],
                           "rpc_ms": run["latency_ms"], "lag_ms": self.lag_ms(t),
                           "checkpoint_lag_ms": self.checkpoint_lag_ms(t)})
        return points

    def metric_sum(self, port, name, match=""):
        """The sum of a service's counter `name` over its series whose
        labels contain `match`."""
        with urllib.request.urlopen(f"http://127.0.0.1:{port + OFF}/metrics", timeout=5) as page:
            text = page.read().decode()
        return sum(float(m.group(2)) for m in
                   re.finditer(rf"^{name}(\{{[^}}]*\}})? ([0-9.e+]+)$", text, re.M)
                   if match in (m.group(1) or ""))

    def reads_twice(self):
        """Entries Admin read again (duplicates) and rows the owners sent
        again, so far."""
        return {"admin_duplicates": self.metric_sum(9103, "ulticode_inbox_entries_total",
                                                    'outcome="duplicate"'),
                "owner_resends": sum(self.metric_sum(port, "ulticode_outbox_resends_total")
                                     for port in (9101, 9102))}

    def drain(self, rate, tag="drain"):
        seconds = max(1, int(self.drain_events / rate))
        log(f"drain: Admin frozen while ~{rate * seconds} events queue up ({seconds}s at {rate}/s)")
        admin = self.mesh.pid("ulticode-admin")
        twice0 = self.reads_twice()
        os.kill(admin, signal.SIGSTOP)
        try:
            run = self.loadgen(tag, "open", rate=rate, seconds=seconds)
        finally:
            c0, b0 = cpu_by_comm(), busy_jiffies()
            os.kill(admin, signal.SIGCONT)
        t0, curve, n = time.time(), [], run["ok"]
        while True:
            done = self.landed(tag)
            curve.append((round(time.time() - t0, 2), done))
            if done >= n or time.time() - t0 > 900:
                break
            time.sleep(0.25)
        elapsed = curve[-1][0]
        b1, c1 = busy_jiffies(), cpu_by_comm()
        twice1 = self.reads_twice()
        # Where the drain's CPU goes: each process's, per event drained, and
        # how busy the whole machine was (1.0: every core).
        by_process = {k: round((c1[k] - c0.get(k, 0)) * 1000 / HZ / max(n, 1), 3)
                      for k in c1 if (c1[k] - c0.get(k, 0)) * 1000 / HZ / max(n, 1) >= 0.005}
        busy = (b1 - b0) / HZ / max(elapsed, 1e-3) / (os.cpu_count() or 1)
        return {"events": n, "seconds_to_drain": elapsed,
                "cpu_ms_per_event_by_process": dict(sorted(by_process.items(),
                                                           key=lambda kv: -kv[1])),
                "machine_busy": round(busy, 2),
                "read_twice": {k: int(twice1[k] - twice0[k]) for k in twice0},
                "events_per_second": round(n / elapsed) if elapsed > 0 else None,
                "complete": curve[-1][1] >= n, "curve": curve}

    def redis_used_memory(self):
        info = self.mesh_redis("INFO", "memory")
        return int(re.search(r"^used_memory:(\d+)", info, re.M).group(1))

    def sizes(self):
        out = {}
        for db in ("ulticode_auth", "ulticode_app", "ulticode_admin"):
            rows = self.mesh.psql(db, "SELECT relname, pg_total_relation_size(oid) FROM pg_class "
                                  "WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace")
            for line in filter(None, rows.splitlines()):
                name, size = line.split("|")
                out[f"{db.removeprefix('ulticode_')}.{name}"] = int(size)
        for stream in ("audit:auth", "audit:app"):
            out[f"stream.{stream}"] = int(self.mesh_redis("XLEN", stream))
        return out

    def mesh_redis(self, *args):
        secrets = os.path.join(self.state, "secrets")
        return subprocess.run(
            ["redis-cli", "-h", "127.0.0.1", "-p", str(56379 + OFF), "--user", "ops",
             "--no-auth-warning", *args],
            env=dict(os.environ, REDISCLI_AUTH=open(os.path.join(secrets, "redis-ops.password"))
                     .read().strip()),
            check=True, capture_output=True, text=True).stdout.strip()

    def servers_sh(self, body):
        r = subprocess.run(["bash", "-c", f'source "{REPO}/scripts/lib/servers.sh" && {body}'],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"[bench] {body} failed:\n{r.stdout}{r.stderr}")

    def replication(self):
        standby = os.path.join(self.state, "standby", "pg")
        os.makedirs(os.path.dirname(standby), mode=0o755)
        log("replication: a streaming standby (pg_basebackup)")
        primary = os.path.join(self.state, "pg")
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            port = free.getsockname()[1]
        self.servers_sh(f"ulticode_pg_standby {primary} {PG_PORT} {standby} {port}")
        out = {}
        try:
            for mode, names in (("async", ""), ("sync", "*")):
                self.mesh.psql("postgres", f"ALTER SYSTEM SET synchronous_standby_names = '{names}'")
                self.mesh.psql("postgres", "SELECT pg_reload_conf()")
                self.closed(tag=f"repl{mode}")
                out[mode] = self.result.pop("closed")
        finally:
            self.mesh.psql("postgres", "ALTER SYSTEM RESET synchronous_standby_names")
            self.mesh.psql("postgres", "SELECT pg_reload_conf()")
            self.servers_sh(f"ulticode_pg_kill9 {standby}")
        a, y = out["async"], out["sync"]
        out["sync_vs_async"] = {
            "throughput": round(y["loadgen"]["ok_per_second"] / a["loadgen"]["ok_per_second"], 3),
            "cpu_per_mutation": round(y["cpu_ms_per_mutation"] / a["cpu_ms_per_mutation"], 2)}
        return out

    def soak(self, rate):
        log(f"soak: {rate}/s for {self.soak_seconds}s, sampling every 30 s")
        args = [os.path.join(self.build_dir, "bench/ulticode-loadgen"),
                f"--auth=127.0.0.1:{50051 + OFF}", f"--app=127.0.0.1:{50052 + OFF}",
                f"--token-file={self.token}", "--mode=open", f"--rate={rate}",
                "--max-in-flight=4096", f"--duration={self.soak_seconds}s",
                f"--run-id={self.rid('soak')}"]
        gen = subprocess.Popen(args, stdout=subprocess.PIPE, text=True)
        t0, samples = time.time(), []
        while True:
            samples.append({"t": round(time.time() - t0), "redis_used_memory": self.redis_used_memory(),
                            "sizes": self.sizes()})
            if gen.poll() is not None:
                break
            time.sleep(30)
        run = json.loads(gen.communicate()[0])
        # Growth over the second half of the run (the first half reaches the
        # steady state: retention and trimming horizons).
        mid = samples[len(samples) // 2]
        last = samples[-1]
        growth = {k: last["sizes"][k] - mid["sizes"].get(k, 0) for k in last["sizes"]}
        growth["redis_used_memory"] = last["redis_used_memory"] - mid["redis_used_memory"]
        return {"rate": rate, "loadgen": run, "samples": samples,
                "second_half_growth_bytes": growth,
                "second_half_seconds": last["t"] - mid["t"]}

    # --- the run -----------------------------------------------------------
    def run(self):
        os.environ["ULTICODE_PG_OPTIONS"] = self.PG_OPTIONS
        try:
            log(f"starting a private durable mesh ({self.state})")
            self.mesh.start()
            with open(self.token, "w", opener=lambda p, f: os.open(p, f, 0o600)) as tok:
                subprocess.run([os.path.join(REPO, "scripts/dev-token.sh"), "bench", "auth.admin",
                                "app.editor"], env=dict(os.environ, ULTICODE_STATE_DIR=self.state),
                               stdout=tok, check=True)
            if self.phases in ("all", "model", "growth", "calibrate"):
                self.reference()
                self.mesh.psql("postgres", "CREATE EXTENSION IF NOT EXISTS pg_stat_statements;"
                                           " SELECT pg_stat_statements_reset()")
            max_rate = self.closed()
            if self.phases in ("all", "model", "calibrate"):
                self.bracket_reference()
            if self.phases in ("all", "model"):
                self.result["closed"]["statements"] = self.statements(
                    self.result["closed"]["loadgen"]["ok"])
            if self.phases in ("all", "model"):
                self.result["notify"] = self.notify()
                self.result["model"] = self.model()
                self.result["profiles"] = self.profile()
            if self.phases == "calibrate":
                self.result["calibrate"] = self.calibrate()
            if self.phases == "sequence":
                self.result["sequence"] = self.sequence(self.result["closed"]["cpu_ms_per_mutation"])
            if self.phases == "log":
                baseline = self.result["closed"]
                self.result["transparency"] = self.transparency(max_rate)
                self.result["transparency"]["proofs"] = self.proofs(
                    int(os.environ.get("ULTICODE_BENCH_LOG_ENTRIES", "5000000")))
                self.result["closed"] = baseline
            if self.phases == "proofs":
                self.result["proofs"] = self.proofs(
                    int(os.environ.get("ULTICODE_BENCH_LOG_ENTRIES", "5000000")))
            if self.phases == "growth":
                baseline = self.result["closed"]
                reference = self.result["reference"]
                self.result["growth"] = self.growth(baseline, reference)
                self.result["closed"], self.result["reference"] = baseline, reference
            if self.phases == "watch":
                self.result["watch"] = self.watch(max_rate)
            if self.phases == "personal":
                baseline = self.result["closed"]
                self.result["personal"] = self.personal()
                self.result["closed"] = baseline
            if self.phases in ("all", "forward"):
                self.result["forward"] = self.forward()
            if self.phases == "replication":
                baseline = self.result["closed"]
                self.result["replication"] = self.replication()
                self.result["closed"] = baseline
            if self.phases in ("all", "drain"):
                if self.phases == "all":
                    self.result["open"] = self.open_loop(max_rate)
                self.result["drain"] = self.drain(max(1, int(max_rate * 0.8)))
                log("restarting the mesh with the original system's settings")
                self.mesh.stop()
                self.mesh.start(ORIGINAL)
                self.result["original"] = {
                    "settings": ORIGINAL,
                    "open": self.open_loop(max_rate, fractions=(0.5,), tag="orig"),
                    "drain": self.drain(max(1, int(max_rate * 0.8)), tag="origdrain")}
            if self.soak_seconds > 0:
                log("restarting the mesh with the soak's housekeeping settings")
                self.mesh.stop()
                self.mesh.start(SOAK)
                self.result["soak"] = self.soak(max(1, int(max_rate * 0.5)))
        finally:
            self.mesh.stop()
            subprocess.run(["rm", "-rf", "--", self.state])
        if self.phases == "all":
            self.ratios()
        os.makedirs(self.out_dir, exist_ok=True)
        path = os.path.join(self.out_dir, f"{self.run_id}.json")
        with open(path, "w") as f:
            json.dump(self.result, f, indent=1)
        plots(self.result, os.path.join(self.out_dir, self.run_id))
        self.summary(path)

    def model_summary(self):
        r, m = self.result, self.result["model"]
        log("cost model, CPU us per audited mutation (each stage alone):")
        log(f"  {'stage':10} {'ops':>8} " + " ".join(f"{w:>14}" for w in
                                                  ("client", "server", "postgres", "redis-server")))
        for name, st in m["stages"].items():
            if name == "crypto":
                continue
            cpu = st["cpu_us_per_op"]
            log(f"  {name:10} {st['ops']:>8} " + " ".join(
                f"{cpu.get(w, 0):>14.1f}" for w in ("client", "server", "postgres", "redis-server")))
        c = m["stages"]["crypto"]
        log(f"  crypto: Ed25519 sign {c['sign_us']:.1f} us and verify {c['verify_us']:.1f} us (once "
            f"a bundle), row MAC {c.get('row_mac_us', 0):.2f} us, SHA-256 "
            f"{c['sha256_us']:.2f} us ({c['envelope_bytes']:.0f}-byte envelope), inclusion proof "
            f"of {c['inclusion_proof_hashes']:.0f} hashes {c['inclusion_verify_us']:.1f} us")
        log(f"  {'process':18} {'model':>8} {'measured':>9} {'x':>6}")
        for p in m["processes"]:
            log(f"  {p['process']:18} {p['model_us']:>8.1f} {p['measured_us']:>9.1f} "
                f"{p['measured_vs_model'] or 0:>6.2f}")
        log(f"  {'sum':18} {m['model_us']:>8.1f} {m['measured_us']:>9.1f} "
            f"{m['measured_us'] / m['model_us']:>6.2f}  (whole machine {m['machine_measured_us']})")
        log(f"  the model's sum is {m['model_us'] / 1000 / r['reference']['cpu_ms_per_txn']:.2f} x "
            "pgbench's CPU per transaction")

    def targets(self):
        """The targets, each with its figure from this run and its
        status; those this run's phases did not measure say which phase does.
        Beside them, PostgreSQL's logical replication of the reference's
        outbox: what copying each row into another database costs alone."""
        r, out = self.result, []

        def target(name, value, ok, phase):
            if value is None:
                out.append((name, f"not measured (ULTICODE_BENCH_PHASES={phase})", None))
            else:
                out.append((name, value, ok))

        ref, c = r.get("reference"), r["closed"]
        tput = c["loadgen"]["ok_per_second"] / ref["tps"] if ref else None
        cpu = c["cpu_ms_per_mutation"] / ref["cpu_ms_per_txn"] if ref else None
        target("throughput >= 0.5 x pgbench", tput and f"{tput:.3f} x", tput and tput >= 0.5,
               "model")
        target("CPU per audited mutation <= 2.0 x pgbench", cpu and f"{cpu:.2f} x",
               cpu and cpu <= 2, "model")
        lr = r.get("logical_replication")
        target("reference: logical replication of the outbox (reported)",
               lr and ref and f"{lr['tps_vs_reference']} x pgbench's throughput, "
                              f"{lr['cpu_vs_reference']} x its CPU; added CPU "
                              f"{lr['added_cpu_ms_per_txn']} ms per transaction, ours "
                              f"{c['cpu_ms_per_mutation'] - ref['cpu_ms_per_txn']:.3f} ms "
                              "per mutation", True, "model")
        m = r.get("model")
        worst = m and max((p for p in m["processes"] if p["measured_vs_model"]),
                          key=lambda p: p["measured_vs_model"])
        target("every process within 1.5 x its stages' floor (reported)",
               worst and f"worst {worst['process']} {worst['measured_vs_model']} x",
               worst and worst["measured_vs_model"] <= 1.5, "model")
        half = next((p for p in r.get("open", []) if p["fraction"] == 0.5), None)
        target("lag at half the maximum p50 <= 5 ms, p99 <= 50 ms",
               half and f"{half['lag_ms']['p50']} / {half['lag_ms']['p99']} ms",
               half and half["lag_ms"]["p50"] <= 5 and half["lag_ms"]["p99"] <= 50, "all")
        cp = half and half.get("checkpoint_lag_ms")
        target("commit -> signed checkpoint at half the maximum p99 <= 1 s",
               half and (f"{cp['p50']} / {cp['p99']} ms" if cp else "never covered"),
               bool(cp) and cp["p99"] <= 1000, "all")
        d = r.get("drain")
        target("backlog drain >= 10,000 events/s", d and f"{d['events_per_second']}/s",
               d and (d["events_per_second"] or 0) >= 10000, "all")
        twice = d and d.get("read_twice")
        target("drain: no event read twice because of the freeze",
               twice and f"{twice['admin_duplicates']} read again by Admin, "
                         f"{twice['owner_resends']} sent again by the owners",
               twice and twice["admin_duplicates"] == 0 and twice["owner_resends"] == 0, "all")
        g = r.get("growth")
        if g:
            worst_read = max(g["grown"]["reads"], key=lambda x: x["p99_ms"])
        target("growth: throughput within 20 % of the small database",
               g and f"{g['throughput_grown_vs_small']} x (pgbench beside it: "
                     f"{g['reference_grown_vs_small']} x)",
               g and g["throughput_grown_vs_small"] >= 0.8, "growth")
        target("growth: the loaded log is consistent (both owners cosign it after the load)",
               g and ("yes" if g.get("witnesses_cosigned_after_load") else "no"),
               g and g.get("witnesses_cosigned_after_load"), "growth")
        target("growth: every query filter and proof RPC p99 <= 20 ms",
               g and f"worst {worst_read['call']} {worst_read['filter']} "
                     f"{worst_read['p99_ms']} ms at {g['audit_rows']} rows",
               g and worst_read["p99_ms"] <= 20 and
               not any(x["errors"] for x in g["grown"]["reads"]), "growth")
        rse = c["loadgen"]["errors_by_code"].get("8", 0)
        target(f"{self.clients} concurrent clients: no RESOURCE_EXHAUSTED",
               f"{rse} RESOURCE_EXHAUSTED, RPC p99 {c['loadgen']['latency_ms']['p99']} ms",
               rse == 0, "any, ULTICODE_BENCH_CLIENTS=256")
        rss = c["peak_rss_mib"]
        target("RSS <= 100 MiB per service at the maximum",
               f"{max(rss.values()) if rss else 0} MiB", rss and max(rss.values()) <= 100, "any")
        rep = r.get("replication")
        target("the same with a synchronous standby (reported)",
               rep and "see the replication summary", True, "replication")
        log("targets:")
        for name, value, ok in out:
            status = ("" if ok is None else "reported" if "(reported)" in name
                      else "met" if ok else "NOT MET")
            log(f"  {name}: {value} {status}")
        r["targets"] = [{"target": n, "value": v, "met": ok} for n, v, ok in out]

    def ratios(self):
        r, ref = self.result, self.result["reference"]
        half = next(p for p in r["open"] if p["fraction"] == 0.5)
        orig = r["original"]
        r["ratios"] = {
            "throughput_vs_pgbench": round(r["closed"]["loadgen"]["ok_per_second"] / ref["tps"], 3),
            "cpu_vs_pgbench": round(r["closed"]["cpu_ms_per_mutation"] / ref["cpu_ms_per_txn"], 2),
            "original_lag_p50_vs_ours": round(orig["open"][0]["lag_ms"]["p50"] /
                                              max(half["lag_ms"]["p50"], 0.1), 1),
            "original_lag_p99_vs_ours": round(orig["open"][0]["lag_ms"]["p99"] /
                                              max(half["lag_ms"]["p99"], 0.1), 1),
            "ours_drain_vs_original": round(r["drain"]["events_per_second"] /
                                            max(orig["drain"]["events_per_second"] or 1, 1), 2)}

    def summary(self, path):
        r = self.result
        if "calibrate" in r:
            self.calibrate_summary()
        if "soak" in r:
            k = r["soak"]
            log(f"soak at {k['rate']}/s: achieved {k['loadgen']['ok_per_second']:.0f}/s; growth over "
                f"the last {k['second_half_seconds']} s (bytes): {k['second_half_growth_bytes']}")
        if "notify" in r:
            q = r["notify"]
            log(f"a NOTIFY per transaction (with a listener): throughput "
                f"x{q['tps_notify_vs_plain']} of the plain business transaction, "
                f"+{q['cpu_ms_added_per_txn']} ms CPU per transaction")
        if "sequence" in r:
            q = r["sequence"]
            log(f"event numbering: throughput x{q['tps_numbered_vs_plain']} of the plain business "
                f"transaction, +{q['cpu_ms_added_per_txn']} ms CPU per transaction = "
                f"{q['share_of_audited_mutation_cpu'] * 100:.1f} % of an audited mutation's CPU "
                f"({r['closed']['cpu_ms_per_mutation']} ms in the closed loop)")
        if "transparency" in r:
            t = r["transparency"]
            f = t["freshness_ms"]
            log(f"transparency log: throughput x{t['throughput_on_vs_off']} of the log off; at "
                f"{t['offered_per_second']}/s a row is in a checkpoint after p50/p99 "
                f"{f['checkpoint_p50']}/{f['checkpoint_p99']} ms, cosigned by both owners after "
                f"{f['cosigned_p50']}/{f['cosigned_p99']} ms ({f['rows_not_covered']} rows not "
                f"covered); {t['log_storage_bytes_per_entry']} bytes of log storage per entry")
        if "personal" in r:
            pd = r["personal"]
            log(f"personal data: commitments on cost x{pd['cpu_per_mutation_on_vs_off']} CPU per "
                f"mutation of them off ({pd['cpu_ms_per_mutation']['on']} vs "
                f"{pd['cpu_ms_per_mutation']['off']} ms), throughput "
                f"x{pd['throughput_on_vs_off']}")
        if "transparency" in r or "proofs" in r:
            p = r["proofs"] if "proofs" in r else r["transparency"]["proofs"]
            log(f"GetInclusionProof on {p['tree_size']} leaves: p50/p99/max {p['p50_ms']}/"
                f"{p['p99_ms']}/{p['max_ms']} ms over {p['calls']} calls ({p['errors']} errors); "
                f"{p['node_bytes_per_entry']} bytes of tree hashes per entry")
        if "growth" in r:
            g = r["growth"]
            log(f"growth: {g['rows']} rows loaded in {g['load_seconds']} s; closed loop "
                f"x{g['throughput_grown_vs_small']} of the small database (pgbench "
                f"x{g['reference_grown_vs_small']} in the same run); audit_logs "
                f"{g['bytes']['audit_logs'] / 2**30:.2f} GiB, log_nodes "
                f"{g['bytes']['log_nodes'] / 2**30:.2f} GiB; both owners cosigned the grown log: "
                f"{'yes' if g.get('witnesses_cosigned_after_load') else 'NO'}")
            for small, grown in zip(g["small"]["reads"], g["grown"]["reads"]):
                log(f"  {grown['call']:16} {grown['filter']:12} p50/p99 {small['p50_ms']}/"
                    f"{small['p99_ms']} ms -> {grown['p50_ms']}/{grown['p99_ms']} ms "
                    f"({grown['errors']} errors)")
        if "watch" in r:
            w = r["watch"]
            for p in w["latency"]:
                log(f"watch: {p['watchers']} watchers at {w['rate']}/s: {p['rows']} rows delivered, "
                    f"commit -> watcher p50/p99/max {p['p50_ms']}/{p['p99_ms']}/{p['max_ms']} ms, "
                    f"Admin {p.get('admin_cpu_cores')} cores, {p['errors']} errors"
                    + (f" ({p['first_error']})" if p.get("first_error") else ""))
            i = w["idle"]
            log(f"watch: {i['watchers']} idle watchers: Admin RSS {i['admin_rss_before_mib']} -> "
                f"{i['admin_rss_with_mib']} MiB ({i['rss_bytes_per_watcher']} bytes each), CPU "
                f"{i['admin_cpu_quiet']} -> {i['admin_cpu_with']} cores "
                f"({i['cpu_us_per_watcher_second']} us per watcher per second), "
                f"{i['progress_frames']} progress frames, {i['errors']} errors")
        if "forward" in r:
            f = r["forward"]
            ref = f["reference"]
            log(f"forwarder over {f['rows']} rows; reference ulticode-tail --verify "
                f"{ref['rows_per_second']} rows/s, {ref['cpu_us_per_row']} us CPU/row")
            for name, k in f["sinks"].items():
                log(f"  {name:16} {k['rows_per_second']:>7} rows/s "
                    f"(x{k['rows_per_second_vs_reference']}), {k['cpu_us_per_row']} us CPU/row "
                    f"(x{k['cpu_per_row_vs_reference']} of the reference)")
        if "model" in r:
            self.model_summary()
        for s in r["closed"].get("statements", [])[:12]:
            log(f"  {s['exec_us_per_mutation']:>7} us {s['calls_per_mutation']:>6} calls "
                f"{s['rows_per_call']:>6} rows/call  {s['database']:6} {s['query'][:80]}")
        for name, p in r.get("profiles", {}).items():
            log(f"profile of {name}: " + "; ".join(
                f"{t['self_pct']} % {t['dso']}" for t in p["libraries"][:6]))
            log("    " + "; ".join(f"{t['self_pct']} % {t['symbol'][:50]}"
                                   for t in p["functions"][:6]))
        if "drain" in r:
            for name, d in (("ours", r["drain"]), ("original", r["original"]["drain"])):
                log(f"drain ({name}): {d['events']} events in {d['seconds_to_drain']} s = "
                    f"{d['events_per_second']}/s, machine {d['machine_busy']} busy; CPU ms per "
                    f"event: {dict(list(d['cpu_ms_per_event_by_process'].items())[:6])}")
        if self.phases != "all":
            self.targets()
            log(f"wrote {path}")
            return
        c, ref = r["closed"], r["reference"]
        runs = ref.get("runs", [ref])
        log(f"reference {ref['tps']:.0f} tps, {ref['cpu_ms_per_txn']} ms CPU/txn (runs: " +
            ", ".join(f"{x['tps']:.0f} tps {x['cpu_ms_per_txn']} ms" for x in runs) + ")")
        log(f"closed loop {c['loadgen']['ok_per_second']:.0f}/s, {c['cpu_ms_per_mutation']} ms "
            f"CPU/mutation, {c['commits_per_event']} commits and {c['wal_bytes_per_event']} WAL "
            f"bytes per event, RPC p99 {c['loadgen']['latency_ms']['p99']} ms")
        log(f"CPU ms per mutation by process: "
            f"{dict(list(c['cpu_ms_per_mutation_by_process'].items())[:6])}")
        log(f"index entries read per scan: {c['index_entries_read_per_scan']}")
        for p in r["open"]:
            log(f"open {p['offered_per_second']}/s: achieved {p['achieved_per_second']:.0f}/s, "
                f"RPC p50/p99 {p['rpc_ms']['p50']}/{p['rpc_ms']['p99']} ms, lag p50/p99 "
                f"{p['lag_ms']['p50']}/{p['lag_ms']['p99']} ms")
        o = r["original"]["open"][0]
        log(f"original settings at {o['offered_per_second']}/s: lag p50/p99 "
            f"{o['lag_ms']['p50']}/{o['lag_ms']['p99']} ms")
        log(f"peak RSS MiB: {c['peak_rss_mib']}")
        log(f"ratios: {r['ratios']}")
        self.targets()
        log(f"wrote {path}")


def plots(r, prefix):
    if "open" not in r and "soak" not in r:
        return
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("python3-matplotlib is not installed: no plots")
        return
    if "soak" in r:
        k = r["soak"]
        ts = [x["t"] for x in k["samples"]]
        # Left: what must stay flat. Right: what grows by design (the audit
        # trail, the business tables, and the inbox under its 48 h floor).
        growing = {"admin.audit_logs", "admin.consumer_inbox", "auth.users", "app.problems"}
        fig, (flat, grows) = plt.subplots(1, 2, figsize=(11, 4))
        flat.plot(ts, [x["redis_used_memory"] / 2**20 for x in k["samples"]],
                  label="Redis used memory", lw=2)
        for name in sorted(k["samples"][-1]["sizes"]):
            if name.startswith("stream.") or name.endswith(".schema_migrations"):
                continue
            series = [x["sizes"].get(name, 0) / 2**20 for x in k["samples"]]
            if name in growing:
                grows.plot(ts, series, label=name)
            elif max(series) >= 1:  # skip the empty and tiny ones
                flat.plot(ts, series, label=name)
        flat.set(xlabel="seconds", ylabel="MiB", title=f"Bounded (soak at {k['rate']}/s)")
        grows.set(xlabel="seconds", ylabel="MiB", title="Growing by design")
        flat.legend(fontsize=7)
        grows.legend(fontsize=7)
        fig.savefig(f"{prefix}-soak.png", dpi=100, bbox_inches="tight")
    if "open" not in r:
        return
    offered = [p["offered_per_second"] for p in r["open"]]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(offered, [p["achieved_per_second"] for p in r["open"]], "o-", label="achieved")
    ax.plot(offered, offered, ":", label="offered")
    ax.axhline(r["reference"]["tps"], color="grey", ls="--", label="pgbench reference")
    ax.set(xlabel="offered mutations/s", ylabel="mutations/s", title="Throughput vs offered load")
    ax.legend()
    fig.savefig(f"{prefix}-throughput.png", dpi=100, bbox_inches="tight")
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(offered, [p["lag_ms"]["p50"] for p in r["open"]], "o-", label="lag p50")
    ax.plot(offered, [p["lag_ms"]["p99"] for p in r["open"]], "o-", label="lag p99")
    ax.plot(offered, [p["rpc_ms"]["p99"] for p in r["open"]], "x--", label="RPC p99")
    ax.set(xlabel="offered mutations/s", ylabel="ms", yscale="log",
           title="Commit -> audit row lag vs load")
    ax.legend()
    fig.savefig(f"{prefix}-lag.png", dpi=100, bbox_inches="tight")
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, d in (("ours", r["drain"]), ("original settings", r["original"]["drain"])):
        ax.plot([t for t, _ in d["curve"]], [n for _, n in d["curve"]], label=name)
    ax.set(xlabel="seconds after Admin resumed", ylabel="audit rows of the backlog",
           title="Backlog drain")
    ax.legend()
    fig.savefig(f"{prefix}-drain.png", dpi=100, bbox_inches="tight")
    log(f"plots: {prefix}-{{throughput,lag,drain}}.png")


def main():
    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    Suite(seconds=seconds,
          clients=int(os.environ.get("ULTICODE_BENCH_CLIENTS", "32")),
          drain_events=int(os.environ.get("ULTICODE_BENCH_DRAIN_EVENTS", "100000")),
          build_dir=os.environ["ULTICODE_BENCH_BUILD_DIR"],
          out_dir=os.environ.get("ULTICODE_BENCH_OUT", os.path.join(REPO, "bench/results")),
          soak_seconds=int(os.environ.get("ULTICODE_BENCH_SOAK_SECONDS", "0")),
          phases=os.environ.get("ULTICODE_BENCH_PHASES", "all")).run()


if __name__ == "__main__":
    main()
