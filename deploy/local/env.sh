# Sourced by the scripts of deploy/local: paths and ports of the local stack.
# Everything the stack writes lives under $STATE (git-ignored).

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEPLOY="$REPO/deploy/local"
STATE=${HOOKRELAY_STACK_DIR:-$REPO/.local}

# Ports on 127.0.0.1. Override them (all four, with a separate
# HOOKRELAY_STACK_DIR) to run a second stack beside the usual one.
KAFKA_PORT=${HOOKRELAY_KAFKA_PORT:-9092}                       # broker, also advertised
KAFKA_CONTROLLER_PORT=${HOOKRELAY_KAFKA_CONTROLLER_PORT:-9093} # KRaft controller
CH_TCP_PORT=${HOOKRELAY_CLICKHOUSE_PORT:-9000}                 # ClickHouse native protocol
CH_HTTP_PORT=${HOOKRELAY_CLICKHOUSE_HTTP_PORT:-8123}           # ClickHouse HTTP interface

KAFKA_LIBS="$STATE/kafka/libs"
KAFKA_DATA="$STATE/kafka/data"
KAFKA_CONFIG="$STATE/kafka/server.properties"
KAFKA_CLUSTER_ID_FILE="$STATE/kafka/cluster-id"
KAFKA_LOG="$STATE/logs/kafka.log"
KAFKA_PID="$STATE/pids/kafka.pid"
KAFKA_HEAP=${HOOKRELAY_KAFKA_HEAP:-1g}

CH_DIR="$STATE/clickhouse"
CH_CONFIG="$CH_DIR/config.xml"
CH_LOG="$STATE/logs/clickhouse-server.log"
CH_ERR_LOG="$STATE/logs/clickhouse-server.err.log"
CH_OUT="$STATE/logs/clickhouse.out"
CH_PID="$STATE/pids/clickhouse.pid"
CH_SERVER=${HOOKRELAY_CLICKHOUSE_SERVER:-/usr/sbin/clickhouse-server}

# How long up.sh waits for each service to become healthy, in seconds.
UP_TIMEOUT=${HOOKRELAY_UP_TIMEOUT:-90}
# How long down.sh waits for a service to exit after SIGTERM before SIGKILL.
DOWN_TIMEOUT=${HOOKRELAY_DOWN_TIMEOUT:-30}

# The jars deps.sh fetched are complete when this marker exists.
KAFKA_LIBS_MARKER="$KAFKA_LIBS/.complete"

# port_open PORT: true when something accepts TCP connections on 127.0.0.1:PORT.
port_open() {
	(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# cmdline PID: prints the command line of process PID, arguments joined by
# spaces (nothing if there is no such process).
cmdline() {
	local -a args=()
	mapfile -d '' -t args 2>/dev/null <"/proc/$1/cmdline" || true
	echo "${args[*]}"
}

# stack_pid PIDFILE MARKER: prints the pid of one process of the stack
# when it runs. The pid file is trusted only if that process is alive and its
# command line contains MARKER (a path unique to this state folder), so a
# stale pid reused by another process is never taken for ours. Without a
# valid pid file, the process is looked up by MARKER in /proc (e.g. after the
# pid file was lost) and the pid file rewritten.
stack_pid() {
	local pidfile=$1 marker=$2 pid d
	if [[ -s $pidfile ]]; then
		pid=$(<"$pidfile")
		if [[ $pid =~ ^[0-9]+$ && $(cmdline "$pid") == *"$marker"* ]]; then
			echo "$pid"
			return 0
		fi
	fi
	for d in /proc/[0-9]*; do
		pid=${d#/proc/}
		# A zombie has an empty cmdline, so a match is a live process.
		if [[ $(cmdline "$pid") == *"$marker"* ]]; then
			mkdir -p "$(dirname "$pidfile")"
			echo "$pid" >"$pidfile"
			echo "$pid"
			return 0
		fi
	done
	rm -f "$pidfile"
	return 1
}

kafka_pid() { stack_pid "$KAFKA_PID" "kafka.Kafka $KAFKA_CONFIG"; }
clickhouse_pid() { stack_pid "$CH_PID" "--config-file=$CH_CONFIG"; }

# kafka_cluster_id: the cluster ID the local broker's storage was formatted with.
kafka_cluster_id() {
	sed -n 's/^cluster\.id=//p' "$KAFKA_DATA/meta.properties" 2>/dev/null
}

kafka_healthy() {
	kafka_pid >/dev/null && port_open "$KAFKA_PORT" && grep -q "Kafka Server started" "$KAFKA_LOG" 2>/dev/null
}

# ch_query SQL: runs SQL on the local ClickHouse, bounded to 5 s (a port held
# by something else that accepts but never answers must not hang us).
ch_query() {
	timeout 5 clickhouse-client --host 127.0.0.1 --port "$CH_TCP_PORT" \
		--connect_timeout 2 --receive_timeout 3 --send_timeout 3 -q "$1"
}

clickhouse_healthy() {
	clickhouse_pid >/dev/null &&
		ch_query "SELECT 1" >/dev/null 2>&1
}

# lock: serialises up.sh and down.sh of one state folder (several shells may
# run `make up` at once). Processes started under the lock must not inherit
# its descriptor (9>&-), or they would hold the lock for their lifetime.
lock() {
	mkdir -p "$STATE"
	exec 9>"$STATE/.lock"
	flock 9
}

log() { echo "stack: $*"; }
die() {
	echo "stack: ERROR: $*" >&2
	exit 1
}
