#!/usr/bin/python3
"""The runtime's plan reader (python/pulse_runtime/plan_doc.py and plan_json.py).

    test_plan_reader.py --binary build/pulse-plan [TestClass ...]

- SchemaCopy: the schema the package ships (python/pulse_runtime/plan.schema.json) is the
  repository's schema/plan.schema.json, byte for byte, and a valid Draft 7 schema.
- Reading: what the file gate promises, on inputs made here: a stream beyond the size limit
  refused after the limit (not read to its end), /dev/zero after its first MiB, the path of
  nesting deeper than Python's own reader goes, and each refusal's exact line.
- Fuzz: hypothesis (derandomized: the same examples every run; PULSE_FUZZ_EXAMPLES of them,
  default 400) mutates real plans the planner under test writes (values replaced by random
  JSON, keys and elements deleted, duplicated, swapped, integers nudged, values borrowed
  from elsewhere in the plan, lists the runtime reads reordered, and bytes of the text
  truncated, inserted or replaced), and
  read_plan must either refuse with one PlanError line naming the file and a JSON path (or
  what is wrong with the file), or accept a plan whose structure everything downstream reads
  without an exception: the launch check, the plan bound to the model (messages, send
  sequences, ranks), and the torchtitan export's readers; and of an accepted plan, every rank
  must find its place in the rank groups and its samples in the global batch, and the ranks'
  iteration must run to its end by the messages plan.py derives (no op waiting forever, no
  message sent and never received). Any other exception fails. A table of what happened is
  printed.
"""

import copy
import json
import os
import re
import sys
import threading
import time
import unittest

import common

OPTS = None
SCHEMA = os.path.join(common.ROOT, "schema", "plan.schema.json")
PACKAGED = os.path.join(common.PYTHON_DIR, "pulse_runtime", "plan.schema.json")
BASE_OPTIONS = {"v": ("--pp", "2", "--global-batch", "8"),
                "split": ("--pp", "2", "--split-backward", "--global-batch", "8"),
                "direct": ("--pp", "2", "--strategy", "1f1b-direct", "--global-batch", "8")}


class SchemaCopy(unittest.TestCase):
    def test_the_packaged_schema_is_the_repository_s(self):
        with open(SCHEMA, "rb") as a, open(PACKAGED, "rb") as b:
            self.assertTrue(a.read() == b.read(),
                            f"{PACKAGED} differs from {SCHEMA}: copy it (cp {SCHEMA} {PACKAGED})")

    def test_it_is_a_valid_draft_7_schema(self):
        import jsonschema
        with open(PACKAGED) as f:
            jsonschema.Draft7Validator.check_schema(json.load(f))


class Reading(common.TempDirCase):
    def refused(self, data):
        from pulse_runtime.plan_doc import PlanError, read_plan
        path = self.path("plan.json")
        with open(path, "wb") as f:
            f.write(data)
        with self.assertRaises(PlanError) as e:
            read_plan(path)
        return str(e.exception).replace(path, "PLAN")

    def test_a_stream_beyond_the_limit_is_not_read_to_its_end(self):
        from pulse_runtime import plan_json
        read, write = os.pipe()
        written = []

        def writer():  # 3 MiB of spaces (JSON whitespace), as far as the reader takes them
            try:
                for _ in range(48):
                    written.append(os.write(write, b" " * (1 << 16)))
            except BrokenPipeError:
                pass
            finally:
                os.close(write)
        thread = threading.Thread(target=writer)
        thread.start()
        try:
            with self.assertRaises(plan_json.PlanError) as e:
                plan_json.read_bytes(f"/proc/self/fd/{read}", limit=1 << 20)
        finally:
            os.close(read)
            thread.join()
        self.assertIn("more than 1048576 bytes (1 MiB), the most a plan pulse-run reads "
                      "has; the rest was not read", str(e.exception))
        self.assertLess(sum(written), 3 << 20)  # the writer was cut off

    def test_dev_zero_ends_after_its_first_mib(self):
        from pulse_runtime import plan_json
        start = time.monotonic()
        with self.assertRaises(plan_json.PlanError) as e:
            plan_json.read_bytes("/dev/zero")
        self.assertEqual(str(e.exception), "/dev/zero: not JSON: byte 0x00 at offset 0 (a JSON "
                         "text holds no control bytes)")
        # Not a speed target: a reader that read its 64 MiB would still pass; one that read
        # /dev/zero to its end would never get here.
        self.assertLess(time.monotonic() - start, 60)

    def test_nesting_beyond_python_s_reader_is_named_by_its_path(self):
        bomb = b'{"schema": "pulse.plan/v1", "stages": [1, {"a": ' + b"[" * 5000 + \
            b"]" * 5000 + b"}]}"
        # The path's first steps (up to 60 characters) and how deep it is.
        self.assertEqual(self.refused(bomb), "PLAN: $.stages[1].a" + "[0]" * 15 + "... (64 "
                         "levels): arrays and objects nested more than 64 deep (a plan's "
                         "deepest value is 5 levels down)")

    def test_numbers_and_keys_json_allows_but_a_plan_may_not_hold(self):
        head = b'{"schema": "pulse.plan/v1", "parallelism": {"pp": '
        self.assertEqual(self.refused(head + b'NaN}}'),
                         "PLAN: $.parallelism.pp: expected a finite number within 2^53, got NaN")
        self.assertEqual(self.refused(head + b'1e999}}'), "PLAN: $.parallelism.pp: expected a "
                         "finite number, got a literal beyond a double's range")
        self.assertEqual(self.refused(head + b'9007199254740993}}'), "PLAN: $.parallelism.pp: "
                         "expected an integer within 2^53, got 9007199254740993")
        self.assertEqual(self.refused(head + b'2, "pp": 3}}'),
                         "PLAN: $.parallelism.pp: the key is given twice in one object")


# --- the fuzz target --------------------------------------------------------------------------

class Fuzz(common.TempDirCase):
    def test_a_mutated_plan_is_refused_in_one_line_or_read_whole(self):
        from hypothesis import HealthCheck, given, settings, strategies as st

        bases = {}
        for name, options in BASE_OPTIONS.items():
            path = self.path(name + ".json")
            common.plan(OPTS.binary, common.TEST_PROFILE, path, *options)
            with open(path) as f:
                bases[name] = json.load(f)
        paths = {name: paths_by_section(doc) for name, doc in bases.items()}
        target = Target(self.path("fuzzed.json"))
        examples = int(os.environ.get("PULSE_FUZZ_EXAMPLES", "400"))

        @settings(max_examples=examples, derandomize=True, database=None, deadline=None,
                  suppress_health_check=list(HealthCheck))
        @given(st.data())
        def fuzz(data):
            base = data.draw(st.sampled_from(sorted(bases)))
            text = mutated(data, bases[base], paths[base])
            target.check(text)

        fuzz()
        target.print_table()
        # Both outcomes happen (a fuzzer that only ever made unreadable text, or never broke
        # a plan, tests nothing).
        self.assertGreater(target.counts.get("accepted", 0), 0)
        self.assertGreater(sum(v for k, v in target.counts.items() if k != "accepted"), 0)


# The sections the runtime reads (plan_doc.read_plan).
READ = {"options", "parallelism", "stages", "skips", "carried", "transfers", "schedule",
        "rank_map", "predicted"}


def json_values():
    from hypothesis import strategies as st
    scalars = (st.none() | st.booleans() | st.integers(-2 ** 64, 2 ** 64)
               | st.sampled_from([0, -1, 1, 2, 7, 2 ** 31, 2 ** 53, 2 ** 53 + 1, 10 ** 30])
               | st.floats() | st.text(max_size=8)
               | st.sampled_from(["F", "B", "I", "W", "main", "skip", "local", "embed", "",
                                  "pulse.plan/v1"]))
    return st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                        | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=6)


def paths_by_section(doc):
    """Every path of the plan (tuples of keys and indices), by top-level key: the fuzzer
    picks a section first, so the thousands of schedule entries do not drown the rest."""
    out = {}

    def walk(node, where):
        out.setdefault(where[0] if where else "", []).append(where)
        items = node.items() if isinstance(node, dict) else \
            enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            walk(value, where + (key,))
    walk(doc, ())
    return out


def locate(doc, where):
    """(parent, key) of `where` in doc, or None once an earlier edit removed it."""
    node = doc
    for key in where[:-1]:
        try:
            node = node[key]
        except (KeyError, IndexError, TypeError):
            return None
    if isinstance(node, dict) and where[-1] in node or \
            isinstance(node, list) and isinstance(where[-1], int) and where[-1] < len(node):
        return node, where[-1]
    return None


def mutated(data, base, paths):
    """The text of `base` after one to three edits (module docstring)."""
    from hypothesis import strategies as st
    doc = copy.deepcopy(base)
    sections = sorted(k for k in paths if k)
    for _ in range(data.draw(st.integers(1, 3))):
        if data.draw(st.integers(0, 3)) == 0:  # a quarter: reorder a list the runtime reads
            reorder(data, doc, paths)
            continue
        # Nine edits in ten where the runtime reads; the rest only the schema checks.
        section = data.draw(st.sampled_from(sorted(READ) if data.draw(st.integers(0, 9)) else
                                            sections))
        where = data.draw(st.sampled_from(paths[section]))
        found = locate(doc, where)
        if found is None:
            continue
        parent, key = found
        edit = data.draw(st.sampled_from(["replace", "delete", "duplicate", "swap", "nudge",
                                          "borrow"]))
        if edit == "replace":
            parent[key] = data.draw(json_values())
        elif edit == "delete":
            del parent[key]
        elif edit == "duplicate" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        elif edit == "swap" and isinstance(parent, list) and len(parent) > 1:
            other = data.draw(st.integers(0, len(parent) - 1))
            parent[key], parent[other] = parent[other], parent[key]
        elif edit == "nudge" and isinstance(parent[key], int) and \
                not isinstance(parent[key], bool):
            parent[key] = data.draw(st.sampled_from([parent[key] + 1, parent[key] - 1, 0, -1,
                                                     parent[key] * 2, 2 ** 20 + 1]))
        elif edit == "borrow":
            other = data.draw(st.sampled_from(paths[data.draw(st.sampled_from(
                sorted(k for k in paths if k)))]))
            value = locate(base, other)
            if value is not None:
                parent[key] = copy.deepcopy(value[0][value[1]])
    text = json.dumps(doc, indent=1)
    if data.draw(st.integers(0, 9)) == 0:  # a tenth: the bytes themselves
        at = data.draw(st.integers(0, len(text)))
        edit = data.draw(st.sampled_from(["truncate", "insert", "replace"]))
        char = data.draw(st.sampled_from(list('{}[],:"\\0- \x00\xff') + ["\n"]))
        text = text[:at] if edit == "truncate" else \
            text[:at] + char + text[at + (edit == "replace"):]
    return text


def reorder(data, doc, paths):
    """Two elements of one of the lists the runtime reads (a device's ops, the stages, the
    ranks, a rank group, the transfers, the skips, a stage's layers) swapped, or one moved
    to another place."""
    from hypothesis import strategies as st
    kind = data.draw(st.sampled_from(["ops", "stages", "ranks", "groups", "transfers", "skips",
                                      "layers"]))
    try:
        items = {"ops": lambda: doc["schedule"][pick(data, doc["schedule"])]["ops"],
                 "stages": lambda: doc["stages"], "ranks": lambda: doc["rank_map"]["ranks"],
                 "groups": lambda: doc["rank_map"][data.draw(st.sampled_from(
                     ["pipeline_groups", "data_parallel_groups"]))],
                 "transfers": lambda: doc["transfers"], "skips": lambda: doc["skips"],
                 "layers": lambda: doc["stages"][pick(data, doc["stages"])]["layers"]}[kind]()
    except (KeyError, IndexError, TypeError):
        return  # an earlier edit took it away
    if not isinstance(items, list) or len(items) < 2:
        return
    a, b = pick(data, items), pick(data, items)
    if data.draw(st.booleans()):
        items[a], items[b] = items[b], items[a]
    else:
        items.insert(b, items.pop(a))


def pick(data, items):
    from hypothesis import strategies as st
    return data.draw(st.integers(0, len(items) - 1))


class Target:
    """read_plan on one text, and what downstream reads of an accepted plan."""

    def __init__(self, path):
        from pulse_runtime import models
        self.path, self.counts, self.reasons = path, {}, []
        self.model = models.load(common.SMALL_UNET + ":build_test", seed=0)

    def check(self, text):
        from pulse_runtime import plan_doc
        from pulse_runtime.plan_doc import PlanError
        with open(self.path, "w", encoding="utf-8", errors="surrogatepass") as f:
            f.write(text)
        plan_doc._READ.clear()
        try:
            doc = plan_doc.read_plan(self.path)
        except PlanError as e:
            message = str(e)
            assert "\n" not in message, message
            assert message.startswith(self.path + ": "), message
            reason = message[len(self.path) + 2:]
            self.reasons.append(reason[:40])
            kind = "refused: JSON path" if reason.startswith("$") else \
                "refused: the schema key" if "($.schema)" in reason else \
                "refused: the file" if re.match(r"not JSON|the file has|more than", reason) \
                else None
            assert kind is not None, f"a refusal naming no JSON path: {message}"
            self.counts[kind] = self.counts.get(kind, 0) + 1
            return
        self.downstream(doc)

    def downstream(self, doc):
        """Everything that reads an accepted plan's structure without training."""
        from pulse_runtime import cli, torchtitan
        from pulse_runtime.plan import Plan, PlanError
        try:
            cli.check_launch(doc, ("local", None, doc.rank_map.world_size))
        except ValueError:
            pass  # more ranks than this host starts: a refusal, as the launch gives it
        for step in (torchtitan.placement_style, torchtitan.data_parallel, torchtitan.training):
            try:
                step(doc)
            except torchtitan.ExportError:
                pass
        try:
            plan = Plan(doc, self.model)
        except PlanError:
            self.counts["accepted, then not this model's"] = \
                self.counts.get("accepted, then not this model's", 0) + 1
            return
        for a in plan.schedule:
            for b in plan.schedule:
                plan.send_sequence(a, b)
        for s in range(len(plan.stages) - 1):
            plan.carried_crossing(s)
        ranks_of(plan)
        runs_to_the_end(plan)
        self.counts["accepted"] = self.counts.get("accepted", 0) + 1

    def print_table(self):
        total = sum(self.counts.values())
        print(f"\nfuzz: {total} examples")
        for kind, count in sorted(self.counts.items()):
            print(f"  {kind:<34}{count:>6}")
        sys.stdout.flush()


def ranks_of(plan):
    """What each rank reads of the rank map (Worker.__init__, comm.Comm): its place, its
    pipeline's ranks and its data-parallel group, and the samples of its microbatches."""
    for rank in range(plan.world_size):
        info = plan.rank_info(rank)
        assert plan.pipeline_ranks(info.dp_index)[info.pipeline_device] == rank, rank
        assert sum(rank in g for g in plan.data_parallel_groups) == 1, rank
        assert rank in plan.data_parallel_groups[info.pipeline_device], rank
        assert plan.stages_on(info.pipeline_device), rank
        last = ((info.dp_index + 1) * plan.num_microbatches) * plan.microbatch_size
        assert last <= plan.global_batch, (rank, last, plan.global_batch)


def runs_to_the_end(plan):
    """The ranks' iteration, by the messages plan.py derives (an op waits for the messages
    awaited before it, sent when their op ran) and the values a device keeps for itself (an
    op needs the one before it in the pipeline when both run on this device: the main path,
    the saved forward, I before W): every op runs, and every message sent is received."""
    last, device = len(plan.stages) - 1, plan.stage_device
    at = {d: 0 for d in plan.schedule}
    done, sent, received = set(), set(), set()

    def local_need(op, s, mb):
        if op == "F":
            return ("F", s - 1, mb) if s > 0 and device[s - 1] == device[s] else None
        if op == "W":
            return ("I", s, mb)
        if s == last:
            return ("F", s, mb)
        return (op, s + 1, mb) if device[s + 1] == device[s] else None

    progress = True
    while progress:
        progress = False
        for d, ops in plan.schedule.items():
            while at[d] < len(ops):
                op, s, mb = ops[at[d]]
                awaited = [(m.id, mb) for m in plan.awaited_before(op, s)]
                need = local_need(op, s, mb)
                if any(k not in sent for k in awaited) or need is not None and need not in done:
                    break
                received.update(awaited)
                sent.update((m.id, mb) for m in plan.sent_after(op, s))
                done.add((op, s, mb))
                at[d] += 1
                progress = True
    stuck = {d: ops[at[d]] for d, ops in plan.schedule.items() if at[d] < len(ops)}
    assert not stuck, f"accepted, but the ranks wait forever at {stuck}"
    assert sent == received, f"accepted, but sent and never received: {sorted(sent - received)[:3]}"


if __name__ == "__main__":
    OPTS, argv = common.main([])
    unittest.main(argv=argv)
