#!/usr/bin/env python3
# Model check of the warp-specialized prefill kernel's barrier protocol (attention_sm90_ws.cu):
# one producer (the load warp), two consumer warpgroups, mbarriers with phase parity, cp.async
# groups landing at random times. Random interleavings; asserts: no deadlock, no parity lap,
# no buffer overwritten while a consumer reads it, consumers read the tile they expect, landed
# and published. A model of the protocol as written in the kernel (a re-statement, not the kernel
# itself): keep the two in step. Run: python3 scripts/gpu/ws_protocol_model.py. Mutations checked
# by hand (2026-12-04): dropping the qempty wait (parity lapped), acquiring a K stage one tile late
# (overwrite while read) and a single part slot (rewritten while read) are all caught.
# ni=True models variants 12 / 13 (2026-12-05): the producer never waits for its copies; a group
# is published (its `full` barrier arrives) when it lands — cp.async.mbarrier.arrive.noinc fires
# once all of the lane's earlier copies have landed, so in issue order — and the producer waits
# only on `empty` barriers, then for its last copies before it exits.
import random


class Bar:
    def __init__(s, count):
        s.count, s.pending, s.ph = count, count, 0

    def arrive(s):
        s.pending -= 1
        assert s.pending >= 0
        if s.pending == 0:
            s.ph += 1
            s.pending = s.count

    def done(s, k):  # phase index k completed? (the parity wait agrees only if ph <= k + 1)
        assert s.ph <= k + 1, "parity lapped"
        return s.ph > k


def run(parts, seed, land_p, ni=False):
    rng = random.Random(seed)
    B = {n: Bar(c) for n, c in [('qfull', 1), ('qempty', 2), ('pfull', 1), ('kf0', 1), ('kf1', 1), ('vf0', 1),
                                ('vf1', 1), ('ke0', 2), ('ke1', 2), ('ve0', 2), ('ve1', 2)]}
    buf = {}       # buffer -> [tile id, landed, published]
    readers = {}   # buffer -> consumers reading it
    groups = []    # the producer's issued, unlanded groups (buffer names), oldest first
    arrive_on_land = {}  # ni: buffer -> the barrier its landing arrives on
    partslot = {0: None, 1: None}
    slotlock = {0: set(), 1: set()}

    def prod():
        pend = []  # issued, not yet published: (barrier, buffer)
        kt = 0

        def land_wait(nmax):  # cp.async.wait_group nmax
            while len(groups) > nmax:
                yield 'wait'

        def publish():
            pb, pbuf = pend.pop(0)
            assert buf[pbuf][1], "published before landing"
            buf[pbuf][2] = True
            B[pb].arrive()

        def issued(bar, b, tid):
            assert not readers.get(b), f"overwrite {b} while read"
            buf[b] = [tid, False, False]
            groups.append(b)
            if ni:
                arrive_on_land[b] = bar
                return
            if pend:
                yield from land_wait(1)
                publish()
            pend.append((bar, b))

        def flush():
            if ni:  # cp.async.wait_all before the warp exits
                yield from land_wait(0)
                return
            if pend:
                yield from land_wait(0)
                publish()

        def acquire(bar, k):
            if ni:
                while not B[bar].done(k):
                    yield 'wait'
                return
            if not B[bar].done(k):
                yield from flush()
                while not B[bar].done(k):
                    yield 'wait'

        for pi in range(len(parts) + 1):
            if pi > 0:
                yield from acquire('qempty', pi - 1)
            slot = pi & 1
            assert not slotlock[slot], "part slot rewritten while read"
            partslot[slot] = parts[pi] if pi < len(parts) else -1
            B['pfull'].arrive()
            if pi == len(parts):
                break
            n = parts[pi]
            yield from issued('qfull', 'Q', ('Q', pi))
            if n > 0:
                s = kt & 1
                if kt >> 1:
                    yield from acquire(f'ke{s}', (kt >> 1) - 1)
                yield from issued(f'kf{s}', f'K{s}', ('K', kt))
            for i in range(n):
                if i + 1 < n:
                    u = kt + i + 1
                    s = u & 1
                    if u >> 1:
                        yield from acquire(f'ke{s}', (u >> 1) - 1)
                    yield from issued(f'kf{s}', f'K{s}', ('K', u))
                u = kt + i
                s = u & 1
                if u >> 1:
                    yield from acquire(f've{s}', (u >> 1) - 1)
                yield from issued(f'vf{s}', f'V{s}', ('V', u))
            kt += n
        yield from flush()

    def cons(c):
        kt = 0
        pi = 0

        def wait(bar, k):
            while not B[bar].done(k):
                yield 'wait'

        def read(b, tid):
            assert buf[b] == [tid, True, True], f"{c} read {b}: {buf.get(b)} want {tid}"
            readers.setdefault(b, set()).add(c)

        def done(b):
            readers[b].discard(c)

        while True:
            yield from wait('pfull', pi)
            slot = pi & 1
            slotlock[slot].add(c)
            n = partslot[slot]
            if n == -1:
                slotlock[slot].discard(c)
                return
            yield from wait('qfull', pi)
            read('Q', ('Q', pi))
            if n > 0:
                u = kt
                yield from wait(f'kf{u & 1}', u >> 1)
                read(f'K{u & 1}', ('K', u))
                yield 'x'
                done(f'K{u & 1}')
                B[f'ke{u & 1}'].arrive()
            for i in range(1, n):
                u = kt + i
                v = u - 1
                yield from wait(f'kf{u & 1}', u >> 1)
                read(f'K{u & 1}', ('K', u))
                yield from wait(f'vf{v & 1}', v >> 1)
                read(f'V{v & 1}', ('V', v))
                yield 'x'
                done(f'K{u & 1}')
                B[f'ke{u & 1}'].arrive()
                yield 'x'
                done(f'V{v & 1}')
                B[f've{v & 1}'].arrive()
            done('Q')
            B['qempty'].arrive()
            if n > 0:
                v = kt + n - 1
                yield from wait(f'vf{v & 1}', v >> 1)
                read(f'V{v & 1}', ('V', v))
                yield 'x'
                done(f'V{v & 1}')
                B[f've{v & 1}'].arrive()
            kt += n
            yield 'x'  # epilogue (reads its part slot)
            slotlock[slot].discard(c)
            pi += 1

    ths = {'p': prod(), 'c0': cons('c0'), 'c1': cons('c1')}
    steps = 0
    while ths:
        steps += 1
        assert steps < 100000, f"deadlock: {parts} seed {seed}"
        if groups and rng.random() < land_p:
            b = groups.pop(0)
            buf[b][1] = True
            if ni:
                buf[b][2] = True
                B[arrive_on_land.pop(b)].arrive()
            continue
        name = rng.choice(list(ths))
        try:
            next(ths[name])
        except StopIteration:
            del ths[name]
    assert not groups
    return steps


if __name__ == '__main__':
    rnd = random.Random(1)
    for ni in (False, True):
        for t in range(4000):
            parts = [rnd.randint(1, 6) for _ in range(rnd.randint(0, 5))]
            run(parts, t, [0.02, 0.3, 0.9][t % 3], ni)
        print(f"ok ({'12 / 13, noinc arrivals' if ni else '9 … 11'}): 4000 random part lists, no deadlock, "
              "no overwrite, reads see landed + published tiles")
