#!/usr/bin/env bash
# Produce one CloudEvent to hookrelay's events topic with kcat (Debian package kcat):
# structured mode, then the same kind of event in binary mode.
# Run: BROKERS=127.0.0.1:9092 TOPIC=hookrelay.events ./produce.sh
set -euo pipefail
brokers=${BROKERS:-127.0.0.1:9092}
topic=${TOPIC:-hookrelay.events}
id="evt_$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"

# Structured: the whole event is the value, on one line (kcat -P splits its input at
# newlines: one message per line); -k is the key.
printf '%s' '{"specversion":"1.0","id":"'"$id"'","source":"/billing","type":"invoice.paid","time":"'"$(date -u +%Y-%m-%dT%H:%M:%SZ)"'","datacontenttype":"application/json","data":{"invoice":"in_1","total":4200,"note":"Grüße <b>&amp;</b>"}}' |
	kcat -P -b "$brokers" -t "$topic" -k in_1 -H content-type=application/cloudevents+json -X enable.idempotence=true
echo "published $id"

# Binary: attributes in ce_ headers, content-type is the data's, the value is the data.
printf '%s' '{"invoice":"in_1","total":4200}' |
	kcat -P -b "$brokers" -t "$topic" -k in_1 -X enable.idempotence=true \
		-H ce_specversion=1.0 -H "ce_id=${id}_b" -H ce_source=/billing -H ce_type=invoice.paid \
		-H content-type=application/json
echo "published ${id}_b"
