#!/usr/bin/env python3
"""Hostile-input catalogue for pulse-plan: malformed, extreme and awkward inputs, each run on a
sanitized build and judged. The first catalogue (classes 1-5 and its extras, 725 cases) was
written as a new user would, from the README, docs/, --help, profiles/ and schema/ only,
without reading the tests (issue 16); the second (scripts/hostile/round2.py, issue 31) adds
outputs that are not plain files, signals and pipes, write errors, models and plans that lie,
the cost of reading, and what the first left open.

  scripts/hostile_catalogue.py [--bin PATH] [--release PATH] [--out DIR] [--only SUBSTR]
                               [--class CLS] [--timing] [--list]

--bin: the binary under test, normally the ASan + UBSan build (default build-asan/pulse-plan,
  which scripts/setup.sh --test builds); --release: the Release binary, for --timing
  comparisons (default build/pulse-plan); --out: where each case gets its directory
  (default a new temporary one), NNN-name/ with its inputs, cmd.txt (the command, with the
  cd), stdout.txt, stderr.txt and result.json; a summary goes to OUT/results.json. --only
  runs the cases whose name holds SUBSTR, --class those of one class (1 to 5, r2-outputs,
  r2-signals, r2-writes, r2-lies, r2-reading, r2-first; r2 for all of the second; r3 for the
  third's); --list
  prints the cases (class, name, expected exits) without running them.

A case FAILS on: a sanitizer report; exit 3 or a signal (unless the case expects it: a write
error, a signal it sends); a run over 300 s (or the case's own limit); nan/inf in any output
or a null where a figure belongs; a file created, changed or removed after a non-zero exit; an
input changed; an exit code wrong for the input (an unexpected success); an error message
that names neither the file, the JSON path nor the option; and whatever a case's own check
adds (raw control bytes in an output, a plan that validate refuses, ...); /dev/stdout,
/dev/stderr or /dev/stdin no longer a link after the case (a binary that renames over them
as root breaks every later run on the machine: the catalogue puts the link back at once).
Runs one case at a time under `nice -n 10 timeout 300`. Exit status 1 when any case fails.

The parts, in scripts/hostile/: common.py (paths, the case list, input helpers), profiles.py,
extremes.py, options.py, plans.py, outputs.py, extras.py (the first catalogue), round2.py
(the second), round3.py (the CLI's side of the third, issue 41: r3-keys, r3-figures,
r3-numbers, r3-names, r3-cuts, r3-moved), runner.py (running and judging one case).
"""
import json
import os
import sys
import tempfile

from hostile import extras, extremes, options, outputs, plans, profiles, round2, round3
from hostile.common import CASE_LIST, cfg, make_bases
from hostile.runner import run_case

PARTS = (profiles, extremes, options, plans, outputs, extras, round2, round3)


def parse_args(argv):
    opts = dict(only=None, cls=None, bin=cfg.bin, timing=False, list=False)
    a = list(argv)
    while a:
        x = a.pop(0)
        if x == '--only':
            opts['only'] = a.pop(0)
        elif x == '--class':
            opts['cls'] = a.pop(0)
        elif x == '--bin':
            opts['bin'] = os.path.abspath(a.pop(0))
        elif x == '--release':
            cfg.rel = os.path.abspath(a.pop(0))
        elif x == '--out':
            cfg.here = os.path.abspath(a.pop(0))
        elif x == '--timing':
            opts['timing'] = True
        elif x == '--list':
            opts['list'] = True
        elif x in ('-h', '--help'):
            print(__doc__)
            sys.exit(0)
        else:
            sys.exit('hostile_catalogue.py: unknown argument %s (see --help)' % x)
    return opts


def register(make):
    """Every part registers its cases in order (the case number is part of its directory)."""
    if make:
        make_bases()
    for part in PARTS:
        part.cases()


def run_all(opts):
    results, per_cls = [], {}
    for i, c in enumerate(CASE_LIST):
        per_cls[c['cls']] = per_cls.get(c['cls'], 0) + 1
        if opts['only'] and opts['only'] not in c['name']:
            continue
        if opts['cls'] and not str(c['cls']).startswith(opts['cls']):
            continue
        res = run_case(i, c, opts['bin'], opts['timing'])
        results.append(res)
        tag = 'FAIL' if res['fails'] else ('??  ' if res['questionable'] else 'ok  ')
        first = (res['fails'] + res['questionable'])[0][:150].replace('\n', ' ') \
            if res['fails'] or res['questionable'] else ''
        print('%s %-60s rc=%-3d %6.2fs %s' % (tag, res['name'], res['rc'], res['seconds'], first),
              flush=True)
    return results, per_cls


def main():
    opts = parse_args(sys.argv[1:])
    if opts['list']:
        cfg.base = '/nonexistent/_base'  # cases name base plans; listing makes none
        register(make=False)
        for c in CASE_LIST:
            print('%-6s %-64s %s' % (c['cls'], c['name'], c['expect']))
        print('total', len(CASE_LIST))
        return 0
    if not os.access(opts['bin'], os.X_OK):
        sys.exit('hostile_catalogue.py: no binary %s (build it: scripts/setup.sh --test, or --bin)'
                 % opts['bin'])
    cfg.bin = opts['bin']  # base plans and helper runs use the binary under test too
    cfg.here = cfg.here or tempfile.mkdtemp(prefix='pulse-hostile-')
    cfg.cases = cfg.here + '/cases'
    cfg.base = cfg.cases + '/_base'
    print('hostile_catalogue.py: cases in %s' % cfg.cases, file=sys.stderr)
    os.makedirs(cfg.cases, exist_ok=True)
    register(make=True)
    results, per_cls = run_all(opts)
    partial = opts['only'] or opts['cls']
    summ = cfg.here + ('/results-partial.json' if partial else '/results.json')
    with open(summ, 'w') as f:
        json.dump(dict(per_class={str(k): v for k, v in per_cls.items()}, total=len(CASE_LIST),
                       results=results), f, indent=1)
    nf = sum(1 for r in results if r['fails'])
    nq = sum(1 for r in results if r['questionable'] and not r['fails'])
    print('cases per class:', per_cls, 'total', len(CASE_LIST))
    print('ran %d: %d FAIL, %d questionable' % (len(results), nf, nq))
    return 1 if nf else 0


if __name__ == '__main__':
    sys.exit(main())
