"""Class 1 of the first catalogue: malformed model and cluster profiles."""
import copy
import json

from .common import (cluster_case, DELETE, DGX_J, dgx_with, model_case, TIMEOUT, TINY_J, tiny_with,
                     unet_model)


def dup_post(d, r, fails, quest):
    if r.returncode == 0:
        try:
            nm = json.load(open(d + '/plan.json'))['inputs']['model']['name']
        except Exception:
            nm = '?'
        quest.append('duplicate key accepted silently (model name in the plan: %r)' % nm)


def model_syntax():
    """Model files that are not JSON, or JSON at its edges."""
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


def model_fields():
    """The top-level fields of a model: schema, name, provenance, timing."""
    C = 1
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


def model_layers():
    """Layers: names, counts, times, bytes."""
    C = 1
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


def model_skips():
    """Skips, carried tensors and time ranges."""
    C = 1
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


def model_limits():
    """Layers and skips at and past their limits."""
    C = 1
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


def cluster_fields():
    """Cluster files: syntax, device, counts, link numbers."""
    C = 1
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


def cluster_links():
    """Cluster link classes and the intra-node matrix."""
    C = 1
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


def cases():
    """Class 1: malformed profiles."""
    for part in (model_syntax, model_fields, model_layers, model_skips, model_limits,
                 cluster_fields, cluster_links):
        part()
