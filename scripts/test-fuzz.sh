#!/usr/bin/env bash
# Fuzz stages (called by scripts/test.sh), both with ASan+UBSan in build-fuzz.
# 1. GGUF reader: builds fuzz/fuzz_gguf.c, generates the malformed-file
#    corpus with test_gguf_corpus --write-corpus (truncations at every
#    structural boundary, seeded flips, hostile fields), runs the target once
#    over every corpus file, then fuzzes for a bounded time.
# 2. Chat templates: builds fuzz/fuzz_template.c, seeds it with every
#    shared/data/chat-templates file joined (at a NUL byte) to a few
#    conversation contexts, runs every seed once, then fuzzes for a bounded
#    time with a dictionary of Jinja2 tokens.
# 3. Session requests: builds fuzz/fuzz_session_request.c (the line splitter
#    and the request parser of src/session), seeds it with requests of every
#    command, good and bad, runs every seed once, then fuzzes for a bounded
#    time with a dictionary of the protocol's keys and JSON tokens.
# With two cores or more, stage 1 runs beside stages 2 and 3 (libFuzzer uses
# one), each fuzzing for its whole time.
# Exits non-zero on any crash, leak, timeout or sanitizer report.
# Environment: BMOE_FUZZ_SECONDS (default 45) bounds the GGUF fuzzing run,
# BMOE_FUZZ_TEMPLATE_SECONDS (default 30) the template one,
# BMOE_FUZZ_SESSION_SECONDS (default 30) the session one; BMOE_SHARED_DIR
# (default ../shared) is where the chat templates are.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
seconds=${BMOE_FUZZ_SECONDS:-45}
build=build-fuzz

# The libraries get coverage instrumentation too (fuzzer-no-link), so the
# fuzzer is guided by the reader's own branches, and ASan sees its reads.
CC=clang cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DBMOE_FUZZ=ON -DBMOE_WERROR=ON \
  -DBMOE_SANITIZE=ON -DCMAKE_C_FLAGS="-fsanitize=fuzzer-no-link" >/dev/null
cmake --build "$build" --target fuzz_gguf test_gguf_corpus fuzz_template fuzz_session_request -j"$jobs"

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

# stage_passed ARTIFACTS NAME: fails when the fuzzer left a crash, leak or
# timeout in ARTIFACTS, else says that stage NAME passed.
stage_passed() {
  if [ -n "$(ls -A "$1")" ]; then
    echo "fuzz: failures left in $1" >&2
    exit 1
  fi
  echo "fuzz: $2 stage passed"
}

# Stage 1: the GGUF reader.
fuzz_gguf_stage() {
  corpus="$build/gguf-corpus"
  work="$build/gguf-corpus-work"
  artifacts="$build/gguf-fuzz-artifacts"
  rm -rf "$corpus" "$work" "$artifacts"
  mkdir -p "$work" "$artifacts"
  "$build/bin/test_gguf_corpus" --write-corpus "$corpus"
  count=$(find "$corpus" -type f | wc -l)
  echo "fuzz: corpus of $count files"
  if [ "$count" -lt 1000 ]; then
    echo "fuzz: corpus too small ($count < 1000)" >&2
    exit 1
  fi

  echo "fuzz: every corpus file once"
  "$build/bin/fuzz_gguf" -runs=0 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts/" "$corpus" 2>&1 | tail -n 5

  echo "fuzz: ${seconds}s of fuzzing"
  "$build/bin/fuzz_gguf" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" "$corpus" 2>&1 | tail -n 12

  stage_passed "$artifacts" GGUF
}

# Stage 2: chat templates.
fuzz_template_stage() {
  template_seconds=${BMOE_FUZZ_TEMPLATE_SECONDS:-30}
  shared=${BMOE_SHARED_DIR:-../shared}
  templates="$shared/data/chat-templates"
  seeds="$build/template-seeds"
  template_work="$build/template-corpus-work"
  template_artifacts="$build/template-fuzz-artifacts"
  dictionary="$build/jinja.dict"
  rm -rf "$seeds" "$template_work" "$template_artifacts"
  mkdir -p "$seeds" "$template_work" "$template_artifacts"
  if [ ! -d "$templates" ]; then
    echo "fuzz: chat templates not found in $templates (set BMOE_SHARED_DIR)" >&2
    exit 1
  fi
  contexts=(
    '{"messages": [{"role": "user", "content": "What is a mixture of experts?"}], "add_generation_prompt": true, "bos_token": "<|bos|>", "eos_token": "<|eos|>"}'
    '{"messages": [{"role": "system", "content": "Be brief.\nReally."}, {"role": "user", "content": "Hi \"there\" & <you> é 中 😀"}, {"role": "assistant", "content": "Hello", "reasoning_content": "greet", "thinking": "greet"}, {"role": "user", "content": "Again"}], "add_generation_prompt": false, "enable_thinking": false, "bos_token": "<|bos|>", "eos_token": "<|eos|>"}'
    '{"messages": [{"role": "user", "content": "Weather in Paris?"}, {"role": "assistant", "content": "", "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "18C"}], "add_generation_prompt": true, "bos_token": "<|bos|>", "eos_token": "<|eos|>", "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name"}}, "required": ["city"]}}}]}'
  )
  for template in "$templates"/*.jinja; do
    name=$(basename "$template" .jinja)
    for index in "${!contexts[@]}"; do
      { cat "$template"; printf '\0%s' "${contexts[$index]}"; } > "$seeds/$name.$index"
    done
  done
  # Tokens the mutator splices in: tags, keywords, filters, tests, methods.
  for token in '{{' '}}' '{%' '%}' '{#' '#}' '{%-' '-%}' '{{-' '-}}' '+%}' '{%+' 'for ' ' in ' 'endfor' 'if ' \
      'elif ' 'else' 'endif' 'set ' 'endset' 'macro ' 'endmacro' 'call' 'endcall' 'caller()' 'filter ' 'endfilter' \
      'raw' 'endraw' 'with ' 'endwith' 'break' 'continue' 'generation' 'endgeneration' 'recursive' 'loop.' 'loop(' \
      'namespace(' 'range(' 'dict(' 'raise_exception(' 'strftime_now(' '|tojson' '|tojson(indent=2)' '|trim' \
      '|length' '|default(' '|join(' '|map(attribute=' '|selectattr(' '|sort' '|dictsort' '|items' '|list' \
      '|string' '|int' '|round' '|indent(' '|format(' ' is defined' ' is not none' ' is string' ' is mapping' \
      ' is sequence' ' not in ' '.split(' '.strip(' '.startswith(' '.format(' '.items()' '.get(' '.append(' \
      'messages' 'message.content' 'none' 'true' '**' '//' '~' '[::-1]' '%s'; do
    printf '"%s"\n' "$(printf '%s' "$token" | sed 's/\\/\\\\/g; s/"/\\"/g')"
  done > "$dictionary"
  count=$(find "$seeds" -type f | wc -l)
  echo "fuzz: $count template seeds"

  echo "fuzz: every template seed once"
  "$build/bin/fuzz_template" -runs=0 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$template_artifacts/" "$seeds" 2>&1 | tail -n 5

  echo "fuzz: ${template_seconds}s of template fuzzing"
  "$build/bin/fuzz_template" -max_total_time="$template_seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -dict="$dictionary" -print_final_stats=1 -artifact_prefix="$template_artifacts/" \
    "$template_work" "$seeds" 2>&1 | tail -n 12

  stage_passed "$template_artifacts" template
}

# Stage 3: session requests.
fuzz_session_stage() {
  session_seconds=${BMOE_FUZZ_SESSION_SECONDS:-30}
  session_seeds="$build/session-seeds"
  session_work="$build/session-corpus-work"
  session_artifacts="$build/session-fuzz-artifacts"
  session_dictionary="$build/session.dict"
  rm -rf "$session_seeds" "$session_work" "$session_artifacts"
  mkdir -p "$session_seeds" "$session_work" "$session_artifacts"
  requests=(
    '{"cmd":"generate","id":1,"prompt":"Hello\nthere \"you\" \u00e9","n_predict":16,"think":false,"clear_kv":true}'
    '{"cmd":"generate","id":2,"prompt":"Go on","clear_kv":false}'
    '{"cmd":"decide","id":3,"prefix":"Is it","suffix":" red?","choices":["yes","no","maybe"],"reuse_prefix":true}'
    '{"cmd":"cancel"}'
    '{"cmd":"close","id":9}'
    '{"cmd":"generate","id":4,"prompt":"a\u0000b"}'
    '{"cmd":"generate","id":"5","prompt":42,"n_predict":1.5}'
    '{"cmd":"explode"} trailing'
    '[1,2,{"cmd":"generate"}]'
  )
  for index in "${!requests[@]}"; do
    printf '%s\n' "${requests[$index]}" > "$session_seeds/request.$index"
  done
  printf '%s\n' "${requests[@]}" > "$session_seeds/stream"
  for token in '{"cmd":"' 'generate' 'decide' 'cancel' 'close' '"id":' '"prompt":' '"n_predict":' '"think":' \
      '"clear_kv":' '"prefix":' '"suffix":' '"choices":[' '"reuse_prefix":' 'true' 'false' 'null' '\u0000' '\ud83d' \
      '\"' '\\' '1e309' '-1' '9007199254740993' '}' ']' ','; do
    printf '"%s"\n' "$(printf '%s' "$token" | sed 's/\\/\\\\/g; s/"/\\"/g')"
  done > "$session_dictionary"
  echo "fuzz: every session seed once"
  "$build/bin/fuzz_session_request" -runs=0 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$session_artifacts/" "$session_seeds" 2>&1 | tail -n 5

  echo "fuzz: ${session_seconds}s of session request fuzzing"
  "$build/bin/fuzz_session_request" -max_total_time="$session_seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len=16384 -dict="$session_dictionary" -print_final_stats=1 -artifact_prefix="$session_artifacts/" \
    "$session_work" "$session_seeds" 2>&1 | tail -n 12

  stage_passed "$session_artifacts" session
}

# libFuzzer runs on one core: with two, the GGUF reader's stage runs beside
# the other two (one after the other), each fuzzing as long as it would
# alone. A stage's output is shown when it ends; set -e holds inside each.
if [ "$jobs" -ge 2 ]; then
  gguf_log="$build/fuzz-gguf.log"
  others_log="$build/fuzz-templates-sessions.log"
  fuzz_gguf_stage >"$gguf_log" 2>&1 &
  gguf_pid=$!
  { fuzz_template_stage; fuzz_session_stage; } >"$others_log" 2>&1 &
  others_pid=$!
  gguf_status=0
  others_status=0
  wait "$gguf_pid" || gguf_status=$?
  wait "$others_pid" || others_status=$?
  cat "$gguf_log" "$others_log"
  if [ "$gguf_status" -ne 0 ] || [ "$others_status" -ne 0 ]; then
    echo "fuzz: failed (GGUF stage exit $gguf_status, template and session stages exit $others_status)" >&2
    exit 1
  fi
else
  fuzz_gguf_stage
  fuzz_template_stage
  fuzz_session_stage
fi
echo "fuzz: passed"
