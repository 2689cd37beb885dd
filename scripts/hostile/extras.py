"""Extras of the first catalogue: sub-nanosecond times, zero-time plans, names that need escaping."""
import os
import re
import shutil
import subprocess

from .common import (named_model, base, case, cfg, cluster_case, cluster_doc, corrupt_case, DGX, DGX2,
                     model_case, plan_case, SAN, TIMEOUT, TINY, tiny_with, unet_model, wb, wj)


INJ_NAMES = ['in"q', 'back\\slash', 'new\nline', '<script>alert(1)</script>', 'com,ma', 'semi;colon',
             'x -> y [color=red]', '}{', '\x1b[31mred\x1b[0m', "it's", '&amp;', 'tab\there']


def injection_model():
    return named_model(['first'] + INJ_NAMES + ['last'], 'skip "%d" <b>,\n', 1024,
                       'inj<script>"\x1b]0;title\x07')


def setup_injection(d):
    wj(d + '/model.json', injection_model(), indent=1)
    r = subprocess.run(['nice', '-n', '10', 'timeout', str(TIMEOUT), cfg.bin, 'plan', '--model', 'model.json',
                        '--cluster', DGX, '--pp', '2', '-q', '-o', 'plan.json'], cwd=d, capture_output=True)
    wb(d + '/setup-stderr.txt', r.stderr)
    if r.returncode != 0 or SAN.search(r.stderr.decode(errors='replace')):
        raise RuntimeError('setup plan failed rc %d: %s' % (r.returncode, r.stderr[-500:]))
    shutil.copy(cfg.base + '/pp2.json', d + '/other.json')


def inj_post(d, r, fails, quest):
    for fn in os.listdir(d):
        p = os.path.join(d, fn)
        if fn.endswith('.html'):
            t = open(p, 'rb').read()
            if b'<script>alert(1)' in t:
                fails.append('HTML injection: a layer named <script>alert(1)</script> appears unescaped in ' + fn)
            if b'\x1b' in t:
                quest.append('raw ESC byte in ' + fn)
        if fn.endswith('.dot'):
            t = open(p, 'rb').read().decode(errors='replace')
            if shutil.which('dot'):
                rr = subprocess.run(['dot', '-Tsvg', p], capture_output=True)
                if rr.returncode != 0:
                    fails.append('dot output does not parse: ' + rr.stderr.decode(errors='replace')[:300])
            for ln in t.splitlines():
                q = re.sub(r'\\.', '', ln).count('"')
                if q % 2:
                    fails.append('dot line with unbalanced quotes (escaping): %r' % ln[:200])
                    break
        if fn.endswith('.csv'):
            t = open(p, 'rb').read()
            if b'\n\n' in t.strip() or b'"' in t:
                quest.append('csv contains quotes/blank lines')
    if b'\x1b' in r.stderr:
        quest.append('raw ESC / control bytes from a profile name echoed to stderr (terminal escape injection)')
    if b'\x1b' in r.stdout and not os.listdir(d):
        quest.append('raw ESC in stdout')


def times_below_quantum():
    """Class 2: times below the 1 ns quantum; 65536 devices; 4096 layers."""
    # ---- class 2: times below the 1 ns quantum
    m = unet_model(11, fwd=lambda i: 1e-10)
    model_case(2, 'x-times-below-quantum-pp1', m, expect=(0, 1, 2), msg=r'forward_s|quantum|1 ns',
               extra=('--pp', '1'), note='every layer 0.1 ns: rounds to 0 on the 1 ns quantum')
    m = unet_model(11, fwd=lambda i: 1e-10)
    model_case(2, 'x-times-below-quantum-tuned', m, expect=(0, 1, 2), msg=r'forward_s|quantum|1 ns')
    mz = unet_model(11, fwd=lambda i: 1e-10, params=0, act=0, out=0)
    for sk in mz['skips']:
        sk['bytes_per_sample'] = 1

    def zsetup(d):
        wj(d + '/model.json', mz)
        wj(d + '/cluster.json', cluster_doc(dpn=2, bw=1e15, lat=0.0))
    for ex in (['--pp', '2'], ['--pp', '2', '--dp', '1', '--split-backward']):
        case(2, 'x-zero-cost-model-fast-links%s' % ''.join(ex).replace('--', '_'),
             ['plan', '--model', 'model.json', '--cluster', 'cluster.json', '-o', 'plan.json'] + ex,
             expect=(0, 1, 2), msg=r'forward_s|quantum|1 ns', setup=zsetup, outputs=('plan.json',),
             note='0.1 ns layers, zero bytes, zero-latency 1e15 B/s links: iteration rounds to 0 s')
    cluster_case(2, 'x-65536-devices-gb-2p24', cluster_doc(dpn=1, nodes=65536), expect=(0, 1, 2), msg=None,
                 extra=('--global-batch', str(2 ** 24), '--pp', '4'), note='65536 devices at the global-batch limit')
    model_case(1, 'm-4096-layers-tuned', unet_model(4096), expect=(0,), msg=None, extra=('--global-batch', '64'),
               note='layer limit, everything searched (docs: 15 s CPU on release)')
    model_case(1, 'm-name-escape-codes', tiny_with(('name', 'x\x1b[2J\x1b]0;pwned\x07\r\x08y')), expect=(0, 2),
               msg=r'model\.json', post=inj_post, note='terminal escapes in the model name')


def zero_time_plans():
    """Class 4: a plan whose every time is 0; replays on other clusters."""
    # ---- class 4: a plan whose every time is 0
    def all_zero(d):
        def z(x):
            if isinstance(x, dict):
                return {k: (0.0 if k.endswith('_s') and isinstance(v, (int, float)) and not isinstance(v, bool)
                            and k != 'time_quantum_s' else z(v)) for k, v in x.items()}
            if isinstance(x, list):
                return [z(v) for v in x]
            return x
        for k in ('stages', 'transfers', 'schedule', 'devices'):
            d[k] = z(d[k])
    for bf in ('pp2.json', 'pp2dp1.json'):
        tag = 'p-all-times-zero-' + bf[:-5]
        corrupt_case(tag, all_zero, cmds=('simulate', 'diff', 'export-html'), expect=(0, 1, 2), basefn=bf,
                     note='every stage, transfer and op time 0: iteration 0 s (dp 1) or all-reduce only')

        def zs(d, bf=bf):
            doc = base(bf)
            all_zero(doc)
            wj(d + '/bad.json', doc, indent=1)
            shutil.copy(cfg.base + '/' + bf, d + '/good.json')
        case(4, tag + '-simulate-text', ['simulate', 'bad.json'], expect=(0, 1, 2), setup=zs, msg=r'bad\.json')
        case(4, tag + '-diff-table', ['diff', 'bad.json', 'good.json', '--fail-if-slower', '5',
                                      '--fail-if-more-traffic', '5'], expect=(0, 2, 4), setup=zs, msg=r'bad\.json')
        case(4, tag + '-diff-linkscale', ['diff', 'good.json', 'bad.json', '--link-scale', '1000', '--json'],
             expect=(0, 2, 4), setup=zs, msg=r'bad\.json')
    # plan for 2 nodes replayed on a 1-node cluster
    case(4, 'p-simulate-2n-plan-on-1n-cluster', ['simulate', cfg.base + '/pp4-2n.json', '--cluster', DGX],
         expect=(0, 2), msg=r'rank|node|devices|cluster')
    case(4, 'p-simulate-on-hier-overlap-cluster', ['simulate', cfg.base + '/pp4-2n.json', '--cluster', 'c.json', '--json'],
         expect=(0, 2), msg=r'c\.json|type|devices',
         setup=lambda d: wj(d + '/c.json', dict(cluster_doc(dpn=8, nodes=2), overlap_comm=True,
                                                  allreduce='hierarchical')))
    case(4, 'p-validate-scaled-plan', ['validate', cfg.base + '/scaled.json', '--model', TINY, '--cluster', DGX],
         expect=(0,))
    case(4, 'p-diff-scaled-linkscale-past-limit', ['diff', cfg.base + '/scaled.json', cfg.base + '/pp2.json',
                                                     '--link-scale', '0.001', '--json'], expect=(0, 2),
         msg=r'scale|0\.001', note='plan link_scale 0.5 x 0.001 = 0.0005, below the 1/1000 limit')
    case(4, 'p-export-html-compare-other-cluster', ['export', cfg.base + '/pp2.json', '--format', 'html', '--compare',
                                                    cfg.base + '/atlas.json', '--compare', cfg.base + '/pp4-2n.json', '-o',
                                                    'o.html'], expect=(0, 2), outputs=('o.html',))


def injected_names():
    """Names that need escaping, through every export."""
    # ---- names that need escaping, through every export
    for nm, args, outs in [
            ('inj-plan-summary', ['plan', '--model', 'model.json', '--cluster', DGX, '--pp', '2', '-o', 'p2.json'],
             ('p2.json',)),
            ('inj-export-dot', ['export', 'plan.json', '--format', 'dot', '--model', 'model.json', '-o', 'o.dot'],
             ('o.dot',)),
            ('inj-export-html', ['export', 'plan.json', '--format', 'html', '--compare', 'other.json', '-o', 'o.html'],
             ('o.html',)),
            ('inj-export-csv', ['export', 'plan.json', '--format', 'torch-csv', '-o', 'o.csv'],
             ('o.csv', 'o.stages.json')),
            ('inj-diff-html', ['diff', 'other.json', 'plan.json', '--format', 'html', '-o', 'o.html'], ('o.html',)),
            ('inj-diff-table', ['diff', 'other.json', 'plan.json', '--color', 'always'], ()),
            ('inj-simulate-trace', ['simulate', 'plan.json', '--trace', 't.json', '-o', 's.txt'], ('t.json', 's.txt')),
            ('inj-validate', ['validate', 'plan.json', '--model', 'model.json', '--cluster', DGX], ())]:
        case(4, nm, args, expect=(0,), setup=setup_injection, outputs=outs, post=inj_post,
             note='layer/skip/model names with quotes, backslash, newline, <script>, comma, ESC')


def more_options():
    """Class 3: more options."""
    # ---- class 3 more
    plan_case(3, 'o--activation-budget=1.0', ['--activation-budget', '1.0', '--pp', '2'], (0,),
              note='fraction 1.0 (the whole usable memory)')
    plan_case(3, 'o--exhaustive-2n', ['--exhaustive'], (0,), cluster=DGX2)
    plan_case(3, 'o--explain-stats-quiet', ['--explain', '--stats', '--quiet', '--split-backward'], (0,))
    plan_case(3, 'o--trace-stdout', ['--trace', '-', '--pp', '2'], (0,))
    plan_case(3, 'o--solver-nodes=1-exhaustive', ['--solver-nodes', '1', '--exhaustive', '--split-backward'], (0,))
    for v in ('1e-300', '5e-324', '-0'):
        case(3, 'd--fail-if-slower=%s' % v, ['diff', cfg.base + '/pp2.json', cfg.base + '/pp4.json', '--fail-if-slower', v],
             expect=(0, 2, 4), msg=r'slower')
    plan_case(3, 'o--global-batch=2p24-pp1-dp8', ['--global-batch', str(2 ** 24), '--pp', '1', '--dp', '8'], (1, 2),
              msg=r'4096|microbatch')


def cases():
    """The extras of the second round of the first catalogue."""
    for part in (times_below_quantum, zero_time_plans, injected_names, more_options):
        part()
