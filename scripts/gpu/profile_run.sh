#!/bin/bash
# One device call (issue 6, decode GEMM): the read-bandwidth probe (g4c_gpu_stream_bench), ncu
# profiles (--set full) of the dispatched register-direct decode kernel at four 12B shapes, then
# (unless NEXT=0) scripts/gpu/next_run.sh without performance_large. Pack: pack_cudart.sh +
# bench_pack.sh; carry [".devpack-cudart", ".devpack-bench"]. Logs in $OUT/profile.tar.xz.
export G4C_NO_PROGRESS=1
O=/tmp/g4c-profile; C=.devpack-cudart; BIN=/tmp/g4c-cudart-bin
mkdir -p "$O" "$BIN"
t() { echo "[profile +${SECONDS}s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,clocks.mem,power.draw --format=csv,noheader
for b in g4c_gpu_decode_bench g4c_gpu_stream_bench; do xz -dc $C/$b.xz > $BIN/$b && chmod +x $BIN/$b; done
t "read probe"
timeout 90 $BIN/g4c_gpu_stream_bench > "$O/stream.log" 2>&1; echo "rc=$?"; cat "$O/stream.log"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for case in ${NCU_CASES:-gate:11,1 gate:11,8 3840->4096:11,1 down:11,1}; do
  shape=${case%%:*}; vm=${case#*:}; tag=$(echo "${shape}_${vm}" | tr -c 'a-z0-9_\n' '_')
  t "ncu $shape v,m=$vm"
  G4C_BENCH_SHAPE="$shape" G4C_BENCH_NCU="$vm" timeout 150 $NCU --clock-control none --kernel-name-base function \
    -k regex:w4_ldg --launch-skip 2 -c 1 --set full --import-source yes -o "$O/ncu_$tag" $BIN/g4c_gpu_decode_bench \
    > "$O/ncu_$tag.log" 2>&1; echo "rc=$?"
  $NCU --import "$O/ncu_$tag.ncu-rep" --page details > "$O/ncu_$tag.txt" 2>&1
  grep -E "Duration|DRAM Throughput|Compute \(SM\) Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|Warp Cycles Per Issued|Executed Instructions  |Grid Size|SM Frequency|L2 Hit|Mem Busy|Max Bandwidth|Eligible Warps|No Eligible" "$O/ncu_$tag.txt" | head -24
  $NCU --import "$O/ncu_$tag.ncu-rep" --page raw --csv 2>/dev/null | python3 -c "
import csv,sys
rows=list(csv.reader(sys.stdin))
if len(rows)>=3:
  h,v=rows[0],rows[2]
  st=[(float(v[i].replace(',','')),h[i]) for i in range(len(h)) if h[i].startswith('smsp__average_warp_latency_issue_stalled_') and h[i].endswith('.ratio') and v[i].replace(',','').replace('.','',1).isdigit()]
  for x,n in sorted(st,reverse=True)[:8]: print('  stall %-70s %.2f'%(n,x))
  for n in ('smsp__inst_executed.sum','dram__bytes_read.sum','lts__t_sectors_srcunit_tex_op_read.sum','sm__cycles_elapsed.avg'):
    if n in h: print('  %-50s %s'%(n,v[h.index(n)]))
" 2>&1 | head -14
done
if [ "${NEXT:-1}" = 1 ]; then t "next_run.sh (no performance_large)"; SKIP_LARGE=1 bash scripts/gpu/next_run.sh; fi
t done
tar cJf $OUT/profile.tar.xz -C "$O" .
