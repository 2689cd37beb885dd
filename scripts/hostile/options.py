"""Class 3 of the first catalogue: command-line options."""
import re
import shutil

from .common import (ATLAS, case, cfg, DGX, DGX2, plan_case, PROF, SD2, TINY)


def integer_options():
    """Integer options and their limits."""
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
    plan_case(C, 'o--zero=4', ['--zero', '4'], (2,), msg=r'zero')  # 0-3 since issue 29
    plan_case(C, 'o--zero=-1', ['--zero', '-1'], (2,), msg=r'zero')


def number_options():
    """Scales, budgets and solver limits."""
    C = 3
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


def command_lines():
    """Strategies, families, stray and missing arguments, odd inputs."""
    C = 3
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


def two_plans(d):
    shutil.copy(cfg.base + '/pp2.json', d + '/a.json')
    shutil.copy(cfg.base + '/pp4.json', d + '/b.json')


def diff_options():
    """diff's options."""
    C = 3
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
         setup=lambda d: shutil.copy(cfg.base + '/scaled.json', d + '/scaled.json'),
         note='plan already at compute_scale 2, x1000 = 2000 beyond the 1000 limit')
    case(C, 'd-one-arg', ['diff', 'a.json'], expect=(2,), msg=r'NEW|two|plan|usage', setup=two_plans)
    case(C, 'd-three-args', ['diff', 'a.json', 'b.json', 'a.json'], expect=(2,), msg=r'a\.json|usage|plan',
         setup=two_plans)
    case(C, 'd-same-file', ['diff', 'a.json', 'a.json', '--fail-if-slower', '0', '--fail-if-more-traffic', '0'],
         expect=(0,), setup=two_plans, note='a plan against itself must not trip a 0% threshold')


def tool_options():
    """simulate's, export's and validate's options."""
    C = 3
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


def cases():
    """Class 3: options."""
    for part in (integer_options, number_options, command_lines, diff_options, tool_options):
        part()
