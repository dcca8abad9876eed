#!/usr/bin/env bash
# Starts the local stack (Kafka 127.0.0.1:9092, ClickHouse native
# 127.0.0.1:9000; see env.sh for overrides) from the state folder, and waits
# until both are healthy. With HOOKRELAY_KAFKA_NODES=N (make up KAFKA_NODES=N),
# Kafka is a cluster of N nodes on 9092, 9102, 9112, ...
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
# The secured side's CA, certificate, passwords and client settings (made
# once; every service below and the SCRAM user need them).
secure_material

# Per service: how to check it, find its pid, and which logs to name. Each
# Kafka node is a service ("kafka" alone, or kafka-1 ... kafka-N).
declare -A check=([clickhouse]=clickhouse_healthy)
declare -A pidof=([clickhouse]=clickhouse_pid)
declare -A logs=([clickhouse]="$CH_ERR_LOG $CH_OUT")
declare -A nodeof=()
kafka_services=()
for ((i = 1; i <= KAFKA_NODES; i++)); do
	kafka_node "$i"
	check[$NODE_NAME]="kafka_healthy $i"
	pidof[$NODE_NAME]="kafka_pid $i"
	logs[$NODE_NAME]=$NODE_LOG
	nodeof[$NODE_NAME]=$i
	kafka_services+=("$NODE_NAME")
done
# launched[NAME]: $EPOCHREALTIME when NAME's process was launched (or found
# starting); the services still to wait for.
declare -A launched=()

elapsed() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }

# port_hint: names whoever listens on the stack's ports.
port_hint() {
	command -v ss >/dev/null || return 0
	local p
	for ((i = 1; i <= KAFKA_NODES; i++)); do
		ss -Hltnp "sport = :$((KAFKA_PORT + 10 * (i - 1)))" 2>/dev/null | sed "s/^/stack: port $((KAFKA_PORT + 10 * (i - 1))) in use: /"
		ss -Hltnp "sport = :$((KAFKA_CONTROLLER_PORT + 10 * (i - 1)))" 2>/dev/null | sed "s/^/stack: port $((KAFKA_CONTROLLER_PORT + 10 * (i - 1))) in use: /"
	done
	for p in "$CH_TCP_PORT" "$CH_HTTP_PORT"; do
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
	launched[$1]=$EPOCHREALTIME
	kafka_launch "${nodeof[$1]}"
}

start_clickhouse() {
	[[ -x $CH_SERVER ]] || die "no $CH_SERVER; run: make deps"
	command -v clickhouse-client >/dev/null || die "no clickhouse-client; run: make deps"
	mkdir -p "$CH_DIR"/{data,tmp,user_files,format_schemas}
	secure_material
	sed -e "s|@STATE@|$STATE|g" -e "s|@CH_TCP_PORT@|$CH_TCP_PORT|g" \
		-e "s|@CH_HTTP_PORT@|$CH_HTTP_PORT|g" -e "s|@CH_SECURE_PORT@|$CH_SECURE_PORT|g" \
		-e "s|@SECURE_DIR@|$SECURE_DIR|g" "$DEPLOY/clickhouse-config.xml" >"$CH_CONFIG"
	sed -e "s|@CH_PASSWORD_SHA256@|$(tr -d '\n' <"$SECURE_DIR/clickhouse.password" | sha256sum | cut -d' ' -f1)|g" \
		"$DEPLOY/clickhouse-users.xml" >"$CH_DIR/users.xml"
	rotate "$CH_ERR_LOG"
	rotate "$CH_OUT"
	log "starting clickhouse on 127.0.0.1:$CH_TCP_PORT (logs: $CH_ERR_LOG, $CH_LOG)"
	launched[clickhouse]=$EPOCHREALTIME
	# Runs as the invoking user; 18.16 runs as root too (CI is root).
	setsid "$CH_SERVER" --config-file="$CH_CONFIG" >>"$CH_OUT" 2>&1 </dev/null 9>&- &
	echo $! >"$CH_PID"
	disown
}

# A single node and a cluster of this state folder use the same ports.
strays=$(kafka_strays)
[[ -z $strays ]] || die "Kafka nodes of another layout run in $STATE ($(echo $strays)); run make down first"

# Launch what is missing, then wait for everything launched, side by side.
for name in "${kafka_services[@]}"; do
	if needs_start "$name"; then start_kafka "$name"; fi
done
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
# A service launched by an up.sh older than the secured side runs without it.
for ((i = 1; i <= KAFKA_NODES; i++)); do
	kafka_node "$i"
	grep -q '^listeners=.*SASL_SSL' "$NODE_CONFIG" 2>/dev/null ||
		log "WARNING: $NODE_NAME runs without the secured listener (started before it existed): make down; make up"
done
grep -q tcp_port_secure "$CH_CONFIG" 2>/dev/null ||
	log "WARNING: clickhouse runs without its TLS port (started before it existed): make down; make up"
# The SCRAM user of storage formatted before the secured side existed.
if secure_scram_missing; then secure_scram_create; fi
log "up: kafka $(kafka_brokers) (cluster $(kafka_cluster_id)), clickhouse 127.0.0.1:$CH_TCP_PORT"
log "up: secured side: kafka SASL_SSL $(kafka_secure_brokers), clickhouse TLS 127.0.0.1:$CH_SECURE_PORT, user $SECURE_USER; settings in $SECURE_ENV"
