#!/usr/bin/env bash
# The direct shape without Kubernetes: three `kvlens sim` processes, each one
# simulated H200 worker with its own HTTP port and its own ZMQ KV-event port,
# and `kvlens serve` routing across them with the KV-aware policy. KV events
# cross process boundaries exactly as they do from vLLM pods.
#
#   deploy/local/three-workers.sh            # then open http://localhost:8080
#
# Environment (all optional):
#   KVLENS        kvlens binary to run (default: go build one into ./build)
#   KVLENS_ADDR   dashboard address (default :8080)
#   HTTP_BASE     first worker's HTTP port (default 8101; workers use +0, +1, +2)
#   EVENTS_BASE   first worker's KV-event port (default 5557)
#   POLICY        routing policy (default kv)
# Ctrl-C (or SIGTERM) stops all four processes.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ -z "${KVLENS:-}" ]; then
	mkdir -p build
	go build -o build/kvlens ./cmd/kvlens
	KVLENS=build/kvlens
fi
addr=${KVLENS_ADDR:-:8080}
http_base=${HTTP_BASE:-8101}
events_base=${EVENTS_BASE:-5557}
policy=${POLICY:-kv}

pids=()
stop() {
	trap - INT TERM EXIT
	kill -TERM "${pids[@]}" 2>/dev/null || true
	wait "${pids[@]}" 2>/dev/null || true
}
trap stop INT TERM EXIT

workers=()
for i in 0 1 2; do
	port=$((http_base + i))
	events=$((events_base + i))
	"$KVLENS" sim --count 1 --host 127.0.0.1 --base-port "$port" \
		--events-bind "tcp://127.0.0.1:$events" &
	pids+=($!)
	workers+=("gpu-$i=http://127.0.0.1:$port,events=tcp://127.0.0.1:$events")
done

list=$(IFS=,; echo "${workers[*]}")
"$KVLENS" serve --addr "$addr" --policy "$policy" --workers "$list" &
pids+=($!)
wait -n "${pids[@]}" # if any process dies, stop the rest
