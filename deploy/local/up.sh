#!/usr/bin/env bash
# Starts the local stack (Kafka 127.0.0.1:9092, ClickHouse native
# 127.0.0.1:9000; see env.sh for overrides) from the state folder, and waits
# until both are healthy.
#
# Idempotent: a healthy service is left alone. A service that does not become
# healthy within $HOOKRELAY_UP_TIMEOUT seconds (default 90), or whose process
# exits, fails the script with an error naming the log file to read; a
# process that timed out is killed, so nothing half-started stays behind.
# Needs what deps.sh installs (make deps).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

lock
mkdir -p "$STATE/pids" "$STATE/logs"

# Per service: how to check it, find its pid, and which logs to name.
declare -A check=([kafka]=kafka_healthy [clickhouse]=clickhouse_healthy)
declare -A pidof=([kafka]=kafka_pid [clickhouse]=clickhouse_pid)
declare -A logs=([kafka]="$KAFKA_LOG" [clickhouse]="$CH_ERR_LOG $CH_OUT")
# launched[NAME]: $EPOCHREALTIME when NAME's process was launched (or found
# starting); the services still to wait for.
declare -A launched=()

elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# port_hint: names whoever listens on the stack's ports.
port_hint() {
	command -v ss >/dev/null || return 0
	local p
	for p in "$KAFKA_PORT" "$KAFKA_CONTROLLER_PORT" "$CH_TCP_PORT" "$CH_HTTP_PORT"; do
		ss -Hltnp "sport = :$p" 2>/dev/null | sed "s/^/stack: port $p in use: /"
	done
}

# fail NAME WHY: shows the end of NAME's logs and exits naming them.
fail() {
	local name=$1 why=$2 f
	for f in ${logs[$name]}; do
		[[ -s $f ]] || continue
		echo "---- last lines of $f ----" >&2
		tail -n 20 "$f" >&2
	done
	echo "----" >&2
	port_hint >&2
	die "$name $why; read ${logs[$name]}"
}

# rotate FILE: keeps the previous run's log as FILE.1.
rotate() { [[ ! -s $1 ]] || mv -f "$1" "$1.1"; }

# needs_start NAME: false when NAME is healthy or already starting.
needs_start() {
	local name=$1 pid
	if ${check[$name]}; then
		log "$name already up (pid $(${pidof[$name]}))"
		return 1
	fi
	if pid=$(${pidof[$name]}); then
		log "$name process $pid is running but not healthy yet; waiting for it"
		launched[$name]=$EPOCHREALTIME
		return 1
	fi
}

start_kafka() {
	[[ -f $KAFKA_LIBS_MARKER ]] || die "no Kafka jars in $KAFKA_LIBS; run: make deps"
	command -v java >/dev/null || die "no java on PATH; run: make deps"
	mkdir -p "$KAFKA_DATA"
	sed -e "s|@KAFKA_DATA@|$KAFKA_DATA|g" -e "s|@KAFKA_PORT@|$KAFKA_PORT|g" \
		-e "s|@KAFKA_CONTROLLER_PORT@|$KAFKA_CONTROLLER_PORT|g" "$DEPLOY/server.properties" >"$KAFKA_CONFIG"
	local cp="$KAFKA_LIBS/*"
	if [[ ! -s $KAFKA_DATA/meta.properties ]]; then
		local id flog="$STATE/logs/kafka-format.log"
		id=$(java -cp "$cp" kafka.tools.StorageTool random-uuid 2>>"$flog") ||
			die "kafka.tools.StorageTool random-uuid failed; read $flog"
		java -Dlog4j2.configurationFile="$DEPLOY/log4j2.properties" -cp "$cp" \
			kafka.tools.StorageTool format --ignore-formatted -t "$id" -c "$KAFKA_CONFIG" >>"$flog" 2>&1 ||
			die "formatting $KAFKA_DATA failed; read $flog"
		echo "$id" >"$KAFKA_CLUSTER_ID_FILE"
		log "kafka storage formatted, cluster ID $id"
	fi
	rotate "$KAFKA_LOG"
	log "starting kafka on 127.0.0.1:$KAFKA_PORT (log: $KAFKA_LOG)"
	launched[kafka]=$EPOCHREALTIME
	# setsid: the broker outlives this script and ignores the terminal's ^C.
	setsid java -Xms256m -Xmx"$KAFKA_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
		-Djava.awt.headless=true \
		-Dlog4j2.configurationFile="$DEPLOY/log4j2.properties" \
		-cp "$cp" kafka.Kafka "$KAFKA_CONFIG" >>"$KAFKA_LOG" 2>&1 </dev/null 9>&- &
	echo $! >"$KAFKA_PID"
	disown
}

start_clickhouse() {
	[[ -x $CH_SERVER ]] || die "no $CH_SERVER; run: make deps"
	command -v clickhouse-client >/dev/null || die "no clickhouse-client; run: make deps"
	mkdir -p "$CH_DIR"/{data,tmp,user_files,format_schemas}
	sed -e "s|@STATE@|$STATE|g" -e "s|@CH_TCP_PORT@|$CH_TCP_PORT|g" \
		-e "s|@CH_HTTP_PORT@|$CH_HTTP_PORT|g" "$DEPLOY/clickhouse-config.xml" >"$CH_CONFIG"
	cp "$DEPLOY/clickhouse-users.xml" "$CH_DIR/users.xml"
	rotate "$CH_ERR_LOG"
	rotate "$CH_OUT"
	log "starting clickhouse on 127.0.0.1:$CH_TCP_PORT (logs: $CH_ERR_LOG, $CH_LOG)"
	launched[clickhouse]=$EPOCHREALTIME
	# Runs as the invoking user; 18.16 runs as root too (CI is root).
	setsid "$CH_SERVER" --config-file="$CH_CONFIG" >>"$CH_OUT" 2>&1 </dev/null 9>&- &
	echo $! >"$CH_PID"
	disown
}

# Launch what is missing, then wait for everything launched, side by side.
if needs_start kafka; then start_kafka; fi
if needs_start clickhouse; then start_clickhouse; fi
while ((${#launched[@]})); do
	for name in "${!launched[@]}"; do
		if ${check[$name]}; then
			log "$name healthy $(elapsed "${launched[$name]}")s after launch"
			unset "launched[$name]"
		elif ! ${pidof[$name]} >/dev/null; then
			fail "$name" "exited during start-up"
		elif (($(elapsed "${launched[$name]}" | cut -d. -f1) >= UP_TIMEOUT)); then
			kill -KILL "$(${pidof[$name]})" 2>/dev/null || true
			fail "$name" "was not healthy ${UP_TIMEOUT}s after launch (process killed)"
		fi
	done
	((${#launched[@]} == 0)) || sleep 0.2
done
log "up: kafka 127.0.0.1:$KAFKA_PORT (cluster $(kafka_cluster_id)), clickhouse 127.0.0.1:$CH_TCP_PORT"
