"""What every end-to-end script shares: checks that count and stop the run at the first failure,
the processes to end when it stops, a relay to talk through, and the summary line `make
python-test` reads (`<name>: N passed, 0 failed`).

A failed check ends the process with os._exit, not sys.exit: the SimpleX library's threads must
not keep a failed run alive.
"""

import hashlib
import os
import subprocess

from simplex_chat import PostgresDb, SqliteDb

BIN = os.environ["SIMPLEX_LIBS_DIR"]
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TIMEOUT = 60
started = []  # processes (anything with kill()) to end when the run fails
_tally = {"passed": 0, "name": "python"}


def postgres_url():
    """The PostgreSQL server the engines keep their data on (`make python-test` runs the library's
    suites once on SQLite files and once on a throwaway PostgreSQL), or None."""
    return os.environ.get("SWIFTPLEX_PY_POSTGRES") or None


def schema_for(path):
    """A schema prefix named after an engine's would-be file prefix: the same path, the same schemas."""
    return "py_" + hashlib.sha1(path.encode()).hexdigest()[:16]


def db(path):
    """The database of an engine whose SQLite files would be `<path>_chat.db` and `_agent.db`:
    those files, or schemas on the PostgreSQL server of `postgres_url()`."""
    url = postgres_url()
    return PostgresDb(connection_string=url, schema_prefix=schema_for(path)) if url else SqliteDb(file_prefix=path)


def db_env(path):
    """`db(path)` as the example bots take it from their environment (BOT_DB, BOT_DB_SCHEMA)."""
    url = postgres_url()
    return {"BOT_DB": url, "BOT_DB_SCHEMA": schema_for(path)} if url else {"BOT_DB": path}


def passed():
    return _tally["passed"]


def _fail(what):
    print(f"FAILED: {what}", flush=True)
    for p in started:
        try:
            p.kill()
        except Exception:  # noqa: BLE001 — ending what is left, whatever state it is in
            pass
    print(f"{_tally['name']}: {_tally['passed']} passed, 1 failed", flush=True)
    os._exit(1)


def check(condition, what):
    if not condition:
        _fail(what)
    _tally["passed"] += 1
    print(f"ok: {what}", flush=True)


def stop(process):
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    if process in started:
        started.remove(process)


def start_relay(data_dir):
    """A swiftplex-relay on a free loopback port; returns the process and its smp:// address."""
    relay = subprocess.Popen([os.path.join(BIN, "swiftplex-relay"), "--data-dir", data_dir, "--listen", "127.0.0.1:0",
                              "--log-level", "warning"], stdout=subprocess.PIPE, text=True)
    started.append(relay)
    address = relay.stdout.readline().strip()
    check(address.startswith("smp://"), f"relay printed its address {address}")
    return relay, address


def run(name, main):
    """Runs `main` as the script `name`: its summary line, and exit status 1 on any failure."""
    _tally["name"] = name + (" on PostgreSQL" if postgres_url() else "")
    try:
        main()
    except BaseException:  # noqa: BLE001 — a failure of any kind is reported and ends the run
        import traceback
        traceback.print_exc()
        _fail("the run raised")
    print(f"{_tally['name']}: {_tally['passed']} passed, 0 failed", flush=True)
