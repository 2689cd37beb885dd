"""What every part of the hostile catalogue shares: where things are, the case list, and the
helpers that write inputs and register cases (scripts/hostile_catalogue.py runs them)."""
import copy
import json
import os
import re
import shutil
import subprocess
import sys

MAIN = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROF = MAIN + '/profiles'
TINY = PROF + '/models/tiny-unet.json'
SD2 = PROF + '/models/sd2-unet-512.json'
DGX = PROF + '/clusters/dgx1-v100-32gb-1n.json'
DGX2 = PROF + '/clusters/dgx1-v100-32gb-2n.json'
ATLAS = PROF + '/clusters/atlas800-910a-1n.json'
CPU = PROF + '/clusters/cpu-localhost.json'
TIMEOUT = 300

SAN = re.compile(r'AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|'
                 r'SUMMARY: \w+Sanitizer')
NANINF = re.compile(rb'(?<![A-Za-z_])(nan|-nan|NaN|-?inf|-?Infinity|-?INF)(?![A-Za-z_])')


class Config:
    """Set by main(): the binary under test, the Release binary, the output directories."""
    bin = os.path.join(MAIN, 'build-asan', 'pulse-plan')
    rel = os.path.join(MAIN, 'build', 'pulse-plan')
    here = None   # --out
    cases = None  # here/cases: one directory per case
    base = None   # cases/_base: the base plans, made once by the binary under test


cfg = Config()
CASE_LIST = []


def case(cls, name, args, expect=(0, 1, 2), msg=None, setup=None, outputs=(), timeout=TIMEOUT,
         note='', stdin=None, post=None, run=None):
    """args: list of str/bytes; '{d}' is replaced by the case dir. expect: exit codes that are
    right for this input. msg: regex the stderr (or stdout for validate) must match when rc != 0.
    outputs: files (relative) the command may create/replace on success. post: extra check fn.
    run: how to run the command instead of plain subprocess.run (runner.py: signals, pipes)."""
    CASE_LIST.append(dict(cls=cls, name=name, args=args, expect=tuple(expect), msg=msg,
                          setup=setup, outputs=tuple(outputs), timeout=timeout, note=note,
                          stdin=stdin, post=post, run=run))


# ---------------------------------------------------------------- inputs
def load(p):
    with open(p) as f:
        return json.load(f)


TINY_J = load(TINY)
DGX_J = load(DGX)


def wj(path, obj, **kw):
    with open(path, 'w') as f:
        json.dump(obj, f, **kw)


def wb(path, data):
    with open(path, 'wb') as f:
        f.write(data if isinstance(data, bytes) else data.encode())


class _Del:
    pass


DELETE = _Del()


def setp(doc, path, value):
    """path like 'layers.0.params' ; value DELETE removes the key."""
    keys = path.split('.')
    cur = doc
    for k in keys[:-1]:
        cur = cur[int(k)] if isinstance(cur, list) else cur[k]
    k = keys[-1]
    if isinstance(cur, list):
        k = int(k)
    if value is DELETE:
        del cur[k]
    else:
        cur[k] = value
    return doc


def tiny_with(*mods):
    d = copy.deepcopy(TINY_J)
    for p, v in mods:
        setp(d, p, v)
    return d


def dgx_with(*mods):
    d = copy.deepcopy(DGX_J)
    for p, v in mods:
        setp(d, p, v)
    return d


def unet_model(n, skips='nested', dev='V100-SXM2', mbs=(1, 2), fwd=lambda i: 0.001, act=1 << 20,
               out=1 << 18, params=1000, name=None):
    layers = []
    for i in range(n):
        f = fwd(i)
        layers.append({'name': 'l%d' % i, 'params': params,
                       'forward_s': {dev: [f * m for m in mbs]},
                       'backward_s': {dev: [2 * f * m for m in mbs]},
                       'activation_bytes_per_sample': act, 'output_bytes_per_sample': out})
    sk = []
    if skips == 'nested':
        for i in range(n // 2 - 1):
            sk.append({'producer': 'l%d' % i, 'consumer': 'l%d' % (n - 1 - i),
                       'bytes_per_sample': out})
    return {'schema': 'pulse.model/v1', 'name': name or 'unet-%d' % n,
            'provenance': {'method': 'hand-written', 'source': 'hostile test'},
            'timing': {'microbatch_sizes': list(mbs), 'device_types': [dev]},
            'layers': layers, 'skips': sk}


def named_model(names, skip_name, skip_bytes, model_name):
    """unet_model with these layer names (each also its kind) and nested skips between them,
    skip i named skip_name % i."""
    m = unet_model(len(names))
    for layer, name in zip(m['layers'], names):
        layer['name'] = name
        layer['kind'] = name
    n = len(names)
    m['skips'] = [{'producer': names[i], 'consumer': names[n - 1 - i],
                   'bytes_per_sample': skip_bytes, 'name': skip_name % i} for i in range(n // 2 - 1)]
    m['name'] = model_name
    return m


def cluster_doc(dpn=2, nodes=1, bw=1e10, lat=1e-5, mem=32 << 30, res=0, dev='V100-SXM2',
                inter=True):
    links = {'L': {'bandwidth_bytes_per_s': bw, 'latency_s': lat}}
    doc = {'schema': 'pulse.cluster/v1', 'name': 'c%dx%d' % (nodes, dpn),
           'provenance': {'method': 'hand-written', 'source': 'hostile test'},
           'device': {'type': dev, 'memory_bytes': mem, 'reserved_bytes': res},
           'devices_per_node': dpn, 'nodes': nodes, 'link_classes': links,
           'intra_node': [['X' if a == b else 'L' for b in range(dpn)] for a in range(dpn)]}
    if inter:
        doc['inter_node'] = 'L'
    return doc


# ---------------------------------------------------------------- case shapes
def model_case(cls, name, doc=None, raw=None, extra=(), expect=(2,), msg=r'model\.json.*\$',
               cluster=DGX, note='', timeout=TIMEOUT, post=None):
    def setup(d):
        if raw is not None:
            wb(d + '/model.json', raw)
        else:
            wj(d + '/model.json', doc, indent=1)
    case(cls, name, ['plan', '--model', 'model.json', '--cluster', cluster, '-o', 'plan.json',
                     *extra],
         expect=expect, msg=msg, setup=setup, outputs=('plan.json',), note=note, timeout=timeout,
         post=post)


def cluster_case(cls, name, doc=None, raw=None, extra=(), expect=(2,), msg=r'cluster\.json.*\$',
                 model=TINY, note='', timeout=TIMEOUT):
    def setup(d):
        if raw is not None:
            wb(d + '/cluster.json', raw)
        else:
            wj(d + '/cluster.json', doc, indent=1)
    case(cls, name, ['plan', '--model', model, '--cluster', 'cluster.json', '-o', 'plan.json',
                     *extra],
         expect=expect, msg=msg, setup=setup, outputs=('plan.json',), note=note, timeout=timeout)


def plan_case(cls, name, extra, expect, msg=None, model=TINY, cluster=DGX, note='',
              timeout=TIMEOUT):
    case(cls, name, ['plan', '--model', model, '--cluster', cluster, '-o', 'plan.json', *extra],
         expect=expect, msg=msg, outputs=('plan.json',), note=note, timeout=timeout)


# ---------------------------------------------------------------- base plans
BASE_SPECS = {
    'pp2.json': ['plan', '--model', TINY, '--cluster', DGX, '--pp', '2', '-q'],
    'pp4.json': ['plan', '--model', TINY, '--cluster', DGX, '--pp', '4', '-q'],
    'pp2-split.json': ['plan', '--model', TINY, '--cluster', DGX, '--pp', '2', '--split-backward',
                       '-q'],
    'pp2-1f1b.json': ['plan', '--model', TINY, '--cluster', DGX, '--pp', '2', '--strategy', '1f1b',
                      '-q'],
    'pp4-2n.json': ['plan', '--model', TINY, '--cluster', DGX2, '--pp', '4', '-q'],
    'atlas.json': ['plan', '--model', TINY, '--cluster', ATLAS, '--pp', '2', '-q'],
    'pp2dp1.json': ['plan', '--model', TINY, '--cluster', DGX, '--pp', '2', '--dp', '1', '-q'],
    'scaled.json': ['plan', '--model', TINY, '--cluster', DGX, '--pp', '2', '--link-scale', '0.5',
                    '--compute-scale', '2', '-q'],
}


def make_bases():
    """The plans the corruption cases start from, made once by the binary under test."""
    os.makedirs(cfg.base, exist_ok=True)
    for fn, args in BASE_SPECS.items():
        p = cfg.base + '/' + fn
        if os.path.exists(p):
            continue
        r = subprocess.run(['nice', '-n', '10', 'timeout', str(TIMEOUT), cfg.bin] + args +
                           ['-o', p], capture_output=True)
        if r.returncode != 0:
            sys.exit('base plan %s failed: %s' % (fn, r.stderr.decode(errors='replace')))


def base(fn):
    return load(cfg.base + '/' + fn)


def corrupt_args(c, basefn):
    """The command and the default exit codes of one corruption case per command `c`."""
    cluster = ATLAS if basefn == 'atlas.json' else (DGX2 if basefn == 'pp4-2n.json' else DGX)
    table = {
        'validate': (['validate', 'bad.json', '--model', TINY, '--cluster', cluster], (1, 2)),
        'simulate': (['simulate', 'bad.json', '--json', '-o', 'out.json', '--trace',
                      'trace.json'], (2,)),
        'export': (['export', 'bad.json', '--format', 'torch-csv', '-o', 'out.csv'], (2,)),
        'export-html': (['export', 'bad.json', '--format', 'html', '-o', 'out.html',
                         '--compare', 'good.json'], (2,)),
        'export-dot': (['export', 'bad.json', '--format', 'dot', '-o', 'out.dot', '--model',
                        TINY], (2,)),
    }
    return table.get(c, (['diff', 'good.json', 'bad.json', '--format', 'html', '-o',
                          'out.html'], (2,)))


def corrupt_case(name, mutate, cmds=('validate', 'simulate', 'export', 'diff'), expect=None,
                 raw=None, basefn='pp2.json', note='', ok_note=None, cls=4):
    """One case per command on a mutated copy of a real plan."""
    for c in cmds:
        def setup(d, mutate=mutate, raw=raw, basefn=basefn):
            if raw is not None:
                data = raw(open(cfg.base + '/' + basefn, 'rb').read()) if callable(raw) else raw
                wb(d + '/bad.json', data)
            else:
                doc = base(basefn)
                r = mutate(doc)
                wj(d + '/bad.json', doc if r is None else r, indent=1)
            shutil.copy(cfg.base + '/' + basefn, d + '/good.json')
        args, ex = corrupt_args(c, basefn)
        if expect is not None:
            ex = expect
        post = None
        if ok_note and c in ok_note:
            ex = tuple(ex) + (0,)

            def post(d, r, fails, quest, t=ok_note[c]):
                if r.returncode == 0:
                    quest.append('accepted (exit 0): ' + t)
        case(cls, '%s-%s' % (name, c), args, expect=ex, msg=r'bad\.json', setup=setup,
             outputs=('out.json', 'trace.json', 'out.csv', 'out.stages.json', 'out.html',
                      'out.dot'),
             note=note, post=post)
