#!/usr/bin/env bash
# bench/server.sh: bmoe-server under load. Starts bmoe-server on a model and
# drives it with bench-server_load (bench/server_load.c): streamed
# /v1/completions of a fixed number of tokens each (end-of-generation
# ignored, a prompt unique to every request), first with 1 client, then with
# 16 at once, each client sending its requests one after the other. Prints
# one line per client count: requests per second, generated tokens per
# second, and the p50 and p99 time to first token (from sending a request to
# its first token's event: the wait in line and the prefill included). The
# server's line is as long as the most clients, so none is refused.
#
# Run: bench/server.sh
#   BMOE_BENCH_MODEL=/path/to/model.gguf BMOE_BENCH_REQUESTS=16 bench/server.sh
#
# Environment: BMOE_BUILD_DIR (default build), BMOE_BENCH_MODEL (default
# $BMOE_BUILD_DIR/models/tiny-qwen3moe.gguf, written by bmoe-mkmodel when
# missing), BMOE_BENCH_CLIENTS (the client counts, default "1 16"),
# BMOE_BENCH_REQUESTS (per client, default 8), BMOE_BENCH_TOKENS (per
# request, default 32), BMOE_BENCH_THREADS (the server's -t, default 2),
# BMOE_BENCH_SERVER_ARGS (more bmoe-server flags, split on spaces).
# A benchmark, not a test.
set -euo pipefail
cd "$(dirname "$0")/.."

build=${BMOE_BUILD_DIR:-build}
model=${BMOE_BENCH_MODEL:-$build/models/tiny-qwen3moe.gguf}
client_counts=${BMOE_BENCH_CLIENTS:-1 16}
requests=${BMOE_BENCH_REQUESTS:-8}
tokens=${BMOE_BENCH_TOKENS:-32}
threads=${BMOE_BENCH_THREADS:-2}
read -r -a server_args <<< "${BMOE_BENCH_SERVER_ARGS:-}"
server=$build/bin/bmoe-server
load=$build/bin/bench-server_load
mkmodel=$build/bin/bmoe-mkmodel

fail() { echo "bench/server.sh: $*" >&2; exit 1; }
for tool in "$server" "$load"; do
  [ -x "$tool" ] || fail "$tool is missing (cmake --build $build --target bmoe-server bench-server_load)"
done
if [ ! -f "$model" ]; then
  [ -z "${BMOE_BENCH_MODEL:-}" ] || fail "$model does not exist"
  [ -x "$mkmodel" ] || fail "$mkmodel is missing (cmake --build $build --target bmoe-mkmodel)"
  mkdir -p "$(dirname "$model")"
  "$mkmodel" --shape tiny-qwen3moe --quiet -o "$model"
fi

most=1
for clients in $client_counts; do
  [[ $clients =~ ^[1-9][0-9]*$ ]] || fail "BMOE_BENCH_CLIENTS: '$clients' is not a positive number"
  [ "$clients" -gt "$most" ] && most=$clients
done

log=$(mktemp)
server_pid=
# shellcheck disable=SC2317 # run by the EXIT trap
stop_server() {
  if [ -n "$server_pid" ]; then
    kill -TERM "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -f "$log"
}
trap stop_server EXIT

"$server" -m "$model" -t "$threads" --port 0 --max-queue "$most" "${server_args[@]}" 2> "$log" &
server_pid=$!
port=
for _ in $(seq 600); do
  port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$log")
  [ -n "$port" ] && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; fail "bmoe-server ended before listening"; }
  sleep 0.5
done
[ -n "$port" ] || fail "bmoe-server did not listen within 300 s"

echo "bench/server.sh: $model, -t $threads, $requests requests per client, $tokens tokens each"
status=0
for clients in $client_counts; do
  "$load" --port "$port" --clients "$clients" --requests "$requests" --tokens "$tokens" || status=1
done
exit $status
