#!/usr/bin/env bash
# Installs what the project needs on a fresh machine, and only what is
# missing, so that a second run costs about a second:
#   apt    Debian packages: clickhouse-server, clickhouse-client, wrk, a Java
#          17 runtime, Maven, openssl, and chromium (the console's browser test,
#          e2e/console_test.go) (apt-get update first, only when installing)
#   kafka  the Kafka jars of deploy/local/pom.xml, via Maven, into
#          $STATE/kafka/libs
#   go     the Go modules of go.mod (go mod download)
#   npm    the packages of e2e/receiver (npm ci), when it has a package.json
#   snippets  what the runnable snippets of docs/PRODUCING.md and
#          docs/RECEIVING.md need (e2e/snippets_test.go runs them): Debian
#          packages ruby, ruby-webrick, php-cli, kcat, postgresql; PyPI
#          packages confluent-kafka and standardwebhooks into
#          $REPO/.local/snippets/py; the jars of the Java producer and of
#          Kafka Connect + Debezium (the outbox recipe) via Maven; the npm
#          package standardwebhooks comes with the npm part, Java and Maven
#          with the apt part
#   chdb   the PyPI package chdb (a current ClickHouse engine in-process) into
#          $REPO/.local/chdb, so that the schema's DDL and every query of the
#          ClickHouse store are also checked on a current engine
#          (audit/chstore TestCurrentEngineSQL runs testdata/chdb_check.py)
# Usage: deps.sh [apt|kafka|go|npm|snippets|chdb]...   (no argument: all of them)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

deps_apt() {
	local missing=()
	[[ -x /usr/sbin/clickhouse-server ]] || missing+=(clickhouse-server)
	command -v clickhouse-client >/dev/null || missing+=(clickhouse-client)
	command -v wrk >/dev/null || missing+=(wrk)
	command -v java >/dev/null || missing+=(openjdk-17-jre-headless)
	command -v mvn >/dev/null || missing+=(maven)
	command -v flock >/dev/null || missing+=(util-linux)
	command -v chromium >/dev/null || missing+=(chromium)
	command -v openssl >/dev/null || missing+=(openssl) # the secured side's CA and certificates
	((${#missing[@]})) || return 0
	log "installing Debian packages: ${missing[*]}"
	local sudo=
	((EUID == 0)) || sudo=sudo
	# Installing clickhouse-server must not start the system service (it
	# would take port 9000): deny service starts while apt runs, unless the
	# machine already has a policy.
	local policy=/usr/sbin/policy-rc.d made_policy=
	if [[ ! -e $policy ]]; then
		printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
		$sudo chmod +x "$policy"
		made_policy=1
	fi
	local rc=0
	$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}" || rc=$?
	[[ -z $made_policy ]] || $sudo rm -f "$policy"
	((rc == 0)) || die "apt-get install ${missing[*]} failed (exit $rc)"
}

deps_kafka() {
	[[ -f $KAFKA_LIBS_MARKER && $KAFKA_LIBS_MARKER -nt $DEPLOY/pom.xml ]] && return 0
	command -v mvn >/dev/null || deps_apt
	log "fetching Kafka jars with Maven into $KAFKA_LIBS"
	rm -rf "$KAFKA_LIBS.tmp"
	mkdir -p "$STATE/logs"
	if ! mvn -B -ntp -f "$DEPLOY/pom.xml" dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory="$KAFKA_LIBS.tmp" >"$STATE/logs/maven.log" 2>&1; then
		tail -n 30 "$STATE/logs/maven.log" >&2
		die "Maven could not fetch the Kafka jars of $DEPLOY/pom.xml; read $STATE/logs/maven.log"
	fi
	rm -rf "$KAFKA_LIBS"
	mv "$KAFKA_LIBS.tmp" "$KAFKA_LIBS"
	touch "$KAFKA_LIBS_MARKER"
	log "kafka jars: $(ls "$KAFKA_LIBS" | wc -l) files, $(du -sh "$KAFKA_LIBS" | cut -f1)"
}

deps_go() {
	(cd "$REPO" && go mod download) || die "go mod download failed"
}

deps_npm() {
	local dir="$REPO/e2e/receiver"
	[[ -f $dir/package.json ]] || return 0
	# npm ci records what it installed in node_modules/.package-lock.json.
	if [[ -f $dir/node_modules/.package-lock.json && $dir/node_modules/.package-lock.json -nt $dir/package-lock.json ]]; then
		return 0
	fi
	log "installing npm packages of e2e/receiver"
	(cd "$dir" && npm ci --no-audit --no-fund) || die "npm ci in $dir failed"
}

# ---- snippets: runtimes and packages of docs/snippets (a separate step) ----
# Pinned PyPI versions of the Python snippets; a change reinstalls.
SNIPPETS_PY="confluent-kafka==2.16.1 standardwebhooks==1.1.0"

deps_snippets() {
	local missing=()
	command -v ruby >/dev/null || missing+=(ruby)
	ruby -e 'require "webrick"' 2>/dev/null || missing+=(ruby-webrick)
	command -v php >/dev/null || missing+=(php-cli)
	command -v kcat >/dev/null || missing+=(kcat)
	command -v python3 >/dev/null || missing+=(python3 python3-pip)
	command -v psql >/dev/null || missing+=(postgresql-client)
	command -v initdb >/dev/null || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
	if ((${#missing[@]})); then
		log "installing Debian packages for the doc snippets: ${missing[*]}"
		local sudo=
		((EUID == 0)) || sudo=sudo
		$sudo apt-get update -q && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}" ||
			die "apt-get install ${missing[*]} failed"
	fi
	local py="$REPO/.local/snippets/py" marker="$REPO/.local/snippets/py/.installed"
	if [[ ! -f $marker || $(cat "$marker") != "$SNIPPETS_PY" ]]; then
		log "installing PyPI packages for the doc snippets into $py: $SNIPPETS_PY"
		rm -rf "$py"
		# shellcheck disable=SC2086 # one word per package
		python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target "$py" $SNIPPETS_PY ||
			die "pip install $SNIPPETS_PY failed"
		echo "$SNIPPETS_PY" >"$marker"
	fi
	command -v mvn >/dev/null || deps_apt
	local dbz="$REPO/.local/snippets/debezium/libs" pom="$REPO/docs/snippets/debezium/pom.xml"
	if [[ ! -f $dbz/.complete || $dbz/.complete -ot $pom ]]; then
		log "fetching Kafka Connect and Debezium (docs/snippets/debezium/pom.xml) into $dbz"
		mvn -B -q -ntp -f "$pom" dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory="$dbz" ||
			die "Maven could not fetch $pom"
		touch "$dbz/.complete"
	fi
	local jp="$REPO/docs/snippets/java/producer/pom.xml" jm="$REPO/.local/snippets/java-producer.fetched"
	if [[ ! -f $jm || $jm -ot $jp ]]; then
		log "fetching the Java producer's jars (docs/snippets/java/producer/pom.xml)"
		mvn -B -q -ntp -f "$jp" dependency:go-offline >/dev/null || die "Maven could not fetch $jp"
		touch "$jm"
	fi
}

# CHDB_PY pins the chdb release the current-engine check runs on.
CHDB_PY="chdb==4.4.0"

deps_chdb() {
	command -v python3 >/dev/null || deps_snippets
	local dir="$REPO/.local/chdb" marker="$REPO/.local/chdb/.installed"
	[[ -f $marker && $(cat "$marker") == "$CHDB_PY" ]] && return 0
	log "installing $CHDB_PY (a current ClickHouse engine, about 200 MB) into $dir"
	rm -rf "$dir"
	python3 -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --target "$dir" "$CHDB_PY" ||
		die "pip install $CHDB_PY failed"
	echo "$CHDB_PY" >"$marker"
}

(($#)) || set -- apt kafka go npm snippets chdb
for part in "$@"; do
	case $part in
	apt | kafka | go | npm | snippets | chdb) "deps_$part" ;;
	*) die "unknown part $part (want apt, kafka, go, npm, snippets or chdb)" ;;
	esac
done
