#!/usr/bin/python3
"""Summary and picture of tools/online_experiment.sh's runs (stdlib only).

  tools/online_curve.py OUT

reads OUT/{online,frozen,plain,poisoned,sat_online,sat_frozen}.json(l) written by `eaglet
loadtest`, writes OUT/summary.json (per run: acceptance per 500 requests, first and last 500,
the lowest later 500 against the first, tok/s, outputs identical to plain greedy) and
OUT/online_acceptance.svg: mean acceptance length per 100-request window (the server's
cumulative speculation counters, read every 100 requests) for online training, the frozen draft
and the poisoned trainer, with the draft versions, and OUT/online_acceptance_saturated.svg for
the saturated runs. TITLE names the setup in the pictures' titles.
"""
import json
import os
import sys


def level(path):
    return json.load(open(path))[0]


def texts(path):
    return {r["index"]: r["text"] for r in map(json.loads, open(path))}


def windows(tl):
    """[(requests, acceptance length over the window ending there, draft version)]."""
    out, prev = [], {"requests": 0, "drafts": 0, "accepted_tokens": 0}
    for x in tl:
        d = x["drafts"] - prev["drafts"]
        if d > 0:
            out.append((x["requests"], 1 + (x["accepted_tokens"] - prev["accepted_tokens"]) / d, x["draft_version"]))
        prev = x
    return out


def span(tl, lo, hi):
    """Acceptance length between the readings at `lo` and `hi` requests."""
    at = {x["requests"]: x for x in tl}
    a = at.get(lo, {"drafts": 0, "accepted_tokens": 0}) if lo else {"drafts": 0, "accepted_tokens": 0}
    b = at[hi]
    return 1 + (b["accepted_tokens"] - a["accepted_tokens"]) / max(1, b["drafts"] - a["drafts"])


def svg(series, path, n, title):
    W, H, L, R, T, B = 760, 360, 60, 150, 30, 50
    ys = [y for _, pts, _ in series for _, y, _ in pts]
    lo, hi = min(ys) - 0.05, max(ys) + 0.05
    X = lambda r: L + (W - L - R) * r / n  # noqa: E731
    Y = lambda a: T + (H - T - B) * (hi - a) / (hi - lo)  # noqa: E731
    s = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
         f'<rect width="{W}" height="{H}" fill="white"/>',
         f'<text x="{L}" y="18" font-size="14">{title}</text>']
    for i in range(6):
        a = lo + (hi - lo) * i / 5
        s.append(f'<line x1="{L}" x2="{W - R}" y1="{Y(a):.1f}" y2="{Y(a):.1f}" stroke="#ddd"/>'
                 f'<text x="{L - 8}" y="{Y(a) + 4:.1f}" text-anchor="end">{a:.2f}</text>')
    for r in range(0, n + 1, max(500, n // 6 // 500 * 500)):
        s.append(f'<text x="{X(r):.1f}" y="{H - B + 18}" text-anchor="middle">{r}</text>')
    s.append(f'<text x="{(L + W - R) / 2}" y="{H - 12}" text-anchor="middle">requests served</text>')
    for k, (name, pts, color) in enumerate(series):
        d = " ".join(f"{X(r):.1f},{Y(a):.1f}" for r, a, _ in pts)
        s.append(f'<polyline points="{d}" fill="none" stroke="{color}" stroke-width="2"/>')
        s.append(f'<line x1="{W - R + 10}" x2="{W - R + 30}" y1="{T + 20 * k}" y2="{T + 20 * k}" stroke="{color}" '
                 f'stroke-width="2"/><text x="{W - R + 36}" y="{T + 20 * k + 4}">{name}</text>')
        last = 0
        for r, a, v in pts:
            if v != last and name.startswith("online training"):
                s.append(f'<circle cx="{X(r):.1f}" cy="{Y(a):.1f}" r="3" fill="{color}"/>')
                last = v
    s.append(f'<text x="{W - R + 10}" y="{T + 80}">dots: the draft version</text>')
    s.append(f'<text x="{W - R + 10}" y="{T + 94}">changed (swap or rollback)</text>')
    s.append("</svg>")
    open(path, "w").write("\n".join(s) + "\n")


def main():
    out = sys.argv[1]
    p = lambda name: os.path.join(out, name)  # noqa: E731
    names = ("online", "frozen", "plain", "poisoned", "sat_online", "sat_frozen")
    runs = {k: level(p(k + ".json")) for k in names if os.path.exists(p(k + ".json"))}  # QUICK=1: the paced three
    ref = texts(p("plain.jsonl"))
    summary = {}
    for k in runs:
        t = texts(p(k + ".jsonl"))
        same = sum(1 for i, x in t.items() if ref.get(i) == x)
        summary[k] = {"requests": runs[k]["requests"], "failed": runs[k]["failed"],
                      "output_tokens_per_second": runs[k]["output_tokens_per_second"], "wall_s": runs[k]["wall_s"],
                      "identical_to_plain_greedy": same, "compared": len(t)}
        tl = runs[k].get("timeline", [])
        if tl:
            n = tl[-1]["requests"]
            per500 = [span(tl, lo, lo + 500) for lo in range(0, n - 499, 500)]
            summary[k]["acceptance_per_500"] = per500
            summary[k]["lowest_later_500_minus_first"] = min(per500[1:]) - per500[0] if len(per500) > 1 else None
            summary[k]["acceptance_first_500"] = span(tl, 0, 500)
            summary[k]["acceptance_last_500"] = span(tl, n - 500, n)
            summary[k]["acceptance_overall"] = span(tl, 0, n)
            summary[k]["final_draft_version"] = tl[-1]["draft_version"]
            summary[k]["online_train_steps"] = tl[-1]["online_train_steps"]
    for on, fr, kind in (("online", "frozen", "paced"), ("sat_online", "sat_frozen", "saturated")):
        if on in runs and fr in runs:
            summary[f"online_gain_last_vs_first_500_{kind}"] = (summary[on]["acceptance_last_500"] -
                                                               summary[on]["acceptance_first_500"])
            summary[f"throughput_ratio_{kind}"] = (summary[on]["output_tokens_per_second"] /
                                                  summary[fr]["output_tokens_per_second"])
    json.dump(summary, open(p("summary.json"), "w"), indent=1)
    title = os.environ.get("TITLE", "stories260K, EAGLE-3 k=3, greedy")
    if "online" in runs:
        series = [("online training", "online", "#1f77b4"), ("frozen draft", "frozen", "#888888"),
                  ("poisoned trainer", "poisoned", "#d62728")]
        svg([(label, windows(runs[k]["timeline"]), color) for label, k, color in series if k in runs],
            p("online_acceptance.svg"), runs["online"]["timeline"][-1]["requests"],
            f"Acceptance length per 100 requests, 12 requests/s ({title})")
    if "sat_online" in runs and "sat_frozen" in runs:
        series = [("online training", "sat_online", "#1f77b4"), ("frozen draft", "sat_frozen", "#888888")]
        svg([(label, windows(runs[k]["timeline"]), color) for label, k, color in series],
            p("online_acceptance_saturated.svg"), runs["sat_online"]["timeline"][-1]["requests"],
            f"Acceptance length per 100 requests, saturated ({title})")
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
