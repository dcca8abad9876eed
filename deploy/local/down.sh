#!/usr/bin/env bash
# Stops the local stack: SIGTERM, then waits up to $HOOKRELAY_DOWN_TIMEOUT
# seconds (default 30) for each process to exit, then SIGKILL. Removes the pid
# files. Idempotent: a service that is not running is reported and skipped.
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

# Both at once: Kafka's controlled shutdown takes a few seconds.
stop kafka kafka_pid "$KAFKA_PID" &
k=$!
stop clickhouse clickhouse_pid "$CH_PID" &
c=$!
rc=0
wait "$k" || rc=1
wait "$c" || rc=1
exit "$rc"
