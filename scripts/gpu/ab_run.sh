#!/bin/bash
# Same-machine A/B of two g4c binaries end to end (2026-12-04, second session): .devpack-e/g4c.xz
# (b, the change) and .devpack-e/g4c-a.xz (a, before), alternating, ROUNDS rounds: performance_public
# on the synthetic 12B INT4 (g4c synth seed 0), whole H200 (--repeat 3) and emulated 1g.10gb
# (--repeat 1). Prints elapsed, prefill / decode phases and the tokens hash of each run.
export G4C_NO_PROGRESS=1 W=/tmp/g4c-ab; C=.devpack-e; O=/tmp/g4c-ab-out
mkdir -p $O $W/bin
xz -dc $C/g4c-a.xz > $W/bin/g4c-a && xz -dc $C/g4c.xz > $W/bin/g4c-b && chmod +x $W/bin/g4c-a $W/bin/g4c-b
echo "[ab +${SECONDS}s] synth"
timeout 90 $W/bin/g4c-b synth --preset gemma4-12b --dtype int4 --group-size 128 --seed 0 -o $W/12b-int4 --no-progress > /dev/null 2>&1; echo "rc=$?"
for r in $(seq 1 ${ROUNDS:-2}); do
  for b in a b; do
    for emu in "" "--emulate 1g.10gb"; do
      tag=$b-r$r${emu:+-emu}; rep=3; [ -n "$emu" ] && rep=1
      timeout 120 $W/bin/g4c-$b bench --model $W/12b-int4 --input $C/perf_public_ids.jsonl --device cuda --budget 9984MiB \
        --ignore-eos --batch-size 16 --repeat $rep $emu --report $O/$tag.json > $O/$tag.log 2>&1 || echo "$tag rc=$?"
      python3 -c "import json; r=json.load(open('$O/$tag.json')); print('$tag', r['elapsed_s']['median'], [round(x, 3) for x in (r['elapsed_s']['min'], r['elapsed_s']['max'])], 'prefill', round(r['phases']['prefill']['elapsed_s'], 3), 'decode', round(r['phases']['decode']['elapsed_s'], 3), 'peak MiB', r['peak_device_bytes'] / 2**20, set(x.get('tokens_fnv1a') for x in r['runs']), r['date'])"
    done
  done
done
tar cJf $OUT/ab.tar.xz -C $O .
