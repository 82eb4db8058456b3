#!/usr/bin/env bash
# A throwaway PostgreSQL server for fencelock-node's resource tests.
#
#   eval "$(scripts/postgres.sh start [DIR])"   # DIR defaults to target/pg
#   cargo test -p fencelock-node                  # reads FENCELOCK_POSTGRES_URL
#   scripts/postgres.sh stop [DIR]
#
# `start` installs Debian's postgresql package if initdb/pg_ctl are missing,
# creates a cluster in DIR/data (once), starts it on a free port of 127.0.0.1
# with its unix socket in DIR and without fsync (a throwaway server no test
# crashes; if the machine went down under it, its data may be torn: remove
# DIR and start again), creates the database `fencelock`, and prints
# one line on stdout: `export FENCELOCK_POSTGRES_URL=postgres://...`. All
# progress goes to stderr, so the output can be eval'd. `stop` stops the
# server of DIR by its data directory (pg_ctl reads the PID from it).
#
# initdb and postgres refuse to run as root: as root, the cluster belongs to
# the `postgres` user (which the Debian package creates) and every server
# command runs as that user through runuser.
set -euo pipefail

readonly DATABASE=fencelock
readonly ROLE=fencelock

log() { echo "postgres.sh: $*" >&2; }

# The directory holding initdb and pg_ctl: PATH first, then Debian's
# versioned directories (the newest version wins).
find_bindir() {
    if command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1; then
        dirname "$(readlink -f "$(command -v pg_ctl)")"
        return 0
    fi
    local dir
    for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [[ -x "$dir/initdb" && -x "$dir/pg_ctl" ]]; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

ensure_installed() {
    if find_bindir >/dev/null; then
        return 0
    fi
    log "initdb/pg_ctl not found: installing Debian's postgresql package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
    find_bindir >/dev/null || { log "postgresql installed but initdb/pg_ctl still not found"; exit 1; }
}

# Runs a server command as the cluster's owner: ourselves, or `postgres` when we are root.
as_owner() {
    if [[ "$(id -u)" == 0 ]]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# A TCP port of 127.0.0.1 that nothing listens on now: the first of up to
# 200 ports from a random start that refuses a connection.
free_port() {
    local port attempt
    for attempt in $(seq 1 200); do
        port=$((20000 + (RANDOM % 20000)))
        if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            echo "$port"
            return 0
        fi
    done
    log "no free port found in 200 tries"
    exit 1
}

start() {
    local dir=$1
    ensure_installed
    local bin
    bin=$(find_bindir)
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    local data="$dir/data"
    if [[ "$(id -u)" == 0 ]]; then
        id postgres >/dev/null 2>&1 || { log "no postgres user to own the cluster"; exit 1; }
        chown postgres: "$dir"
        # The postgres user must be able to reach DIR through its parents;
        # only if it cannot do they get the traverse bit for others.
        if ! runuser -u postgres -- test -x "$dir"; then
            log "letting the postgres user traverse the parents of $dir"
            local parent=$dir
            while [[ "$parent" != / ]]; do
                parent=$(dirname "$parent")
                chmod o+x "$parent"
            done
        fi
    fi
    if [[ -f "$data/postmaster.pid" ]] && as_owner "$bin/pg_ctl" status -D "$data" >/dev/null 2>&1; then
        log "already running in $data"
    else
        if [[ ! -f "$data/PG_VERSION" ]]; then
            log "initdb in $data"
            # Trust on the socket and 127.0.0.1 only: a test server, not reachable from elsewhere.
            as_owner "$bin/initdb" -D "$data" -U postgres --auth=trust -E UTF8 --locale=C.UTF-8 >/dev/null
        fi
        local port
        port=$(free_port)
        log "starting on 127.0.0.1:$port (socket in $dir)"
        # No fsync: a throwaway server that no test crashes. The tests hold
        # the SQL resource's verdicts and state to core's rule; a commit that
        # waits for the disk only makes them slower.
        as_owner "$bin/pg_ctl" start -D "$data" -w -t 60 -l "$dir/server.log" \
            -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c fsync=off -c synchronous_commit=off -c full_page_writes=off" >/dev/null
    fi
    local port
    port=$(sed -n 4p "$data/postmaster.pid")
    local psql=(as_owner "$bin/psql" -X -q -h "$dir" -p "$port" -U postgres -d postgres -v ON_ERROR_STOP=1)
    if [[ -z "$("${psql[@]}" -tAc "SELECT 1 FROM pg_roles WHERE rolname = '$ROLE'")" ]]; then
        "${psql[@]}" -c "CREATE ROLE $ROLE LOGIN"
    fi
    if [[ -z "$("${psql[@]}" -tAc "SELECT 1 FROM pg_database WHERE datname = '$DATABASE'")" ]]; then
        "${psql[@]}" -c "CREATE DATABASE $DATABASE OWNER $ROLE"
    fi
    echo "export FENCELOCK_POSTGRES_URL=postgres://$ROLE@127.0.0.1:$port/$DATABASE"
}

stop() {
    local dir=$1
    local data="$dir/data"
    if [[ ! -f "$data/postmaster.pid" ]]; then
        log "not running in $data"
        return 0
    fi
    local bin
    bin=$(find_bindir)
    as_owner "$bin/pg_ctl" stop -D "$(cd "$data" && pwd)" -m fast -w >/dev/null
    log "stopped $data"
}

# `postgres.sh DIR` is `postgres.sh start DIR`.
case "${1:-start}" in
    start | stop)
        command=${1:-start}
        dir=${2:-target/pg}
        ;;
    -h | --help)
        echo "usage: $0 [start|stop] [DIR]   (DIR defaults to target/pg)" >&2
        exit 0
        ;;
    *)
        command=start
        dir=$1
        ;;
esac
"$command" "$dir"
