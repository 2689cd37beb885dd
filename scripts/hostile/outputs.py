"""Class 5 of the first catalogue: output paths."""
import os
import shutil

from .common import (base, case, cfg, DGX, setp, TINY, wb, wj)


C = 5


def cp_inputs(d):
    shutil.copy(TINY, d + '/model.json')
    shutil.copy(DGX, d + '/cluster.json')
    shutil.copy(cfg.base + '/pp2.json', d + '/plan.json')
    shutil.copy(cfg.base + '/pp4.json', d + '/plan4.json')
    os.mkdir(d + '/sub')


def P(name, args, expect=(2,), msg=None, setup=None, outputs=(), note=''):
    def s(d, setup=setup):
        cp_inputs(d)
        if setup:
            setup(d)
    case(C, name, args, expect=expect, msg=msg, setup=s, outputs=outputs, note=note)


pl = ['plan', '--model', 'model.json', '--cluster', 'cluster.json', '--pp', '2', '-q']


def preexist(d):
    wb(d + '/out.json', b'PRECIOUS')
    wb(d + '/trace.json', b'PRECIOUS-TRACE')


def plan_outputs():
    """plan's -o and --trace where they cannot or must not go."""
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


def plan_outputs_preexisting():
    """Failing plans leave the files that were there."""
    P('w-preexisting-failing-plan', ['plan', '--model', 'model.json', '--cluster', 'cluster.json', '--pp', '999',
                                     '-o', 'out.json', '--trace', 'trace.json'], expect=(1, 2), setup=preexist)
    P('w-preexisting-infeasible-plan', ['plan', '--model', 'model.json', '--cluster', 'cluster.json',
                                        '--activation-budget', '1B', '--pp', '8', '-o', 'out.json', '--trace',
                                        'trace.json'], expect=(1, 2), setup=preexist)
    P('w-preexisting-trace-bad-dir', ['plan', '--model', 'model.json', '--cluster', 'cluster.json', '--pp', '2',
                                      '-o', 'out.json', '--trace', 'nodir/trace.json'], expect=(2,), setup=preexist,
      msg=r'nodir')


def tool_outputs():
    """simulate's, diff's, export's and validate's outputs."""
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


def cases():
    """Class 5: output paths."""
    plan_outputs()
    plan_outputs_preexisting()
    tool_outputs()
