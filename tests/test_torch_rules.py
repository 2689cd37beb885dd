#!/usr/bin/env python3
"""PyTorch's schedule rules as restated in tests/torch_rules.py, judged on schedules small
enough to follow by hand: each rule rejects what PyTorch rejects (or silently gets wrong),
PyTorch's own GPipe order passes, and `new_group`'s rank numbering is what real gloo
processes report (torch 1.13 here). tests/test_torch_csv.py applies the rules to exports.

    /usr/bin/python3 tests/test_torch_rules.py
"""
import csv
import os
import socket
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_rules as rules  # noqa: E402


def write_rows(path, rows):
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)


def judge(path, pp, num_stages, m):
    """Both executors on a hand-written CSV: {"runtime": error or None, "lock_step": ...}."""
    rows, stage_row = rules.load_compute_only(path, pp, num_stages, m)
    out = {}
    for name, fn in (("runtime", lambda: rules.run_runtime(
                          rules.lower_compute_only(rows, stage_row, num_stages, m), stage_row,
                          num_stages)),
                     ("lock_step", lambda: rules.run_lock_step(rows, stage_row, num_stages))):
        try:
            fn()
            out[name] = None
        except rules.ScheduleError as e:
            out[name] = str(e)
    return out


class NegativeControls(unittest.TestCase):
    """Each rule rejects what PyTorch rejects (or silently gets wrong), so a passing export
    means something. The schedules are small enough to follow by hand."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.path = os.path.join(self.tmp.name, "s.csv")

    def test_deadlocking_order(self):
        # A V on 2 ranks (stages 0 and 3 on rank 0, 1 and 2 on rank 1), one microbatch:
        # rank 0 starts with 3F0, which needs 2F0 (rank 1), which needs 1F0, which needs
        # 0F0, which rank 0 only runs after 3F0. _validate_schedule accepts it.
        write_rows(self.path, [["3F0", "0F0", "3B0", "0B0"], ["1F0", "2F0", "2B0", "1B0"]])
        got = judge(self.path, 2, 4, 1)
        self.assertTrue(got["runtime"].startswith("Malformed compute schedule, can't schedule "
                                                  "sends/recvs (rank 0 at 3F0, rank 1 at 1F0)"),
                        got["runtime"])
        self.assertIn("rank 0 step 0 (3F0)", got["lock_step"])
        # The same V in a valid order passes both.
        write_rows(self.path, [["0F0", "", "", "", "3F0", "3B0", "", "", "", "0B0"],
                               ["", "1F0", "2F0", "", "", "", "2B0", "1B0"]])
        self.assertEqual(judge(self.path, 2, 4, 1), {"runtime": None, "lock_step": None})

    def test_last_stage_forwards_out_of_microbatch_order(self):
        # 2 stages in a row, 2 microbatches; stage 1 runs 1F1 before 1F0. Idle cells make
        # every input arrive in time, so only the loss rule can object.
        write_rows(self.path, [["0F0", "0F1", "", "", "", "0B0", "0B1"],
                               ["", "", "1F1", "1F0", "1B0", "1B1"]])
        got = judge(self.path, 2, 2, 2)
        for executor in ("runtime", "lock_step"):
            self.assertIn("the backward of microbatch 0 would use the loss of microbatch 1",
                          got[executor])
        # A backward before its forward's loss exists: PyTorch's own error.
        write_rows(self.path, [["0F0", "0F1", "", "", "", "0B1", "0B0"],
                               ["", "", "1F1", "1B1", "1F0", "1B0"]])
        got = judge(self.path, 2, 2, 2)
        self.assertIn("Loss for microbatch 1 is not available", got["runtime"])
        self.assertIn("Loss for microbatch 1 is not available", got["lock_step"])
        write_rows(self.path, [["0F0", "0F1", "", "", "", "0B0", "0B1"],
                               ["", "1F0", "1F1", "", "1B0", "1B1"]])
        self.assertEqual(judge(self.path, 2, 2, 2), {"runtime": None, "lock_step": None})

    def test_consumer_in_the_step_of_its_producer(self):
        # 1F0 at step 0 beside 0F0 at step 0 (what the v1 export writes): the runtime's
        # lowering waits for the receive, lock-step reads the buffer before it is filled.
        write_rows(self.path, [["0F0", "", "", "0B0"], ["1F0", "1B0"]])
        got = judge(self.path, 2, 2, 1)
        self.assertIsNone(got["runtime"])
        self.assertEqual(got["lock_step"], "rank 1 step 0 (1F0): its input from stage 0 (rank 0) "
                         "is received at step 0, not before step 0: PipelineScheduleMulti would "
                         "compute on an unfilled buffer")
        # The backward too: 0B0 in the step of 1B0.
        write_rows(self.path, [["0F0", "", "0B0"], ["", "1F0", "1B0"]])
        self.assertIn("rank 0 step 2 (0B0): its gradient from stage 1 (rank 1) is received at "
                      "step 2", judge(self.path, 2, 2, 1)["lock_step"])
        write_rows(self.path, [["0F0", "", "", "0B0"], ["", "1F0", "1B0"]])
        self.assertEqual(judge(self.path, 2, 2, 1), {"runtime": None, "lock_step": None})

    def test_sends_and_receives_paired_out_of_order(self):
        # A compute_comms schedule (PyTorch does not validate those) whose receives on rank 1
        # are posted in the other order than rank 0 sends: gloo and NCCL would swap them.
        rows = {0: [rules.Action(0, "F", 0), rules.Action(0, "SEND_F", 0),
                    rules.Action(0, "F", 1), rules.Action(0, "SEND_F", 1)],
                1: [rules.Action(1, "RECV_F", 1), rules.Action(1, "RECV_F", 0),
                    rules.Action(1, "F", 0), rules.Action(1, "F", 1)]}
        with self.assertRaisesRegex(rules.ScheduleError, r"ranks 0 -> 1: sends \[\('F', 1, 0\), "
                                    r"\('F', 1, 1\)\] but receives \[\('F', 1, 1\), "
                                    r"\('F', 1, 0\)\]"):
            rules.run_runtime(rows, {0: 0, 1: 1}, 2)
        rows[1][:2] = rows[1][1::-1]
        self.assertTrue(rules.run_runtime(rows, {0: 0, 1: 1}, 2))

    def test_loader_rules(self):
        m = 2
        cases = {
            "Schedule has incorrect number of ranks - expected 2, actual 1":
                [["0F0", "0F1", "0B0", "0B1"]],
            "Rank 1, step 0: Stage 0 is assigned to both rank 1 and rank 0":
                [["0F0", "0B0"], ["0F1", "0B1"]],
            "Rank 0, step 0: Running Full Backward for stage 0, microbatch 0 without first "
            "running Forward": [["0B0", "0F0", "0F1", "0B1"], ["1F0", "1F1", "1B0", "1B1"]],
            "Rank 0, step 2: Running Backward Weight for stage 0, microbatch 0 without first "
            "running Backward Input":
                [["0F0", "0F1", "0W0", "0I0"], ["1F0", "1F1", "1B0", "1B1"]],
            "Got 1 F microbatches for stage 1, expected 2":
                [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1B0"]],
            "Invalid backward microbatches for stage 0: I and W must have equal counts, but "
            "got I=2, W=1": [["0F0", "0F1", "0I0", "0I1", "0W0"], ["1F0", "1F1", "1B0", "1B1"]],
            "Invalid backward microbatches for stage 1: expected 2 total backwards, but got "
            "B=1, I=0, W=0": [["0F0", "0F1", "0B0", "0B1"], ["1F0", "1F1", "1B0"]],
            "Invalid action string: 0X0": [["0X0"], ["1F0"]],
        }
        for message, rows in cases.items():
            write_rows(self.path, rows)
            with self.assertRaises(rules.ScheduleError) as e:
                rules.load_compute_only(self.path, 2, 2, m)
            self.assertEqual(str(e.exception), message)
        write_rows(self.path, [["0F0", "0F1", "", "0I0", "0W0", "0B1"],
                               ["", "1F0", "1F1", "1B0", "1B1"]])
        self.assertEqual(rules.load_compute_only(self.path, 2, 2, m)[1], {0: 0, 1: 1})
        write_rows(self.path, [["0F0", "0SEND_F0"], ["1F0"]])
        with self.assertRaisesRegex(rules.ScheduleError, "Expected compute-only schedule"):
            rules.lower_compute_only(rules.read_csv(self.path), {0: 0, 1: 1}, 2, 1)


class PyTorchsOwnOrders(unittest.TestCase):
    """Positive controls: the orders PyTorch generates for its own schedules pass."""

    def test_gpipe_order(self):
        # ScheduleGPipe._get_pipeline_order: rank r idles r steps, runs every forward, idles
        # 3 (P - 1 - r) steps, runs every backward.
        p, m = 4, 4
        rows = {r: [None] * r + [rules.Action(r, "F", i) for i in range(m)]
                + [None] * (3 * (p - 1 - r)) + [rules.Action(r, "B", i) for i in range(m)]
                for r in range(p)}
        stage_row = rules.validate_schedule(rows, p, p, m)
        steps = rules.run_lock_step(rows, stage_row, p)
        self.assertEqual(steps[(3, "F", 0)], 3)
        rules.run_runtime(rules.lower_compute_only(rows, stage_row, p, m), stage_row, p)
        # Without its idle cells it is a consumer-beside-producer schedule.
        tight = {r: [a for a in row if a is not None] for r, row in rows.items()}
        with self.assertRaisesRegex(rules.ScheduleError, r"rank 0 step 4 \(0B0\): its gradient "
                                    r"from stage 1 \(rank 1\) is received at step 4"):
            rules.run_lock_step(tight, stage_row, p)


class RankNumbering(unittest.TestCase):
    """`new_group` sorts ranks: checked with 4 real gloo processes (torch 1.13 here)."""

    def test_new_group_sorts(self):
        try:
            import torch.distributed  # noqa: F401
            import multiprocessing
        except ImportError as e:
            self.skipTest(f"torch is not importable: {e}")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        ctx = multiprocessing.get_context("fork")
        queue = ctx.Queue()
        procs = [ctx.Process(target=_group_rank_of, args=(r, 4, port, [0, 3, 2, 1], queue))
                 for r in range(4)]
        for proc in procs:
            proc.start()
        got = dict(queue.get(timeout=120) for _ in procs)
        for proc in procs:
            proc.join(timeout=60)
        self.assertEqual(got, {0: 0, 3: 3, 2: 2, 1: 1})
        self.assertEqual(got, {g: rules.group_rank(g, [0, 3, 2, 1]) for g in range(4)})
        # Not pipeline order: global rank 3 is pipeline device 1 of [0, 3, 2, 1].
        self.assertNotEqual(got[3], [0, 3, 2, 1].index(3))


def _group_rank_of(rank, world, port, ranks, queue):
    import datetime
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=60))
    group = dist.new_group(ranks)
    queue.put((rank, dist.get_rank(group)))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    unittest.main()
