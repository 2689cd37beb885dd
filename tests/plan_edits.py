"""Plans edited by hand into shapes the planner does not write yet, for the tests that must
handle any plan: tests/torch/test_pulse_run.py runs them, tests/test_torch_csv.py exports
them. Python standard library only."""


def wave_plan(plan, profile, k=2):
    """A planner's plan (any pp) rewritten as waves: 2 k P stages, k per side on each device in
    a zig-zag (0 1 1 0 0 1 1 0 for k = 2), layers cut evenly. Skips whose ends land on two
    devices are sent directly; main-path messages follow the cuts; the schedule runs every
    forward in stage order, then every backward in reverse (a valid order on any stage map),
    op i of that order from i ms to i + 1 ms (placeholder times, so that pulse-plan reads the
    plan; nothing predicts them). Everything else (rank map, degrees, skips' bytes, the
    predicted figures) is the planner's."""
    pp = plan["parallelism"]["pp"]
    layers = [l["name"] for l in profile["layers"]]
    n = 2 * k * pp
    cuts = [round(i * len(layers) / n) for i in range(n + 1)]
    zigzag = [d for _ in range(k) for d in list(range(pp)) + list(reversed(range(pp)))]
    stages = [{"id": s, "device": zigzag[s], "layers": layers[cuts[s]:cuts[s + 1]]}
              for s in range(n)]
    stage_of = {name: s["id"] for s in stages for name in s["layers"]}
    out_bytes = {l["name"]: l["output_bytes_per_sample"] for l in profile["layers"]}
    b = plan["parallelism"]["microbatch_size"]
    transfers = []

    def moved(activation=0, skip=0):
        return {"activation": activation, "skip": skip, "carried": 0, "total": activation + skip}

    def transfer(a, c, kind, nbytes, skips):
        return {"from_stage": a, "to_stage": c, "from_device": zigzag[a],
                "to_device": zigzag[c], "kind": kind, "forward_bytes_per_microbatch": nbytes,
                "backward_bytes_per_microbatch": nbytes, "skips": skips}

    for s in range(n - 1):
        if zigzag[s] != zigzag[s + 1]:
            per_mb = b * out_bytes[stages[s]["layers"][-1]]
            t = transfer(s, s + 1, "main", moved(activation=per_mb), [])
            carried = carried_crossing(plan, stages, stage_of, zigzag, s)
            for key, grads in (("forward_bytes_per_microbatch", False),
                               ("backward_bytes_per_microbatch", True)):
                t[key] = dict(t[key])
                t[key]["carried"] = sum(b * c["bytes_per_sample"] for c in carried
                                        if c["needs_gradient"] or not grads)
                t[key]["total"] += t[key]["carried"]
            transfers.append(t)
    for skip in plan["skips"]:
        p, c = stage_of[skip["producer"]], stage_of[skip["consumer"]]
        local = zigzag[p] == zigzag[c]
        skip.update(producer_stage=p, consumer_stage=c, producer_device=zigzag[p],
                    consumer_device=zigzag[c], local=local, route="local" if local else "direct")
        if not local:
            transfers.append(transfer(p, c, "skip", moved(skip=b * skip["bytes_per_sample"]),
                                      [skip["name"]]))
    m = plan["parallelism"]["num_microbatches"]
    split = plan["schedule_info"]["split_backward"]
    order = [("F", s, mb) for s in range(n) for mb in range(m)]
    for s in reversed(range(n)):
        for mb in range(m):
            order += [("I", s, mb), ("W", s, mb)] if split else [("B", s, mb)]
    plan.update(stages=stages, transfers=transfers, schedule=[
        {"device": d, "ops": [{"op": o, "stage": s, "mb": mb, "start_s": i / 1000,
                               "end_s": (i + 1) / 1000}
                              for i, (o, s, mb) in enumerate(order) if zigzag[s] == d]}
        for d in range(pp)])
    for entry in plan["devices"]:
        d = entry["device"]
        entry["stages"] = [s for s in range(n) if zigzag[s] == d]
        entry["cached_skips"] = [k["name"] for k in plan["skips"]
                                 if k["local"] and k["producer_device"] == d]
    plan["parallelism"]["num_stages"] = n
    return plan


def carried_crossing(plan, stages, stage_of, zigzag, s):
    """The carried tensors a main transfer s -> s+1 moves, by the planner's rule
    (src/cost/pipeline_model.cpp): those that exist by the end of stage s and that the
    receiving device does not hold yet (no earlier stage on it ran after they existed)."""
    out = []
    for c in plan["carried"]:
        producer = -1 if c["producer"] is None else stage_of[c["producer"]]
        held = any(zigzag[e] == zigzag[s + 1] for e in range(max(producer, 0), s + 1))
        if producer <= s and not held:
            out.append(c)
    return out

