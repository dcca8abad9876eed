# Sourced by the scripts of deploy/local: paths and ports of the local stack.
# Everything the stack writes lives under $STATE (git-ignored).

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
DEPLOY="$REPO/deploy/local"
STATE=${HOOKRELAY_STACK_DIR:-$REPO/.local}

# Ports on 127.0.0.1. Override them (all four, with a separate
# HOOKRELAY_STACK_DIR) to run a second stack beside the usual one.
KAFKA_PORT=${HOOKRELAY_KAFKA_PORT:-9092}                       # broker, also advertised
KAFKA_CONTROLLER_PORT=${HOOKRELAY_KAFKA_CONTROLLER_PORT:-9093} # KRaft controller

# Kafka nodes (combined broker + controller each; the controller quorum is
# all of them). Node i (1-based) listens on KAFKA_PORT + 10*(i-1) for
# clients and KAFKA_CONTROLLER_PORT + 10*(i-1) for its controller: 9092,
# 9102, 9112 by default. One node keeps the original layout ($STATE/kafka,
# kafka.log, kafka.pid); more keep each node's files under
# $STATE/kafka/node-<i> with logs/kafka-<i>.log and pids/kafka-<i>.pid.
KAFKA_NODES=${HOOKRELAY_KAFKA_NODES:-1}
[[ $KAFKA_NODES =~ ^[1-9]$ ]] || {
	echo "stack: ERROR: HOOKRELAY_KAFKA_NODES (KAFKA_NODES) must be 1 to 9, got '$KAFKA_NODES'" >&2
	exit 1
}
CH_TCP_PORT=${HOOKRELAY_CLICKHOUSE_PORT:-9000}                 # ClickHouse native protocol
CH_HTTP_PORT=${HOOKRELAY_CLICKHOUSE_HTTP_PORT:-8123}           # ClickHouse HTTP interface

# The secured side of the same stack, always on beside the plain one (see
# "Secured mode" in docs/OPERATIONS.md): each Kafka node also has a SASL_SSL
# listener (SCRAM-SHA-512) on its client port + 4 (9096, 9106, 9116, ...),
# and ClickHouse a TLS native port (default 9440 = native port + 440) where,
# as on the plain port, the user "hookrelay" needs its password. The CA, the
# server certificate and the passwords are generated on the first start into
# $SECURE_DIR; $SECURE_ENV holds the HOOKRELAY_* settings of a client of the
# secured side (source it, then run bin/hookrelay).
KAFKA_SECURE_OFFSET=4
CH_SECURE_PORT=${HOOKRELAY_CLICKHOUSE_SECURE_PORT:-$((CH_TCP_PORT + 440))}
SECURE_DIR="$STATE/secure"
SECURE_ENV="$SECURE_DIR/env"
SECURE_USER=hookrelay # the SCRAM user of Kafka and the password user of ClickHouse

KAFKA_LIBS="$STATE/kafka/libs"
KAFKA_DATA="$STATE/kafka/data"
KAFKA_CONFIG="$STATE/kafka/server.properties"
KAFKA_CLUSTER_ID_FILE="$STATE/kafka/cluster-id"
KAFKA_LOG="$STATE/logs/kafka.log"
KAFKA_PID="$STATE/pids/kafka.pid"
# Heap of each broker; several nodes share the machine, so they get less.
if ((KAFKA_NODES == 1)); then KAFKA_HEAP=${HOOKRELAY_KAFKA_HEAP:-1g}; else KAFKA_HEAP=${HOOKRELAY_KAFKA_HEAP:-512m}; fi

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

# kafka_node I: sets the NODE_* variables of Kafka node I of a cluster of
# $KAFKA_NODES nodes (I=1 of a single node: the original layout).
kafka_node() {
	local i=$1
	[[ $i =~ ^[1-9]$ ]] && ((i <= KAFKA_NODES)) ||
		die "no Kafka node '$i': the stack has $KAFKA_NODES node(s) (HOOKRELAY_KAFKA_NODES)"
	NODE=$i
	NODE_PORT=$((KAFKA_PORT + 10 * (i - 1)))
	NODE_CONTROLLER_PORT=$((KAFKA_CONTROLLER_PORT + 10 * (i - 1)))
	NODE_SECURE_PORT=$((NODE_PORT + KAFKA_SECURE_OFFSET))
	if ((KAFKA_NODES == 1)); then
		NODE_NAME=kafka
		NODE_DATA=$KAFKA_DATA NODE_CONFIG=$KAFKA_CONFIG NODE_LOG=$KAFKA_LOG NODE_PID=$KAFKA_PID
		NODE_CLUSTER_ID_FILE=$KAFKA_CLUSTER_ID_FILE
	else
		NODE_NAME=kafka-$i
		NODE_DATA=$STATE/kafka/node-$i/data
		NODE_CONFIG=$STATE/kafka/node-$i/server.properties
		NODE_LOG=$STATE/logs/kafka-$i.log
		NODE_PID=$STATE/pids/kafka-$i.pid
		NODE_CLUSTER_ID_FILE=$STATE/kafka/cluster.id
	fi
}

# kafka_replication: prints "RF MIN_ISR" for $KAFKA_NODES nodes: 1 1 on one
# node, 2 1 on two, 3 2 on three or more (one node may die).
kafka_replication() {
	if ((KAFKA_NODES >= 3)); then echo "3 2"; elif ((KAFKA_NODES == 2)); then echo "2 1"; else echo "1 1"; fi
}

# kafka_voters: controller.quorum.voters of $KAFKA_NODES nodes.
kafka_voters() {
	local i out=
	for ((i = 1; i <= KAFKA_NODES; i++)); do out+=${out:+,}$i@127.0.0.1:$((KAFKA_CONTROLLER_PORT + 10 * (i - 1))); done
	echo "$out"
}

# kafka_launch I: renders node I's config, formats its storage the first
# time (every node of a cluster with one cluster ID), and launches it in
# the background (setsid: it outlives the caller and ignores the
# terminal's ^C). The caller holds the lock and waits for kafka_healthy I.
kafka_launch() {
	kafka_node "$1"
	[[ -f $KAFKA_LIBS_MARKER ]] || die "no Kafka jars in $KAFKA_LIBS; run: make deps"
	command -v java >/dev/null || die "no java on PATH; run: make deps"
	local rf isr sizef=$STATE/kafka/cluster.size
	read -r rf isr < <(kafka_replication)
	if ((KAFKA_NODES > 1)); then
		if [[ -s $sizef && $(<"$sizef") != "$KAFKA_NODES" ]]; then
			die "$STATE/kafka holds a $(<"$sizef")-node cluster, not $KAFKA_NODES: use KAFKA_NODES=$(<"$sizef"), or make down and make reset first"
		fi
		echo "$KAFKA_NODES" >"$sizef"
	fi
	mkdir -p "$NODE_DATA" "$(dirname "$NODE_CONFIG")" "$STATE/logs" "$STATE/pids"
	secure_material
	sed -e "s|@KAFKA_DATA@|$NODE_DATA|g" -e "s|@KAFKA_PORT@|$NODE_PORT|g" \
		-e "s|@KAFKA_SECURE_PORT@|$NODE_SECURE_PORT|g" -e "s|@SECURE_DIR@|$SECURE_DIR|g" \
		-e "s|@KAFKA_CONTROLLER_PORT@|$NODE_CONTROLLER_PORT|g" -e "s|@NODE_ID@|$NODE|g" \
		-e "s|@VOTERS@|$(kafka_voters)|g" -e "s|@RF@|$rf|g" -e "s|@MIN_ISR@|$isr|g" \
		"$DEPLOY/server.properties" >"$NODE_CONFIG"
	local cp="$KAFKA_LIBS/*"
	if [[ ! -s $NODE_DATA/meta.properties ]]; then
		local id flog="$STATE/logs/$NODE_NAME-format.log"
		if [[ -s $NODE_CLUSTER_ID_FILE ]] && ((KAFKA_NODES > 1)); then
			id=$(<"$NODE_CLUSTER_ID_FILE")
		else
			id=$(java -cp "$cp" kafka.tools.StorageTool random-uuid 2>>"$flog") ||
				die "kafka.tools.StorageTool random-uuid failed; read $flog"
		fi
		# The SCRAM user goes into the bootstrap metadata (KRaft), so the
		# secured listener accepts it from the first start.
		java -Dlog4j2.configurationFile="$DEPLOY/log4j2.properties" -cp "$cp" \
			kafka.tools.StorageTool format --ignore-formatted -t "$id" -c "$NODE_CONFIG" \
			--add-scram "SCRAM-SHA-512=[name=$SECURE_USER,password=$(secure_password kafka)]" >>"$flog" 2>&1 ||
			die "formatting $NODE_DATA failed; read $flog"
		secure_scram_done
		echo "$id" >"$NODE_CLUSTER_ID_FILE"
		log "$NODE_NAME storage formatted, cluster ID $id"
	fi
	[[ ! -s $NODE_LOG ]] || mv -f "$NODE_LOG" "$NODE_LOG.1"
	log "starting $NODE_NAME on 127.0.0.1:$NODE_PORT (controller $NODE_CONTROLLER_PORT, log: $NODE_LOG)"
	setsid java -Xms256m -Xmx"$KAFKA_HEAP" -XX:+UseG1GC -XX:MaxGCPauseMillis=20 \
		-Djava.awt.headless=true \
		-Dlog4j2.configurationFile="$DEPLOY/log4j2.properties" \
		-cp "$cp" kafka.Kafka "$NODE_CONFIG" >>"$NODE_LOG" 2>&1 </dev/null 9>&- &
	echo $! >"$NODE_PID"
	disown
}

# secure_password NAME: the generated password NAME (kafka or clickhouse).
secure_password() { cat "$SECURE_DIR/$1.password"; }

# secure_material: creates, the first time, what the secured side needs in
# $SECURE_DIR (mode 700): a CA (ca.pem, ca.key), a server certificate it
# signed for 127.0.0.1, ::1 and localhost (server.pem, server.key; Kafka
# reads both from kafka-keystore.pem, ClickHouse the two files), the
# passwords of the user $SECURE_USER (kafka.password, clickhouse.password,
# 24 random bytes in hex) and $SECURE_ENV. Idempotent and quick afterwards.
# HOOKRELAY_SECURE_DAYS (default 3650) is the certificates' lifetime.
secure_material() {
	local d=$SECURE_DIR days=${HOOKRELAY_SECURE_DAYS:-3650} slog="$STATE/logs/secure.log"
	mkdir -p "$d" "$STATE/logs"
	chmod 700 "$d"
	command -v openssl >/dev/null || die "no openssl on PATH; run: make deps"
	if [[ ! -s $d/ca.pem || ! -s $d/server.pem || ! -s $d/server.key || ! -s $d/kafka-keystore.pem ]]; then
		(
			set -e
			cd "$d"
			openssl req -x509 -newkey rsa:2048 -nodes -days "$days" -subj "/CN=hookrelay local stack CA" \
				-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
				-keyout ca.key -out ca.pem
			openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" -keyout server.key -out server.csr
			printf '%s\n' "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost" "basicConstraints=CA:FALSE" \
				"keyUsage=critical,digitalSignature,keyEncipherment" "extendedKeyUsage=serverAuth" >server.ext
			openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days "$days" \
				-extfile server.ext -out server.pem
			cat server.key server.pem >kafka-keystore.pem
			rm -f server.csr server.ext ca.srl
			chmod 600 ./*.key kafka-keystore.pem
		) >>"$slog" 2>&1 || die "generating the CA and server certificate in $d failed; read $slog"
		log "secured side: CA and server certificate generated in $d"
	fi
	local p
	for p in kafka clickhouse; do
		[[ -s $d/$p.password ]] || (umask 077 && openssl rand -hex 24 >"$d/$p.password")
	done
	local brokers= i
	for ((i = 1; i <= KAFKA_NODES; i++)); do brokers+=${brokers:+,}127.0.0.1:$((KAFKA_PORT + 10 * (i - 1) + KAFKA_SECURE_OFFSET)); done
	(
		umask 077
		cat >"$SECURE_ENV.tmp" <<-EOF
			# The HOOKRELAY_* settings of a client of the local stack's secured side
			# (deploy/local/env.sh, secure_material): source it, then run bin/hookrelay.
			HOOKRELAY_BROKERS=$brokers
			HOOKRELAY_KAFKA_TLS=true
			HOOKRELAY_KAFKA_TLS_CA=$d/ca.pem
			HOOKRELAY_KAFKA_SASL_MECHANISM=SCRAM-SHA-512
			HOOKRELAY_KAFKA_SASL_USER=$SECURE_USER
			HOOKRELAY_KAFKA_SASL_PASSWORD=$(secure_password kafka)
			HOOKRELAY_CLICKHOUSE=clickhouse://$SECURE_USER@127.0.0.1:$CH_SECURE_PORT/default?secure=true
			HOOKRELAY_CLICKHOUSE_PASSWORD=$(secure_password clickhouse)
			HOOKRELAY_CLICKHOUSE_TLS_CA=$d/ca.pem
			export HOOKRELAY_BROKERS HOOKRELAY_KAFKA_TLS HOOKRELAY_KAFKA_TLS_CA HOOKRELAY_KAFKA_SASL_MECHANISM
			export HOOKRELAY_KAFKA_SASL_USER HOOKRELAY_KAFKA_SASL_PASSWORD HOOKRELAY_CLICKHOUSE
			export HOOKRELAY_CLICKHOUSE_PASSWORD HOOKRELAY_CLICKHOUSE_TLS_CA
		EOF
	)
	mv -f "$SECURE_ENV.tmp" "$SECURE_ENV"
}

# secure_scram_done / secure_scram_missing: the SCRAM user of the current
# password is in the cluster's metadata (a marker holding a hash of it).
secure_scram_marker() { echo "$STATE/kafka/scram-$(sha256sum "$SECURE_DIR/kafka.password" | cut -c1-16)"; }
secure_scram_done() { touch "$(secure_scram_marker)"; }
secure_scram_missing() { [[ ! -e $(secure_scram_marker) ]]; }

# secure_scram_create: creates (or updates) the SCRAM user through the plain
# listener of node 1, for storage formatted before the secured side existed
# or with another password. One JVM start, only then.
secure_scram_create() {
	secure_scram_missing || return 0
	local flog="$STATE/logs/scram.log"
	java -Dlog4j2.configurationFile="$DEPLOY/log4j2.properties" -cp "$KAFKA_LIBS/*" kafka.admin.ConfigCommand \
		--bootstrap-server "127.0.0.1:$KAFKA_PORT" --alter --entity-type users --entity-name "$SECURE_USER" \
		--add-config "SCRAM-SHA-512=[password=$(secure_password kafka)]" >>"$flog" 2>&1 ||
		die "creating the SCRAM user $SECURE_USER failed; read $flog"
	secure_scram_done
	log "secured side: SCRAM-SHA-512 user $SECURE_USER created"
}

# kafka_brokers: the bootstrap list of every node, comma-separated.
kafka_brokers() {
	local i out=
	for ((i = 1; i <= KAFKA_NODES; i++)); do out+=${out:+,}127.0.0.1:$((KAFKA_PORT + 10 * (i - 1))); done
	echo "$out"
}

# kafka_pid [I]: the pid of node I (default 1).
kafka_pid() {
	kafka_node "${1:-1}"
	stack_pid "$NODE_PID" "kafka.Kafka $NODE_CONFIG"
}
clickhouse_pid() { stack_pid "$CH_PID" "--config-file=$CH_CONFIG"; }

# kafka_strays: prints the pid files of live Kafka nodes of this state
# folder that are not nodes of a $KAFKA_NODES-node stack (the single node
# while a cluster is wanted, or the reverse, or nodes past $KAFKA_NODES):
# they hold ports or data that this stack needs.
kafka_strays() {
	local f pid i
	for f in "$STATE"/pids/kafka.pid "$STATE"/pids/kafka-[0-9].pid; do
		[[ -s $f ]] || continue
		pid=$(<"$f")
		[[ $(cmdline "$pid") == *"kafka.Kafka $STATE/kafka/"* ]] || continue
		i=${f##*/kafka-}
		i=${i%.pid}
		if [[ $f == */kafka.pid ]]; then
			((KAFKA_NODES == 1)) || echo "$f"
		elif ((KAFKA_NODES == 1 || i > KAFKA_NODES)); then
			echo "$f"
		fi
	done
}

# kafka_all_nodes: prints "NODES I" for every Kafka node this state folder
# has (the single node, and each node-<i> of a cluster), whatever the
# configured size, for down.sh and status.sh: run `kafka_node I` with
# KAFKA_NODES=NODES to address it.
kafka_all_nodes() {
	local d
	echo "1 1"
	for d in "$STATE"/kafka/node-[0-9]; do
		[[ -d $d ]] && echo "9 ${d##*/node-}"
	done
}

# kafka_cluster_id [I]: the cluster ID node I's storage was formatted with.
kafka_cluster_id() {
	kafka_node "${1:-1}"
	sed -n 's/^cluster\.id=//p' "$NODE_DATA/meta.properties" 2>/dev/null
}

# kafka_healthy [I]: node I (default 1) runs, accepts connections and has
# logged that it started.
kafka_healthy() {
	kafka_pid "${1:-1}" >/dev/null && port_open "$NODE_PORT" && grep -q "Kafka Server started" "$NODE_LOG" 2>/dev/null
}

# ch_query SQL: runs SQL on the local ClickHouse, bounded to 5 s (a port held
# by something else that accepts but never answers must not hang us).
ch_query() {
	timeout 5 clickhouse-client --host 127.0.0.1 --port "$CH_TCP_PORT" \
		--connect_timeout 2 --receive_timeout 3 --send_timeout 3 -q "$1"
}

# kafka_secure_brokers: the bootstrap list of the SASL_SSL listeners.
kafka_secure_brokers() {
	local i out=
	for ((i = 1; i <= KAFKA_NODES; i++)); do out+=${out:+,}127.0.0.1:$((KAFKA_PORT + 10 * (i - 1) + KAFKA_SECURE_OFFSET)); done
	echo "$out"
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
