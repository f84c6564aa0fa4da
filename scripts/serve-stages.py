#!/usr/bin/env python3
"""Reads chute serve's /metrics (stdin) and prints, per histogram of where a
request's time goes, the count, mean and approximate p50/p99 (upper bound of
the bucket holding it): request stages, batch COPY+commit time, batch rows.
Used by scripts/bench-serve."""
import re
import sys

hists = {}
for line in sys.stdin:
    m = re.match(r'^(chute_request_stage_seconds|chute_batch_commit_seconds|chute_batch_rows|chute_ack_latency_seconds)_(bucket|sum|count)(\{[^}]*\})? (\S+)', line)
    if not m:
        continue
    name, kind, labels, value = m.group(1), m.group(2), m.group(3) or "", float(m.group(4))
    stage = re.search(r'(stage|endpoint)="([^"]*)"', labels)
    key = name + (f"{{{stage.group(2)}}}" if stage else "")
    h = hists.setdefault(key, {"buckets": [], "sum": 0.0, "count": 0.0})
    if kind == "bucket":
        le = re.search(r'le="([^"]*)"', labels).group(1)
        h["buckets"].append((float("inf") if le == "+Inf" else float(le), value))
    else:
        h[kind] = value


def q(h, p):
    want = h["count"] * p
    for le, n in sorted(h["buckets"]):
        if n >= want:
            return le
    return float("inf")


unit = lambda k, v: f"{v:.0f}" if k.startswith("chute_batch_rows") else f"{v * 1000:.1f} ms"
print("| histogram | count | mean | p50 <= | p99 <= |")
print("|---|---|---|---|---|")
for k in sorted(hists):
    h = hists[k]
    if h["count"] == 0:
        continue
    print(f"| {k} | {h['count']:.0f} | {unit(k, h['sum'] / h['count'])} | {unit(k, q(h, 0.5))} | {unit(k, q(h, 0.99))} |")
