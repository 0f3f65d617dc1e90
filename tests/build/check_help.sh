#!/bin/bash
# Every subcommand has --help; `g4c` with no subcommand fails with usage.
set -uo pipefail
bin="$1"
for c in compile opt run quantize eval bench synth inspect; do
  out=$("$bin" "$c" --help 2>&1) || { echo "g4c $c --help failed: $out"; exit 1; }
  # (A pattern match, not `echo | grep -q`: grep -q exits at its first match, and the echo builtin
  # writes a long text (opt's help, ~15 KB) in pieces, so a piece written after grep has exited
  # dies of SIGPIPE and, with pipefail, fails the check: CI failed this way once, 2026-12-05.)
  [[ "${out,,}" == *usage* ]] || { echo "g4c $c --help printed no usage: $out"; exit 1; }
done
if "$bin" >/dev/null 2>&1; then echo "g4c without a subcommand should fail"; exit 1; fi
echo ok
