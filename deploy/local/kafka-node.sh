#!/usr/bin/env bash
# Starts, stops or kills one Kafka node of the local stack, for fault
# injection (e2e/faults uses it):
#   kafka-node.sh start  I   start node I if it is not running; wait until
#                            it is healthy ($HOOKRELAY_UP_TIMEOUT s, default 90)
#   kafka-node.sh stop   I   SIGTERM (controlled shutdown); wait until it has
#                            exited ($HOOKRELAY_DOWN_TIMEOUT s, default 30,
#                            then SIGKILL)
#   kafka-node.sh kill   I   SIGKILL; wait until it has exited
#   kafka-node.sh status I   print its state; exit 0 when healthy
# I is 1-based, up to HOOKRELAY_KAFKA_NODES (default 1: I=1 is the single
# node). Node I listens on 127.0.0.1:$((KAFKA_PORT + 10*(I-1))). Every
# command is idempotent: stopping a stopped node succeeds.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

usage() { die "usage: kafka-node.sh start|stop|kill|status NODE (1..$KAFKA_NODES)"; }
(($# == 2)) || usage
cmd=$1 i=$2
kafka_node "$i"

alive() {
	local state
	state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
	[[ $state != Z ]]
}

# wait_exit PID SECONDS: true once PID has exited, false after SECONDS.
wait_exit() {
	local pid=$1 until=$((SECONDS + $2))
	while alive "$pid"; do
		((SECONDS < until)) || return 1
		sleep 0.05
	done
}

case $cmd in
start)
	lock
	if kafka_healthy "$i"; then
		log "$NODE_NAME already up (pid $(kafka_pid "$i"))"
		exit 0
	fi
	started=$EPOCHREALTIME
	if ! kafka_pid "$i" >/dev/null; then
		strays=$(kafka_strays)
		[[ -z $strays ]] || die "Kafka nodes of another layout run in $STATE ($(echo $strays)); run make down first"
		kafka_launch "$i"
	fi
	until kafka_healthy "$i"; do
		pid=$(kafka_pid "$i") || {
			tail -n 20 "$NODE_LOG" >&2
			die "$NODE_NAME exited during start-up; read $NODE_LOG"
		}
		if (($(awk -v a="$started" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", b - a }') >= UP_TIMEOUT)); then
			kill -KILL "$pid" 2>/dev/null || true
			die "$NODE_NAME was not healthy ${UP_TIMEOUT}s after launch (process killed); read $NODE_LOG"
		fi
		sleep 0.2
	done
	log "$NODE_NAME healthy on 127.0.0.1:$NODE_PORT (pid $(kafka_pid "$i"))"
	;;
stop | kill)
	lock
	if ! pid=$(kafka_pid "$i"); then
		log "$NODE_NAME not running"
		exit 0
	fi
	if [[ $cmd == kill ]]; then
		log "killing $NODE_NAME (pid $pid, SIGKILL)"
		kill -KILL "$pid" 2>/dev/null || true
		wait_exit "$pid" 10 || die "$NODE_NAME (pid $pid) survives SIGKILL"
	else
		log "stopping $NODE_NAME (pid $pid, SIGTERM)"
		kill -TERM "$pid" 2>/dev/null || true
		if ! wait_exit "$pid" "$DOWN_TIMEOUT"; then
			log "$NODE_NAME still running after ${DOWN_TIMEOUT}s; sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			wait_exit "$pid" 10 || die "$NODE_NAME (pid $pid) survives SIGKILL"
		fi
	fi
	rm -f "$NODE_PID"
	log "$NODE_NAME $cmd: done"
	;;
status)
	if kafka_healthy "$i"; then
		echo "$NODE_NAME: up   pid $(kafka_pid "$i")  127.0.0.1:$NODE_PORT  log $NODE_LOG"
	elif pid=$(kafka_pid "$i"); then
		echo "$NODE_NAME: STARTING or UNHEALTHY  pid $pid  log $NODE_LOG"
		exit 1
	else
		echo "$NODE_NAME: down  127.0.0.1:$NODE_PORT"
		exit 1
	fi
	;;
*) usage ;;
esac
