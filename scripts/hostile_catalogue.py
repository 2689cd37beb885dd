#!/usr/bin/env python3
"""Hostile-input catalogue for pulse-plan: 725 malformed, extreme and awkward inputs, each run
on a sanitized build and judged. Written as a new user would, from the README, docs/,
--help, profiles/ and schema/ only, without reading the tests (issue 16).

  scripts/hostile_catalogue.py [--bin PATH] [--release PATH] [--out DIR] [--only SUBSTR]
                               [--timing]

--bin: the binary under test, normally the ASan + UBSan build (default build-asan/pulse-plan,
  which scripts/setup.sh --test builds); --release: the Release binary, for --timing
  comparisons (default build/pulse-plan); --out: where each case gets its directory
  (default a new temporary one), NNN-name/ with its inputs, cmd.txt (the command, with the
  cd), stdout.txt, stderr.txt and result.json; a summary goes to OUT/results.json.

A case FAILS on: a sanitizer report; exit 3 or a signal; a run over 300 s; nan/inf in any
output or a null where a figure belongs; a file created, changed or removed after a non-zero
exit; an input changed; an exit code wrong for the input (an unexpected success); an error
message that names neither the file, the JSON path nor the option. Runs one case at a time
under `nice -n 10 timeout 300`. Exit status 1 when any case fails.
"""
import copy, hashlib, json, os, re, shutil, stat, subprocess, sys, tempfile, time

MAIN = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = None  # --out
BIN = os.path.join(MAIN, 'build-asan', 'pulse-plan')
REL = os.path.join(MAIN, 'build', 'pulse-plan')
CASES = None
PROF = MAIN + '/profiles'
TINY = PROF + '/models/tiny-unet.json'
SD2 = PROF + '/models/sd2-unet-512.json'
DGX = PROF + '/clusters/dgx1-v100-32gb-1n.json'
DGX2 = PROF + '/clusters/dgx1-v100-32gb-2n.json'
ATLAS = PROF + '/clusters/atlas800-910a-1n.json'
CPU = PROF + '/clusters/cpu-localhost.json'
TIMEOUT = 300

SAN = re.compile(r'AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|runtime error:|SUMMARY: \w+Sanitizer')
NANINF = re.compile(rb'(?<![A-Za-z_])(nan|-nan|NaN|-?inf|-?Infinity|-?INF)(?![A-Za-z_])')

CASE_LIST = []


def case(cls, name, args, expect=(0, 1, 2), msg=None, setup=None, outputs=(), timeout=TIMEOUT,
         note='', stdin=None, post=None):
    """args: list of str/bytes; '{d}' is replaced by the case dir. expect: exit codes that are
    right for this input. msg: regex the stderr (or stdout for validate) must match when rc != 0.
    outputs: files (relative) the command may create/replace on success. post: extra check fn."""
    CASE_LIST.append(dict(cls=cls, name=name, args=args, expect=tuple(expect), msg=msg,
                          setup=setup, outputs=tuple(outputs), timeout=timeout, note=note,
                          stdin=stdin, post=post))


# ---------------------------------------------------------------- helpers
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


class _Del:
    pass


DELETE = _Del()


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


def model_case(cls, name, doc=None, raw=None, extra=(), expect=(2,), msg=r'model\.json.*\$', cluster=DGX,
               note='', timeout=TIMEOUT, post=None):
    def setup(d):
        if raw is not None:
            wb(d + '/model.json', raw)
        else:
            wj(d + '/model.json', doc, indent=1)
    case(cls, name, ['plan', '--model', 'model.json', '--cluster', cluster, '-o', 'plan.json', *extra],
         expect=expect, msg=msg, setup=setup, outputs=('plan.json',), note=note, timeout=timeout, post=post)


def dup_post(d, r, fails, quest):
    if r.returncode == 0:
        try:
            nm = json.load(open(d + '/plan.json'))['inputs']['model']['name']
        except Exception:
            nm = '?'
        quest.append('duplicate key accepted silently (model name in the plan: %r)' % nm)


def cluster_case(cls, name, doc=None, raw=None, extra=(), expect=(2,), msg=r'cluster\.json.*\$', model=TINY,
                 note='', timeout=TIMEOUT):
    def setup(d):
        if raw is not None:
            wb(d + '/cluster.json', raw)
        else:
            wj(d + '/cluster.json', doc, indent=1)
    case(cls, name, ['plan', '--model', model, '--cluster', 'cluster.json', '-o', 'plan.json', *extra],
         expect=expect, msg=msg, setup=setup, outputs=('plan.json',), note=note, timeout=timeout)


def plan_case(cls, name, extra, expect, msg=None, model=TINY, cluster=DGX, note='', timeout=TIMEOUT):
    case(cls, name, ['plan', '--model', model, '--cluster', cluster, '-o', 'plan.json', *extra],
         expect=expect, msg=msg, outputs=('plan.json',), note=note, timeout=timeout)


def unet_model(n, skips='nested', dev='V100-SXM2', mbs=(1, 2), fwd=lambda i: 0.001, act=1 << 20, out=1 << 18,
               params=1000, name=None):
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
            sk.append({'producer': 'l%d' % i, 'consumer': 'l%d' % (n - 1 - i), 'bytes_per_sample': out})
    return {'schema': 'pulse.model/v1', 'name': name or 'unet-%d' % n,
            'provenance': {'method': 'hand-written', 'source': 'hostile test'},
            'timing': {'microbatch_sizes': list(mbs), 'device_types': [dev]},
            'layers': layers, 'skips': sk}


def cluster_doc(dpn=2, nodes=1, bw=1e10, lat=1e-5, mem=32 << 30, res=0, dev='V100-SXM2', inter=True):
    links = {'L': {'bandwidth_bytes_per_s': bw, 'latency_s': lat}}
    doc = {'schema': 'pulse.cluster/v1', 'name': 'c%dx%d' % (nodes, dpn),
           'provenance': {'method': 'hand-written', 'source': 'hostile test'},
           'device': {'type': dev, 'memory_bytes': mem, 'reserved_bytes': res},
           'devices_per_node': dpn, 'nodes': nodes, 'link_classes': links,
           'intra_node': [['X' if a == b else 'L' for b in range(dpn)] for a in range(dpn)]}
    if inter:
        doc['inter_node'] = 'L'
    return doc


# base plans, made once by the sanitized binary into cases/_base (main sets it)
BASE = None


def make_bases():
    os.makedirs(BASE, exist_ok=True)
    specs = {
        'pp2.json': ['plan', '--model', TINY, '--cluster', DGX, '--pp', '2', '-q'],
        'pp4.json': ['plan', '--model', TINY, '--cluster', DGX, '--pp', '4', '-q'],
        'pp2-split.json': ['plan', '--model', TINY, '--cluster', DGX, '--pp', '2', '--split-backward', '-q'],
        'pp2-1f1b.json': ['plan', '--model', TINY, '--cluster', DGX, '--pp', '2', '--strategy', '1f1b', '-q'],
        'pp4-2n.json': ['plan', '--model', TINY, '--cluster', DGX2, '--pp', '4', '-q'],
        'atlas.json': ['plan', '--model', TINY, '--cluster', ATLAS, '--pp', '2', '-q'],
        'pp2dp1.json': ['plan', '--model', TINY, '--cluster', DGX, '--pp', '2', '--dp', '1', '-q'],
        'scaled.json': ['plan', '--model', TINY, '--cluster', DGX, '--pp', '2', '--link-scale', '0.5',
                        '--compute-scale', '2', '-q'],
    }
    for fn, args in specs.items():
        p = BASE + '/' + fn
        if os.path.exists(p):
            continue
        r = subprocess.run(['nice', '-n', '10', 'timeout', str(TIMEOUT), BIN] + args + ['-o', p],
                           capture_output=True)
        if r.returncode != 0:
            sys.exit('base plan %s failed: %s' % (fn, r.stderr.decode(errors='replace')))


def base(fn):
    return load(BASE + '/' + fn)


def corrupt_case(name, mutate, cmds=('validate', 'simulate', 'export', 'diff'), expect=None, raw=None,
                 basefn='pp2.json', note='', ok_note=None):
    """One case per command on a mutated copy of a real plan."""
    for c in cmds:
        def setup(d, mutate=mutate, raw=raw, basefn=basefn):
            if raw is not None:
                data = raw(open(BASE + '/' + basefn, 'rb').read()) if callable(raw) else raw
                wb(d + '/bad.json', data)
            else:
                doc = base(basefn)
                r = mutate(doc)
                wj(d + '/bad.json', doc if r is None else r, indent=1)
            shutil.copy(BASE + '/' + basefn, d + '/good.json')
        if c == 'validate':
            args = ['validate', 'bad.json', '--model', TINY, '--cluster',
                    ATLAS if basefn == 'atlas.json' else (DGX2 if basefn == 'pp4-2n.json' else DGX)]
            ex = expect if expect is not None else (1, 2)
        elif c == 'simulate':
            args = ['simulate', 'bad.json', '--json', '-o', 'out.json', '--trace', 'trace.json']
            ex = expect if expect is not None else (2,)
        elif c == 'export':
            args = ['export', 'bad.json', '--format', 'torch-csv', '-o', 'out.csv']
            ex = expect if expect is not None else (2,)
        elif c == 'export-html':
            args = ['export', 'bad.json', '--format', 'html', '-o', 'out.html', '--compare', 'good.json']
            ex = expect if expect is not None else (2,)
        elif c == 'export-dot':
            args = ['export', 'bad.json', '--format', 'dot', '-o', 'out.dot', '--model', TINY]
            ex = expect if expect is not None else (2,)
        else:
            args = ['diff', 'good.json', 'bad.json', '--format', 'html', '-o', 'out.html']
            ex = expect if expect is not None else (2,)
        post = None
        if ok_note and c in ok_note:
            ex = tuple(ex) + (0,)

            def post(d, r, fails, quest, t=ok_note[c]):
                if r.returncode == 0:
                    quest.append('accepted (exit 0): ' + t)
        case(4, '%s-%s' % (name, c), args, expect=ex, msg=r'bad\.json', setup=setup,
             outputs=('out.json', 'trace.json', 'out.csv', 'out.stages.json', 'out.html', 'out.dot'),
             note=note, post=post)


# ================================================================ class 1: malformed profiles
def class1():
    C = 1
    model_case(C, 'm-empty-file', raw=b'', msg=r'model\.json')
    model_case(C, 'm-not-json', raw=b'hello world', msg=r'model\.json')
    model_case(C, 'm-top-array', raw=b'[]', msg=r'model\.json')
    model_case(C, 'm-top-null', raw=b'null', msg=r'model\.json')
    model_case(C, 'm-top-number', raw=b'1e999', msg=r'model\.json')
    model_case(C, 'm-truncated', raw=json.dumps(TINY_J).encode()[:1000], msg=r'model\.json')
    model_case(C, 'm-bom', raw=b'\xef\xbb\xbf' + json.dumps(TINY_J).encode(), expect=(0, 2), msg=r'model\.json',
               note='BOM: either accepted or refused with a message')
    model_case(C, 'm-utf16', raw=json.dumps(TINY_J).encode('utf-16'), msg=r'model\.json')
    model_case(C, 'm-trailing-garbage', raw=json.dumps(TINY_J).encode() + b'\n}{ garbage', msg=r'model\.json')
    model_case(C, 'm-two-documents', raw=json.dumps(TINY_J).encode() + json.dumps(TINY_J).encode(), msg=r'model\.json')
    model_case(C, 'm-nul-byte-inside', raw=json.dumps(TINY_J).encode().replace(b'"tiny-unet"', b'"tiny\x00unet"'),
               msg=r'model\.json')
    s = json.dumps(TINY_J)
    model_case(C, 'm-dup-key-name', raw=s.replace('"name": "tiny-unet"', '"name": "tiny-unet", "name": "other"', 1),
               expect=(0, 2), msg=r'model\.json', note='duplicate keys should be refused or at least be deterministic',
               post=dup_post)
    model_case(C, 'm-dup-key-layers', raw=s.replace('"skips":', '"layers": [], "skips":', 1), msg=r'model\.json',
               expect=(2,))
    model_case(C, 'm-dup-key-params', raw=s.replace('"params": 1000000', '"params": 1000000, "params": -5', 1),
               msg=r'model\.json')
    model_case(C, 'm-bare-NaN', raw=s.replace('0.0018', 'NaN', 1), msg=r'model\.json')
    model_case(C, 'm-bare-Infinity', raw=s.replace('0.0018', 'Infinity', 1), msg=r'model\.json')
    model_case(C, 'm-number-1e999', raw=s.replace('0.0018', '1e999', 1), msg=r'model\.json')
    model_case(C, 'm-hex-number', raw=s.replace('"params": 1000000', '"params": 0x10', 1), msg=r'model\.json')
    model_case(C, 'm-leading-zero-number', raw=s.replace('"params": 1000000', '"params": 0100', 1), msg=r'model\.json')
    model_case(C, 'm-comments', raw=b'// c\n' + s.encode(), msg=r'model\.json')
    model_case(C, 'm-single-quotes', raw=s.replace('"schema"', "'schema'", 1), msg=r'model\.json')
    model_case(C, 'm-bad-utf8-in-string', raw=s.encode().replace(b'tiny-unet', b'tiny-\xff\xfeunet', 1),
               expect=(0, 2), msg=r'model\.json', note='invalid UTF-8 in the name: refuse, or accept and write valid JSON')
    model_case(C, 'm-lone-surrogate', raw=s.replace('tiny-unet', 'tiny-\\ud800unet', 1), expect=(0, 2),
               msg=r'model\.json', note='lone surrogate escape in name')
    model_case(C, 'm-deep-array', raw=s.replace('"dtype": "fp16"', '"dtype": ' + '[' * 200000 + ']' * 200000, 1),
               msg=r'model\.json', note='200000-deep nesting (stack exhaustion?)')
    model_case(C, 'm-deep-object', raw=(b'{"a":' * 100000) + b'1' + b'}' * 100000, msg=r'model\.json')
    model_case(C, 'm-deep-in-layer', raw=s.replace('"kind": "conv"', '"kind": ' + '[' * 5000 + ']' * 5000, 1),
               msg=r'model\.json')
    model_case(C, 'm-schema-v2', tiny_with(('schema', 'pulse.model/v2')), msg=r'\$\.schema')
    model_case(C, 'm-schema-missing', tiny_with(('schema', DELETE)), msg=r'schema')
    model_case(C, 'm-schema-cluster', tiny_with(('schema', 'pulse.cluster/v1')), msg=r'\$\.schema')
    model_case(C, 'm-name-empty', tiny_with(('name', '')), msg=r'\$\.name')
    model_case(C, 'm-name-null', tiny_with(('name', None)), msg=r'\$\.name')
    model_case(C, 'm-name-number', tiny_with(('name', 12)), msg=r'\$\.name')
    model_case(C, 'm-name-huge', tiny_with(('name', 'N' * (8 << 20))), expect=(0, 2), msg=r'model\.json',
               note='8 MiB model name')
    model_case(C, 'm-name-unicode', tiny_with(('name', 'мо\u202eдель-\U0001F600-\u0000-"q"\\\n\t</script><b>')),
               expect=(0, 2), msg=r'model\.json', note='RTL override, emoji, NUL, quote, backslash, newline, html')
    model_case(C, 'm-provenance-bad-method', tiny_with(('provenance.method', 'guessed')), msg=r'provenance')
    model_case(C, 'm-provenance-missing', tiny_with(('provenance', DELETE)), msg=r'provenance')
    model_case(C, 'm-unknown-top-key', tiny_with(('bogus', 1)), msg=r'bogus')
    model_case(C, 'm-timing-mbs-empty', tiny_with(('timing.microbatch_sizes', [])), msg=r'microbatch_sizes')
    model_case(C, 'm-timing-mbs-unsorted', tiny_with(('timing.microbatch_sizes', [2, 1])), msg=r'microbatch_sizes')
    model_case(C, 'm-timing-mbs-dup', tiny_with(('timing.microbatch_sizes', [1, 1])), msg=r'microbatch_sizes')
    model_case(C, 'm-timing-mbs-zero', tiny_with(('timing.microbatch_sizes', [0, 2])), msg=r'microbatch_sizes')
    model_case(C, 'm-timing-mbs-neg', tiny_with(('timing.microbatch_sizes', [-1, 2])), msg=r'microbatch_sizes')
    model_case(C, 'm-timing-mbs-float', tiny_with(('timing.microbatch_sizes', [1, 2.5])), msg=r'microbatch_sizes')
    model_case(C, 'm-timing-mbs-huge', tiny_with(('timing.microbatch_sizes', [1, 2 ** 63])), msg=r'microbatch_sizes')
    model_case(C, 'm-timing-mbs-intmax', tiny_with(('timing.microbatch_sizes', [1, 2 ** 31 - 1])),
               expect=(0, 1, 2), msg=r'model\.json|microbatch|global',
               note='second size INT_MAX: times per microbatch at 2^31 samples')
    model_case(C, 'm-device-types-empty', tiny_with(('timing.device_types', [])), msg=r'device_types')
    model_case(C, 'm-device-types-dup', tiny_with(('timing.device_types', ['V100-SXM2', 'V100-SXM2'])),
               msg=r'device_types')
    model_case(C, 'm-layers-empty', tiny_with(('layers', []), ('skips', [])), msg=r'layers')
    model_case(C, 'm-layers-one', tiny_with(('layers', [TINY_J['layers'][0]]), ('skips', [])), msg=r'layers')
    model_case(C, 'm-layers-null', tiny_with(('layers', None)), msg=r'layers')
    model_case(C, 'm-layers-object', tiny_with(('layers', {'a': 1})), msg=r'layers')
    model_case(C, 'm-layer-name-dup', tiny_with(('layers.3.name', 'enc0')), msg=r'layers\[3\]|enc0')
    model_case(C, 'm-layer-name-empty', tiny_with(('layers.3.name', '')), msg=r'layers\[3\]')
    model_case(C, 'm-layer-unknown-key', tiny_with(('layers.3.foo', 1)), msg=r'layers\[3\]')
    model_case(C, 'm-params-negative', tiny_with(('layers.2.params', -1)), msg=r'layers\[2\]\.params')
    model_case(C, 'm-params-float', tiny_with(('layers.2.params', 1.5)), msg=r'layers\[2\]\.params')
    model_case(C, 'm-params-1e308', tiny_with(('layers.2.params', 1e308)), msg=r'layers\[2\]\.params')
    model_case(C, 'm-params-2p64', tiny_with(('layers.2.params', 2 ** 64)), msg=r'layers\[2\]\.params')
    model_case(C, 'm-params-2p40', tiny_with(('layers.2.params', 2 ** 40)), expect=(1, 2),
               msg=r'params|memory|fit|bytes', note='at the documented limit: 16 TiB of state, cannot fit')
    model_case(C, 'm-params-2p40p1', tiny_with(('layers.2.params', 2 ** 40 + 1)), msg=r'layers\[2\]\.params')
    model_case(C, 'm-params-string', tiny_with(('layers.2.params', '1000')), msg=r'layers\[2\]\.params')
    model_case(C, 'm-params-null', tiny_with(('layers.2.params', None)), msg=r'layers\[2\]\.params')
    model_case(C, 'm-params-neg-zero', tiny_with(('layers.2.params', -0.0)), expect=(0, 2), msg=r'params',
               note='-0.0 as an integer count')
    model_case(C, 'm-params-bool', tiny_with(('layers.2.params', True)), msg=r'layers\[2\]\.params')
    model_case(C, 'm-fwd-zero', tiny_with(('layers.4.forward_s.V100-SXM2', [0.0, 0.0])), msg=r'forward_s')
    model_case(C, 'm-fwd-neg', tiny_with(('layers.4.forward_s.V100-SXM2', [-0.001, 0.002])), msg=r'forward_s')
    model_case(C, 'm-fwd-neg-zero', tiny_with(('layers.4.forward_s.V100-SXM2', [-0.0, 0.002])), msg=r'forward_s')
    model_case(C, 'm-fwd-denormal', tiny_with(('layers.4.forward_s.V100-SXM2', [5e-324, 5e-324])),
               expect=(0, 2), msg=r'forward_s', note='smallest positive double: > 0, so valid per schema')
    model_case(C, 'm-fwd-1e308', tiny_with(('layers.4.forward_s.V100-SXM2', [1e308, 1e308])), msg=r'forward_s')
    model_case(C, 'm-fwd-3600', tiny_with(('layers.4.forward_s.V100-SXM2', [3600, 3600])), expect=(0, 1, 2),
               msg=r'forward|seconds|1e\+09', note='at the per-layer limit')
    model_case(C, 'm-fwd-3601', tiny_with(('layers.4.forward_s.V100-SXM2', [3600.5, 3601])), msg=r'forward_s')
    model_case(C, 'm-fwd-str-nan', tiny_with(('layers.4.forward_s.V100-SXM2', ['NaN', 0.002])), msg=r'forward_s')
    model_case(C, 'm-fwd-str-inf', tiny_with(('layers.4.forward_s.V100-SXM2', ['inf', 'Infinity'])), msg=r'forward_s')
    model_case(C, 'm-fwd-short', tiny_with(('layers.4.forward_s.V100-SXM2', [0.001])), msg=r'forward_s')
    model_case(C, 'm-fwd-long', tiny_with(('layers.4.forward_s.V100-SXM2', [0.001, 0.002, 0.003])), msg=r'forward_s')
    model_case(C, 'm-fwd-empty-arr', tiny_with(('layers.4.forward_s.V100-SXM2', [])), msg=r'forward_s')
    model_case(C, 'm-fwd-missing-device', tiny_with(('layers.4.forward_s', {'Ascend-910A': [0.005, 0.009]})),
               msg=r'forward_s|V100')
    model_case(C, 'm-fwd-extra-device', tiny_with(('layers.4.forward_s.TPU', [1, 2])), expect=(0, 2),
               msg=r'forward_s', note='times for a device type not in timing.device_types')
    model_case(C, 'm-fwd-empty-obj', tiny_with(('layers.4.forward_s', {})), msg=r'forward_s')
    model_case(C, 'm-fwd-nonmonotone', tiny_with(('layers.4.forward_s.V100-SXM2', [1.0, 0.000001])), expect=(0, 2),
               msg=r'forward_s', note='microbatch of 2 far faster than 1: odd but not invalid')
    model_case(C, 'm-bwd-null', tiny_with(('layers.4.backward_s', None)), msg=r'backward_s')
    model_case(C, 'm-bwf-0', tiny_with(('layers.4.backward_weight_fraction', 0)), msg=r'backward_weight_fraction',
               extra=('--split-backward',))
    model_case(C, 'm-bwf-1', tiny_with(('layers.4.backward_weight_fraction', 1)), msg=r'backward_weight_fraction',
               extra=('--split-backward',))
    model_case(C, 'm-bwf-tiny', tiny_with(('layers.4.backward_weight_fraction', 5e-324)), expect=(0, 2),
               msg=r'backward_weight_fraction', extra=('--split-backward',), note='denormal but in (0,1)')
    model_case(C, 'm-act-neg', tiny_with(('layers.1.activation_bytes_per_sample', -1)), msg=r'activation_bytes')
    model_case(C, 'm-act-2p40p1', tiny_with(('layers.1.activation_bytes_per_sample', 2 ** 40 + 1)),
               msg=r'activation_bytes')
    model_case(C, 'm-act-float', tiny_with(('layers.1.activation_bytes_per_sample', 1.25)), msg=r'activation_bytes')
    model_case(C, 'm-act-1e308', tiny_with(('layers.1.activation_bytes_per_sample', 1e308)), msg=r'activation_bytes')
    model_case(C, 'm-out-null', tiny_with(('layers.1.output_bytes_per_sample', None)), msg=r'output_bytes')
    model_case(C, 'm-out-missing', tiny_with(('layers.1.output_bytes_per_sample', DELETE)), msg=r'output_bytes')
    model_case(C, 'm-flops-neg', tiny_with(('layers.1.forward_flops_per_sample', -1)), msg=r'flops')
    model_case(C, 'm-skip-missing-producer', tiny_with(('skips.1.producer', 'nope')), msg=r'skips\[1\]')
    model_case(C, 'm-skip-self', tiny_with(('skips.1.consumer', 'enc0')), msg=r'skips\[1\]')
    model_case(C, 'm-skip-backward', tiny_with(('skips.1.producer', 'dec0'), ('skips.1.consumer', 'enc0')),
               msg=r'skips\[1\]')
    model_case(C, 'm-skip-dup', tiny_with(('skips', TINY_J['skips'] + [TINY_J['skips'][1]])), msg=r'skips\[4\]')
    model_case(C, 'm-skip-bytes-zero', tiny_with(('skips.1.bytes_per_sample', 0)), msg=r'skips\[1\]')
    model_case(C, 'm-skip-bytes-2p40p1', tiny_with(('skips.1.bytes_per_sample', 2 ** 40 + 1)), msg=r'skips\[1\]')
    model_case(C, 'm-skip-adjacent', tiny_with(('skips.1.consumer', 'enc1')), expect=(0, 2), msg=r'skips',
               note='skip from a layer to the next one (parallel to the main edge)')
    model_case(C, 'm-skip-crossing', tiny_with(('skips', [
        {'producer': 'enc0', 'consumer': 'dec2', 'bytes_per_sample': 1 << 20},
        {'producer': 'enc1', 'consumer': 'dec0', 'bytes_per_sample': 1 << 20},
        {'producer': 'embed', 'consumer': 'mid1', 'bytes_per_sample': 1 << 20},
        {'producer': 'mid0', 'consumer': 'head', 'bytes_per_sample': 1 << 20}])), expect=(0,),
        msg=None, extra=('--pp', '4'), note='non-nested (crossing) skips: valid, cannot all be local')
    cyc = copy.deepcopy(TINY_J)
    cyc['skips'] += [{'producer': 'head', 'consumer': 'embed', 'bytes_per_sample': 1}]
    model_case(C, 'm-skip-cycle', cyc, msg=r'skips\[4\]')
    model_case(C, 'm-skip-unknown-key', tiny_with(('skips.0.via', 'x')), msg=r'skips\[0\]')
    model_case(C, 'm-carried-missing-producer',
               tiny_with(('carried', [{'name': 't', 'producer': 'nope', 'bytes_per_sample': 8,
                                       'needs_gradient': True}])), msg=r'carried\[0\]')
    model_case(C, 'm-carried-null-producer',
               tiny_with(('carried', [{'name': 't', 'producer': None, 'bytes_per_sample': 8,
                                       'needs_gradient': True}])), expect=(0,), msg=None,
               note='null producer is documented as valid')
    model_case(C, 'm-carried-gradient-string',
               tiny_with(('carried', [{'name': 't', 'producer': 'embed', 'bytes_per_sample': 8,
                                       'needs_gradient': 'yes'}])), msg=r'carried\[0\]')
    model_case(C, 'm-carried-dup-name',
               tiny_with(('carried', [{'name': 't', 'producer': 'embed', 'bytes_per_sample': 8, 'needs_gradient': True},
                                      {'name': 't', 'producer': 'enc0', 'bytes_per_sample': 8,
                                       'needs_gradient': False}])), expect=(0, 2), msg=r'carried',
               note='two carried tensors with one name')
    model_case(C, 'm-carried-last-layer',
               tiny_with(('carried', [{'name': 't', 'producer': 'head', 'bytes_per_sample': 2 ** 40,
                                       'needs_gradient': True}])), expect=(0, 1, 2), msg=r'carried|fit|bytes',
               note='carried tensor produced by the last layer, 1 TiB')
    model_case(C, 'm-time-range-malformed',
               tiny_with(('provenance.assumptions', ['time-range V100-SXM2: x2 to x0.5 (backwards)'])),
               extra=('--compute-scale', 'range-low'), msg=r'time-range|range')
    model_case(C, 'm-time-range-twice',
               tiny_with(('provenance.assumptions', ['time-range V100-SXM2: x0.5 to x2 (a)',
                                                     'time-range V100-SXM2: x0.6 to x3 (b)'])),
               extra=('--compute-scale', 'range-high'), msg=r'time-range|range')
    model_case(C, 'm-time-range-huge',
               tiny_with(('provenance.assumptions', ['time-range V100-SXM2: x1e-300 to x1e300 (wide)'])),
               extra=('--compute-scale', 'range-high'), expect=(2,), msg=r'range|scale|1000',
               note='range ends beyond the 0.001..1000 scale limit')
    model_case(C, 'm-time-range-nan',
               tiny_with(('provenance.assumptions', ['time-range V100-SXM2: xnan to xinf (why)'])),
               extra=('--compute-scale', 'range-low'), msg=r'range')
    model_case(C, 'm-time-range-absent', TINY_J, extra=('--compute-scale', 'range-low'), msg=r'range|time-range',
               note='tiny-unet states no time range')
    # limits on layers
    def big(n, **kw):
        return unet_model(n, **kw)
    model_case(C, 'm-4097-layers', big(4097), expect=(2,), msg=r'4096|layers')
    model_case(C, 'm-4096-layers-pp8', big(4096), extra=('--pp', '8', '--global-batch', '16'), expect=(0,),
               msg=None, note='at the layer limit, fixed pp', timeout=TIMEOUT)
    m = big(200, skips='none')
    m['skips'] = [{'producer': 'l%d' % a, 'consumer': 'l%d' % b, 'bytes_per_sample': 16}
                  for a in range(0, 100) for b in range(100, 141)][:4097]
    model_case(C, 'm-4097-skips', m, expect=(2,), msg=r'4096|skips')
    m = big(200, skips='none')
    m['skips'] = [{'producer': 'l%d' % a, 'consumer': 'l%d' % b, 'bytes_per_sample': 16}
                  for a in range(0, 100) for b in range(100, 141)][:4096]
    model_case(C, 'm-4096-crossing-skips', m, expect=(0, 1), msg=None, extra=('--pp', '4', '--global-batch', '8'),
               note='4096 skips, crossing each other, at the skip limit')

    # ---- cluster
    cluster_case(C, 'c-empty-file', raw=b'', msg=r'cluster\.json')
    cluster_case(C, 'c-truncated', raw=json.dumps(DGX_J).encode()[:500], msg=r'cluster\.json')
    cluster_case(C, 'c-schema-model', dgx_with(('schema', 'pulse.model/v1')), msg=r'\$\.schema')
    cluster_case(C, 'c-mem-zero', dgx_with(('device.memory_bytes', 0), ('device.reserved_bytes', 0)),
                 msg=r'memory_bytes')
    cluster_case(C, 'c-mem-neg', dgx_with(('device.memory_bytes', -1)), msg=r'memory_bytes')
    cluster_case(C, 'c-mem-float', dgx_with(('device.memory_bytes', 3.4e10)), expect=(0, 2), msg=r'memory_bytes',
                 note='integer-valued float 3.4e10')
    cluster_case(C, 'c-mem-2p50p1', dgx_with(('device.memory_bytes', 2 ** 50 + 1)), msg=r'memory_bytes')
    cluster_case(C, 'c-mem-2p50', dgx_with(('device.memory_bytes', 2 ** 50)), expect=(0,), msg=None)
    cluster_case(C, 'c-mem-1e308', dgx_with(('device.memory_bytes', 1e308)), msg=r'memory_bytes')
    cluster_case(C, 'c-mem-string', dgx_with(('device.memory_bytes', '32GiB')), msg=r'memory_bytes')
    cluster_case(C, 'c-reserved-gt-mem', dgx_with(('device.reserved_bytes', 2 ** 36)), msg=r'reserved_bytes',
                 expect=(1, 2))
    cluster_case(C, 'c-reserved-eq-mem', dgx_with(('device.reserved_bytes', 34359738368)), expect=(1, 2),
                 msg=r'reserved|memory|fit')
    cluster_case(C, 'c-reserved-neg', dgx_with(('device.reserved_bytes', -5)), msg=r'reserved_bytes')
    cluster_case(C, 'c-dpn-zero', dgx_with(('devices_per_node', 0)), msg=r'devices_per_node')
    cluster_case(C, 'c-dpn-mismatch', dgx_with(('devices_per_node', 4)), msg=r'intra_node|devices_per_node')
    cluster_case(C, 'c-nodes-zero', dgx_with(('nodes', 0)), msg=r'nodes')
    cluster_case(C, 'c-nodes-neg', dgx_with(('nodes', -8)), msg=r'nodes')
    cluster_case(C, 'c-nodes-8193', dgx_with(('nodes', 8193)), msg=r'nodes|65536|devices')
    cluster_case(C, 'c-nodes-2p62', dgx_with(('nodes', 2 ** 62)), msg=r'nodes')
    cluster_case(C, 'c-nodes-float', dgx_with(('nodes', 1.5)), msg=r'nodes')
    cluster_case(C, 'c-bw-zero', dgx_with(('link_classes.NV1.bandwidth_bytes_per_s', 0)), msg=r'NV1')
    cluster_case(C, 'c-bw-neg', dgx_with(('link_classes.NV1.bandwidth_bytes_per_s', -1e9)), msg=r'NV1')
    cluster_case(C, 'c-bw-denormal', dgx_with(('link_classes.NV1.bandwidth_bytes_per_s', 5e-324)), msg=r'NV1')
    cluster_case(C, 'c-bw-1e16', dgx_with(('link_classes.NV1.bandwidth_bytes_per_s', 1e16)), msg=r'NV1')
    cluster_case(C, 'c-bw-string', dgx_with(('link_classes.NV1.bandwidth_bytes_per_s', '40e9')), msg=r'NV1')
    cluster_case(C, 'c-lat-neg', dgx_with(('link_classes.NV1.latency_s', -1e-6)), msg=r'NV1')
    cluster_case(C, 'c-lat-neg-zero', dgx_with(('link_classes.NV1.latency_s', -0.0)), expect=(0, 2), msg=r'NV1',
                 note='-0.0 latency')
    cluster_case(C, 'c-lat-61', dgx_with(('link_classes.NV1.latency_s', 61)), msg=r'NV1')
    cluster_case(C, 'c-lat-null', dgx_with(('link_classes.NV1.latency_s', None)), msg=r'NV1')
    cluster_case(C, 'c-link-X', dgx_with(('link_classes.X', {'bandwidth_bytes_per_s': 1e9, 'latency_s': 0})),
                 msg=r'X')
    cluster_case(C, 'c-link-empty-name', dgx_with(('link_classes.', {'bandwidth_bytes_per_s': 1e9, 'latency_s': 0})),
                 expect=(0, 2), msg=r'link_classes', note='a link class named ""')
    cluster_case(C, 'c-links-empty', dgx_with(('link_classes', {})), msg=r'link_classes')
    cluster_case(C, 'c-intra-unknown-class', dgx_with(('intra_node.0.1', 'NV9'), ('intra_node.1.0', 'NV9')),
                 msg=r'intra_node\[0\]\[1\]|NV9')
    cluster_case(C, 'c-intra-asym', dgx_with(('intra_node.0.1', 'SYS')), msg=r'intra_node')
    cluster_case(C, 'c-intra-diag', dgx_with(('intra_node.2.2', 'NV1')), msg=r'intra_node')
    cluster_case(C, 'c-intra-offdiag-X', dgx_with(('intra_node.0.1', 'X'), ('intra_node.1.0', 'X')),
                 msg=r'intra_node')
    cluster_case(C, 'c-intra-ragged', dgx_with(('intra_node.3', ['NV2', 'NV1'])), msg=r'intra_node')
    cluster_case(C, 'c-intra-null-row', dgx_with(('intra_node.3', None)), msg=r'intra_node')
    cluster_case(C, 'c-intra-deep', raw=json.dumps(DGX_J).replace('"intra_node": [', '"intra_node": [' + '[' * 100000 + ']' * 100000 + ',', 1).encode(),
                 msg=r'cluster\.json')
    cluster_case(C, 'c-inter-missing', dgx_with(('nodes', 2), ('inter_node', DELETE)), msg=r'inter_node')
    cluster_case(C, 'c-inter-unknown', dgx_with(('nodes', 2), ('inter_node', 'ETH')), msg=r'inter_node')
    cluster_case(C, 'c-inter-X', dgx_with(('nodes', 2), ('inter_node', 'X')), msg=r'inter_node')
    cluster_case(C, 'c-overlap-string', dgx_with(('overlap_comm', 'false')), msg=r'overlap_comm')
    cluster_case(C, 'c-allreduce-bad', dgx_with(('allreduce', 'tree')), msg=r'allreduce')
    cluster_case(C, 'c-device-type-other', dgx_with(('device.type', 'H100')), msg=r'H100|device')
    cluster_case(C, 'c-device-type-empty', dgx_with(('device.type', '')), msg=r'device\.type')
    cluster_case(C, 'c-dup-key-memory', raw=json.dumps(DGX_J).replace('"memory_bytes": 34359738368',
                                                                      '"memory_bytes": 34359738368, "memory_bytes": 1', 1).encode(),
                 msg=r'cluster\.json', note='duplicate key with a different value')
    cluster_case(C, 'c-unknown-key', dgx_with(('gpus', 8)), msg=r'gpus')


# ================================================================ class 2: extreme but valid
def class2():
    C = 2
    cluster_case(C, 'x-mem-1-byte', cluster_doc(mem=1), expect=(1,), msg=r'memory|fit|device')
    cluster_case(C, 'x-mem-2p50', cluster_doc(mem=2 ** 50), expect=(0,), msg=None)
    cluster_case(C, 'x-bw-1', cluster_doc(bw=1.0), expect=(0, 1, 2), msg=r'1e\+09|link|s an iteration',
                 note='slowest link allowed, 1 B/s')
    cluster_case(C, 'x-bw-1e15', cluster_doc(bw=1e15, lat=0.0), expect=(0,), msg=None)
    cluster_case(C, 'x-lat-60', cluster_doc(lat=60.0), expect=(0, 1, 2), msg=r'1e\+09|latency')
    cluster_case(C, 'x-lat-0-bw-max', cluster_doc(lat=0.0, bw=1e15), expect=(0,), msg=None, extra=('--pp', '2'))
    cluster_case(C, 'x-one-device', cluster_doc(dpn=1, nodes=1), expect=(0,), msg=None)
    cluster_case(C, 'x-one-device-pp2', cluster_doc(dpn=1, nodes=1), expect=(1, 2), msg=r'pp|device',
                 extra=('--pp', '2'))
    cluster_case(C, 'x-65536-devices', cluster_doc(dpn=1, nodes=65536), expect=(0, 1, 2), msg=None,
                 extra=('--pp', '2'), note='65536 single-device nodes, pp fixed')
    cluster_case(C, 'x-65537-devices', cluster_doc(dpn=1, nodes=65537), expect=(2,), msg=r'65536|nodes|devices')
    cluster_case(C, 'x-65536-devices-tuned', cluster_doc(dpn=1, nodes=65536), expect=(0, 1, 2), msg=None,
                 note='65536 devices, everything searched (global batch 8/device = 524288)')
    cluster_case(C, 'x-dpn-256', cluster_doc(dpn=256, nodes=1), expect=(0, 1, 2), msg=None,
                 note='256x256 intra_node matrix, tuned')
    cluster_case(C, 'x-dpn-2048', cluster_doc(dpn=2048, nodes=1), expect=(0, 1, 2), msg=None,
                 extra=('--pp', '4'), note='2048x2048 intra_node matrix (4M strings)')
    # models
    m = unet_model(11, fwd=lambda i: 1e-9)
    model_case(C, 'x-all-layers-1ns', m, expect=(0,), msg=None, extra=('--pp', '2'), note='every layer 1 ns')
    m = unet_model(11, fwd=lambda i: 1e-12)
    model_case(C, 'x-all-layers-1ps', m, expect=(0, 2), msg=r'forward_s|quantum|ns',
               note='every layer below the 1 ns time quantum')
    m = unet_model(11, fwd=lambda i: 1800.0 if i == 5 else 1e-9)
    model_case(C, 'x-all-cost-one-layer', m, expect=(0, 2), msg=r'1e\+09|3600', extra=('--global-batch', '16'))
    m = unet_model(12, fwd=lambda i: 1.0 if i == 0 else 1e-6)
    model_case(C, 'x-first-layer-heavy-pp8', m, expect=(0,), msg=None, extra=('--pp', '8'))
    m = unet_model(3)
    model_case(C, 'x-3-layers-pp8', m, expect=(1, 2), msg=r'layers|stages|pp', extra=('--pp', '8'),
               note='3 layers cannot fill 16 V stages')
    m = unet_model(2)
    model_case(C, 'x-2-layers-tuned', m, expect=(0,), msg=None)
    m = unet_model(17)
    model_case(C, 'x-17-layers-pp8', m, expect=(0, 1), msg=r'layers|stages', extra=('--pp', '8'),
               note='odd layer count, 16 stages needed')
    m = unet_model(16, params=0, act=0, out=0)
    for s in m['skips']:
        s['bytes_per_sample'] = 1
    model_case(C, 'x-zero-bytes-zero-params', m, expect=(0,), msg=None, extra=('--pp', '4'))
    m = unet_model(10, out=2 ** 40)
    model_case(C, 'x-1TiB-outputs', m, expect=(1, 2), msg=r'bytes|memory|fit|2\^60|1\.15e\+18')
    m = unet_model(10, mbs=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024))
    model_case(C, 'x-many-mbs', m, expect=(0,), msg=None, note='11 profiled microbatch sizes')
    m = unet_model(10, mbs=(3,))
    model_case(C, 'x-mbs-only-3', m, expect=(0, 1, 2), msg=r'batch|microbatch|divid',
               note='only size 3 profiled (not a power of two)')
    cluster_case(C, 'x-big-reserved', cluster_doc(mem=2 ** 40, res=2 ** 40 - 1), expect=(1,), msg=r'memory|fit')
    cluster_case(C, 'x-overlap-hier-2n', dict(cluster_doc(dpn=4, nodes=2), overlap_comm=True,
                                                 allreduce='hierarchical'), expect=(0,), msg=None)


# ================================================================ class 3: options
def class3():
    C = 3
    bad_ints = [('0', (1, 2)), ('-1', (2,)), ('2147483647', (2,)), ('2147483648', (2,)),
                ('9223372036854775808', (2,)), ('1e309', (2,)), ('nan', (2,)), ('inf', (2,)), ('', (2,)),
                ('abc', (2,)), ('2.5', (2,)), ('0x10', (2,)), (' 4', (0, 2)), ('4abc', (2,))]
    for opt in ('--pp', '--dp', '--microbatch-size', '--global-batch'):
        for v, ex in bad_ints:
            if v in ('0x10', ' 4', '4abc', '2.5') and opt != '--pp':
                continue
            if v == '9223372036854775808' and opt not in ('--pp', '--global-batch'):
                continue
            exx = ex
            if v == '0':
                exx = (2,)
            plan_case(C, 'o%s=%s' % (opt, v or 'EMPTY'), [opt, v], expect=exx,
                      msg=re.escape(opt[2:]) + r'|' + re.escape(opt) + '|' + opt[2:].split('-')[0])
    plan_case(C, 'o--pp=1025', ['--pp', '1025'], (2,), msg=r'1024|pp')
    plan_case(C, 'o--pp=1024-on-8', ['--pp', '1024'], (1, 2), msg=r'pp|devices|1024')
    plan_case(C, 'o--pp=3-on-8', ['--pp', '3'], (0, 1, 2), msg=r'pp|divide')
    plan_case(C, 'o--pp-twice', ['--pp', '2', '--pp', '4'], (2,), msg=r'pp', note='repeated option')
    plan_case(C, 'o--global-batch=2p24', ['--global-batch', str(2 ** 24)], (0, 1, 2), msg=r'global|batch|4096',
              note='at the global-batch limit, tuned on 8 devices')
    plan_case(C, 'o--global-batch=2p24p1', ['--global-batch', str(2 ** 24 + 1)], (2,), msg=r'global')
    plan_case(C, 'o--global-batch=7', ['--global-batch', '7'], (0, 1, 2), msg=r'global|divid',
              note='7 samples: pp 8 x dp 1 with 7 microbatches of 1 is a valid answer')
    plan_case(C, 'o--gb-4097-mb', ['--pp', '2', '--dp', '1', '--microbatch-size', '1', '--global-batch', '4097'],
              (2,), msg=r'4096|microbatch')
    plan_case(C, 'o--gb-4096-mb', ['--pp', '2', '--dp', '1', '--microbatch-size', '1', '--global-batch', '4096'],
              (0,), msg=None, note='at the microbatch limit')
    plan_case(C, 'o--dp-pp-overflow', ['--pp', '1024', '--dp', '2097152'], (2,), msg=r'dp|pp|devices')
    plan_case(C, 'o--zero=2', ['--zero', '2'], (2,), msg=r'zero')
    plan_case(C, 'o--zero=-1', ['--zero', '-1'], (2,), msg=r'zero')
    for opt in ('--compute-scale', '--link-scale'):
        for v, ex in [('0', (2,)), ('-1', (2,)), ('nan', (2,)), ('inf', (2,)), ('1e309', (2,)), ('0.001', (0, 1)),
                      ('0.0009', (2,)), ('1000', (0, 1, 2)), ('1000.0001', (2,)), ('', (2,)), ('1e-320', (2,)),
                      ('range-mid', (2,))]:
            plan_case(C, 'o%s=%s' % (opt, v or 'EMPTY'), [opt, v, '--pp', '2'], ex, msg=re.escape(opt))
    for v, ex in [('0', (2,)), ('-1', (2,)), ('1', (0, 1)), ('1.0000001', (2,)), ('0.5', (0,)), ('5e-324', (1, 2)),
                  ('1e309', (2,)), ('nan', (2,)), ('inf', (2,)), ('8GiB', (0,)), ('8 GiB', (0, 2)), ('8XiB', (2,)),
                  ('99999999999999999999GiB', (2,)), ('16EiB', (2,)), ('1B', (1, 2)), ('0B', (2,)), ('-8GiB', (2,)),
                  ('', (2,)), ('0x10', (2,)), ('1e3', (1, 2)), ('2', (1, 2))]:
        plan_case(C, 'o--activation-budget=%s' % (v or 'EMPTY'), ['--activation-budget', v, '--pp', '2'], ex,
                  msg=r'activation-budget|budget|fit|memory')
    for v, ex in [('0', (0, 2)), ('-1', (2,)), ('2147483648', (0, 2)), ('1e309', (2,)), ('nan', (2,)),
                  ('18446744073709551616', (2,))]:
        plan_case(C, 'o--solver-nodes=%s' % v, ['--solver-nodes', v, '--pp', '2'], ex, msg=r'solver-nodes')
    for v, ex in [('0', (0,)), ('-1', (2,)), ('nan', (2,)), ('inf', (0, 2)), ('1e309', (2,)), ('1e-300', (0, 2)),
                  ('abc', (2,)), ('1e18', (0, 2))]:
        plan_case(C, 'o--solver-time-limit=%s' % v, ['--solver-time-limit', v, '--pp', '2'], ex,
                  msg=r'solver-time-limit')
    plan_case(C, 'o--strategy=bogus', ['--strategy', 'bogus'], (2,), msg=r'strategy')
    plan_case(C, 'o--strategy=PULSE', ['--strategy', 'PULSE'], (0, 2), msg=r'strategy')
    plan_case(C, 'o--family=bogus', ['--family', 'bogus'], (2,), msg=r'family')
    plan_case(C, 'o--family-with-1f1b', ['--family', 'w3', '--strategy', '1f1b'], (2,), msg=r'family|strategy')
    plan_case(C, 'o--family=w3-pp8', ['--family', 'w3', '--pp', '8'], (0, 1, 2), msg=r'layers|stages|w3',
              note='w3 on pp 8 needs 48 stages from 10 layers')
    plan_case(C, 'o-unknown-option', ['--bogus'], (2,), msg=r'bogus')
    plan_case(C, 'o-missing-value', ['--pp'], (2,), msg=r'pp')
    plan_case(C, 'o-extra-positional', ['extra.json'], (2,), msg=r'extra|positional|unrecognised|unrecognized')
    case(C, 'o-no-args', [], expect=(2,), msg=r'usage|command')
    case(C, 'o-unknown-command', ['frobnicate'], expect=(2,), msg=r'frobnicate|command')
    case(C, 'o-plan-no-model', ['plan', '--cluster', DGX], expect=(2,), msg=r'model')
    case(C, 'o-model-twice', ['plan', '--model', TINY, '--model', SD2, '--cluster', DGX], expect=(2,), msg=r'model')
    case(C, 'o-model-empty-string', ['plan', '--model', '', '--cluster', DGX], expect=(2,), msg=r'model')
    case(C, 'o-model-missing-file', ['plan', '--model', 'nope.json', '--cluster', DGX], expect=(2,), msg=r'nope\.json')
    case(C, 'o-model-is-dir', ['plan', '--model', '.', '--cluster', DGX], expect=(2,), msg=r'\.|directory')
    case(C, 'o-model-dev-zero', ['plan', '--model', '/dev/zero', '--cluster', DGX], expect=(2,), msg=r'/dev/zero',
         timeout=6, note='infinite input: must stop at a size limit, not read for ever (release: 6 GB RSS in 10 s)')
    case(C, 'o-model-dev-null', ['plan', '--model', '/dev/null', '--cluster', DGX], expect=(2,), msg=r'/dev/null')

    # Not a case: a named FIFO with no writer blocks in open(2), for pulse-plan as for cat;
    # pipes that have a writer work ('-' below, and /dev/fd/N from the shell's <(...)).
    case(C, 'o-model-stdin', ['plan', '--model', '-', '--cluster', DGX, '-q'], expect=(0, 2), msg=r'-|model',
         stdin=open(TINY, 'rb').read(), note='"-" as the model file')
    # diff options
    def two_plans(d):
        shutil.copy(BASE + '/pp2.json', d + '/a.json')
        shutil.copy(BASE + '/pp4.json', d + '/b.json')
    for opt in ('--fail-if-slower', '--fail-if-more-traffic'):
        for v, ex in [('-1', (0, 2, 4)), ('nan', (2,)), ('inf', (0, 2)), ('1e309', (2,)), ('abc', (2,)), ('', (2,)),
                      ('0', (0, 4)), ('-0', (0, 4))]:
            case(C, 'd%s=%s' % (opt, v or 'EMPTY'), ['diff', 'a.json', 'b.json', opt, v], expect=ex,
                 msg=re.escape(opt) + '|slower|traffic', setup=two_plans)
    case(C, 'd--color=bad', ['diff', 'a.json', 'b.json', '--color', 'rainbow'], expect=(2,), msg=r'color',
         setup=two_plans)
    case(C, 'd--json-and-html', ['diff', 'a.json', 'b.json', '--json', '--format', 'html'], expect=(2,),
         msg=r'json|format', setup=two_plans)
    case(C, 'd--color-with-json', ['diff', 'a.json', 'b.json', '--json', '--color', 'always'], expect=(2,),
         msg=r'color', setup=two_plans)
    case(C, 'd--compute-scale=range-low', ['diff', 'a.json', 'b.json', '--compute-scale', 'range-low'],
         expect=(2,), msg=r'range|compute-scale', setup=two_plans)
    for v in ('0', 'nan', '1e309', '1001'):
        case(C, 'd--link-scale=%s' % v, ['diff', 'a.json', 'b.json', '--link-scale', v], expect=(2,),
             msg=r'link-scale', setup=two_plans)
    case(C, 'd-compute-scale-multiplies-past-limit', ['diff', 'scaled.json', 'scaled.json', '--compute-scale', '1000',
                                                     '--json', '-o', 'o.json'],
         expect=(0, 2), msg=r'scale|1000', outputs=('o.json',),
         setup=lambda d: shutil.copy(BASE + '/scaled.json', d + '/scaled.json'),
         note='plan already at compute_scale 2, x1000 = 2000 beyond the 1000 limit')
    case(C, 'd-one-arg', ['diff', 'a.json'], expect=(2,), msg=r'NEW|two|plan|usage', setup=two_plans)
    case(C, 'd-three-args', ['diff', 'a.json', 'b.json', 'a.json'], expect=(2,), msg=r'a\.json|usage|plan',
         setup=two_plans)
    case(C, 'd-same-file', ['diff', 'a.json', 'a.json', '--fail-if-slower', '0', '--fail-if-more-traffic', '0'],
         expect=(0,), setup=two_plans, note='a plan against itself must not trip a 0% threshold')
    case(C, 's--cluster-other-type', ['simulate', 'a.json', '--cluster', ATLAS], expect=(2,), msg=r'type|Ascend|V100',
         setup=two_plans)
    case(C, 's--cluster-smaller', ['simulate', 'b.json', '--cluster', PROF + '/clusters/emulated-veth-10mbit.json'],
         expect=(2,), msg=r'type|CPU|devices', setup=two_plans)
    case(C, 's--check-good', ['simulate', 'a.json', '--check'], expect=(0,), setup=two_plans)
    case(C, 's-no-plan', ['simulate'], expect=(2,), msg=r'PLAN|plan|usage')
    case(C, 'e--format-bogus', ['export', 'a.json', '--format', 'pdf'], expect=(2,), msg=r'format|pdf',
         setup=two_plans)
    case(C, 'e--format-missing', ['export', 'a.json'], expect=(2,), msg=r'format', setup=two_plans)
    case(C, 'e-torch-csv-stdout-no-stages', ['export', 'a.json', '--format', 'torch-csv'], expect=(0,),
         msg=r'stages', setup=two_plans,
         note='the CSV alone on stdout, with a note that no side file is written (export --help)')
    case(C, 'e-compare-many', ['export', 'a.json', '--format', 'html', '-o', 'o.html'] +
         sum([['--compare', 'b.json'] for _ in range(60)], []), expect=(0, 2), outputs=('o.html',), setup=two_plans,
         note='60 --compare of the same plan')
    case(C, 'e-stages-with-dot', ['export', 'a.json', '--format', 'dot', '--stages', 's.json', '-o', 'o.dot'],
         expect=(0, 2), outputs=('o.dot', 's.json'), setup=two_plans, msg=r'stages',
         note='--stages only applies to torch-csv')
    case(C, 'v-missing-model', ['validate', 'a.json', '--cluster', DGX], expect=(2,), msg=r'model', setup=two_plans)
    case(C, 'v-wrong-model', ['validate', 'a.json', '--model', SD2, '--cluster', DGX], expect=(1, 2),
         msg=r'sha256|inputs|layer', setup=two_plans)
    case(C, 'v-wrong-cluster', ['validate', 'a.json', '--model', TINY, '--cluster', DGX2], expect=(1,),
         msg=r'sha256|inputs', setup=two_plans)


# ================================================================ class 4: corrupted plans
def class4():
    def ops(doc, dev=0):
        return doc['schedule'][dev]['ops']

    def m_del_op(d):
        ops(d).pop(3)

    def m_dup_op(d):
        ops(d).insert(3, copy.deepcopy(ops(d)[3]))

    def m_reorder(d):
        o = ops(d)
        o[0], o[-1] = o[-1], o[0]

    def m_reverse(d):
        ops(d).reverse()

    def m_stage_dev(d):
        d['stages'][0]['device'] = 1

    def m_stage_dev_oor(d):
        d['stages'][0]['device'] = 99

    def m_op_stage_oor(d):
        ops(d)[0]['stage'] = 2 ** 31

    def m_op_mb_neg(d):
        ops(d)[0]['mb'] = -1

    def m_op_kind(d):
        ops(d)[0]['op'] = 'X'

    def m_op_I_without_split(d):
        ops(d)[0]['op'] = 'I'

    def m_end_before_start(d):
        o = ops(d)[2]
        o['end_s'] = o['start_s'] - 0.001

    def m_neg_start(d):
        ops(d)[0]['start_s'] = -1.0

    def m_huge_time(d):
        ops(d)[-1]['end_s'] = 1e300

    def m_time_limit(d):
        ops(d)[-1]['end_s'] = 1e6 + 1

    def m_time_str(d):
        ops(d)[0]['start_s'] = 'NaN'

    def m_time_null(d):
        ops(d)[0]['start_s'] = None

    def m_pp_intmax(d):
        d['parallelism']['pp'] = 2 ** 31 - 1

    def m_pp_zero(d):
        d['parallelism']['pp'] = 0

    def m_mbs_65537(d):
        d['parallelism']['num_microbatches'] = 65537

    def m_nmb_zero(d):
        d['parallelism']['num_microbatches'] = 0

    def m_stages_huge(d):
        d['parallelism']['num_stages'] = 16385

    def m_dp_huge(d):
        d['parallelism']['dp'] = 2 ** 20

    def m_world(d):
        d['rank_map']['world_size'] = 2 ** 40

    def m_rank_dup(d):
        d['rank_map']['ranks'][1]['rank'] = 0

    def m_rank_neg(d):
        d['rank_map']['ranks'][1]['rank'] = -1

    def m_rank_node_oor(d):
        d['rank_map']['ranks'][1]['node'] = 1000

    def m_groups_wrong(d):
        g = d['rank_map']['pipeline_groups']
        g[0], g[1] = g[1], g[0]

    def m_groups_empty(d):
        d['rank_map']['pipeline_groups'] = []

    def m_bytes_2p53(d):
        d['skips'][0]['bytes_per_sample'] = 2 ** 53 + 2

    def m_bytes_neg(d):
        d['skips'][0]['bytes_per_sample'] = -1

    def m_bytes_2p52_mbs(d):
        d['skips'][0]['bytes_per_sample'] = 2 ** 52

    def m_params_huge(d):
        d['stages'][0]['params'] = 2 ** 53

    def m_stage_params_float(d):
        d['stages'][0]['params'] = 1.5

    def m_schema_v2(d):
        d['schema'] = 'pulse.plan/v2'

    def m_schema_model(d):
        d['schema'] = 'pulse.model/v1'

    def m_drop(key):
        def f(d):
            del d[key]
        return f

    def m_predicted_null(d):
        d['predicted']['iteration_s'] = None

    def m_predicted_zero(d):
        d['predicted']['iteration_s'] = 0
        d['predicted']['samples_per_s'] = 0

    def m_peaks_short(d):
        pk = d['predicted']['peak_memory_bytes']
        if isinstance(pk, list):
            pk.pop()

    def m_stage_layers_empty(d):
        d['stages'][1]['layers'] = []

    def m_stage_layers_unknown(d):
        d['stages'][1]['layers'] = ['nonexistent']

    def m_stage_layer_dup(d):
        d['stages'][1]['layers'] = d['stages'][0]['layers'] + d['stages'][1]['layers']

    def m_stage_fwd_neg(d):
        d['stages'][0]['forward_s'] = -0.5

    def m_stage_fwd_zero(d):
        d['stages'][0]['forward_s'] = 0.0
        d['stages'][0]['backward_s'] = 0.0
        d['stages'][0]['backward_weight_s'] = 0.0

    def m_transfers_empty(d):
        d['transfers'] = []

    def m_transfer_dev_oor(d):
        d['transfers'][0]['from_device' if 'from_device' in d['transfers'][0] else list(d['transfers'][0])[0]] = 77

    def m_transfer_neg_time(d):
        t = d['transfers'][0]
        for k in t:
            if k.endswith('_s') and isinstance(t[k], (int, float)):
                t[k] = -1.0

    def m_cost_model_scale0(d):
        d['cost_model']['compute_scale'] = 0

    def m_cost_model_scale_huge(d):
        d['cost_model']['link_scale'] = 1e9

    def m_cost_model_drop(d):
        del d['cost_model']

    def m_quantum_zero(d):
        d['cost_model']['time_quantum_s'] = 0

    def m_quantum_huge(d):
        d['cost_model']['time_quantum_s'] = 1e6

    def m_split_flip(d):
        d['schedule_info']['split_backward'] = True
        d['options']['split_backward'] = True

    def m_memory_opt_huge(d):
        d['options']['memory']['optimizer_bytes_per_param'] = 1e7

    def m_memory_opt_neg(d):
        d['options']['memory']['optimizer_bytes_per_param'] = -12

    def m_strategy_unknown(d):
        d['options']['strategy'] = 'bogus'

    def m_deep(d):
        d['generator']['extra'] = 'DEEP'

    def m_skip_dev_oor(d):
        d['skips'][0]['producer_device'] = 5

    def m_skip_local_lie(d):
        d['skips'][0]['consumer_device'] = 1
        d['skips'][0]['local'] = True

    def m_all_types_string(d):
        d['parallelism'] = {k: str(v) for k, v in d['parallelism'].items()}

    def m_parallelism_array(d):
        d['parallelism'] = []

    def m_ops_10x(d):
        d['schedule'][0]['ops'] = d['schedule'][0]['ops'] * 10

    def m_schedule_extra_device(d):
        d['schedule'].append(copy.deepcopy(d['schedule'][0]))

    def m_schedule_swap_devices(d):
        d['schedule'][0], d['schedule'][1] = d['schedule'][1], d['schedule'][0]

    def m_sha_changed(d):
        d['inputs']['model']['sha256'] = '0' * 64

    def m_device_type(d):
        d['parallelism']['device_type'] = 'Ascend-910A'

    def m_global_batch_lie(d):
        d['parallelism']['global_batch'] = 9999

    def m_makespan_lie(d):
        d['schedule_info']['makespan_s'] = 0.000001

    def m_all_ops_same_time(d):
        for o in ops(d):
            o['start_s'] = 0.0
            o['end_s'] = 0.001

    def m_mbs_0(d):
        d['parallelism']['microbatch_size'] = 0

    corrupt_case('p-del-op', m_del_op)
    corrupt_case('p-dup-op', m_dup_op)
    corrupt_case('p-reorder-ops', m_reorder, cmds=('validate', 'simulate', 'export'), expect=None)
    corrupt_case('p-reverse-ops', m_reverse, cmds=('validate', 'simulate'))
    corrupt_case('p-all-ops-same-time', m_all_ops_same_time, cmds=('validate', 'simulate'),
                 expect=(0, 1, 2))
    corrupt_case('p-stage-device-swap', m_stage_dev, cmds=('validate', 'simulate', 'export'))
    corrupt_case('p-stage-device-oor', m_stage_dev_oor)
    corrupt_case('p-op-stage-intmax', m_op_stage_oor, cmds=('validate', 'simulate'))
    corrupt_case('p-op-mb-neg', m_op_mb_neg, cmds=('validate', 'simulate'))
    corrupt_case('p-op-kind-X', m_op_kind, cmds=('validate', 'simulate'))
    corrupt_case('p-op-I-without-split', m_op_I_without_split, cmds=('validate', 'export'))
    corrupt_case('p-end-before-start', m_end_before_start, cmds=('validate', 'simulate'))
    corrupt_case('p-neg-start', m_neg_start, cmds=('validate', 'simulate'))
    corrupt_case('p-time-1e300', m_huge_time, cmds=('validate', 'simulate', 'diff'))
    corrupt_case('p-time-1e6p1', m_time_limit, cmds=('simulate',))
    corrupt_case('p-time-string-NaN', m_time_str, cmds=('validate', 'simulate'))
    corrupt_case('p-time-null', m_time_null, cmds=('simulate',))
    corrupt_case('p-pp-intmax', m_pp_intmax)
    corrupt_case('p-pp-zero', m_pp_zero, cmds=('validate', 'simulate'))
    corrupt_case('p-nmb-65537', m_mbs_65537, cmds=('simulate',))
    corrupt_case('p-nmb-zero', m_nmb_zero, cmds=('validate', 'simulate'))
    corrupt_case('p-mbsize-zero', m_mbs_0, cmds=('validate', 'simulate', 'diff'), expect=None)
    corrupt_case('p-num-stages-16385', m_stages_huge, cmds=('simulate',))
    corrupt_case('p-dp-2p20', m_dp_huge, cmds=('validate', 'simulate'))
    corrupt_case('p-world-2p40', m_world, cmds=('validate', 'export'))
    corrupt_case('p-rank-dup', m_rank_dup, cmds=('validate', 'export'))
    corrupt_case('p-rank-neg', m_rank_neg, cmds=('validate', 'export'))
    corrupt_case('p-rank-node-oor', m_rank_node_oor, cmds=('validate', 'export'),
                 ok_note={'export': 'rank 1 claims node 1000 of a 1-node job; export reads no cluster, validate catches it'})
    corrupt_case('p-groups-swapped', m_groups_wrong, cmds=('validate', 'export'))
    corrupt_case('p-groups-empty', m_groups_empty, cmds=('validate', 'export'))
    corrupt_case('p-skip-bytes-2p53', m_bytes_2p53, cmds=('validate', 'simulate'))
    corrupt_case('p-skip-bytes-2p52', m_bytes_2p52_mbs, cmds=('validate', 'simulate', 'diff'),
                 note='2^52 per sample x microbatch 2 x M: derived sums beyond 2^53')
    corrupt_case('p-skip-bytes-neg', m_bytes_neg, cmds=('validate', 'simulate'))
    corrupt_case('p-stage-params-2p53', m_params_huge, cmds=('validate', 'simulate', 'diff'), expect=(1, 2))
    corrupt_case('p-stage-params-float', m_stage_params_float, cmds=('simulate',))
    corrupt_case('p-schema-v2', m_schema_v2)
    corrupt_case('p-schema-model', m_schema_model, cmds=('simulate',))
    for k in ('schedule', 'stages', 'rank_map', 'parallelism', 'predicted', 'transfers', 'inputs', 'skips',
              'schema', 'options', 'devices', 'comm'):
        corrupt_case('p-drop-%s' % k, m_drop(k), cmds=('validate', 'simulate', 'export', 'diff'),
                     expect=(1, 2) if k in ('predicted', 'comm') else None)
    corrupt_case('p-predicted-null', m_predicted_null, cmds=('simulate', 'diff'))
    corrupt_case('p-predicted-zero', m_predicted_zero, cmds=('simulate', 'diff'), expect=(0, 1, 2),
                 note='iteration 0 s, 0 samples/s: division by zero in diff percentages?')
    corrupt_case('p-peaks-short', m_peaks_short, cmds=('simulate',))
    corrupt_case('p-stage-layers-empty', m_stage_layers_empty, cmds=('validate', 'export-dot'))
    corrupt_case('p-stage-layers-unknown', m_stage_layers_unknown, cmds=('validate', 'export-dot'),
                 expect=(1, 2), ok_note={'export-dot': 'a stage lists a layer the --model given does not have; drawn anyway'})
    corrupt_case('p-stage-layer-dup', m_stage_layer_dup, cmds=('validate', 'export-dot'), expect=(1, 2),
                 ok_note={'export-dot': 'layers in two stages; drawn anyway (with --model)'})
    corrupt_case('p-stage-fwd-neg', m_stage_fwd_neg, cmds=('validate', 'simulate'))
    corrupt_case('p-stage-zero-time', m_stage_fwd_zero, cmds=('validate', 'simulate'), expect=(0, 1, 2))
    corrupt_case('p-transfers-empty', m_transfers_empty, cmds=('validate', 'simulate'), expect=(0, 1, 2))
    corrupt_case('p-transfer-dev-oor', m_transfer_dev_oor, cmds=('validate', 'simulate'))
    corrupt_case('p-transfer-neg-time', m_transfer_neg_time, cmds=('simulate',))
    corrupt_case('p-cost-scale-0', m_cost_model_scale0, cmds=('validate', 'simulate', 'diff'))
    corrupt_case('p-cost-linkscale-1e9', m_cost_model_scale_huge, cmds=('simulate', 'diff'))
    corrupt_case('p-cost-model-dropped', m_cost_model_drop, cmds=('simulate', 'diff'), expect=(0, 2))
    corrupt_case('p-quantum-zero', m_quantum_zero, cmds=('validate', 'simulate'), expect=(0, 1, 2))
    corrupt_case('p-quantum-1e6', m_quantum_huge, cmds=('validate', 'simulate'), expect=(0, 1, 2))
    corrupt_case('p-split-flag-flipped', m_split_flip, cmds=('validate', 'simulate', 'export'))
    corrupt_case('p-optimizer-bytes-1e7', m_memory_opt_huge, cmds=('validate', 'simulate'))
    corrupt_case('p-optimizer-bytes-neg', m_memory_opt_neg, cmds=('validate', 'simulate'))
    corrupt_case('p-strategy-unknown', m_strategy_unknown, cmds=('validate', 'export'), expect=(0, 1, 2))
    corrupt_case('p-skip-device-oor', m_skip_dev_oor, cmds=('validate', 'simulate', 'export'))
    corrupt_case('p-skip-local-lie', m_skip_local_lie, cmds=('validate', 'simulate'),
                 ok_note={'simulate': 'skip claims local with consumer_device 1 != producer_device 0; replayed as stated'})
    corrupt_case('p-parallelism-strings', m_all_types_string, cmds=('simulate',))
    corrupt_case('p-parallelism-array', m_parallelism_array, cmds=('simulate',))
    corrupt_case('p-ops-10x', m_ops_10x, cmds=('validate', 'simulate'))
    corrupt_case('p-schedule-extra-device', m_schedule_extra_device, cmds=('validate', 'simulate'))
    corrupt_case('p-schedule-devices-swapped', m_schedule_swap_devices, cmds=('validate', 'simulate'))
    corrupt_case('p-sha-changed', m_sha_changed, cmds=('validate', 'diff'), expect=(1, 2))
    corrupt_case('p-device-type-lie', m_device_type, cmds=('validate',), expect=(1, 2))
    corrupt_case('p-device-type-lie', m_device_type, cmds=('simulate',), expect=(0, 2),
                 note='without --cluster simulate has nothing to compare the device type with')
    corrupt_case('p-global-batch-lie', m_global_batch_lie, cmds=('validate', 'simulate'),
                 ok_note={'simulate': 'global_batch 9999 != dp x mbs x M = 64: the report gives 14386 samples/s (true 92) and only flags matches_plan false'})
    corrupt_case('p-makespan-lie', m_makespan_lie, cmds=('validate',), expect=(1, 2))
    corrupt_case('p-makespan-lie-check', m_makespan_lie, cmds=('simulate',), expect=(0, 1, 2))
    # split-backward plan mutations
    def m_split_unflip(d):
        d['schedule_info']['split_backward'] = False
        d['options']['split_backward'] = False
    corrupt_case('p-split-unflipped', m_split_unflip, cmds=('validate', 'simulate', 'export'), basefn='pp2-split.json')
    def m_W_before_I(d):
        o = d['schedule'][0]['ops']
        iI = next(i for i, x in enumerate(o) if x['op'] == 'I')
        iW = next(i for i, x in enumerate(o) if x['op'] == 'W' and x['mb'] == o[iI]['mb'] and x['stage'] == o[iI]['stage'])
        o[iI]['op'], o[iW]['op'] = 'W', 'I'
    corrupt_case('p-W-before-I', m_W_before_I, cmds=('validate', 'simulate', 'export'), basefn='pp2-split.json',
                 expect=(1, 2))
    # 2-node plan
    def m_rank_local_oor(d):
        d['rank_map']['ranks'][0]['local_device'] = 8
    corrupt_case('p-2n-local-device-oor', m_rank_local_oor, cmds=('validate', 'export'), basefn='pp4-2n.json',
                 ok_note={'export': 'local_device 8 on 8-device nodes; export reads no cluster, validate catches it'})
    # raw-byte corruptions
    raw_muts = {
        'p-empty-file': b'',
        'p-truncated-half': lambda b: b[:len(b) // 2],
        'p-truncated-1': lambda b: b[:-2],
        'p-binary': bytes(range(256)) * 64,
        'p-bom': lambda b: b'\xef\xbb\xbf' + b,
        'p-nul-appended': lambda b: b + b'\x00',
        'p-dup-key-pp': lambda b: b.replace(b'"pp": 2,', b'"pp": 2, "pp": 1024,', 1),
        'p-bare-nan': lambda b: b.replace(b'"start_s": 0.0', b'"start_s": NaN', 1),
        'p-1e999': lambda b: b.replace(b'"start_s": 0.0', b'"start_s": 1e999', 1),
        'p-deep-nesting': lambda b: b.replace(b'"generator": {', b'"zz": ' + b'[' * 300000 + b']' * 300000 + b', "generator": {', 1),
        'p-huge-string': lambda b: b.replace(b'"name": "pulse-plan"', b'"name": "' + b'A' * (50 << 20) + b'"', 1),
        'p-int-overflow-literal': lambda b: b.replace(b'"mb": 1,', b'"mb": 99999999999999999999999999,', 1),
        'p-neg-zero-mb': lambda b: b.replace(b'"mb": 1,', b'"mb": -0,', 1),
        'p-mb-float': lambda b: b.replace(b'"mb": 1,', b'"mb": 1.0,', 1),
        'p-mb-exp': lambda b: b.replace(b'"mb": 1,', b'"mb": 1e0,', 1),
    }
    for nm, r in raw_muts.items():
        ex = (0, 1, 2) if nm in ('p-bom', 'p-mb-float', 'p-mb-exp', 'p-neg-zero-mb', 'p-nul-appended',
                              'p-dup-key-pp') else None
        if nm in ('p-deep-nesting', 'p-huge-string'):
            ex = (0, 1, 2)  # an unknown key / a long generator name: may be accepted; must not crash
        corrupt_case(nm, None, raw=r, cmds=('validate', 'simulate', 'export', 'diff'), expect=ex)

    # file-system oddities as the plan
    def dirplan(d):
        os.mkdir(d + '/plan.json')
    case(4, 'p-directory-simulate', ['simulate', 'plan.json'], expect=(2,), msg=r'plan\.json', setup=dirplan)
    case(4, 'p-directory-diff', ['diff', 'plan.json', 'plan.json'], expect=(2,), msg=r'plan\.json', setup=dirplan)
    case(4, 'p-dev-zero-simulate', ['simulate', '/dev/zero'], expect=(2,), msg=r'/dev/zero', timeout=6,
         note='plans are limited to 1 GiB "checked before it is read"; a device has no size')
    case(4, 'p-dev-urandom-validate', ['validate', '/dev/urandom', '--model', TINY, '--cluster', DGX], expect=(2,),
         msg=r'/dev/urandom', timeout=6)

    def sparse_big(d):
        shutil.copy(BASE + '/pp2.json', d + '/big.json')
        with open(d + '/big.json', 'r+b') as f:
            f.truncate((1 << 30) + 1)
    case(4, 'p-1GiB-plus-1', ['simulate', 'big.json'], expect=(2,), msg=r'big\.json', setup=sparse_big,
         note='sparse file just over the 1 GiB plan limit')

    def sparse_under(d):
        data = open(BASE + '/pp2.json', 'rb').read()
        with open(d + '/big.json', 'wb') as f:
            f.write(data)
            f.write(b' ' * (((1 << 30) - len(data) - 16)))
    case(4, 'p-just-under-1GiB-spaces', ['simulate', 'big.json'], expect=(0, 2), msg=r'big\.json', setup=sparse_under,
         note='a valid plan padded with whitespace to just under 1 GiB')

    def noperm(d):
        shutil.copy(BASE + '/pp2.json', d + '/p.json')
        os.chmod(d + '/p.json', 0)
    case(4, 'p-unreadable-mode-000', ['simulate', 'p.json'], expect=(0, 2), msg=r'p\.json', setup=noperm,
         note='mode 000 (root can read it anyway)')
    # diff of plans with the same inputs but different sha
    def diff_sha(d):
        a = base('pp2.json')
        b = base('pp4.json')
        b['inputs']['model']['sha256'] = 'f' * 64
        wj(d + '/a.json', a)
        wj(d + '/b.json', b)
    case(4, 'p-diff-changed-inputs', ['diff', 'a.json', 'b.json'], expect=(2,), msg=r'sha256|changed', setup=diff_sha)
    case(4, 'p-diff-changed-inputs-allowed', ['diff', 'a.json', 'b.json', '--allow-changed-inputs', '--json'],
         expect=(0,), setup=diff_sha)

    def diff_same_sha_other_name(d):
        a = base('pp2.json')
        b = base('pp4.json')
        b['inputs']['model']['name'] = 'other-model'
        wj(d + '/a.json', a)
        wj(d + '/b.json', b)
    case(4, 'p-diff-same-sha-other-name', ['diff', 'a.json', 'b.json', '--allow-changed-inputs'], expect=(2,),
         msg=r'sha256|name', setup=diff_same_sha_other_name)
    # a plan for another cluster validated / simulated
    case(4, 'p-simulate-atlas-plan-on-dgx', ['simulate', BASE + '/atlas.json', '--cluster', DGX], expect=(2,),
         msg=r'type|Ascend|V100')
    case(4, 'p-diff-v100-vs-atlas', ['diff', BASE + '/pp2.json', BASE + '/atlas.json', '--format', 'html', '-o',
                                      'o.html', '--fail-if-slower', '0'], expect=(0, 4), outputs=('o.html',))
    # export of a plan whose pipeline groups order devices differently
    def groups_reordered(d):
        a = base('pp2.json')
        g = a['rank_map']['pipeline_groups']
        g[0] = list(reversed(g[0]))
        wj(d + '/bad.json', a)
    case(4, 'p-export-groups-reversed', ['export', 'bad.json', '--format', 'torch-csv', '-o', 'o.csv'], expect=(2,),
         msg=r'bad\.json', setup=groups_reordered, outputs=('o.csv', 'o.stages.json'))


# ================================================================ class 5: output paths
def class5():
    C = 5

    def cp_inputs(d):
        shutil.copy(TINY, d + '/model.json')
        shutil.copy(DGX, d + '/cluster.json')
        shutil.copy(BASE + '/pp2.json', d + '/plan.json')
        shutil.copy(BASE + '/pp4.json', d + '/plan4.json')
        os.mkdir(d + '/sub')

    def P(name, args, expect=(2,), msg=None, setup=None, outputs=(), note=''):
        def s(d, setup=setup):
            cp_inputs(d)
            if setup:
                setup(d)
        case(C, name, args, expect=expect, msg=msg, setup=s, outputs=outputs, note=note)

    pl = ['plan', '--model', 'model.json', '--cluster', 'cluster.json', '--pp', '2', '-q']
    P('w-out-is-model', pl + ['-o', 'model.json'], msg=r'model\.json')
    P('w-out-is-model-dotslash', pl + ['-o', './model.json'], msg=r'model\.json')
    P('w-out-is-model-dotdot', pl + ['-o', 'sub/../model.json'], msg=r'model\.json')
    P('w-out-is-cluster-abs', ['plan', '--model', 'model.json', '--cluster', 'cluster.json', '--pp', '2', '-q',
                               '-o', '{d}/cluster.json'], msg=r'cluster\.json')
    P('w-out-symlink-to-model', pl + ['-o', 'link.json'], msg=r'link\.json|model\.json',
      setup=lambda d: os.symlink('model.json', d + '/link.json'))
    P('w-out-hardlink-to-model', pl + ['-o', 'hard.json'], msg=r'hard\.json|model\.json',
      setup=lambda d: os.link(d + '/model.json', d + '/hard.json'))
    P('w-out-symlink-dir-to-model', pl + ['-o', 'ldir/model.json'], msg=r'model\.json',
      setup=lambda d: os.symlink('.', d + '/ldir'))
    P('w-trace-is-model', pl + ['-o', 'out.json', '--trace', 'model.json'], msg=r'model\.json')
    P('w-out-eq-trace', pl + ['-o', 'out.json', '--trace', 'out.json'], msg=r'out\.json')
    P('w-out-eq-trace-via-dotslash', pl + ['-o', 'out.json', '--trace', './sub/../out.json'], msg=r'out\.json')
    P('w-out-stdout-trace-stdout', pl + ['-o', '-', '--trace', '-'], expect=(0, 2), msg=r'stdout|-',
      note='both to stdout: two documents interleaved on one stream?')
    P('w-out-missing-dir', pl + ['-o', 'nodir/out.json'], msg=r'nodir')
    P('w-out-parent-is-file', pl + ['-o', 'model.json/out.json'], msg=r'model\.json')
    P('w-out-existing-dir', pl + ['-o', 'sub'], msg=r'sub')
    P('w-out-existing-dir-slash', pl + ['-o', 'sub/'], msg=r'sub')
    P('w-out-empty-string', pl + ['-o', ''], msg=r'output|-o|empty|""')
    P('w-out-dot', pl + ['-o', '.'], msg=r'\.|directory')
    P('w-out-readonly-dir', pl + ['-o', 'ro/out.json'], expect=(0, 2), msg=r'ro', outputs=('ro/out.json',),
      setup=lambda d: (os.mkdir(d + '/ro'), os.chmod(d + '/ro', 0o555)),
      note='root ignores mode 555, so the write may legitimately succeed')
    P('w-out-readonly-existing-file', pl + ['-o', 'rofile.json'], expect=(0, 2), outputs=('rofile.json',),
      setup=lambda d: (wb(d + '/rofile.json', b'old'), os.chmod(d + '/rofile.json', 0o444)),
      note='existing read-only file: atomic rename replaces it (root)')
    P('w-out-long-component', pl + ['-o', 'a' * 300 + '.json'], msg=r'aaaa|name|long')
    P('w-out-long-path', pl + ['-o', '/'.join(['d' * 200] * 25) + '/x.json'], msg=r'dddd|long|directory')
    P('w-out-255-component', pl + ['-o', 'b' * 250 + '.json'], expect=(0, 2), outputs=('b' * 250 + '.json',),
      note='250+5 = 255-byte name: legal, but the temp file name may be longer')
    P('w-out-spaces', pl + ['-o', 'my plan file.json'], expect=(0,), outputs=('my plan file.json',))
    P('w-out-newline', pl + ['-o', 'a\nb.json'], expect=(0, 2), outputs=('a\nb.json',))
    P('w-out-non-utf8', pl + [b'-o', b'\xff\xfe-plan.json'], expect=(0, 2), outputs=(b'\xff\xfe-plan.json',))
    P('w-out-dash-prefix', pl + ['-o', '--pp'], expect=(0, 2), outputs=('--pp',), note='output literally named --pp')
    P('w-out-dangling-symlink', pl + ['-o', 'dangle.json'], expect=(0, 2), outputs=('dangle.json', 'sub/target.json'),
      setup=lambda d: os.symlink('sub/target.json', d + '/dangle.json'),
      note='dangling symlink as output: replaced or written through?')
    P('w-out-symlink-loop', pl + ['-o', 'loop.json'], msg=r'loop', expect=(0, 2), outputs=('loop.json',),
      setup=lambda d: os.symlink('loop.json', d + '/loop.json'))

    def preexist(d):
        wb(d + '/out.json', b'PRECIOUS')
        wb(d + '/trace.json', b'PRECIOUS-TRACE')
    P('w-preexisting-failing-plan', ['plan', '--model', 'model.json', '--cluster', 'cluster.json', '--pp', '999',
                                     '-o', 'out.json', '--trace', 'trace.json'], expect=(1, 2), setup=preexist)
    P('w-preexisting-infeasible-plan', ['plan', '--model', 'model.json', '--cluster', 'cluster.json',
                                        '--activation-budget', '1B', '--pp', '8', '-o', 'out.json', '--trace',
                                        'trace.json'], expect=(1, 2), setup=preexist)
    P('w-preexisting-trace-bad-dir', ['plan', '--model', 'model.json', '--cluster', 'cluster.json', '--pp', '2',
                                      '-o', 'out.json', '--trace', 'nodir/trace.json'], expect=(2,), setup=preexist,
      msg=r'nodir')
    # simulate
    P('w-sim-out-is-plan', ['simulate', 'plan.json', '-o', 'plan.json'], msg=r'plan\.json')
    P('w-sim-trace-is-plan-symlink', ['simulate', 'plan.json', '--trace', 'l.json'], msg=r'l\.json|plan\.json',
      setup=lambda d: os.symlink(d + '/plan.json', d + '/l.json'))
    P('w-sim-out-eq-trace', ['simulate', 'plan.json', '-o', 'x.json', '--trace', 'x.json'], msg=r'x\.json')
    P('w-sim-out-is-cluster', ['simulate', 'plan.json', '--cluster', 'cluster.json', '-o', 'cluster.json'],
      msg=r'cluster\.json')
    P('w-sim-check-fails-preexisting', ['simulate', 'bad.json', '--check', '-o', 'out.json', '--trace', 'trace.json'],
      expect=(1,), setup=lambda d: (preexist(d), wj(d + '/bad.json', setp(base('pp2.json'), 'predicted.iteration_s',
                                                                              123.0))),
      outputs=('out.json', 'trace.json'),
      note='--check fails (exit 1): is the report written? docs: "nothing written on failure"')
    # diff
    P('w-diff-out-is-old', ['diff', 'plan.json', 'plan4.json', '-o', 'plan.json'], msg=r'plan\.json')
    P('w-diff-out-is-new-hardlink', ['diff', 'plan.json', 'plan4.json', '-o', 'h.json'], msg=r'h\.json|plan4',
      setup=lambda d: os.link(d + '/plan4.json', d + '/h.json'))
    P('w-diff-threshold-preexisting', ['diff', 'plan.json', 'plan4.json', '--fail-if-slower', '0',
                                       '--fail-if-more-traffic', '0', '-o', 'out.json'], expect=(0, 4),
      setup=preexist, outputs=('out.json',), note='exit 4 writes the report by design (documented)')
    # export
    P('w-export-csv-eq-stages', ['export', 'plan.json', '--format', 'torch-csv', '-o', 'x.csv', '--stages', 'x.csv'],
      msg=r'x\.csv')
    P('w-export-stages-is-plan', ['export', 'plan.json', '--format', 'torch-csv', '-o', 'x.csv', '--stages',
                                  'plan.json'], msg=r'plan\.json')
    P('w-export-default-stages-is-plan', ['export', 'plan.json', '--format', 'torch-csv', '-o', 'plan.csv'],
      expect=(0, 2), outputs=('plan.csv', 'plan.stages.json'),
      setup=lambda d: shutil.copy(d + '/plan.json', d + '/plan.stages.json'),
      note='default side file plan.stages.json already exists (not an input): replaced')
    P('w-export-default-stages-collides-input', ['export', 'x.stages.json', '--format', 'torch-csv', '-o', 'x.csv'],
      msg=r'x\.stages\.json', setup=lambda d: shutil.copy(d + '/plan.json', d + '/x.stages.json'),
      note='the derived side-file name is the input plan')
    P('w-export-out-no-csv-ext', ['export', 'plan.json', '--format', 'torch-csv', '-o', 'schedule'],
      expect=(0, 2), outputs=('schedule', 'schedule.stages.json'),
      note='-o without .csv: what is the side file called?')
    P('w-export-out-is-csv-dot-only', ['export', 'plan.json', '--format', 'torch-csv', '-o', '.csv'],
      expect=(0, 2), outputs=('.csv', '.stages.json'))
    P('w-export-stages-dir-missing', ['export', 'plan.json', '--format', 'torch-csv', '-o', 'x.csv', '--stages',
                                      'nodir/s.json'], msg=r'nodir')
    P('w-export-html-out-is-compare', ['export', 'plan.json', '--format', 'html', '--compare', 'plan4.json', '-o',
                                       'plan4.json'], msg=r'plan4\.json')
    P('w-export-dot-out-is-model', ['export', 'plan.json', '--format', 'dot', '--model', 'model.json', '-o',
                                    'model.json'], msg=r'model\.json')
    P('w-validate-plan-is-dir', ['validate', 'sub', '--model', 'model.json', '--cluster', 'cluster.json'],
      msg=r'sub')
    P('w-export-stages-stdout-dash', ['export', 'plan.json', '--format', 'torch-csv', '-o', 'x.csv', '--stages', '-'],
      expect=(0, 2), outputs=('x.csv',), note='--stages - (stdout)')


# ================================================================ extras (second round)
INJ_NAMES = ['in"q', 'back\\slash', 'new\nline', '<script>alert(1)</script>', 'com,ma', 'semi;colon',
             'x -> y [color=red]', '}{', '\x1b[31mred\x1b[0m', "it's", '&amp;', 'tab\there']


def injection_model():
    m = unet_model(len(INJ_NAMES) + 2)
    names = ['first'] + INJ_NAMES + ['last']
    for L, nm in zip(m['layers'], names):
        L['name'] = nm
        L['kind'] = nm
    n = len(names)
    m['skips'] = [{'producer': names[i], 'consumer': names[n - 1 - i], 'bytes_per_sample': 1024,
                   'name': 'skip "%d" <b>,\n' % i} for i in range(n // 2 - 1)]
    m['name'] = 'inj<script>"\x1b]0;title\x07'
    return m


def setup_injection(d):
    wj(d + '/model.json', injection_model(), indent=1)
    r = subprocess.run(['nice', '-n', '10', 'timeout', str(TIMEOUT), BIN, 'plan', '--model', 'model.json',
                        '--cluster', DGX, '--pp', '2', '-q', '-o', 'plan.json'], cwd=d, capture_output=True)
    wb(d + '/setup-stderr.txt', r.stderr)
    if r.returncode != 0 or SAN.search(r.stderr.decode(errors='replace')):
        raise RuntimeError('setup plan failed rc %d: %s' % (r.returncode, r.stderr[-500:]))
    shutil.copy(BASE + '/pp2.json', d + '/other.json')


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


def extras():
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
            shutil.copy(BASE + '/' + bf, d + '/good.json')
        case(4, tag + '-simulate-text', ['simulate', 'bad.json'], expect=(0, 1, 2), setup=zs, msg=r'bad\.json')
        case(4, tag + '-diff-table', ['diff', 'bad.json', 'good.json', '--fail-if-slower', '5',
                                      '--fail-if-more-traffic', '5'], expect=(0, 2, 4), setup=zs, msg=r'bad\.json')
        case(4, tag + '-diff-linkscale', ['diff', 'good.json', 'bad.json', '--link-scale', '1000', '--json'],
             expect=(0, 2, 4), setup=zs, msg=r'bad\.json')
    # plan for 2 nodes replayed on a 1-node cluster
    case(4, 'p-simulate-2n-plan-on-1n-cluster', ['simulate', BASE + '/pp4-2n.json', '--cluster', DGX],
         expect=(0, 2), msg=r'rank|node|devices|cluster')
    case(4, 'p-simulate-on-hier-overlap-cluster', ['simulate', BASE + '/pp4-2n.json', '--cluster', 'c.json', '--json'],
         expect=(0, 2), msg=r'c\.json|type|devices',
         setup=lambda d: wj(d + '/c.json', dict(cluster_doc(dpn=8, nodes=2), overlap_comm=True,
                                                  allreduce='hierarchical')))
    case(4, 'p-validate-scaled-plan', ['validate', BASE + '/scaled.json', '--model', TINY, '--cluster', DGX],
         expect=(0,))
    case(4, 'p-diff-scaled-linkscale-past-limit', ['diff', BASE + '/scaled.json', BASE + '/pp2.json',
                                                     '--link-scale', '0.001', '--json'], expect=(0, 2),
         msg=r'scale|0\.001', note='plan link_scale 0.5 x 0.001 = 0.0005, below the 1/1000 limit')
    case(4, 'p-export-html-compare-other-cluster', ['export', BASE + '/pp2.json', '--format', 'html', '--compare',
                                                    BASE + '/atlas.json', '--compare', BASE + '/pp4-2n.json', '-o',
                                                    'o.html'], expect=(0, 2), outputs=('o.html',))
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
    # ---- class 3 more
    plan_case(3, 'o--activation-budget=1.0', ['--activation-budget', '1.0', '--pp', '2'], (0,),
              note='fraction 1.0 (the whole usable memory)')
    plan_case(3, 'o--exhaustive-2n', ['--exhaustive'], (0,), cluster=DGX2)
    plan_case(3, 'o--explain-stats-quiet', ['--explain', '--stats', '--quiet', '--split-backward'], (0,))
    plan_case(3, 'o--trace-stdout', ['--trace', '-', '--pp', '2'], (0,))
    plan_case(3, 'o--solver-nodes=1-exhaustive', ['--solver-nodes', '1', '--exhaustive', '--split-backward'], (0,))
    for v in ('1e-300', '5e-324', '-0'):
        case(3, 'd--fail-if-slower=%s' % v, ['diff', BASE + '/pp2.json', BASE + '/pp4.json', '--fail-if-slower', v],
             expect=(0, 2, 4), msg=r'slower')
    plan_case(3, 'o--global-batch=2p24-pp1-dp8', ['--global-batch', str(2 ** 24), '--pp', '1', '--dp', '8'], (1, 2),
              msg=r'4096|microbatch')


# ================================================================ runner
def snapshot(d):
    res = {}
    for root, dirs, files in os.walk(d.encode()):
        for fn in files + [x for x in dirs if os.path.islink(os.path.join(root, x))]:
            p = os.path.join(root, fn)
            rel = os.path.relpath(p, d.encode())
            try:
                st = os.lstat(p)
                if stat.S_ISREG(st.st_mode):
                    if st.st_size > (256 << 20):
                        res[rel] = ('big', st.st_size, st.st_mtime_ns)
                    else:
                        with open(p, 'rb') as f:
                            res[rel] = ('f', hashlib.sha256(f.read()).hexdigest())
                elif stat.S_ISLNK(st.st_mode):
                    res[rel] = ('l', os.readlink(p))
                else:
                    res[rel] = ('o', st.st_mode)
            except OSError as e:
                res[rel] = ('err', str(e))
        for x in dirs:
            p = os.path.join(root, x)
            if not os.path.islink(p):
                res[os.path.relpath(p, d.encode()) + b'/'] = ('d',)
    return res


def null_numbers(doc, path='$'):
    """nulls under keys that name a quantity (units in the key), outside options."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            p = path + '.' + k
            if v is None and re.search(r'(_s|_bytes|_per_s|_ratio|_scale|^pp|^dp|bytes_per_sample)$', k) \
                    and not p.startswith('$.options') and p not in ('$.solver.activation_budget_bytes',):
                out.append(p)
            out += null_numbers(v, p)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += null_numbers(v, '%s[%d]' % (path, i))
    return out


def scan_text(name, data, problems, skip_naninf=False):
    if not skip_naninf:
        m = NANINF.search(data)
        if m:
            ctx = data[max(0, m.start() - 60):m.end() + 40]
            problems.append('non-finite token %r in %s: ...%s...' % (m.group(0).decode(), name,
                                                                    ctx.decode(errors='replace')))
    s = data.lstrip()
    if s[:1] in (b'{', b'['):
        try:
            doc = json.loads(data)
        except Exception as e:
            if name.endswith('.json') and len(data) < (64 << 20):
                problems.append('%s is not valid JSON: %s' % (name, e))
            return
        nn = null_numbers(doc)
        if nn:
            problems.append('null where a number is expected in %s: %s' % (name, ', '.join(nn[:5])))


def run_case(i, c, binpath, timing=False):
    name = '%03d-%s' % (i, re.sub(r'[^A-Za-z0-9_.=+-]', '_', c['name']))
    d = os.path.join(CASES, name)
    if os.path.exists(d):
        for root, dirs, files in os.walk(d):
            for x in dirs:
                try:
                    os.chmod(os.path.join(root, x), 0o755)
                except OSError:
                    pass
        shutil.rmtree(d)
    os.makedirs(d)
    if c['setup']:
        c['setup'](d)
    args = [a.replace('{d}', d) if isinstance(a, str) else a for a in c['args']]
    cmd = ['nice', '-n', '10', 'timeout', str(c['timeout']), binpath] + args
    with open(d + '/cmd.txt', 'w') as f:
        f.write('cd %s && %s\n' % (d, ' '.join(repr(a) if (isinstance(a, bytes) or not a or re.search(r'[\s\'"\\]', a))
                                                else a for a in
                                                [x.decode('latin1') if isinstance(x, bytes) else x for x in cmd])))
    before = snapshot(d)
    shared_before = {p: hashlib.sha256(open(p, 'rb').read()).hexdigest() for p in (TINY, DGX, SD2, ATLAS, DGX2)}
    t0 = time.time()
    r = subprocess.run(cmd, cwd=d, capture_output=True, input=c['stdin'] if c['stdin'] is not None else b'')
    el = time.time() - t0
    rc = r.returncode
    # keep stdout/stderr beside the case (not inside the snapshot: written after it)
    after = snapshot(d)
    with open(d + '/stdout.txt', 'wb') as f:
        f.write(r.stdout[:4 << 20])
    with open(d + '/stderr.txt', 'wb') as f:
        f.write(r.stderr[:4 << 20])
    err = r.stderr.decode(errors='replace')
    out = r.stdout.decode(errors='replace')
    fails, quest = [], []
    san = SAN.search(err)
    if san:
        fails.append('sanitizer report: ' + err[max(0, san.start() - 100):san.start() + 1500])
    if rc == 3:
        fails.append('exit 3 (internal error): ' + err[-600:])
    if rc == 124 and c['timeout'] >= TIMEOUT:
        fails.append('timed out after %ds' % c['timeout'])
    elif rc == 124:
        fails.append('timed out after %ds (case limit)' % c['timeout'])
    elif rc < 0 or rc >= 128:
        fails.append('killed by signal / abort (rc %d): %s' % (rc, err[-800:]))
    if rc not in (0, 1, 2, 3, 4, 124) and rc < 128 and rc >= 0:
        fails.append('undocumented exit code %d' % rc)
    # files
    outputs = set(o.encode() if isinstance(o, str) else o for o in c['outputs'])
    new = sorted(set(after) - set(before))
    changed = sorted(k for k in before if k in after and before[k] != after[k])
    gone = sorted(set(before) - set(after))
    if rc != 0:
        if new and not (rc == 4 and set(new) <= outputs) and not (rc == 1 and c['name'].startswith('w-sim-check')
                                                                 and set(new) <= outputs):
            fails.append('files created despite exit %d: %s' % (rc, [x.decode(errors='replace') for x in new]))
        if changed and not (rc == 4 and set(changed) <= outputs):
            fails.append('files changed despite exit %d: %s' % (rc, [x.decode(errors='replace') for x in changed]))
        if gone:
            fails.append('files removed despite exit %d: %s' % (rc, [x.decode(errors='replace') for x in gone]))
        if rc == 1 and c['name'].startswith('w-sim-check') and new:
            quest.append('simulate --check exit 1 wrote its report (%s)' % [x.decode() for x in new])
    else:
        bad_change = [k for k in changed if k not in outputs]
        if bad_change:
            fails.append('input/unrelated file modified on success: %s' % [x.decode(errors='replace') for x in bad_change])
        if gone:
            fails.append('files removed: %s' % [x.decode(errors='replace') for x in gone])
        stray = [k for k in new if k not in outputs]
        if stray:
            quest.append('unexpected new files on success: %s' % [x.decode(errors='replace') for x in stray])
    for p, h in shared_before.items():
        if hashlib.sha256(open(p, 'rb').read()).hexdigest() != h:
            fails.append('shared profile modified: ' + p)
    # outputs content
    for k in set(new) | set(changed):
        p = os.path.join(d.encode(), k)
        if os.path.isfile(p) and os.path.getsize(p) < (256 << 20):
            scan_text(k.decode(errors='replace'), open(p, 'rb').read(), fails,
                      skip_naninf=c['name'].startswith('m-name-unicode'))
    scan_text('stdout', r.stdout, fails, skip_naninf=c['name'].startswith('m-name-unicode'))
    # expectations
    if rc in (0, 1, 2, 4) and rc not in c['expect']:
        if rc == 0:
            fails.append('UNEXPECTED SUCCESS (expected %s)' % (c['expect'],))
        else:
            quest.append('exit %d, expected %s' % (rc, c['expect']))
    if rc in (1, 2):
        text = err + ('\n' + out if c['args'] and c['args'][0] == 'validate' else '')
        if not text.strip():
            fails.append('exit %d with no message' % rc)
        elif c['msg'] and not re.search(c['msg'], text):
            quest.append('message does not match /%s/: %s' % (c['msg'], text.strip()[:400]))
    if c['post']:
        c['post'](d, r, fails, quest)
    res = dict(name=name, cls=c['cls'], rc=rc, seconds=round(el, 2), expect=c['expect'], fails=fails,
               questionable=quest, note=c['note'], stderr_head=err[:1500], cmd=open(d + '/cmd.txt').read().strip())
    if timing or (el > 30 and binpath == BIN):
        t1 = time.time()
        subprocess.run(['nice', '-n', '10', 'timeout', str(TIMEOUT), REL] + args, cwd=d, capture_output=True,
                       input=c['stdin'] if c['stdin'] is not None else b'')
        res['release_seconds'] = round(time.time() - t1, 2)
        # clean what the release run wrote, so the directory shows the sanitized run's result
    with open(d + '/result.json', 'w') as f:
        json.dump(res, f, indent=1)
    return res


def main():
    global HERE, CASES, REL, BASE, BIN
    only = None
    binpath = BIN
    timing = False
    a = sys.argv[1:]
    while a:
        x = a.pop(0)
        if x == '--only':
            only = a.pop(0)
        elif x == '--bin':
            binpath = os.path.abspath(a.pop(0))
        elif x == '--release':
            REL = os.path.abspath(a.pop(0))
        elif x == '--out':
            HERE = os.path.abspath(a.pop(0))
        elif x == '--timing':
            timing = True
        elif x in ('-h', '--help'):
            print(__doc__)
            return 0
        else:
            sys.exit('hostile_catalogue.py: unknown argument %s (see --help)' % x)
    if not os.access(binpath, os.X_OK):
        sys.exit('hostile_catalogue.py: no binary %s (build it: scripts/setup.sh --test, or --bin)'
                 % binpath)
    BIN = binpath  # base plans and helper runs use the binary under test too
    HERE = HERE or tempfile.mkdtemp(prefix='pulse-hostile-')
    CASES = HERE + '/cases'
    BASE = CASES + '/_base'
    print('hostile_catalogue.py: cases in %s' % CASES, file=sys.stderr)
    os.makedirs(CASES, exist_ok=True)
    make_bases()
    class1()
    class2()
    class3()
    class4()
    class5()
    extras()
    results = []
    per_cls = {}
    for i, c in enumerate(CASE_LIST):
        per_cls[c['cls']] = per_cls.get(c['cls'], 0) + 1
        if only and only not in c['name']:
            continue
        res = run_case(i, c, binpath, timing)
        results.append(res)
        tag = 'FAIL' if res['fails'] else ('??  ' if res['questionable'] else 'ok  ')
        print('%s %-60s rc=%-3d %6.2fs %s' % (tag, res['name'], res['rc'], res['seconds'],
                                              (res['fails'] + res['questionable'])[0][:150].replace('\n', ' ')
                                              if res['fails'] or res['questionable'] else ''), flush=True)
    summ = HERE + ('/results.json' if not only else '/results-partial.json')
    with open(summ, 'w') as f:
        json.dump(dict(per_class=per_cls, total=len(CASE_LIST), results=results), f, indent=1)
    nf = sum(1 for r in results if r['fails'])
    nq = sum(1 for r in results if r['questionable'] and not r['fails'])
    print('cases per class:', per_cls, 'total', len(CASE_LIST))
    print('ran %d: %d FAIL, %d questionable' % (len(results), nf, nq))
    return 1 if nf else 0


if __name__ == '__main__':
    sys.exit(main())
