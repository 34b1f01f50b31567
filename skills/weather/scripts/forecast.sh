#!/bin/sh
# Prints the current weather for a place in one line, then today's and the
# next days' forecast as wttr.in's plain-text table. Usage: forecast.sh PLACE
set -eu
if [ $# -lt 1 ] || [ -z "$1" ]; then
  echo "usage: forecast.sh PLACE" >&2
  exit 2
fi
# wttr.in wants spaces as `+`; everything else is passed as typed.
place=$(printf '%s' "$1" | tr ' ' '+')
base="https://wttr.in/${place}"
echo "now: $(curl -fsS --max-time 10 "${base}?format=%l:+%c+%t+(feels+%f),+wind+%w,+humidity+%h,+rain+%p")"
echo
# 3 days, narrow (n), quiet (q), no terminal colours (T).
curl -fsS --max-time 10 "${base}?3nqT"
