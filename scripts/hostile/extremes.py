"""Class 2 of the first catalogue: extreme but valid inputs."""

from .common import (cluster_case, cluster_doc, model_case, unet_model)


def cluster_extremes():
    """Clusters at the edges of what is valid."""
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


def model_extremes():
    """Models at the edges of what is valid."""
    C = 2
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


def cases():
    """Class 2: extreme but valid inputs."""
    cluster_extremes()
    model_extremes()
