"""Cluster profiles (pulse.cluster/v2): DGX-1 V100 and Atlas 800 (Ascend 910A) servers, the
2026 servers: DGX H100, DGX H200, DGX A100, Atlas 800T A2 (Ascend 910B), and a DGX B200,
whose device no model profile has times for (the planner derives them from its spec).

Bandwidths are achieved bytes per second per direction, latencies per message; every
figure comes from models_hw.md section 6 or the sources cited below, and is repeated, with
its source, in each profile's provenance. Each profile's `device.spec` is its device's row
of datasheets.TABLE (specs.py).
"""

from dataclasses import dataclass
from typing import Dict, List, Tuple

from . import datasheets, specs
from .catalog import GENERATOR, r6

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


def device(type_name: str, capacity: int) -> Dict:
    """The `device` object: its type, memory and the spec of its datasheet row."""
    return {"type": type_name, "memory_bytes": capacity,
            "reserved_bytes": reserved_bytes(capacity), "spec": specs.spec_json(type_name)}


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
    source: str = ("Vendor topology and link figures with stated achieved-bandwidth factors "
                   "(models_hw.md section 6); nothing measured.")


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
        device=device("V100-SXM2", capacity),
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
        device=device("Ascend-910A", capacity),
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


# --- the 2026 servers ----------------------------------------------------------------------

NEW_NODE_COUNTS = (1, 2, 4, 8, 16)
MLPERF_SYSTEMS = ("mlcommons/training_results_v4.0 @ 62f111b, NVIDIA/systems/"
                  "eos_n8_ngc24.04_nemo.json (DGX H100) and h200_ngc24.04_nemo.json (DGX H200): "
                  "8 GPUs, 'NVLINK Gen4 900 GB/s + NVSWITCH Gen3', 'Compute: 8x ConnectX-7 IB "
                  "NDR 400Gb/s', memory 81559 MiB (H100-SXM5-80GB) and 143771 MiB "
                  "(H200-SXM5-141GB)")
NCCL_H100 = ("NVIDIA/nccl-tests issue #212 (sjeaugey, 2024-05-06): H100 NVLink line rate 450 "
             "GB/s per direction, NCCL's effective bandwidth 370 GB/s")
NCCL_NDR = ("NVIDIA/nccl-tests issue #290 (AddyLaddy, 2025-03-03): 'For NDR @ 400Gbps you "
            "should see 46-48GB/s per NIC'")
NCCL_A100 = ("NVIDIA/nccl-tests issue #149 (sjeaugey, 2023-07-05): A100 12 NVLinks of 25 GB/s "
             "per direction, about 20 GB/s effective each, 'limits it to ~230GB/s'")
NCCL_HDR = ("NVIDIA/nccl-tests issue #100 (2022-01-17): two HGX A100 with four ConnectX-6 HDR "
            "200 Gb/s reach 91 GB/s bus bandwidth, 22.75 GB/s per NIC")
ASCEND_910B_SERVER = ("ArthurChiao/arthurchiao.github.io _posts/2023-09-16-gpu-advanced-notes-"
                      "2-zh.md @ 1127364: an 8 x 910B1 server, npu-smi -t topo HCCS between every "
                      "pair, 65536 MB HBM per NPU, 8 x 200G RoCE NICs (hccn_tool: Speed "
                      "200000Mb/s); 910B HCCS 56 GB/s per pair (both directions), 392 GB/s per "
                      "NPU in all (its _posts/2023-10-25 GPU data sheet table)")
HIXL_A2 = ("xiaojia151/Hixl benchmarks/A2_benchmark_performance.md @ 875da07: one NPU pair on "
           "an Ascend A2 server, 8 MB transfers: HCCS D2D write 19.4 GB/s, read 25.7 GB/s; "
           "RDMA (RoCE) D2D 22.6 GB/s")
A100_MEMORY = "nvidia-smi of an A100-SXM4-80GB quoted in public code: 81920MiB"


def _switched(cls: str, n: int = 8) -> List[List[str]]:
    """Every pair of the node on one switched fabric (NVSwitch, or HCCS full mesh)."""
    return [["X" if a == b else cls for b in range(n)] for a in range(n)]


def _dgx_hopper(gpu: str, mib: int, model: str) -> ServerSpec:
    capacity = mib << 20
    return ServerSpec(
        prefix=f"dgx-{gpu.lower()}",
        description=(f"NVIDIA DGX {gpu} with 8 {model} (NVLink 4 through NVSwitch, every GPU "
                     "pair at full bandwidth); nodes joined by NDR InfiniBand, one 400 Gb/s "
                     "ConnectX-7 per GPU."),
        device=device(f"{gpu}-SXM", capacity),
        links={
            "NVL": _link(370e9, 8e-6, "NVLink 4 through NVSwitch: 450 GB/s per direction "
                         "line rate, 370 GB/s NCCL effective"),
            "IB": _link(46e9, 15e-6, "one NDR InfiniBand port per GPU (400 Gb/s = 50 GB/s), "
                        "46 GB/s achieved"),
        },
        topology=_switched("NVL"),
        inter_node="IB",
        references=[MLPERF_SYSTEMS, NCCL_H100, NCCL_NDR,
                    f"NVIDIA {gpu} SXM datasheet: 989.4 TFLOPS bf16 dense",
                    "models_hw.md section 6 (pulse-plan shared reference): per-message alpha"],
        assumptions=[
            "NVL = 370 GB/s per direction for every GPU pair (NCCL's measured effective "
            "NVLink 4 bandwidth; the NVSwitch gives each pair the full 18 links); latency "
            "8 us (5-10 us intra-node per-message alpha).",
            "IB = 46 GB/s, the low end of the 46-48 GB/s NCCL reaches per NDR NIC; every GPU "
            "has its own NIC (rail-optimized), so a pair across nodes gets a whole port; "
            "latency 15 us (10-20 us NCCL small-message).",
            f"memory_bytes = {mib} MiB, what the GPU reports (MLPerf system description).",
        ] + COMMON_CLUSTER_ASSUMPTIONS,
        source=("Vendor topology and NCCL-measured link bandwidths (sources below); "
                "nothing measured by us."),
    )


def _dgx_a100() -> ServerSpec:
    capacity = 81920 << 20
    return ServerSpec(
        prefix="dgx-a100",
        description=("NVIDIA DGX A100 with 8 A100 SXM4 80 GB (NVLink 3 through NVSwitch, every "
                     "GPU pair at full bandwidth); nodes joined by HDR InfiniBand, one 200 Gb/s "
                     "ConnectX-6 per GPU."),
        device=device("A100-SXM", capacity),
        links={
            "NVL": _link(230e9, 8e-6, "NVLink 3 through NVSwitch: 12 x 25 GB/s per direction "
                         "line rate, about 230 GB/s NCCL effective"),
            "IB": _link(22.5e9, 15e-6, "one HDR InfiniBand port per GPU (200 Gb/s = 25 GB/s) "
                        "at 0.9"),
        },
        topology=_switched("NVL"),
        inter_node="IB",
        references=[NCCL_A100, NCCL_HDR, A100_MEMORY,
                    "NVIDIA DGX A100 system architecture: 8 A100 SXM4, 6 NVSwitch, 8 x "
                    "ConnectX-6 HDR 200 Gb/s for the compute fabric",
                    "NVIDIA A100 SXM4 datasheet: 312 TFLOPS bf16 dense, 2.039 TB/s HBM2e",
                    "models_hw.md section 6 (pulse-plan shared reference): per-message alpha"],
        assumptions=[
            "NVL = 230 GB/s per direction for every GPU pair (NCCL's measured ceiling on "
            "A100); latency 8 us.",
            "IB = 0.9 x 25 GB/s = 22.5 GB/s per GPU's own HDR port (NCCL measured 22.75 per "
            "NIC); latency 15 us.",
            "memory_bytes = 81920 MiB (80 GiB), what an A100-SXM4-80GB reports.",
        ] + COMMON_CLUSTER_ASSUMPTIONS,
        source=("Vendor topology and NCCL-measured link bandwidths (sources below); "
                "nothing measured by us."),
    )


def _atlas_a2() -> ServerSpec:
    capacity = 65536 << 20
    return ServerSpec(
        prefix="atlas800t-a2-910b",
        description=("Huawei Atlas 800T A2 training server with 8 Ascend 910B: a full HCCS "
                     "mesh (every NPU pair linked directly); 200GE RoCE v2 per NPU between "
                     "nodes."),
        device=device("Ascend-910B", capacity),
        links={
            "HCCS": _link(22.4e9, 10e-6, "one HCCS link per NPU pair (56 GB/s both "
                          "directions, 28 per direction) at 0.8"),
            "ROCE": _link(22.5e9, 20e-6, "the NPU's own 200GE RoCE v2 port (25 GB/s) at 0.9"),
        },
        topology=_switched("HCCS"),
        inter_node="ROCE",
        references=[ASCEND_910B_SERVER, HIXL_A2,
                    "Huawei Ascend 910, Hot Chips 31 (2019): 4096 fp16 MAC per cube per cycle",
                    "models_hw.md section 6 (pulse-plan shared reference)"],
        assumptions=[
            "HCCS = 0.8 x 28 GB/s = 22.4 GB/s per direction per NPU pair (HIXL measured "
            "19.4 GB/s writing and 25.7 GB/s reading one pair); latency 10 us.",
            "ROCE = 0.9 x 25 GB/s = 22.5 GB/s per NPU's own 200GE port (HIXL measured 22.6 "
            "GB/s RDMA between two NPUs); latency 20 us (RoCE at the high end of 10-20 us).",
            "memory_bytes = 64 GiB (65536 MB, npu-smi); the spec's fp16 peak = 24 AI cores x "
            "1.8 GHz x 4096 MAC x 2 = 354 TFLOPS (public figures for 910B SKUs range 280-414; "
            "only peak x the fitted efficiency is anchored).",
        ] + COMMON_CLUSTER_ASSUMPTIONS,
        source=("Topology read by npu-smi on an 8 x 910B server, link figures from measured "
                "HCCS/RDMA transfers (sources below); nothing measured by us."),
    )


MLPERF_B200 = ("mlcommons/training_results_v5.0 NVIDIA/systems/nyx_n1_ngc25.04_nemo.json (read "
               "in the copy prishajain1/training_results_v5.0 @ 0fdc28f): 'Nyx (1x NVIDIA DGX "
               "B200)', 8 'NVIDIA Blackwell GPU (B200-SXM-180GB)', memory 183359 MiB, 'NVLINK "
               "Gen5 1800 GB/s + NVSWITCH Gen5', '8x ConnectX-7 IB NDR 400Gb/s'")
NCCL_B200 = ("NVIDIA/nccl src/graph/topo.h (v2.27, quoted in NVIDIA/nccl issue #1807, "
             "2025-08-13): SM100_NVLINK_BW 40.1 GB/s per link, 18 links = 721.8 GB/s, the "
             "'maxBw 721.8' NCCL logs on a B200 (SM90_NVLINK_BW 20.6 x 18 = 370.8 is the H100's "
             "370 GB/s)")


def _dgx_b200() -> ServerSpec:
    capacity = 183359 << 20
    return ServerSpec(
        prefix="dgx-b200",
        description=("NVIDIA DGX B200 with 8 B200 SXM 180 GB (NVLink 5 through NVSwitch, every "
                     "GPU pair at full bandwidth); nodes joined by NDR InfiniBand, one 400 Gb/s "
                     "ConnectX-7 per GPU. No model profile has B200 times: the planner derives "
                     "them from this file's device spec."),
        device=device("B200", capacity),
        links={
            "NVL": _link(720e9, 8e-6, "NVLink 5 through NVSwitch: 900 GB/s per direction "
                         "line rate, 720 GB/s in NCCL's own model (18 x 40.1 GB/s)"),
            "IB": _link(46e9, 15e-6, "one NDR InfiniBand port per GPU (400 Gb/s = 50 GB/s), "
                        "46 GB/s achieved"),
        },
        topology=_switched("NVL"),
        inter_node="IB",
        references=[MLPERF_B200, NCCL_B200, NCCL_NDR, datasheets.KLOCKWOOD_B200,
                    datasheets.AO_B200_BW,
                    "models_hw.md section 6 (pulse-plan shared reference): per-message alpha"],
        assumptions=[
            "NVL = 720 GB/s per direction for every GPU pair: NCCL's bandwidth model of 18 "
            "NVLink 5 links (40.1 GB/s each), 0.8 of the 900 GB/s line rate as H100's 370 is "
            "of 450; not measured by us; latency 8 us.",
            "IB = 46 GB/s per GPU's own NDR port, as on DGX H100; latency 15 us.",
            "memory_bytes = 183359 MiB, what the GPU reports (MLPerf system description).",
            "The device spec's figures are datasheet figures and assumptions (its source "
            "says which); nothing was measured on a B200.",
        ] + COMMON_CLUSTER_ASSUMPTIONS,
        source=("Vendor topology, datasheet figures and NCCL's NVLink model (sources below); "
                "nothing measured by us."),
    )


def new_server_specs() -> List[ServerSpec]:
    return [_dgx_hopper("H100", 81559, "H100 SXM5 80 GB"),
            _dgx_hopper("H200", 143771, "H200 SXM 141 GB"), _dgx_a100(), _atlas_a2()]


def all_servers() -> List[Tuple[ServerSpec, Tuple[int, ...]]]:
    """Every server with the node counts shipped for it."""
    return ([(s, NODE_COUNTS) for s in server_specs()]
            + [(s, NEW_NODE_COUNTS) for s in new_server_specs()] + [(_dgx_b200(), (1,))])


def cluster_profile(server: ServerSpec, nodes: int) -> Dict:
    return {
        "schema": "pulse.cluster/v2",
        "name": f"{server.prefix}-{nodes}n",
        "description": f"{nodes} node{'s' if nodes > 1 else ''}. {server.description}",
        "provenance": {
            "method": "analytic",
            "source": server.source,
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
    return [cluster_profile(s, n) for s, counts in all_servers() for n in counts]
