#!/usr/bin/env python3
"""Top warp-stall reasons of one ncu profile, from `ncu --import R --page raw --csv` on stdin.

Usage: ncu --import R.ncu-rep --page raw --csv | python3 scripts/gpu/ncu_stalls.py [N] [METRIC ...]
Prints the N (default 8) largest stall metrics (average latency ratios and PC-sample counts),
then the value of every metric whose name starts with one of the METRIC prefixes.
"""
import csv
import sys

rows = list(csv.reader(sys.stdin))
top = int(sys.argv[1]) if len(sys.argv) > 1 else 8
prefixes = tuple(sys.argv[2:])
if len(rows) >= 3:
    names, values = rows[0], rows[2]  # row 1: units
    stalls = []
    for name, value in zip(names, values):
        if prefixes and name.startswith(prefixes):
            print('  %-70s %s' % (name, value))
        is_stall = (name.startswith('smsp__average_warp_latency_issue_stalled_') and name.endswith('.ratio')) or (
            name.startswith('smsp__pcsamp_warps_issue_stalled_') and not name.endswith('_not_issued'))
        if is_stall:
            try:
                stalls.append((float(value.replace(',', '')), name))
            except ValueError:
                pass
    for value, name in sorted(stalls, reverse=True)[:top]:
        print('  stall %-70s %.2f' % (name, value))
