#!/usr/bin/env python3
"""The cost of reading inputs that are cheap to write (issue 31): CPU seconds and peak RSS of
one pulse-plan command per input, for each binary given, in one run, as a table.

  scripts/reading_bench.py [--binary PATH ...] [--timeout S]

Default binaries: build/pulse-plan. Give the baseline first to compare, e.g.
  scripts/reading_bench.py --binary /work/baseline/pulse-plan-1b38b3c --binary build/pulse-plan

Inputs (written to a temporary directory):
  model-junk-N     tiny-unet with N small objects under an unknown key (refused: exit 2)
  plan-junk-N      a tiny-unet plan with N small objects under an unknown key (simulate)
  types-N          tiny-unet / sd2 listing N device types, planned at a fixed pp
Times are user + system CPU of the child (resource.getrusage), RSS its peak; a run past
--timeout seconds of wall time is killed and shown as '>' the limit.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from hostile.round2 import many_types, small_objects as junk

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, 'profiles/models/tiny-unet.json')
SD2 = os.path.join(ROOT, 'profiles/models/sd2-unet-512.json')
DGX = os.path.join(ROOT, 'profiles/clusters/dgx1-v100-32gb-1n.json')


def inputs(d, plan_binary):
    """(name, argv after the binary) for every input, written into d."""
    out = []
    tiny = json.dumps(json.load(open(TINY)))
    for n in (400000, 1000000):
        path = os.path.join(d, 'model-junk-%d.json' % n)
        open(path, 'w').write(tiny[:-1] + ', "junk": %s}' % junk(n))
        out.append(('model-junk-%d' % n, ['plan', '--model', path, '--cluster', DGX, '-q', '-o',
                                          os.path.join(d, 'out.json')]))
    plan = os.path.join(d, 'plan.json')
    subprocess.run([plan_binary, 'plan', '--model', TINY, '--cluster', DGX, '--pp', '2', '-q',
                    '-o', plan], check=True)
    text = open(plan).read().rstrip()
    for n in (400000, 1000000):
        path = os.path.join(d, 'plan-junk-%d.json' % n)
        open(path, 'w').write(text[:-1] + ', "junk": %s}' % junk(n))
        out.append(('plan-junk-%d' % n, ['simulate', path]))
    for model, name, pp in ((TINY, 'tiny', '2'), (SD2, 'sd2', '4')):
        path = os.path.join(d, 'types-%s.json' % name)
        json.dump(many_types(json.load(open(model)), 1600), open(path, 'w'))
        out.append(('types-1600-%s' % name, ['plan', '--model', path, '--cluster', DGX, '--pp',
                                              pp, '--solver-time-limit', '0', '-q', '-o',
                                              os.path.join(d, 'out.json')]))
    return out


def measure(binary, argv, timeout):
    """CPU seconds and peak RSS of this one child (wait4's rusage), killed past `timeout`."""
    t0 = time.time()
    p = subprocess.Popen([binary] + argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killed = False
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        if time.time() - t0 > timeout and not killed:
            p.kill()
            killed = True
        time.sleep(0.01)
    p.returncode = os.waitstatus_to_exitcode(status)
    return dict(cpu=usage.ru_utime + usage.ru_stime, wall=time.time() - t0,
                rss_mb=usage.ru_maxrss / 1024, killed=killed, rc=p.returncode)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('--binary', action='append')
    ap.add_argument('--timeout', type=float, default=120)
    ap.add_argument('--write-inputs', help=argparse.SUPPRESS)  # DIR: the child's job
    a = ap.parse_args()
    binaries = a.binary or [os.path.join(ROOT, 'build', 'pulse-plan')]
    if a.write_inputs:
        json.dump(inputs(a.write_inputs, binaries[-1]), open(a.write_inputs + '/cases.json', 'w'))
        return
    with tempfile.TemporaryDirectory(prefix='pulse-reading-') as d:
        # Written by a child process: a child of this one starts as a copy of it, and its
        # peak RSS would count the inputs built here.
        subprocess.run([sys.executable, __file__, '--write-inputs', d, '--binary', binaries[-1]],
                       check=True)
        cases = json.load(open(d + '/cases.json'))
        head = '%-20s' % 'input' + ''.join('  %24s' % os.path.basename(b)[:24] for b in binaries)
        print(head + ('  %8s' % 'ratio' if len(binaries) > 1 else ''))
        for name, argv in cases:
            row, cpus = '%-20s' % name, []
            for b in binaries:
                m = measure(b, argv, a.timeout)
                cpu = ('>%.0f s' % a.timeout) if m['killed'] else '%.2f s' % m['cpu']
                row += '  %24s' % ('%s cpu %4.0f MB rc %s' % (cpu, m['rss_mb'], m['rc']))
                cpus.append(None if m['killed'] else m['cpu'])
            if len(binaries) > 1 and cpus[-1]:
                ratio = ('>%.0fx' % (a.timeout / cpus[-1])) if cpus[0] is None else \
                    '%.1fx' % (cpus[0] / cpus[-1])
                row += '  %8s' % ratio
            print(row, flush=True)


if __name__ == '__main__':
    main()
