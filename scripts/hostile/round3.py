"""The third catalogue's classes on the CLI's side (issue 41): keys a plan carries that
validate checked less strictly than simulate, figures that contradict each other, per-layer
numbers too large to derive times from, device aliases, and given cuts. Each case is a
refusal (or an acceptance) the issue asks for, run as the other parts' cases are."""
import hashlib
import json
import os
import shutil
import subprocess

from . import hooks
from .common import (CPU, DGX, PROF, TINY, TINY_J, TIMEOUT, case, cfg, cluster_case, load,
                     model_case, tiny_with, wj)

KEYS, FIGURES, NUMBERS, NAMES, CUTS, MOVED = ('r3-keys', 'r3-figures', 'r3-numbers', 'r3-names',
                                              'r3-cuts', 'r3-moved')
SMALL = PROF + '/models/small-unet-cpu.json'
H100 = PROF + '/clusters/dgx-h100-1n.json'

# The plans these cases edit, made once by the binary under test (as common.BASE_SPECS).
BASES = {
    'tiny.json': (TINY, DGX, ['--pp', '2']),
    'tiny-full.json': (TINY, DGX, ['--pp', '2', '--recompute', 'full']),
    'small-cpu.json': (SMALL, CPU, ['--pp', '2']),
    'h100.json': (TINY, H100, ['--pp', '2']),
}


def base_plan(name):
    path = cfg.base + '/r3-' + name
    if not os.path.exists(path):
        model, cluster, extra = BASES[name]
        os.makedirs(cfg.base, exist_ok=True)
        r = subprocess.run(['nice', '-n', '10', 'timeout', str(TIMEOUT), cfg.bin, 'plan', '--model',
                            model, '--cluster', cluster, '-q', '-o', path] + extra,
                           capture_output=True)
        if r.returncode != 0:
            raise RuntimeError('base plan %s failed: %s' % (name, r.stderr.decode()))
    return load(path)


def stages_digest(stages):
    """plan.cpp's stages_digest, as a user who read it would recompute it after an edit."""
    def t(x):
        return '-' if x is None else '%.9f' % x
    text = ''
    for s in stages:
        text += '%d %d %s %s %s %d' % (s['id'], s['device'], t(s.get('forward_s')),
                                       t(s.get('backward_s')), t(s.get('backward_weight_s')),
                                       len(s['layers']))
        for name in s['layers']:
            text += '\x1f%d:%s' % (len(name.encode()), name)
        text += '\n'
    return hashlib.sha256(text.encode()).hexdigest()


def command(c, name):
    model, cluster, _ = BASES[name]
    return {
        'validate': ['validate', 'bad.json', '--model', model, '--cluster', cluster],
        'simulate': ['simulate', 'bad.json', '--check', '-o', 'out.txt'],
        'simulate-cluster': ['simulate', 'bad.json', '--cluster', cluster, '--check', '-o',
                             'out.txt'],
        'diff': ['diff', 'good.json', 'bad.json', '-o', 'out.txt'],
        'diff-gate': ['diff', 'good.json', 'bad.json', '--format', 'markdown',
                      '--fail-if-slower', '5', '-o', 'out.md'],
        'export': ['export', 'bad.json', '--format', 'torch-csv', '-o', 'out.csv'],
    }[c]


def edited(cls, tag, name, mutate, expect, msg, note=''):
    """One case per command in `expect` ({command: exit codes}) on an edited copy of a base."""
    for c, codes in expect.items():
        def setup(d, name=name, mutate=mutate):
            doc = base_plan(name)
            wj(d + '/good.json', doc, indent=1)
            mutate(doc)
            wj(d + '/bad.json', doc, indent=1)
        case(cls, '%s-%s' % (tag, c), command(c, name), expect=codes, msg=msg, setup=setup,
             outputs=('out.txt', 'out.md', 'out.csv', 'out.stages.json'), note=note)


# ================================================================ keys validate checks
def key_cases():
    def sha(d):
        d['partition']['stages_sha256'] = '0' * 64
    edited(KEYS, 'k-stages-sha256-edited', 'tiny.json', sha,
           {'validate': (1,), 'simulate': (2,)}, r'stages_sha256')

    def precision(d):
        d['options']['memory']['precision'] = 'fp32'  # beside 2 + 2 + 12 bytes
    edited(KEYS, 'k-precision-contradicts-bytes', 'tiny.json', precision,
           {'validate': (1,), 'simulate': (2,), 'diff': (2,), 'export': (2,)},
           r'options\.memory\.precision')

    def workspace(d):
        d['stages'][0]['recompute_workspace_bytes_per_microbatch'] = 1
    edited(KEYS, 'k-recompute-workspace-edited', 'tiny-full.json', workspace, {'validate': (1,)},
           r'recompute_workspace_bytes_per_microbatch')

    def foreign(d):
        d['stages'][0]['recomputed'].append(d['stages'][1]['layers'][0])
    edited(KEYS, 'k-recomputed-names-another-stages-layer', 'tiny-full.json', foreign,
           {'validate': (1,)}, r'recomputed names')

    def dropped(d):
        del d['stages'][0]['recomputed']
    edited(KEYS, 'k-recomputed-list-dropped', 'tiny-full.json', dropped, {'validate': (1,)},
           r'recomputed is missing')

    def carried(d):
        t = next(t for t in d['transfers'] if t.get('carried'))
        t['carried'].append('not_a_tensor')
    edited(KEYS, 'k-carried-tensor-not-in-plan', 'small-cpu.json', carried,
           {'validate': (1,), 'simulate': (2,), 'simulate-cluster': (2,), 'export': (2,)},
           r'not_a_tensor')


# ================================================================ figures that disagree
def figure_cases():
    def rate(d):
        d['predicted']['samples_per_s'] *= 3
    edited(FIGURES, 'f-samples-contradict-iteration', 'tiny.json', rate,
           {'simulate': (2,), 'diff': (2,), 'diff-gate': (2,)}, r'predicted\.samples_per_s',
           note='the gate never decides on a rate the plan contradicts')

    def tiny_iteration(d):
        d['predicted']['iteration_s'] = 1e-300
        d['predicted']['samples_per_s'] = d['parallelism']['global_batch'] * 1e300
    edited(FIGURES, 'f-iteration-below-1ns', 'tiny.json', tiny_iteration,
           {'diff': (2,), 'diff-gate': (2,), 'simulate': (2,)}, r'predicted\.iteration_s',
           note='no 300-digit percentages')


# ================================================================ per-layer numbers
def layer_index(name):
    return next(i for i, l in enumerate(TINY_J['layers']) if l['name'] == name)


def number_cases():
    """tiny-unet has V100 times only: on an H100 cluster its times are derived from the
    device specs and each layer's FLOPs (profile/derive.hpp)."""
    enc1 = layer_index('enc1')
    for tag, flops, expect, msg in [('1e300', 1e300, (2,), r'forward_flops_per_sample.*enc1'),
                                    ('1e19', 1e19, (2,), r'forward_flops_per_sample.*enc1'),
                                    ('at-the-limit', 1e18, (0,), None)]:
        model_case(NUMBERS, 'n-layer-flops-%s' % tag,
                   tiny_with(('layers.%d.forward_flops_per_sample' % enc1, flops)),
                   extra=('--pp', '2'), cluster=H100, expect=expect, msg=msg,
                   note='derived times finite, or the layer named')
    h100 = load(H100)
    for tag, key, value in [('peak-tiny', 'peak_flops', {'fp16': 1e-300, 'bf16': 1e-300}),
                            ('peak-huge', 'peak_flops', {'fp16': 1e300, 'bf16': 1e300}),
                            ('bandwidth-huge', 'memory_bytes_per_s', 1e300)]:
        doc = json.loads(json.dumps(h100))
        doc['device']['spec'][key] = value
        cluster_case(NUMBERS, 'n-device-spec-%s' % tag, doc, extra=('--pp', '2'),
                     msg=r'cluster\.json.*spec\.' + key)


# ================================================================ device aliases
def alias_cases():
    """A plan for the H100 replayed on a cluster that names the same device by an alias its
    spec lists (or a name derive.hpp knows): the planner takes them as one device."""
    def setup(device_type):
        def run(d):
            shutil.copy(base_plan_path('h100.json'), d + '/p.json')
            c = load(H100)
            c['device']['type'] = device_type
            wj(d + '/cluster.json', c, indent=1)
        return run
    for tag, name, expect in [('spec-alias', 'H100-SXM5-80GB', (0,)),
                              ('torch-name', 'NVIDIA H100 80GB HBM3', (0,)),
                              ('another-device', 'A100-SXM', (2,))]:
        case(NAMES, 'a-simulate-cluster-%s' % tag,
             ['simulate', 'p.json', '--cluster', 'cluster.json', '--check', '-o', 'out.txt'],
             expect=expect, setup=setup(name), outputs=('out.txt',),
             msg=r'p\.json.*device_type' if expect == (2,) else None)


def base_plan_path(name):
    base_plan(name)
    return cfg.base + '/r3-' + name


# ================================================================ given cuts
def plan_keeps_cut(pp, cuts):
    def post(d, r, fails, quest):
        if r.returncode != 0:
            return
        doc = load(os.path.join(d, 'plan.json'))
        got = (doc['parallelism']['pp'], [s['layers'][0] for s in doc['stages'][1:]])
        if got != (pp, cuts):
            fails.append('expected pp %d with stages starting at %s, got %s' % (pp, cuts, got))
    return post


def cut_cases():
    cuts = ['enc1', 'mid0', 'dec1']
    plan = ['plan', '--model', TINY, '--cluster', DGX, '-o', 'plan.json', '--cuts',
            ','.join(cuts)]
    case(CUTS, 'c-four-stages-on-eight-devices', plan, expect=(0,), outputs=('plan.json',),
         post=hooks.all_of(plan_keeps_cut(2, cuts), hooks.plan_validates('plan.json', TINY, DGX)),
         note='4 stages: the V at pp 2, not pp 1 data parallelism with the cut recorded')
    case(CUTS, 'c-pp1', plan + ['--pp', '1'], expect=(2,), outputs=('plan.json',),
         msg=r'--pp 1')
    case(CUTS, 'c-family-w2', plan + ['--family', 'w2'], expect=(2,), outputs=('plan.json',),
         msg=r'4 stages', note='w2 has 4 stages only at pp 1')
    case(CUTS, 'c-pp3-no-family', plan + ['--pp', '3'], expect=(2,), outputs=('plan.json',),
         msg=r'--pp 3')
    case(CUTS, 'c-dp-leaves-one-device', plan + ['--dp', '8'], expect=(2,),
         outputs=('plan.json',), msg=r'4 stages')

    def pp1_plan(d):
        r = subprocess.run([cfg.bin, 'plan', '--model', TINY, '--cluster', DGX, '--pp', '1',
                            '--family', 'w2', '-q', '-o', d + '/dp.json'], capture_output=True)
        assert r.returncode == 0, r.stderr
    case(CUTS, 'c-partition-from-a-pp1-plan',
         ['plan', '--model', TINY, '--cluster', DGX, '-o', 'plan.json', '--partition-from',
          'dp.json'], expect=(0,), setup=pp1_plan, outputs=('plan.json',),
         post=hooks.plan_validates('plan.json', TINY, DGX),
         note='its 4 stages (w2 on one device) planned as a pipeline')


# ================================================================ a layer moved
def moved_cases():
    """The last layer of stage 0 (enc1, the producer of skip enc1->dec1) moved to the head of
    stage 1: with the digest as planned, recomputed by a user who read plan.cpp, or deleted."""
    def move(d):
        d['stages'][1]['layers'].insert(0, d['stages'][0]['layers'].pop())

    def recomputed(d):
        move(d)
        d['partition']['stages_sha256'] = stages_digest(d['stages'])

    def deleted(d):
        move(d)
        del d['partition']['stages_sha256']
    every = {'validate': (1,), 'simulate': (2,), 'simulate-cluster': (2,), 'diff': (2,),
             'export': (2,)}
    edited(MOVED, 'm-layer-moved', 'tiny.json', move, every, r'stages_sha256|skips')
    edited(MOVED, 'm-layer-moved-digest-recomputed', 'tiny.json', recomputed, every,
           r'skips|layers')
    edited(MOVED, 'm-layer-moved-digest-deleted', 'tiny.json', deleted, every, r'skips|layers')


def cases():
    key_cases()
    figure_cases()
    number_cases()
    alias_cases()
    cut_cases()
    moved_cases()
