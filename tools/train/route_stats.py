"""Routing statistics of a bmoe --route-trace (the telemetry contract's
route_trace v1): per layer, the entropy of the expert distribution against
the uniform log2(E), and the share of routings taken by the most popular
10 % of experts (ceil(E / 10) of them). Used for the trained model's
evidence and for the real traces in shared/data/route-traces."""
import collections
import math
import sys


def stats(path, phase=None):
    n_expert = None
    per_layer = collections.defaultdict(collections.Counter)
    with open(path) as f:
        for line in f:
            if line.startswith("#"):
                for field in line[1:].split():
                    if field.startswith("n_expert="):
                        n_expert = int(field.split("=")[1])
                continue
            if line.startswith("turn"):
                continue
            cols = line.strip().split(",")
            if phase is not None and int(cols[1]) != phase:
                continue
            per_layer[int(cols[3])][int(cols[5])] += 1
    top = math.ceil(n_expert / 10)
    rows = []
    for layer in sorted(per_layer):
        counts = per_layer[layer]
        total = sum(counts.values())
        h = -sum(c / total * math.log2(c / total) for c in counts.values())
        share = sum(c for _, c in counts.most_common(top)) / total
        rows.append((layer, total, len(counts), h, h / math.log2(n_expert), share))
    return n_expert, top, rows


def main():
    for path in sys.argv[1:]:
        n_expert, top, rows = stats(path)
        print("%s: %d experts, top 10 %% = %d experts" % (path, n_expert, top))
        print("  layer  routings  distinct  H_bits  H/log2(E)  top10%share")
        for layer, total, distinct, h, even, share in rows:
            print("  %5d  %8d  %8d  %6.3f  %9.3f  %10.1f%%" % (layer, total, distinct, h, even, 100 * share))
        n = len(rows)
        print("  mean   H/log2(E) %.3f, top-10%% share %.1f%% (uniform: %.1f%%)"
              % (sum(r[4] for r in rows) / n, 100 * sum(r[5] for r in rows) / n, 100 * top / n_expert))


if __name__ == "__main__":
    main()
