#!/usr/bin/env python3
"""Pages a logged decision costs SQLite's write-ahead log, by row design.

The store's writer pays for a commit by the pages it dirtied: each is a
frame appended to the write-ahead log (two `pwrite`s) and later copied back
by a checkpoint (docs/performance.md, "The decisions log's rows packed").
This script counts those frames for the rows `cargo bench --bench writer`
stores, on the schema of `host/migrations/` (the system's SQLite, through
Python's `sqlite3`), with parts of the design switched off one by one, so
that a schema change can be sized before it is written. Frame counts are
deterministic; time is not measured here (the writer bench does that).

Each decision is what a held decision queues: a claim, and its log entry
(the answer, the request, one claim row, the byte-budget lookup), in a log
kept to 1,000 decisions and trimmed every 125, as the writer does. The
answer is the writer bench's summary (6,352 bytes of JSON as Rust writes
it, and here) stored plain, or compressed with zlib level 1 as a stand-in
for zstd level 1 (~690 bytes against the 656 the bench prints for zstd).

Run: python3 scripts/decision-log-frames.py
Prints one line per design and decisions per commit:
`frames design=... per_commit=... frames_per_decision=... answer_bytes=...`.
"""

import glob
import json
import os
import pathlib
import sqlite3
import tempfile
import time
import uuid
import zlib

MIGRATIONS = sorted(
    glob.glob(str(pathlib.Path(__file__).resolve().parent.parent / "host/migrations/0*.sql"))
)
PAGE = 4096
FRAME = PAGE + 24
KEEP = 1000
TRIM_EVERY = KEEP // 8
DECISIONS = 3000
RESOURCES = (
    '{"memory_mib":2048.0,"memory_guaranteed_mib":2048.0,"vcpus":2.0,'
    '"cpu_vcpu_percent":20.0,"disk_gib":0.0,"vms":1.0}'
)

# Each design: (name, switches). Switches: packed, v7, no_time_index,
# no_claims, no_triggers, no_trims, no_log.
DESIGNS = [
    ("claim alone", {"no_log"}),
    ("before 0014: plain answer, v4 ids", set()),
    ("packed answer, v4 ids", {"packed"}),
    ("packed, v7 ids (as landed)", {"packed", "v7"}),
    ("as landed, without decisions_by_time", {"packed", "v7", "no_time_index"}),
    (
        "as landed, without decisions_by_time, decision_claims, byte triggers",
        {"packed", "v7", "no_time_index", "no_claims", "no_triggers"},
    ),
    ("before 0014, trims off", {"no_trims"}),
]


def summary_answer(vm):
    """The writer bench's summary answer (host/benches/writer.rs)."""
    filters = [
        {
            "unit": f"Filter-{i:02}", "input": 500, "survivors": 500, "rejected": [],
            "other_reasons": 0, "other_hosts": 0, "failure": None,
            "skipped": "the request has none of: dedicated-hosts, current-host",
        }
        for i in range(21)
    ]
    scores = [
        {
            "unit": f"Weight-{i:02}", "factor": 1.0, "input": 500, "failure": None,
            "best": [{"host": f"host-0{h:04}", "score": h} for h in range(5)],
        }
        for i in range(8)
    ]
    return json.dumps({
        "decision_id": str(uuid.uuid4()), "dry_run": False, "cluster_id": str(uuid.uuid4()),
        "vm_id": vm, "chosen_host": "host-02701", "complete": True, "mode": "all_or_nothing",
        "instances": [{"vm_id": vm, "host": "host-02701", "explain": {
            "combination": "rank", "candidates": 500,
            "considered": "considered 500 of 10000 hosts (sampled window 6 of 20: held hosts "
                          "2500 to 2999, rotating with each decision)",
            "filters": filters, "scores": scores,
            "ranked": [{"host": f"host-0{h:04}", "total": 66694.0} for h in range(5)],
            "outcome": "weighed", "winner": "host-02701", "tied_with": 0,
        }}],
    }, separators=(",", ":")).encode()


class V7:
    """UUIDv7 as the uuid crate's `now_v7` makes them: milliseconds, then a
    counter within the millisecond, so that ids sort in creation order."""

    def __init__(self):
        self.ms, self.counter = 0, 0

    def next(self):
        ms = time.time_ns() // 1_000_000
        self.counter = self.counter + 1 if ms <= self.ms else 0
        self.ms = max(ms, self.ms)
        rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
        value = (self.ms << 80) | (0x7 << 76) | ((self.counter & 0xFFF) << 64) | (0b10 << 62) | rand
        return str(uuid.UUID(int=value))


def frames(design, per_commit, path):
    db = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS:
        db.executescript(pathlib.Path(migration).read_text())
    db.executescript(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; "
        "PRAGMA foreign_keys = OFF; PRAGMA wal_autocheckpoint = 0;"
    )
    # The cluster's row, without the policy it names; then foreign keys on,
    # as the server runs, so that trims cascade to the claim rows.
    cluster = str(uuid.uuid4())
    required = [
        (name, kind) for _, name, kind, notnull, default, _ in db.execute("PRAGMA table_info(clusters)")
        if notnull and default is None
    ]
    values = [cluster if name == "id" else 0 if kind == "INTEGER" else "{}" for name, kind in required]
    db.execute(
        f"INSERT INTO clusters ({', '.join(n for n, _ in required)}) "
        f"VALUES ({', '.join('?' * len(required))})",
        values,
    )
    db.execute("PRAGMA foreign_keys = ON")
    if "no_time_index" in design:
        db.execute("DROP INDEX decisions_by_time")
    if "no_triggers" in design:
        db.execute("DROP TRIGGER decisions_bytes_added")
        db.execute("DROP TRIGGER decisions_bytes_removed")
    answer = summary_answer("vm-adaptive-default-0-4939")
    codec = "plain"
    if "packed" in design:
        answer, codec = zlib.compress(answer, 1), "zstd"
    v7 = V7()

    def decide(i):
        did = v7.next() if "v7" in design else str(uuid.uuid4())
        vm = f"vm-{i}"
        db.execute(
            "INSERT INTO claims (cluster_id, vm_id, host_id, resources, decision_id, "
            "created_at_ms, expires_at_ms) VALUES (?, ?, 'host-02701', ?, ?, 1, 2)",
            (cluster, vm, RESOURCES, did),
        )
        if "no_log" in design:
            return
        db.execute(
            "INSERT INTO decisions (id, cluster_id, kind, vm_id, host_id, answer, answer_codec, "
            "summarized, answer_bytes, request) VALUES (?, ?, 'schedule', ?, 'host-02701', ?, ?, "
            "0, ?, ?)",
            (did, cluster, vm, answer, codec, len(answer),
             f'{{"vm":{{"id":"{vm}","memory_mib":2048.0,"vcpus":2}}}}'),
        )
        if "no_claims" not in design:
            db.execute(
                "INSERT INTO decision_claims (decision_id, vm_id, host_id) "
                "VALUES (?, ?, 'host-02701')",
                (did, vm),
            )
        if "no_triggers" not in design:
            db.execute("SELECT row_bytes, full_bytes FROM decision_log_bytes WHERE id = 0").fetchall()

    def trim():
        db.execute(
            "DELETE FROM decisions WHERE cluster_id = ?1 AND rowid <= (SELECT rowid FROM "
            "decisions WHERE cluster_id = ?1 ORDER BY rowid DESC LIMIT 1 OFFSET ?2)",
            (cluster, KEEP),
        )

    def store(first, count, per):
        since = 0
        for i in range(first, first + count, per):
            db.execute("BEGIN")
            for j in range(per):
                decide(i + j)
            since += per
            if since >= TRIM_EVERY and "no_trims" not in design:
                trim()
                since = 0
            db.execute("COMMIT")

    # Fill the log to its retention first, so every measured decision trims.
    store(0, DECISIONS, 8)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store(DECISIONS, DECISIONS, per_commit)
    written = os.path.getsize(path + "-wal") // FRAME
    db.close()
    return written / DECISIONS, len(answer)


def main():
    with tempfile.TemporaryDirectory() as tmp:
        for per_commit in (1, 8):
            for n, (name, design) in enumerate(DESIGNS):
                path = os.path.join(tmp, f"{per_commit}-{n}.db")
                per_decision, size = frames(design, per_commit, path)
                print(
                    f'frames design="{name}" per_commit={per_commit} '
                    f"frames_per_decision={per_decision:.2f} answer_bytes={size}"
                )


if __name__ == "__main__":
    main()
