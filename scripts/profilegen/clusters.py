"""Cluster profiles (pulse.cluster/v1): DGX-1 V100 and Atlas 800 (Ascend 910A) servers.

Bandwidths are achieved bytes per second per direction, latencies per message; every
figure comes from models_hw.md section 6 and is repeated, with its source, in each
profile's provenance.
"""

from dataclasses import dataclass
from typing import Dict, List

from .catalog import GENERATOR, r6
from .timing import ASCEND_910A, V100

GIB = 1 << 30
NODE_COUNTS = (1, 2, 4, 8)

# NVLink 2.0: 25 GB/s per link per direction; NVLink/HCCS achieve about 0.8 x peak, IB and
# RoCE 0.85-0.9 x peak (models_hw.md 6, "Suggested achieved-efficiency defaults").
NVLINK_LINK_PEAK = 25e9
NVLINK_EFFICIENCY = 0.8
EDR_IB_PEAK = 12.5e9           # 100 Gb/s EDR InfiniBand port
IB_EFFICIENCY = 0.9
HCCS_LINK_PEAK = 30e9          # Hot Chips 2019: "3x 240Gbps HCCS ports" on the 910
HCCS_EFFICIENCY = 0.8
ROCE_PEAK = 12.5e9             # integrated 100GE RoCE v2 port per NPU
ROCE_EFFICIENCY = 0.85

# DGX-1V `nvidia-smi topo -m` (models_hw.md 6): NV1 = one NVLink, NV2 = two, SYS = none.
DGX1V_TOPOLOGY = [
    "X   NV1 NV1 NV2 NV2 SYS SYS SYS",
    "NV1 X   NV2 NV1 SYS NV2 SYS SYS",
    "NV1 NV2 X   NV2 SYS SYS NV1 SYS",
    "NV2 NV1 NV2 X   SYS SYS SYS NV1",
    "NV2 SYS SYS SYS X   NV1 NV1 NV2",
    "SYS NV2 SYS SYS NV1 X   NV2 NV1",
    "SYS SYS NV1 SYS NV1 NV2 X   NV2",
    "SYS SYS SYS NV1 NV2 NV1 NV2 X",
]


def reserved_bytes(capacity: int) -> int:
    """Runtime context, library workspaces and communicator buffers (1 GiB) plus 5% of
    the capacity for caching-allocator fragmentation."""
    return GIB + capacity // 20


def _link(bw: float, latency: float, description: str) -> Dict:
    return {"bandwidth_bytes_per_s": r6(bw), "latency_s": r6(latency),
            "description": description}


def dgx1_links() -> Dict[str, Dict]:
    return {
        "NV2": _link(2 * NVLINK_LINK_PEAK * NVLINK_EFFICIENCY, 8e-6,
                     "two NVLink 2.0 links (2 x 25 GB/s per direction) at 0.8"),
        "NV1": _link(NVLINK_LINK_PEAK * NVLINK_EFFICIENCY, 8e-6,
                     "one NVLink 2.0 link (25 GB/s per direction) at 0.8"),
        "SYS": _link(9e9, 12e-6,
                     "no NVLink: PCIe 3.0 x16 across the QPI socket link, about 8-10 GB/s"),
        "IB": _link(EDR_IB_PEAK * IB_EFFICIENCY, 15e-6,
                    "one EDR InfiniBand port (100 Gb/s = 12.5 GB/s) at 0.9"),
    }


def atlas800_links() -> Dict[str, Dict]:
    return {
        "HCCS": _link(HCCS_LINK_PEAK * HCCS_EFFICIENCY, 10e-6,
                      "one HCCS link (240 Gb/s = 30 GB/s) at 0.8, inside a 4-NPU group"),
        "PCIE": _link(20e9, 15e-6,
                      "between the two 4-NPU groups: PCIe 4.0 x16 through the host CPUs, "
                      "about 20-25 GB/s practical"),
        "ROCE": _link(ROCE_PEAK * ROCE_EFFICIENCY, 20e-6,
                      "the NPU's own 100GE RoCE v2 port (12.5 GB/s) at 0.85"),
    }


def atlas800_topology() -> List[List[str]]:
    """Two groups of four NPUs (0-3, 4-7), a full HCCS mesh inside each group."""
    return [["X" if a == b else ("HCCS" if a // 4 == b // 4 else "PCIE") for b in range(8)]
            for a in range(8)]


@dataclass
class ServerSpec:
    prefix: str
    description: str
    device: Dict
    links: Dict[str, Dict]
    topology: List[List[str]]
    inter_node: str
    references: List[str]
    assumptions: List[str]


COMMON_CLUSTER_ASSUMPTIONS = [
    "Bandwidths are achieved per direction per device pair; contention between concurrent "
    "transfers on shared links is not modelled.",
    "overlap_comm false: a point-to-point send occupies the sending device (NCCL/HCCL P2P "
    "kernels use compute units).",
    "reserved_bytes = 1 GiB (runtime context, cuDNN/cuBLAS or CANN workspaces, communicator "
    "buffers) + 5% of memory_bytes (caching-allocator fragmentation).",
]


def _v100_server(gb: int) -> ServerSpec:
    capacity = gb * GIB
    return ServerSpec(
        prefix=f"dgx1-v100-{gb}gb",
        description=(f"NVIDIA DGX-1 with 8 V100 SXM2 {gb} GB (hybrid cube-mesh NVLink 2.0); "
                     "nodes joined by EDR InfiniBand, one port per device pair."),
        device={"type": V100.name, "memory_bytes": capacity,
                "reserved_bytes": reserved_bytes(capacity), "peak_fp16_flops": r6(V100.peak_flops)},
        links=dgx1_links(),
        topology=[row.split() for row in DGX1V_TOPOLOGY],
        inter_node="IB",
        references=[
            "NVIDIA DGX-1 System Architecture white paper (hybrid cube-mesh, nvidia-smi topo -m)",
            "NVIDIA NVLink page: 6 links x 25 GB/s per direction per V100",
            "NCCL nccl-tests issues #149 (about 20 GB/s per link achieved) and #29 (DGX-1 4 x EDR)",
            "NVIDIA Tesla V100 datasheet: 16/32 GB HBM2, 125 TFLOPS fp16 tensor",
            "models_hw.md section 6 (pulse-plan shared reference)",
        ],
        assumptions=[
            "NV2 = 2 x 25 GB/s x 0.8 = 40 GB/s, NV1 = 25 GB/s x 0.8 = 20 GB/s (0.8 x NVLink "
            "peak, matching NCCL's about 20 GB/s per link); latency 8 us (5-10 us intra-node "
            "per-message alpha).",
            "SYS (GPU pairs without NVLink, across the CPU sockets) = 9 GB/s, the middle of the "
            "8-10 GB/s effective cross-socket PCIe/QPI figure; latency 12 us.",
            "IB = one 100 Gb/s EDR port at 0.9 = 11.25 GB/s (11-12 GB/s achieved); latency "
            "15 us (10-20 us NCCL small-message).",
            f"memory_bytes = {gb} GiB HBM2.",
        ] + COMMON_CLUSTER_ASSUMPTIONS,
    )


def _atlas_server() -> ServerSpec:
    capacity = 32 * GIB
    return ServerSpec(
        prefix="atlas800-910a",
        description=("Huawei Atlas 800 training server (model 9000) with 8 Ascend 910A: two "
                     "groups of 4 NPUs, full HCCS mesh inside a group, PCIe through the host "
                     "between groups; 100GE RoCE v2 per NPU between nodes."),
        device={"type": ASCEND_910A.name, "memory_bytes": capacity,
                "reserved_bytes": reserved_bytes(capacity),
                "peak_fp16_flops": r6(ASCEND_910A.peak_flops)},
        links=atlas800_links(),
        topology=atlas800_topology(),
        inter_node="ROCE",
        references=[
            "Huawei Ascend 910, Hot Chips 31 (2019): 256 TFLOPS fp16, 3 x 240 Gb/s HCCS ports",
            "Huawei Cloud CCE documentation: 8 NPUs in two groups of 4 interconnected by HCCS",
            "Atlas 800 training server (model 9000) specifications: 8 x 100GE RoCE v2",
            "models_hw.md section 6 (pulse-plan shared reference)",
        ],
        assumptions=[
            "HCCS = 30 GB/s x 0.8 = 24 GB/s per NPU pair inside a group (each NPU uses its 3 "
            "ports for the other 3); latency 10 us.",
            "PCIE (pairs in different groups) = 20 GB/s, the low end of the 20-25 GB/s "
            "practical PCIe 4.0 x16 path through the host CPUs; latency 15 us.",
            "ROCE = one 100GE port per NPU at 0.85 = 10.6 GB/s (11-12 GB/s achievable at "
            "best); latency 20 us (10-20 us inter-node, RoCE at the high end).",
            "memory_bytes = 32 GiB HBM2; the 256 TFLOPS peak is the Hot Chips figure (some "
            "SKUs quote 280 or 320).",
        ] + COMMON_CLUSTER_ASSUMPTIONS,
    )


def server_specs() -> List[ServerSpec]:
    return [_v100_server(16), _v100_server(32), _atlas_server()]


def cluster_profile(server: ServerSpec, nodes: int) -> Dict:
    return {
        "schema": "pulse.cluster/v1",
        "name": f"{server.prefix}-{nodes}n",
        "description": f"{nodes} node{'s' if nodes > 1 else ''}. {server.description}",
        "provenance": {
            "method": "analytic",
            "source": ("Vendor topology and link figures with stated achieved-bandwidth "
                       "factors (models_hw.md section 6); nothing measured."),
            "generator": GENERATOR,
            "references": server.references,
            "assumptions": server.assumptions,
        },
        "device": dict(server.device),
        "devices_per_node": len(server.topology),
        "nodes": nodes,
        "link_classes": server.links,
        "intra_node": server.topology,
        "inter_node": server.inter_node,
        "overlap_comm": False,
    }


def cluster_profiles() -> List[Dict]:
    return [cluster_profile(s, n) for s in server_specs() for n in NODE_COUNTS]
