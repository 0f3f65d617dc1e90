#!/usr/bin/env python3
"""Opcode mix of one kernel in nvdisasm output (scripts/sass/sass_here.sh): the whole function
and its innermost loops (a backward branch and the code it jumps over), the loops with the most
of --key (default HMMA) first. For reading what a change did to a hot loop without a GPU, e.g.
  sass_mix.py lean.sass w4_lean_kernelILi1ELi16ELi1ELi8ELi2ELb0ELb0ELb1E
"""
import argparse, collections, re

ap = argparse.ArgumentParser()
ap.add_argument('sass')
ap.add_argument('kernel', help='a part of the mangled kernel name (first match)')
ap.add_argument('--key', default='HMMA', help='opcode that ranks the loops')
ap.add_argument('--loops', type=int, default=3)
ap.add_argument('--from-op', default=None, help='also count from the first instruction containing this text on (e.g. DEALLOC: a producer warp)')
args = ap.parse_args()

body, on, name = [], False, None
for l in open(args.sass).read().split('\n'):
    if l.startswith('//---') and '.text.' in l:
        if name is None and args.kernel in l:
            on, name = True, l.split('.text.')[1].strip()
        else:
            on = False
        continue
    if on:
        body.append(l)
if name is None:
    raise SystemExit('no kernel matching ' + args.kernel)
ins, labels, cur = [], {}, None
for l in body:
    m = re.match(r'\.L_x_(\d+):', l.strip())
    if m:
        cur = m.group(1); labels[cur] = None; continue
    m = re.match(r'\s+/\*([0-9a-f]+)\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_]+)(\S*)\s*(.*);', l)
    if m:
        a = int(m.group(1), 16)
        if cur is not None and labels[cur] is None:
            labels[cur] = a
        ins.append((a, m.group(3), m.group(3) + m.group(4) + ' ' + m.group(5)))
mix = lambda xs: ', '.join(f'{k} {v}' for k, v in collections.Counter(x[1] for x in xs).most_common())
print(name)
print(f'function: {len(ins)} instructions: {mix(ins)}')
loops = []
for a, op, text in ins:
    if op == 'BRA':
        t = re.search(r'\.L_x_(\d+)', text)
        if t and labels.get(t.group(1)) is not None and labels[t.group(1)] < a:
            s = labels[t.group(1)]
            xs = [x for x in ins if s <= x[0] <= a]
            loops.append((sum(x[1] == args.key for x in xs), -len(xs), s, a, xs))
loops.sort(key=lambda t: (t[0], t[1]), reverse=True)
for k, n, s, a, xs in loops[:args.loops]:
    print(f'loop {s:#x}-{a:#x}: {len(xs)} instructions, {k} {args.key}: {mix(xs)}')
if args.from_op:
    i0 = next((i for i, x in enumerate(ins) if args.from_op in x[2]), None)
    if i0 is None:
        raise SystemExit('no instruction containing ' + args.from_op)
    print(f'from {args.from_op} ({ins[i0][0]:#x}) on: {len(ins) - i0} instructions: {mix(ins[i0:])}')
