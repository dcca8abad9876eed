#!/usr/bin/env bash
# Stops the local stack: SIGTERM, then waits up to $HOOKRELAY_DOWN_TIMEOUT
# seconds (default 30) for each process to exit, then SIGKILL. Removes the pid
# files. Idempotent: a service that is not running is reported and skipped.
# Every Kafka node of the state folder is stopped (the single node and each
# node of a cluster), whatever HOOKRELAY_KAFKA_NODES says.
# Data stays in the state folder; `make reset` wipes it.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

lock

# alive PID: true while PID exists and is not a zombie.
alive() {
	local state
	state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ $state != Z ]]
}

# stop NAME PIDFN PIDFILE
stop() {
	local name=$1 pidfn=$2 pidfile=$3 pid started=$SECONDS
	if ! pid=$($pidfn); then
		log "$name not running"
		rm -f "$pidfile"
		return
	fi
	log "stopping $name (pid $pid)"
	kill -TERM "$pid" 2>/dev/null || true
	while alive "$pid"; do
		if ((SECONDS - started >= DOWN_TIMEOUT)); then
			log "$name still running after ${DOWN_TIMEOUT}s; sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			started=$SECONDS
			while alive "$pid"; do
				((SECONDS - started < 10)) || die "$name (pid $pid) survives SIGKILL"
				sleep 0.1
			done
			break
		fi
		sleep 0.1
	done
	rm -f "$pidfile"
	log "$name stopped"
}

# stop_node NODES I: stops Kafka node I of a NODES-node layout.
stop_node() {
	KAFKA_NODES=$1
	kafka_node "$2"
	stop "$NODE_NAME" "kafka_pid $2" "$NODE_PID"
}

# All at once: Kafka's controlled shutdown takes a few seconds. (A cluster's
# last nodes may wait for the quorum they are leaving; the SIGKILL after
# $DOWN_TIMEOUT bounds it.)
pids=()
while read -r n i; do
	# The single node is stopped only when it runs, so a cluster's
	# shutdown does not also report "kafka not running".
	if ((n == 1)) && [[ -d $STATE/kafka/node-1 ]] && ! (KAFKA_NODES=1 kafka_pid >/dev/null); then continue; fi
	stop_node "$n" "$i" &
	pids+=($!)
done < <(kafka_all_nodes)
stop clickhouse clickhouse_pid "$CH_PID" &
pids+=($!)
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit "$rc"
