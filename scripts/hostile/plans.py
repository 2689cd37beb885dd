"""Class 4 of the first catalogue: corrupted plans, one case per command."""
import copy
import os
import shutil

from .common import (base, case, cfg, corrupt_case, DGX, TINY, wj)


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


def schedule_corruptions():
    """Ops, stages and times edited."""
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


def degree_corruptions():
    """Degrees, ranks, bytes and schema edited."""
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


def section_corruptions():
    """Sections dropped, figures and cost model edited."""
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


def claim_corruptions():
    """Claims that contradict the rest; split and 2-node plans."""
    corrupt_case('p-sha-changed', m_sha_changed, cmds=('validate',), expect=(1, 2))
    # diff has no model file to hash: it shows a changed sha256 as a recalibrated profile in
    # its headline (issue 32, as p-diff-changed-inputs), it does not refuse it.
    corrupt_case('p-sha-changed', m_sha_changed, cmds=('diff',), expect=(0,))
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


def raw_corruptions():
    """The bytes of a plan corrupted."""
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


def file_oddities():
    """A plan that is a directory, a device, huge, unreadable."""
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
        shutil.copy(cfg.base + '/pp2.json', d + '/big.json')
        with open(d + '/big.json', 'r+b') as f:
            f.truncate((1 << 30) + 1)
    case(4, 'p-1GiB-plus-1', ['simulate', 'big.json'], expect=(2,), msg=r'big\.json', setup=sparse_big,
         note='sparse file just over the 1 GiB plan limit')

    def sparse_under(d):
        data = open(cfg.base + '/pp2.json', 'rb').read()
        with open(d + '/big.json', 'wb') as f:
            f.write(data)
            f.write(b' ' * (((1 << 30) - len(data) - 16)))
    case(4, 'p-just-under-1GiB-spaces', ['simulate', 'big.json'], expect=(0, 2), msg=r'big\.json', setup=sparse_under,
         note='a valid plan padded with whitespace to just under 1 GiB')

    def noperm(d):
        shutil.copy(cfg.base + '/pp2.json', d + '/p.json')
        os.chmod(d + '/p.json', 0)
    case(4, 'p-unreadable-mode-000', ['simulate', 'p.json'], expect=(0, 2), msg=r'p\.json', setup=noperm,
         note='mode 000 (root can read it anyway)')


def cross_plan_cases():
    """Two plans that disagree; a plan for another cluster."""
    # diff of plans with the same inputs but different sha
    def diff_sha(d):
        a = base('pp2.json')
        b = base('pp4.json')
        b['inputs']['model']['sha256'] = 'f' * 64
        wj(d + '/a.json', a)
        wj(d + '/b.json', b)
    # A recalibrated profile is shown (the headline says so), not refused (issue 32).
    case(4, 'p-diff-changed-inputs', ['diff', 'a.json', 'b.json'], expect=(0,), setup=diff_sha)
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
    case(4, 'p-simulate-atlas-plan-on-dgx', ['simulate', cfg.base + '/atlas.json', '--cluster', DGX], expect=(2,),
         msg=r'type|Ascend|V100')
    case(4, 'p-diff-v100-vs-atlas', ['diff', cfg.base + '/pp2.json', cfg.base + '/atlas.json', '--format', 'html', '-o',
                                      'o.html', '--fail-if-slower', '0'], expect=(0, 4), outputs=('o.html',))
    # export of a plan whose pipeline groups order devices differently
    def groups_reordered(d):
        a = base('pp2.json')
        g = a['rank_map']['pipeline_groups']
        g[0] = list(reversed(g[0]))
        wj(d + '/bad.json', a)
    case(4, 'p-export-groups-reversed', ['export', 'bad.json', '--format', 'torch-csv', '-o', 'o.csv'], expect=(2,),
         msg=r'bad\.json', setup=groups_reordered, outputs=('o.csv', 'o.stages.json'))


def cases():
    """Class 4: corrupted plans."""
    for part in (schedule_corruptions, degree_corruptions, section_corruptions, claim_corruptions,
                 raw_corruptions, file_oddities, cross_plan_cases):
        part()
