#!/usr/bin/env bash
# Prints the state of the local stack; exits 0 when both services are
# healthy, 1 otherwise.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

rc=0
if kafka_healthy; then
	echo "kafka:      up   pid $(kafka_pid)  127.0.0.1:$KAFKA_PORT  cluster $(kafka_cluster_id)  log $KAFKA_LOG"
elif pid=$(kafka_pid); then
	echo "kafka:      STARTING or UNHEALTHY  pid $pid  log $KAFKA_LOG"
	rc=1
else
	echo "kafka:      down"
	rc=1
fi
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
echo "state:      $STATE"
exit "$rc"
