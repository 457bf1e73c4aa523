#!/usr/bin/env bash
# A throwaway PostgreSQL 15 cluster for the tests (`make test`).
#   cluster.sh start DIR   initdb into DIR (fresh, empty), start it on a free port of 127.0.0.1,
#                          print its URL (postgresql://postgres@127.0.0.1:PORT/postgres)
#   cluster.sh stop DIR    stop it (immediate) and remove DIR
# initdb refuses to run as root: as root the cluster belongs to the `postgres` user (runuser).
set -euo pipefail
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
cmd=${1:?start|stop}
dir=${2:?directory}

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

case "$cmd" in
start)
  [ -x "$PG_BIN/initdb" ] || { echo "cluster.sh: no PostgreSQL 15 in $PG_BIN (apt-get install postgresql-15)" >&2; exit 1; }
  mkdir -p "$dir"
  [ "$(id -u)" -eq 0 ] && chown postgres "$dir"
  chmod 700 "$dir"
  as_owner "$PG_BIN/initdb" -D "$dir/data" -U postgres -A trust --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  # A free port: bind port 0, read what the kernel gave, close (then PostgreSQL binds it).
  for attempt in 1 2 3 4 5; do
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
    if as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
        -o "-p $port -c listen_addresses=127.0.0.1 -k $dir -c max_connections=300 -c shared_buffers=64MB" start >/dev/null; then
      echo "postgresql://postgres@127.0.0.1:$port/postgres"
      exit 0
    fi
  done
  cat "$dir/server.log" >&2
  exit 1
  ;;
stop)
  if [ -d "$dir/data" ]; then as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true; fi
  rm -rf "$dir"
  ;;
*)
  echo "usage: cluster.sh start|stop DIR" >&2; exit 2
  ;;
esac
