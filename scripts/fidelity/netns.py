"""Two network namespaces joined by a veth pair, shaped with tc (tbf, and netem for delay
where the kernel has it). Root only. Everything is created under one unique prefix and
removed by ``down()``, which is safe to call at any point (and twice)."""

import os
import subprocess


def sh(*cmd, check=True):
    proc = subprocess.run(list(cmd), capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc


class VethPair:
    """Namespace i holds device dev[i] with address addr[i] (a private /24)."""

    def __init__(self, prefix=None, subnet="10.231.77"):
        prefix = prefix or f"pf{os.getpid() % 100000}"
        self.ns = [f"{prefix}n0", f"{prefix}n1"]
        self.dev = [f"{prefix}v0", f"{prefix}v1"]  # interface names: at most 15 characters
        self.addr = [f"{subnet}.1", f"{subnet}.2"]
        self.created = False

    def up(self):
        self.down()  # a stale pair from an interrupted run under the same prefix
        self.created = True
        for ns in self.ns:
            sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", self.dev[0], "type", "veth", "peer", "name", self.dev[1])
        for i in (0, 1):
            sh("ip", "link", "set", self.dev[i], "netns", self.ns[i])
            sh("ip", "-n", self.ns[i], "addr", "add", f"{self.addr[i]}/24", "dev", self.dev[i])
            sh("ip", "-n", self.ns[i], "link", "set", self.dev[i], "up")
            sh("ip", "-n", self.ns[i], "link", "set", "lo", "up")

    def down(self):
        for ns in self.ns:  # deleting a namespace deletes the veth end inside it
            sh("ip", "netns", "del", ns, check=False)
        self.created = False

    def shape(self, rate_mbit, delay_ms=0.0, queue_ms=50.0):
        """Limit each direction to rate_mbit (tbf on each end's egress); add delay_ms
        one-way with netem if asked (fails clearly where netem is missing).

        The queue holds queue_ms of data (at least 128 KiB). A deep queue (seconds) made
        the TCP ACKs of one direction wait behind the other direction's data, which cut
        the throughput of links busy both ways (measured: +13% on the sequential plan at
        10 Mbit/s with a 4 MiB queue)."""
        rate_bytes = rate_mbit * 1e6 / 8
        burst = max(32 * 1024, int(rate_bytes / 100))     # 10 ms worth, at least 32 KiB
        limit = max(128 * 1024, int(rate_bytes * queue_ms / 1000))
        for i in (0, 1):
            self.unshape(i)
            tc = ["ip", "netns", "exec", self.ns[i], "tc", "qdisc", "add", "dev", self.dev[i]]
            tbf = ["tbf", "rate", f"{rate_mbit}mbit", "burst", str(burst), "limit", str(limit)]
            if delay_ms > 0:
                sh(*tc, "root", "handle", "1:", "netem", "delay", f"{delay_ms}ms")
                sh(*tc, "parent", "1:", "handle", "2:", *tbf)
            else:
                sh(*tc, "root", *tbf)

    def unshape(self, i=None):
        for j in ((0, 1) if i is None else (i,)):
            sh("ip", "netns", "exec", self.ns[j], "tc", "qdisc", "del", "dev", self.dev[j],
               "root", check=False)

    def command(self, i, argv, env=None):
        """argv run inside namespace i, with env entries passed through `env`."""
        extra = [f"{k}={v}" for k, v in (env or {}).items()]
        return ["ip", "netns", "exec", self.ns[i], "env", *extra, *argv]


def qdisc_available(kind):
    """Whether this kernel knows a qdisc (netem is missing from some VM kernels)."""
    probe = VethPair(prefix=f"pq{os.getpid() % 100000}", subnet="10.231.78")
    try:
        probe.up()
        args = {"netem": ["netem", "delay", "1ms"],
                "tbf": ["tbf", "rate", "100mbit", "burst", "32768", "limit", "65536"]}[kind]
        return sh("ip", "netns", "exec", probe.ns[0], "tc", "qdisc", "add", "dev",
                  probe.dev[0], "root", *args, check=False).returncode == 0
    finally:
        probe.down()
