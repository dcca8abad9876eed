#!/usr/bin/env bash
# Runs the outbox recipe for real on one machine: a throwaway PostgreSQL with
# wal_level=logical, Kafka Connect (standalone) with Debezium's PostgreSQL
# connector and outbox event router from Maven Central (pom.xml), configured
# by outbox-connector.json with the local addresses. Then, in one database
# transaction each, it inserts one outbox row that commits and one that rolls
# back, prints "published <id>" for the committed CloudEvent, and keeps
# running until SIGTERM/SIGINT (then it stops Connect and PostgreSQL).
# Needs: java, mvn, PostgreSQL's initdb/pg_ctl/psql, python3.
# Env: BROKERS (127.0.0.1:9092), TOPIC (hookrelay.events), WORK (a new temp
# dir), LIBS (jar cache, default <repo>/.local/snippets/debezium/libs),
# PG_PORT (55432), CONNECT_PORT (58083).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../../.." && pwd)
brokers=${BROKERS:-127.0.0.1:9092}
topic=${TOPIC:-hookrelay.events}
work=${WORK:-$(mktemp -d)}
libs=${LIBS:-$repo/.local/snippets/debezium/libs}
pg_port=${PG_PORT:-55432}
connect_port=${CONNECT_PORT:-58083}
log() { echo "debezium: $*" >&2; }

if [[ ! -f $libs/.complete || $libs/.complete -ot $here/pom.xml ]]; then
	log "fetching Kafka Connect and Debezium with Maven into $libs"
	mvn -B -q -ntp -f "$here/pom.xml" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$libs" >&2
	touch "$libs/.complete"
fi

bindir=$(dirname "$(command -v pg_ctl || ls /usr/lib/postgresql/*/bin/pg_ctl | tail -1)")
as_pg=()
if ((EUID == 0)); then as_pg=(runuser -u postgres --); fi # PostgreSQL refuses to run as root
# Its own directory, readable by the postgres user even when $work is not.
pg=$(mktemp -d /tmp/hookrelay-outbox-pg.XXXXXX)
chmod 755 "$pg"
[[ ${#as_pg[@]} -eq 0 ]] || chown postgres "$pg"
"${as_pg[@]}" "$bindir/initdb" -D "$pg/data" -U postgres --auth=trust >"$work/initdb.log"
cat >>"$pg/data/postgresql.conf" <<CONF
wal_level = logical
port = $pg_port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$pg'
CONF
connect_pid=
cleanup() {
	[[ -z $connect_pid ]] || { kill "$connect_pid" 2>/dev/null || true; wait "$connect_pid" 2>/dev/null || true; }
	"${as_pg[@]}" "$bindir/pg_ctl" -D "$pg/data" stop -m fast >/dev/null 2>&1 || true
	rm -rf "$pg"
}
trap cleanup EXIT
trap 'exit 0' TERM INT
"${as_pg[@]}" "$bindir/pg_ctl" -D "$pg/data" -l "$pg/log" -w start >/dev/null
psql=(psql -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U postgres)
"${psql[@]}" -c 'CREATE DATABASE billing'
"${psql[@]}" -d billing -f "$here/outbox.sql"

# The recipe's connector, pointed at this database and topic.
python3 - "$here/outbox-connector.json" "$work/connector.properties" <<PY
import json, sys
c = json.load(open(sys.argv[1]))
cfg = c["config"]
cfg.update({"name": c["name"], "database.hostname": "127.0.0.1", "database.port": "$pg_port",
            "database.user": "postgres", "database.password": "unused",
            "transforms.outbox.route.topic.replacement": "$topic"})
cfg.pop("exactly.once.support")  # a distributed-mode worker setting; standalone Connect has none
with open(sys.argv[2], "w") as f:
    for k, v in cfg.items():
        f.write(f"{k}={v}\n")
PY
cat >"$work/worker.properties" <<PROPS
bootstrap.servers=$brokers
key.converter=org.apache.kafka.connect.storage.StringConverter
value.converter=org.apache.kafka.connect.converters.ByteArrayConverter
offset.storage.file.filename=$work/offsets
listeners=http://127.0.0.1:$connect_port
PROPS
printf '%s\n' 'log4j.rootLogger=INFO, stdout' 'log4j.appender.stdout=org.apache.log4j.ConsoleAppender' \
	'log4j.appender.stdout.layout=org.apache.log4j.PatternLayout' 'log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n' \
	>"$work/log4j.properties"
java -cp "$libs/*" -Dlog4j.configuration="file:$work/log4j.properties" \
	org.apache.kafka.connect.cli.ConnectStandalone "$work/worker.properties" "$work/connector.properties" >"$work/connect.log" 2>&1 &
connect_pid=$!
log "Kafka Connect started (log: $work/connect.log); waiting for the connector to stream"
for _ in $(seq 1 180); do
	grep -q 'Processing messages' "$work/connect.log" && break
	kill -0 "$connect_pid" 2>/dev/null || { tail -n 40 "$work/connect.log" >&2; exit 1; }
	sleep 1
done
grep -q 'Processing messages' "$work/connect.log" || { tail -n 40 "$work/connect.log" >&2; exit 1; }

id="evt_outbox_$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
event() { printf '{"specversion":"1.0","id":"%s","source":"/billing","type":"invoice.paid","time":"%s","datacontenttype":"application/json","data":{"invoice":"in_1","note":"Grüße <b>&amp;</b>","big":123456789012345678901234567890}}' "$1" "$now"; }
"${psql[@]}" -d billing -c "BEGIN; INSERT INTO outbox (id, aggregate_type, aggregate_id, payload) VALUES (gen_random_uuid(), 'invoice', 'in_1', convert_to('$(event "$id")', 'UTF8')); COMMIT;"
"${psql[@]}" -d billing -c "BEGIN; INSERT INTO outbox (id, aggregate_type, aggregate_id, payload) VALUES (gen_random_uuid(), 'invoice', 'in_1', convert_to('$(event "${id}_rolled_back")', 'UTF8')); ROLLBACK;"
echo "published $id"
echo "rolled back ${id}_rolled_back"
while kill -0 "$connect_pid" 2>/dev/null; do sleep 1; done
log "Kafka Connect exited"; tail -n 20 "$work/connect.log" >&2
exit 1
