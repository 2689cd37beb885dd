"""The second hostile catalogue (issue 31), written as its held-out cousin would be: outputs
that are not plain files, signals and pipes, write errors, models and plans that lie, the
cost of reading, and what the first catalogue left open. Scale and tuning time are measured
by scripts/limits_bench.py, not here."""
import copy
import json
import os
import shutil
import signal
import socket
import subprocess

from . import hooks
from .common import (ATLAS, DGX, SD2, TINY, TINY_J, base, case, cfg, cluster_case, cluster_doc,
                     corrupt_case, model_case, named_model, setp, tiny_with, unet_model, wb,
                     wj)

OUT, SIG, WRITE, LIES, READ, FIRST = ('r2-outputs', 'r2-signals', 'r2-writes', 'r2-lies',
                                      'r2-reading', 'r2-first')
PLAN = ['plan', '--model', TINY, '--cluster', DGX, '--pp', '2', '-q']
PLAN_SD2 = ['plan', '--model', SD2, '--cluster', DGX, '--pp', '4', '-q']


def with_plan(d):
    shutil.copy(cfg.base + '/pp2.json', d + '/p.json')
    shutil.copy(cfg.base + '/pp4.json', d + '/p4.json')


def fifo(name):
    def setup(d):
        with_plan(d)
        os.mkfifo(os.path.join(d, name))
    return setup


# ================================================================ outputs that are not files
def descriptor_outputs():
    """/dev/stdout, /dev/stderr, /dev/fd/N: written directly, never replaced."""
    holds_plan = hooks.file_holds('captured.json', b'"schema": "pulse.plan/v2"')
    for name, target, run in [('stdout', '/dev/stdout', hooks.stdout_to('captured.json')),
                              ('stderr', '/dev/stderr', hooks.stderr_to('captured.json')),
                              ('fd1', '/dev/fd/1', hooks.stdout_to('captured.json')),
                              ('proc-self-fd1', '/proc/self/fd/1', hooks.stdout_to('captured.json')),
                              ('dev-dot-stdout', '/dev/./stdout', hooks.stdout_to('captured.json'))]:
        case(OUT, 'o-plan-to-%s-redirected' % name, PLAN + ['-o', target], expect=(0,),
             outputs=('captured.json',), run=run, post=holds_plan,
             note='-o %s with the stream redirected to a file: the file gets the plan, the /dev '
                  'link stays a link' % target)
    case(OUT, 'o-trace-to-dev-stdout', PLAN + ['-o', 'plan.json', '--trace', '/dev/stdout'],
         expect=(0,), outputs=('plan.json', 'captured.json'), run=hooks.stdout_to('captured.json'),
         post=hooks.file_holds('captured.json', b'traceEvents'))
    for other in ('-', '/dev/fd/1', '/proc/self/fd/1'):
        case(OUT, 'o-dev-stdout-and-%s' % other.replace('/', '_'),
             PLAN + ['-o', '/dev/stdout', '--trace', other], expect=(2,), msg=r'stdout',
             post=hooks.dev_links_kept, note='two outputs on one descriptor')
    case(OUT, 'o-dev-stdin', PLAN + ['-o', '/dev/stdin'], expect=(2,), msg=r'stdin|/dev/stdin')
    case(OUT, 'o-descriptor-not-open', PLAN + ['-o', '/dev/fd/9'], expect=(2,), msg=r'descriptor 9')

    def model_copy(d):
        shutil.copy(TINY, d + '/m.json')

    def append_to_model(cmd, d, c):
        with open(os.path.join(d, 'm.json'), 'ab') as f:
            p = subprocess.Popen(cmd, cwd=d, stdout=f, stderr=subprocess.PIPE,
                                 stdin=subprocess.DEVNULL)
            return hooks.wait(p, c['timeout'])
    for out in ('-', '/dev/stdout'):
        case(OUT, 'o-stdout-appended-onto-model%s' % out.replace('/', '_'),
             ['plan', '--model', 'm.json', '--cluster', DGX, '--pp', '2', '-q', '-o', out],
             expect=(2,), setup=model_copy, run=append_to_model, msg=r'm\.json',
             note='>> m.json: stdout is the model itself')
    case(OUT, 'o-export-csv-dev-stdout-redirected',
         ['export', 'p.json', '--format', 'torch-csv', '-o', '/dev/stdout'], expect=(0,),
         setup=with_plan, outputs=('captured.csv',), run=hooks.stdout_to('captured.csv'),
         post=hooks.file_holds('captured.csv', b'0F0'),
         note='no side file invented in /dev; the CSV in the redirected file')
    case(OUT, 'o-simulate-dev-stdout-trace-dev-stderr',
         ['simulate', 'p.json', '-o', '/dev/stdout', '--trace', '/dev/stderr'], expect=(0,),
         setup=with_plan, outputs=('captured.txt',), run=hooks.stdout_to('captured.txt'),
         post=hooks.file_holds('captured.txt', b'replayed with'))
    case(OUT, 'o-diff-dev-stdout-redirected', ['diff', 'p.json', 'p4.json', '-o', '/dev/stdout'],
         expect=(0,), setup=with_plan, outputs=('captured.txt',),
         run=hooks.stdout_to('captured.txt'), post=hooks.file_holds('captured.txt', b'moved layers'))
    case(OUT, 'o-link-to-dev-stdout', PLAN + ['-o', 'out'], expect=(0,), outputs=('captured.json',),
         setup=lambda d: os.symlink('/dev/stdout', d + '/out'), run=hooks.stdout_to('captured.json'),
         post=hooks.all_of(hooks.link_kept('out', '/dev/stdout', b''),
                           hooks.file_holds('captured.json', b'pulse.plan/v2')))
    case(OUT, 'o-link-to-dev-null', PLAN + ['-o', 'out'], expect=(0,),
         setup=lambda d: os.symlink('/dev/null', d + '/out'),
         post=hooks.link_kept('out', '/dev/null', b''))


def link_outputs():
    """-o through symbolic links: the file at the end is replaced, the links stay."""
    def real(d):
        os.mkdir(d + '/real')
        wb(d + '/real/plan.json', b'OLD')
        os.symlink('real/plan.json', d + '/link.json')
        os.symlink('link.json', d + '/link2.json')
        os.symlink('link2.json', d + '/link3.json')
    case(OUT, 'o-through-link', PLAN + ['-o', 'link.json'], expect=(0,),
         outputs=('real/plan.json',), setup=real,
         post=hooks.link_kept('link.json', 'real/plan.json', b'pulse.plan/v2'))
    case(OUT, 'o-through-chain-of-links', PLAN + ['-o', 'link3.json'], expect=(0,),
         outputs=('real/plan.json',), setup=real,
         post=hooks.all_of(hooks.link_kept('link3.json', 'link2.json', b''),
                           hooks.link_kept('link.json', 'real/plan.json', b'pulse.plan/v2')))
    case(OUT, 'o-through-dangling-link', PLAN + ['-o', 'dangle.json'], expect=(0,),
         outputs=('sub/new.json',), setup=lambda d: (os.mkdir(d + '/sub'),
                                                     os.symlink('sub/new.json', d + '/dangle.json')),
         post=hooks.link_kept('dangle.json', 'sub/new.json', b'pulse.plan/v2'))
    case(OUT, 'o-link-loop', PLAN + ['-o', 'a.json'], expect=(2,), msg=r'a\.json.*link',
         setup=lambda d: (os.symlink('b.json', d + '/a.json'), os.symlink('a.json', d + '/b.json')))
    case(OUT, 'o-trace-link-to-output', PLAN + ['-o', 'a.json', '--trace', 'l.json'], expect=(2,),
         msg=r'same file', setup=lambda d: os.symlink('a.json', d + '/l.json'),
         note='a dangling link to the plan output: the same file twice')
    case(OUT, 'o-link-to-missing-dir', PLAN + ['-o', 'l.json'], expect=(2,), msg=r'l\.json',
         setup=lambda d: os.symlink('nodir/x.json', d + '/l.json'))
    case(OUT, 'o-link-into-proc', PLAN + ['-o', 'l.json'], expect=(2,), msg=r'l\.json|proc',
         setup=lambda d: os.symlink('/proc/pulse-link-out.json', d + '/l.json'))

    def private(d):
        wb(d + '/plan.json', b'OLD')
        os.chmod(d + '/plan.json', 0o600)

    def keeps_mode(d, r, fails, quest):
        mode = os.stat(d + '/plan.json').st_mode & 0o777
        if mode != 0o600:
            fails.append('the replaced plan.json has mode %o, was 600' % mode)
    case(OUT, 'o-replace-keeps-mode', PLAN + ['-o', 'plan.json'], expect=(0,),
         outputs=('plan.json',), setup=private, post=keeps_mode)


def special_outputs():
    """Named pipes, sockets, pseudo file systems, devices."""
    case(OUT, 'o-fifo-with-reader', PLAN + ['-o', 'pipe'], expect=(0,), setup=fifo('pipe'),
         outputs=('got.json',), run=hooks.fifo_reader('pipe', 'got.json'),
         post=hooks.file_holds('got.json', b'pulse.plan/v2'))
    case(OUT, 'o-trace-fifo-with-reader', PLAN + ['-o', 'plan.json', '--trace', 'pipe'],
         expect=(0,), setup=fifo('pipe'), outputs=('got.json', 'plan.json'),
         run=hooks.fifo_reader('pipe', 'got.json'), post=hooks.file_holds('got.json', b'traceEvents'))

    def sock(d):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(os.path.join(d, 'sock'))
        s.close()
    case(OUT, 'o-socket', PLAN + ['-o', 'sock'], expect=(2,), msg=r'sock', setup=sock)
    for path in ('/proc/pulse-out.json', '/proc/self/pulse.json', '/sys/pulse-out.json',
                 '/proc/self/status'):
        case(OUT, 'o-pseudo-fs-%s' % path.replace('/', '_'), PLAN + ['-o', path], expect=(2,),
             msg=path.split('/')[1])
    case(OUT, 'o-dev-full', PLAN + ['-o', '/dev/full'], expect=(3,), msg=r'/dev/full.*write failed')
    case(OUT, 'o-dev-tty-without-terminal', PLAN + ['-o', '/dev/tty'], expect=(0, 2),
         msg=r'/dev/tty', note='no controlling terminal under the catalogue: refused before work')
    case(OUT, 'o-dev-null-and-file', PLAN + ['-o', '/dev/null', '--trace', 't.json'], expect=(0,),
         outputs=('t.json',), post=hooks.dev_links_kept)


# ================================================================ signals and pipes
def signal_cases():
    """A signal while an output waits on a named pipe nobody reads: no temporary is left."""
    blocked = PLAN + ['-o', 'out.json', '--trace', 'pipe']
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                signal.SIGALRM):
        case(SIG, 'g-%s-while-trace-blocks' % sig.name, blocked, expect=(128 + sig,),
             setup=fifo('pipe'), timeout=60, run=hooks.signal_when(sig),
             note='the plan is in its temporary, the trace blocks in open(2): the signal must '
                  'remove the temporary and end the process by that signal')
    case(SIG, 'g-SIGTERM-while-plan-blocks', PLAN + ['-o', 'pipe', '--trace', 't.json'],
         expect=(128 + signal.SIGTERM,), setup=fifo('pipe'), timeout=60,
         run=hooks.signal_when(signal.SIGTERM))
    case(SIG, 'g-SIGTERM-while-planning', ['plan', '--model', SD2, '--cluster', DGX, '-q', '-o',
                                           'out.json', '--exhaustive'],
         expect=(0, 128 + signal.SIGTERM), timeout=120,
         run=hooks.signal_when(signal.SIGTERM, ready='time', after_s=0.5), outputs=('out.json',))
    case(SIG, 'g-SIGINT-ignored-like-nohup', blocked, expect=(0,), setup=fifo('pipe'), timeout=60,
         outputs=('out.json',), run=hooks.signal_when(signal.SIGINT, ignore_int=True),
         note='SIGINT ignored from the start stays ignored; the reader that comes later gets '
              'the trace')
    for name, args in [('plan-trace', PLAN_SD2 + ['-o', 'out.json', '--trace', '-']),
                       ('plan', PLAN_SD2),
                       ('simulate', ['simulate', 'p.json']),
                       ('export-html', ['export', 'p.json', '--format', 'html']),
                       ('diff', ['diff', 'p.json', 'p4.json']),
                       ('validate', ['validate', 'p.json', '--model', TINY, '--cluster', DGX]),
                       ('help', ['plan', '--help']), ('version', ['--version'])]:
        case(SIG, 'g-stdout-reader-gone-%s' % name, args, expect=(3,), setup=with_plan,
             msg=r'stdout: write failed: Broken pipe', run=hooks.stdout_pipe_closed,
             note='SIGPIPE ignored: EPIPE is a write error (exit 3), nothing renamed into place')
    case(SIG, 'g-stderr-reader-gone', PLAN + ['-o', 'out.json'], expect=(0,), outputs=('out.json',),
         run=hooks.stderr_pipe_closed, note='only the summary is lost; the plan is written')
    for name, limit, args in [('plan', 4096, PLAN + ['-o', 'out.json']),
                              ('trace', 80000, ['plan', '--model', TINY, '--cluster', DGX,
                                                '--pp', '4', '-q', '-o', 'out.json', '--trace',
                                                't.json']),
                              ('export-html', 4096, ['export', 'p.json', '--format', 'html',
                                                     '-o', 'o.html'])]:
        case(SIG, 'g-file-size-limit-%s' % name, args, expect=(3,), setup=with_plan,
             msg=r'write failed: File too large', run=hooks.file_size_limit(limit),
             note='ulimit -f: SIGXFSZ ignored, EFBIG reported, the temporary removed')
    model = open(TINY, 'rb').read()
    case(SIG, 'g-model-from-fifo', ['plan', '--model', 'm.fifo', '--cluster', DGX, '-q', '-o',
                                    'out.json'],
         expect=(0,), outputs=('out.json',), setup=fifo('m.fifo'),
         run=hooks.fifo_writer('m.fifo', model))


# ================================================================ write errors
def write_error_cases():
    """Every write checked: stdout full or closed gives exit 3 and a message."""
    commands = [('validate', ['validate', 'p.json', '--model', TINY, '--cluster', DGX]),
                ('validate-invalid', ['validate', 'p.json', '--model', TINY, '--cluster', ATLAS]),
                ('help', ['--help']), ('h', ['-h']), ('help-word', ['help']),
                ('help-plan', ['help', 'plan']), ('version', ['--version']),
                ('plan-help', ['plan', '--help']), ('diff-help', ['diff', '--help']),
                ('export-help', ['export', '--help']), ('simulate-help', ['simulate', '--help']),
                ('validate-help', ['validate', '--help']), ('plan', PLAN),
                ('diff', ['diff', 'p.json', 'p4.json']), ('diff-json', ['diff', 'p.json', 'p4.json',
                                                                         '--json']),
                ('simulate', ['simulate', 'p.json']), ('export-dot', ['export', 'p.json',
                                                                      '--format', 'dot'])]
    for name, args in commands:
        case(WRITE, 'w-%s-to-dev-full' % name, args, expect=(3,), setup=with_plan,
             msg=r'stdout: write failed: No space left', run=hooks.stdout_device('/dev/full'))
        case(WRITE, 'w-%s-stdout-closed' % name, args, expect=(3,), setup=with_plan,
             msg=r'stdout: write failed', run=hooks.stdout_closed)
    case(WRITE, 'w-csv-stdout-full-side-file', ['export', 'p.json', '--format', 'torch-csv',
                                                '--stages', 's.json'],
         expect=(3,), setup=with_plan, msg=r'stdout: write failed',
         run=hooks.stdout_device('/dev/full'), note='stdout fails: the side file is not written')
    case(WRITE, 'w-summary-to-dev-full', PLAN + ['-o', 'out.json'], expect=(0,),
         outputs=('out.json',), run=hooks.stderr_device('/dev/full'),
         note='the summary line cannot be written: the plan still is')
    case(WRITE, 'w-trace-dev-full-keeps-plan', PLAN + ['-o', 'out.json', '--trace', '/dev/full'],
         expect=(3,), setup=lambda d: wb(d + '/out.json', b'PRECIOUS'), msg=r'/dev/full')


# ================================================================ models and plans that lie
def skip_name_cases():
    """Skip names: one name, one skip, given or default."""
    sk = TINY_J['skips']
    named = [dict(s, name='skip') for s in sk[:2]] + sk[2:]
    model_case(LIES, 'l-skip-names-twice', tiny_with(('skips', named)), msg=r'skips\[1\]\.name')
    default = copy.deepcopy(sk)
    default[1]['name'] = '%s->%s' % (sk[0]['producer'], sk[0]['consumer'])
    model_case(LIES, 'l-skip-name-is-another-default', tiny_with(('skips', default)),
               msg=r'skips\[1\]\.name.*default')
    default2 = copy.deepcopy(sk)
    default2[0]['name'] = '%s->%s' % (sk[1]['producer'], sk[1]['consumer'])
    model_case(LIES, 'l-default-name-is-another-given', tiny_with(('skips', default2)),
               msg=r'skips\[1\]')
    m = unet_model(8)
    for layer, name in zip(m['layers'], ['a', 'a->b', 'b->c', 'c', 'x', 'y', 'z', 'w']):
        layer['name'] = name
    m['skips'] = [{'producer': 'a->b', 'consumer': 'c', 'bytes_per_sample': 8},
                  {'producer': 'a', 'consumer': 'b->c', 'bytes_per_sample': 8}]
    model_case(LIES, 'l-default-skip-names-collide', m, msg=r'skips\[1\].*a->b->c')
    carried = tiny_with(('carried', [{'name': '%s->%s' % (sk[0]['producer'], sk[0]['consumer']),
                                      'producer': 'embed', 'bytes_per_sample': 8,
                                      'needs_gradient': False}]))
    model_case(LIES, 'l-carried-named-like-a-skip', carried, expect=(0, 2), msg=r'carried|skip',
               post=hooks.plan_validates('plan.json', 'model.json', DGX))

    def dup_names(d):
        d['skips'][1]['name'] = d['skips'][0].get('name') or '%s->%s' % (
            d['skips'][0]['producer'], d['skips'][0]['consumer'])
    corrupt_case('l-plan-skip-names-twice', dup_names,
                 cmds=('validate', 'simulate', 'export', 'export-html', 'diff'), cls=LIES)


def split_backward_cases():
    """Weight shares near 1 or 0 and layers under a nanosecond: every plan validates."""
    for tag, w in (('near-1', 0.9999999), ('near-0', 1e-9), ('tiny', 5e-324)):
        m = copy.deepcopy(TINY_J)
        for layer in m['layers']:
            layer['backward_weight_fraction'] = w
        for pp in ('1', '2', '4'):
            model_case(LIES, 'l-weight-share-%s-pp%s' % (tag, pp), m, expect=(0, 2),
                       extra=('--split-backward', '--pp', pp), msg=r'backward_weight_fraction',
                       post=hooks.plan_validates('plan.json', 'model.json', DGX))
    for pp, extra in (('4', ()), ('8', ()), ('4', ('--split-backward',)), ('2', ('--dp', '1'))):
        m = unet_model(16, fwd=lambda i: 1e-6 if i == 0 else 1e-12)
        model_case(LIES, 'l-sub-ns-stages-pp%s%s' % (pp, ''.join(extra)), m, expect=(0,),
                   extra=('--pp', pp) + extra,
                   post=hooks.plan_validates('plan.json', 'model.json', DGX),
                   note='stages of layers under half a nanosecond: no op may round to 0 ns')
    m = unet_model(12, fwd=lambda i: 1e-9)
    model_case(LIES, 'l-every-layer-1ns-split', m, expect=(0,), extra=('--pp', '2', '--split-backward'),
               post=hooks.plan_validates('plan.json', 'model.json', DGX))


CONTROL_NAMES = ['nul\x00byte', 'esc\x1b]0;title\x07', 'del\x7f', 'c1\u009b31m', 'rtl\u202etxt',
                 'cr\rlf', 'bell\x07\x08']


def control_name_model():
    names = CONTROL_NAMES + ['plain%d' % i for i in range(len(CONTROL_NAMES))]
    return named_model(names, 'skip\x00%d\x1b', 64, 'model\x00\x1b[2J\u202e')


def control_setup(d):
    wj(d + '/model.json', control_name_model())
    r = subprocess.run([cfg.bin, 'plan', '--model', 'model.json', '--cluster', DGX, '--pp', '2',
                        '-q', '-o', 'plan.json'], cwd=d, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError('control-name plan failed: %r' % r.stderr[-400:])
    shutil.copy(cfg.base + '/pp2.json', d + '/other.json')


def control_name_cases():
    """Names with NUL, ESC, DEL, C1 and bidi controls through every text and HTML output."""
    dot = ['export', 'plan.json', '--format', 'dot', '--model', 'model.json', '-o', 'o.dot']
    for name, args, outs, colors in [
            ('plan-summary', ['plan', '--model', 'model.json', '--cluster', DGX, '--pp', '2',
                              '-o', 'p2.json'], ('p2.json',), False),
            ('export-dot', dot, ('o.dot',), False),
            ('export-html', ['export', 'plan.json', '--format', 'html', '--compare', 'other.json',
                             '-o', 'o.html'], ('o.html',), False),
            ('export-csv', ['export', 'plan.json', '--format', 'torch-csv', '-o', 'o.csv'],
             ('o.csv', 'o.stages.json'), False),
            ('diff-table', ['diff', 'other.json', 'plan.json', '--color', 'always'], (), True),
            ('diff-json', ['diff', 'other.json', 'plan.json', '--json'], (), False),
            ('diff-html', ['diff', 'other.json', 'plan.json', '--format', 'html', '-o',
                           'o.html'], ('o.html',), False),
            ('simulate-text', ['simulate', 'plan.json'], (), False),
            ('simulate-json', ['simulate', 'plan.json', '--json'], (), False),
            ('validate', ['validate', 'plan.json', '--model', 'model.json', '--cluster', DGX], (),
             False)]:
        case(LIES, 'l-control-names-%s' % name, args, expect=(0,), setup=control_setup,
             outputs=outs, post=hooks.no_raw_controls(outs, colors=colors))

    def broken(d):
        control_setup(d)
        m = json.load(open(d + '/model.json'))
        m['layers'][1]['params'] = -1
        m['layers'][2]['forward_s'] = {'V100-SXM2\x1b[31m': [1, 2]}
        wj(d + '/bad.json', m)
    case(LIES, 'l-control-names-in-errors', ['plan', '--model', 'bad.json', '--cluster', DGX],
         expect=(2,), setup=broken, msg=r'bad\.json', post=hooks.no_raw_controls())

    def renamed(d):
        control_setup(d)
        m = json.load(open(d + '/model.json'))
        m['layers'][len(CONTROL_NAMES) - 1]['name'] = 'other\x1b[2Jname'  # in no skip
        wj(d + '/model.json', m)
    case(LIES, 'l-control-names-in-violations', ['validate', 'plan.json', '--model', 'model.json',
                                                 '--cluster', DGX],
         expect=(1,), setup=renamed, msg=r'plan\.json', post=hooks.no_raw_controls())
    case(LIES, 'l-control-bytes-in-paths', PLAN + ['-o', 'no\x1bdir/p.json'], expect=(2,),
         msg=r'no\\x1bdir', post=hooks.no_raw_controls())


PREDICTED_LIES = [
    ('iteration-x1.5', 'predicted.iteration_s', lambda v: v * 1.5),
    ('samples-x2', 'predicted.samples_per_s', lambda v: v * 2),
    ('bubble-0', 'predicted.bubble_ratio', lambda v: 0.0),
    ('pipeline-makespan', 'predicted.pipeline_makespan_s', lambda v: v / 2),
    ('allreduce-exposed', 'predicted.allreduce_exposed_s', lambda v: v + 0.5),
    ('p2p-bytes-0', 'comm.p2p_bytes_per_iteration', lambda v: 0),
    ('skip-bytes', 'comm.skip_bytes_per_iteration', lambda v: v + 1024),
    ('allreduce-bytes', 'comm.allreduce_bytes_per_iteration', lambda v: v // 2),
    ('solver-makespan', 'solver.makespan_s', lambda v: v * 0.9),
    ('device-optimizer', 'predicted.devices.0.memory.optimizer', lambda v: 1),
    ('device-compute', 'predicted.devices.1.compute_s', lambda v: v * 3),
]


def chosen(entries):
    return next(e for e in entries if e.get('chosen'))


SUMMARY_LIES = [
    ('objective-x2', lambda d: setp(d, 'partition.objective_s', d['partition']['objective_s'] * 2)),
    ('lower-bound-above', lambda d: setp(d, 'partition.lower_bound_s', 5.0)),
    ('family-iteration', lambda d: chosen(d['partition']['families']).update(iteration_s=9.0)),
    ('search-iteration', lambda d: chosen(d['search']).update(iteration_s=9.0)),
    ('search-degrees', lambda d: chosen(d['search']).update(pp=8)),
    ('options-pp', lambda d: setp(d, 'options.pp', 8)),
    ('inflight-limit', lambda d: setp(d, 'devices.0.inflight_limit', 1000)),
    ('solver-lower-bound', lambda d: setp(d, 'solver.lower_bound_s', 10.0)),
    ('solver-peak', lambda d: setp(d, 'solver.peak_activation_bytes', 1)),
    ('memory-curve', lambda d: setp(d, 'solver.memory_curve.0.activation_budget_bytes', 1 << 50)),
    ('link-class', lambda d: setp(d, 'transfers.0.forward_link', 'bogus')),
    ('cost-model-allreduce', lambda d: setp(d, 'cost_model.allreduce', 'hierarchical')),
    ('cost-model-overlap', lambda d: setp(d, 'cost_model.overlap_comm', True)),
    ('cost-model-quantum', lambda d: setp(d, 'cost_model.time_quantum_s', 1e-6)),
]


def summary_lie_cases():
    """What a plan says of its own search and solve, and of the cluster: validate holds each
    to what it summarises (exit 1)."""
    for tag, mutate in SUMMARY_LIES:
        corrupt_case('l-summary-%s' % tag, mutate, cmds=('validate',), expect=(1,), cls=LIES)


def getp(doc, path):
    cur = doc
    for k in path.split('.'):
        cur = cur[int(k)] if isinstance(cur, list) else cur[k]
    return cur


def predicted_lie_cases():
    """Figures edited by hand: validate recomputes them (exit 1); simulate --check too."""
    def peaks(d):
        d['predicted']['peak_memory_bytes'] = [1 for _ in d['predicted']['peak_memory_bytes']]
    lies = [('peaks-1-byte', peaks)]
    for tag, path, change in PREDICTED_LIES:
        lies.append((tag, lambda d, path=path, change=change: setp(d, path, change(getp(d, path)))))
    for tag, mutate in lies:
        for basefn in ('pp2.json', 'pp2-split.json', 'pp2-1f1b.json', 'pp4-2n.json'):
            corrupt_case('l-predicted-%s-%s' % (tag, basefn[:-5]), mutate, cmds=('validate',),
                         expect=(1,), basefn=basefn, cls=LIES)
    corrupt_case('l-predicted-peaks-1-byte-check', peaks, cmds=('simulate',), expect=(0, 1),
                 cls=LIES)
    case(LIES, 'l-untouched-plans-validate', ['validate', 'p.json', '--model', TINY, '--cluster',
                                              DGX], expect=(0,), setup=with_plan)
    case(LIES, 'l-scaled-plan-validates', ['validate', 'scaled.json', '--model', TINY,
                                           '--cluster', DGX], expect=(0,),
         setup=lambda d: shutil.copy(cfg.base + '/scaled.json', d + '/scaled.json'))

    def split_zero_i(d):
        for s in d['stages']:
            s['backward_weight_s'] = s['backward_s']
    corrupt_case('l-split-I-zero', split_zero_i, cmds=('validate',), expect=(1, 2),
                 basefn='pp2-split.json', cls=LIES)
    corrupt_case('l-split-I-zero', split_zero_i, cmds=('simulate',), expect=(0, 1, 2),
                 basefn='pp2-split.json', cls=LIES, note='replayed as stated')

    def reversed_first(d):
        d['stages'][0]['layers'].reverse()
    corrupt_case('l-first-stage-reversed', reversed_first, cmds=('validate', 'export-dot'),
                 expect=(1, 2), cls=FIRST)


# ================================================================ the cost of reading
def small_objects(n):
    return '[' + ','.join('{"a":%d}' % i for i in range(n)) + ']'


def junk_model(n, key='junk'):
    return json.dumps(TINY_J)[:-1] + ', "%s": %s}' % (key, small_objects(n))


def reading_cases():
    """Inputs that are cheap to write and must be cheap to refuse: linear parsing, counts
    limited while parsing, one look-up per name."""
    for n in (400000, 1000000):
        model_case(READ, 'r-model-%d-objects-unknown-key' % n, raw=junk_model(n).encode(),
                   timeout=30, msg=r'model\.json.*junk')
    cluster_case(READ, 'r-cluster-1000000-objects', raw=(json.dumps(cluster_doc())[:-1] +
                                                          ', "junk": %s}' % small_objects(1000000)).encode(),
                 timeout=30, msg=r'cluster\.json.*junk')

    def plan_junk(d):
        with_plan(d)
        text = open(d + '/p.json').read().rstrip()
        wb(d + '/big.json', text[:-1] + ', "junk": %s}' % small_objects(1000000))
    for cmd in (['simulate', 'big.json'], ['validate', 'big.json', '--model', TINY, '--cluster',
                                           DGX], ['export', 'big.json', '--format', 'dot'],
                ['diff', 'p.json', 'big.json']):
        case(READ, 'r-plan-1000000-objects-%s' % cmd[0], cmd, expect=(0, 2), setup=plan_junk,
             timeout=60, msg=r'big\.json')
    deep = ('{"schema": "pulse.model/v1", "junk": ' + '[' * 1000000 + ']' * 1000000 + '}')
    model_case(READ, 'r-model-1000000-deep', raw=deep.encode(), timeout=30, msg=r'model\.json')
    wide = '{' + ','.join('"k%d": %d' % (i, i) for i in range(300000)) + '}'
    model_case(READ, 'r-model-300000-keys-top', raw=wide.encode(), timeout=30, msg=r'model\.json')
    m = tiny_with()
    m['layers'][0]['extra'] = {('x%d' % i): i for i in range(100000)}
    model_case(READ, 'r-layer-100000-unknown-keys', m, timeout=30, msg=r'layers\[0\]')
    big = unet_model(10)
    big['layers'] = big['layers'] * 20000
    model_case(READ, 'r-model-200000-layers', big, timeout=30, msg=r'layers')
    sk = unet_model(10)
    sk['skips'] = [sk['skips'][0]] * 100000
    model_case(READ, 'r-model-100000-skips', sk, timeout=30, msg=r'skips')
    device_type_cases()
    cluster_reading_cases()


def many_types(model, count):
    m = copy.deepcopy(model)
    real = m['timing']['device_types']
    types = ['T%04d' % i for i in range(count - len(real))] + real
    m['timing']['device_types'] = types
    for layer in m['layers']:
        for key in ('forward_s', 'backward_s'):
            first = layer[key][real[0]]
            layer[key] = {t: layer[key].get(t, first) for t in types}
    return m


def device_type_cases():
    """A model listing hundreds of device types: each looked up once per layer."""
    model_case(READ, 'r-1600-device-types-tiny', many_types(TINY_J, 1600), expect=(0,),
               timeout=60, msg=None)
    sd2 = json.load(open(SD2))
    model_case(READ, 'r-1600-device-types-sd2', many_types(sd2, 1600), expect=(0,),
               timeout=120, extra=('--pp', '4'), msg=None)
    typo = many_types(TINY_J, 1600)
    for layer in typo['layers']:
        layer['forward_s'] = {k + 'x': v for k, v in layer['forward_s'].items()}
    model_case(READ, 'r-1600-device-types-all-misspelt', typo, timeout=60, msg=r'forward_s')
    model_case(READ, 'r-4096-device-types-4096-layers',
               many_types(unet_model(4096, mbs=(1,)), 64), expect=(0, 1, 2), timeout=120,
               extra=('--pp', '8', '--global-batch', '16'), msg=None)


def cluster_reading_cases():
    """Clusters whose matrices and class lists are large or wrong everywhere."""
    classes = cluster_doc(dpn=64)
    classes['link_classes'] = {('C%05d' % i): {'bandwidth_bytes_per_s': 1e10, 'latency_s': 1e-6}
                               for i in range(20000)}
    classes['intra_node'] = [['X' if a == b else 'C%05d' % ((a + b) % 20000) for b in range(64)]
                             for a in range(64)]
    classes['inter_node'] = 'C00000'
    cluster_case(READ, 'r-cluster-20000-link-classes', classes, expect=(0,), timeout=60, msg=None)
    unknown = cluster_doc(dpn=1024)
    unknown['intra_node'] = [['X' if a == b else 'NOPE' for b in range(1024)] for a in range(1024)]
    cluster_case(READ, 'r-cluster-1M-unknown-cells', unknown, timeout=60, msg=r'intra_node')
    cluster_case(READ, 'r-cluster-dpn-1024', cluster_doc(dpn=1024), expect=(0, 1, 2),
                 extra=('--pp', '2'), timeout=120, msg=None)


# ================================================================ left open by the first
def first_catalogue_cases():
    """export --format dot --model with layers out of order; /proc as an output directory."""
    def swapped(d):
        a = d['stages'][0]['layers']
        b = d['stages'][1]['layers']
        a[-1], b[0] = b[0], a[-1]
    corrupt_case('f-layers-swapped-across-stages', swapped, cmds=('export-dot', 'validate'),
                 expect=(1, 2), cls=FIRST)

    def permuted_model(d):
        with_plan(d)
        m = copy.deepcopy(TINY_J)
        m['layers'][1], m['layers'][2] = m['layers'][2], m['layers'][1]
        wj(d + '/m.json', m)
    case(FIRST, 'f-dot-model-in-another-order', ['export', 'p.json', '--format', 'dot', '--model',
                                                 'm.json', '-o', 'o.dot'],
         expect=(2,), setup=permuted_model, msg=r'p\.json.*layers')
    for name, cmd in [('plan', PLAN + ['-o', '/proc/pulse-out.json']),
                      ('plan-trace', PLAN + ['-o', 'p.json', '--trace', '/proc/pulse-trace.json']),
                      ('simulate', ['simulate', 'p.json', '-o', '/proc/pulse-out.json']),
                      ('export-html', ['export', 'p.json', '--format', 'html', '-o',
                                       '/proc/pulse-out.html']),
                      ('export-stages', ['export', 'p.json', '--format', 'torch-csv', '-o', 'o.csv',
                                         '--stages', '/proc/pulse-stages.json']),
                      ('diff', ['diff', 'p.json', 'p4.json', '-o', '/proc/pulse-out.txt'])]:
        case(FIRST, 'f-proc-output-%s' % name, cmd, expect=(2,), setup=with_plan, msg=r'/proc')


def cases():
    """Registered after the first catalogue's cases, in this order."""
    for part in (descriptor_outputs, link_outputs, special_outputs, signal_cases,
                 write_error_cases, skip_name_cases, split_backward_cases, control_name_cases,
                 predicted_lie_cases, summary_lie_cases, reading_cases, first_catalogue_cases):
        part()
