# What scripts/setup and scripts/test share: where things are, and a few small helpers.
# Sourced, not run: the caller has set ROOT and changed to it.

VENV="$ROOT/.venv"
PG_HOST=127.0.0.1
PG_PORT=5432
REDIS_HOST=127.0.0.1
REDIS_PORT=6379
SCRIPT="scripts/$(basename "$0")"

section() { printf '\n==== %s ====\n' "$*"; }
note() { printf '%s: %s\n' "$SCRIPT" "$*"; }
die() { printf '%s: error: %s\n' "$SCRIPT" "$*" >&2; exit 1; }

# The SHA-256 of a file, which stamps record to tell whether an install is still current.
digest() {
    sha256sum "$1" | cut -d' ' -f1
}

# True when something accepts TCP connections on host:port (no client binary needed).
port_open() {
    (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null
}

wait_for_port() {
    local host=$1 port=$2 seconds=$3
    for _ in $(seq 1 $((seconds * 5))); do
        port_open "$host" "$port" && return 0
        sleep 0.2
    done
    return 1
}
