#!/bin/sh
# g4c run / g4c inspect end to end on the tiny model: one good and one malformed request →
# exit status 1, an output line for each (the bad one with finish_reason "error"), a summary;
# the saved plan prints with inspect and runs again through --plan; a truncated plan is refused;
# seeded sampled requests repeat their tokens across batch sizes.
set -u
G4C="$1"; SRC="$2"; TMP="${TMPDIR:-/tmp}/g4c_cli_run_$$"
mkdir -p "$TMP"; trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
printf '{"input_ids": [2, 818, 2050], "max_new_tokens": 3}\n{"prompt": \n' > "$TMP/r.jsonl"
"$G4C" run --model "$SRC/models/gemma4-tiny" --input "$TMP/r.jsonl" --output "$TMP/o.jsonl" \
  --summary "$TMP/s.json" --batch-size 2 --save-plan "$TMP/tiny.g4p" 2> "$TMP/err"
rc=$?
[ "$rc" = 1 ] || fail "exit status $rc, expected 1 (one request failed)"
[ "$(wc -l < "$TMP/o.jsonl")" = 2 ] || fail "expected 2 output lines"
grep -q '"finish_reason":"length"' "$TMP/o.jsonl" || fail "good request not served"
grep -q '"finish_reason":"error"' "$TMP/o.jsonl" || fail "bad request not marked error"
grep -q '"generated_tokens": 3' "$TMP/s.json" || fail "summary: $(cat "$TMP/s.json")"
grep -q "1 of 2 requests failed" "$TMP/err" || fail "no failure message on stderr"
"$G4C" inspect "$TMP/tiny.g4p" --model "$SRC/models/gemma4-tiny" > "$TMP/inspect.txt" || fail "inspect failed"
grep -q "QkNormRopeKvWrite" "$TMP/inspect.txt" || fail "inspect shows no program"
grep -q "plan matches checkpoint" "$TMP/inspect.txt" || fail "inspect did not verify"
head -n 1 "$TMP/r.jsonl" > "$TMP/good.jsonl"
"$G4C" run --model "$SRC/models/gemma4-tiny" --plan "$TMP/tiny.g4p" --input "$TMP/good.jsonl" \
  --output "$TMP/o2.jsonl" 2>/dev/null || fail "run with --plan failed"
[ "$(head -n 1 "$TMP/o.jsonl" | sed 's/.*"token_ids":\(\[[^]]*\]\).*/\1/')" = \
  "$(sed 's/.*"token_ids":\(\[[^]]*\]\).*/\1/' "$TMP/o2.jsonl")" ] || fail "--plan run gave other tokens"
head -c 2000 "$TMP/tiny.g4p" > "$TMP/cut.g4p"
"$G4C" run --model "$SRC/models/gemma4-tiny" --plan "$TMP/cut.g4p" --input "$TMP/good.jsonl" \
  --output "$TMP/o3.jsonl" 2> "$TMP/err3" && fail "a truncated plan was accepted"
grep -q "truncated" "$TMP/err3" || fail "unclear truncated-plan error: $(cat "$TMP/err3")"
# Sampled requests through the CLI: a seed repeats its tokens run after run and in another batch;
# the greedy request next to them keeps its tokens.
printf '%s\n' '{"input_ids": [2, 818, 2050], "max_new_tokens": 12, "sampling_params": {"temperature": 1.0, "top_p": 0.9, "seed": 5}}' \
  '{"input_ids": [2, 7750, 327], "max_new_tokens": 12, "sampling_params": {"temperature": 0.8, "top_k": 20, "seed": 6}}' \
  '{"input_ids": [2, 818, 2050], "max_new_tokens": 3}' > "$TMP/sampled.jsonl"
for b in 1 3; do
  "$G4C" run --model "$SRC/models/gemma4-tiny" --plan "$TMP/tiny.g4p" --input "$TMP/sampled.jsonl" \
    --output "$TMP/s$b.jsonl" --batch-size $b --ignore-eos 2>/dev/null || fail "sampled run (batch $b) failed"
  sed 's/.*"token_ids":\(\[[^]]*\]\).*/\1/' "$TMP/s$b.jsonl" > "$TMP/t$b.txt"
done
cmp -s "$TMP/t1.txt" "$TMP/t3.txt" || fail "sampled tokens depend on the batch: $(cat "$TMP/t1.txt") vs $(cat "$TMP/t3.txt")"
[ "$(sed -n 3p "$TMP/t1.txt")" = "$(sed 's/.*"token_ids":\(\[[^]]*\]\).*/\1/' "$TMP/o2.jsonl")" ] \
  || fail "the greedy request changed next to sampled ones"
[ "$(sed -n 1p "$TMP/t1.txt" | tr -cd , | wc -c)" = 11 ] || fail "sampled request: not 12 tokens"
# (Seeded, so fixed: at T = 1 the first request's first three tokens are not the greedy three.)
[ "$(sed -n 1p "$TMP/t1.txt" | cut -d, -f1-3)]" != "$(sed -n 3p "$TMP/t1.txt")" ] || fail "sampling gave the greedy tokens"
echo "cli run/inspect OK"
