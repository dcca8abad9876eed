#!/usr/bin/env bash
# Prints the state of the local stack (each Kafka node, ClickHouse); exits 0
# when every node of the configured stack (HOOKRELAY_KAFKA_NODES) and
# ClickHouse are healthy, 1 otherwise. Nodes of another layout that still
# run in the state folder are listed too.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

rc=0
# node_status I: one line for Kafka node I; false unless it is healthy.
node_status() {
	local pid
	kafka_node "$1"
	local label
	label=$(printf '%-11s' "$NODE_NAME:")
	if kafka_healthy "$1"; then
		echo "$label up   pid $(kafka_pid "$1")  127.0.0.1:$NODE_PORT (controller $NODE_CONTROLLER_PORT)  cluster $(kafka_cluster_id "$1")  log $NODE_LOG"
	elif pid=$(kafka_pid "$1"); then
		echo "$label STARTING or UNHEALTHY  pid $pid  log $NODE_LOG"
		return 1
	else
		echo "$label down  127.0.0.1:$NODE_PORT"
		return 1
	fi
}
for ((i = 1; i <= KAFKA_NODES; i++)); do
	node_status "$i" || rc=1
done
for f in $(kafka_strays); do
	echo "stray:      $f: a Kafka node of another layout (not $KAFKA_NODES node(s)) runs; make down stops it"
	rc=1
done
if clickhouse_healthy; then
	v=$(ch_query "SELECT version()" 2>/dev/null)
	echo "clickhouse: up   pid $(clickhouse_pid)  127.0.0.1:$CH_TCP_PORT (native), 127.0.0.1:$CH_HTTP_PORT (http)  version $v  log $CH_ERR_LOG"
elif pid=$(clickhouse_pid); then
	echo "clickhouse: STARTING or UNHEALTHY  pid $pid  log $CH_ERR_LOG"
	rc=1
else
	echo "clickhouse: down"
	rc=1
fi
if [[ -s $SECURE_ENV ]]; then
	echo "secured:    kafka SASL_SSL $(kafka_secure_brokers) (SCRAM-SHA-512), clickhouse TLS 127.0.0.1:$CH_SECURE_PORT, user $SECURE_USER; settings: source $SECURE_ENV"
else
	echo "secured:    not set up yet (up.sh generates it)"
fi
echo "state:      $STATE"
exit "$rc"
