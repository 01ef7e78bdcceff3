#!/usr/bin/python3
"""Independent numpy reference for greedy EAGLE-3 chain speculative decoding (vLLM's scheme, see
../shared/docs/eagle3-reference.md sections 3-5), written from those definitions, not from eaglet's
code. Everything is recomputed from scratch at every step (no caches), in float64.

usage: spec_decode_ref.py TARGET_DIR DRAFT_DIR PROMPT_IDS(comma-separated) K MAX_TOKENS [SEMANTICS]
Prints JSON: {"token_ids", "num_drafts", "num_draft_tokens", "num_accepted_tokens_per_pos"}.

Step: the sequence is x_0..x_{n-1}, of which the target has seen x_0..x_{n-2}. The draft reads, at
position t = 0..n-2, token x_{t+1} with g = fc(taps of x_t); its last row drafts d_1; each further
draft step reads the previous draft token at the next position with the draft's own state. The
target verifies [x_{n-1}, d_1..d_k]: d_i is accepted while it equals the target's argmax, and the
target's token at the first mismatch (or after the last draft) is emitted too. k is cut to leave
room for that token under MAX_TOKENS; a step with no room drafts nothing.
"""
import json
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from decoder_ref import forward, load_safetensors  # noqa: E402
from eagle3_ref import Draft  # noqa: E402


def main():
    target_dir, draft_dir, prompt, k, max_tokens = sys.argv[1:6]
    semantics = sys.argv[6] if len(sys.argv) > 6 else "vllm"
    k, max_tokens = int(k), int(max_tokens)
    cfg = json.load(open(target_dir + "/config.json"))
    W = load_safetensors(target_dir + "/model.safetensors")
    seq = [int(t) for t in prompt.split(",")]
    logits, _ = forward(cfg, W, seq)
    out = [int(np.argmax(logits[-1]))]
    seq.append(out[-1])
    num_drafts = num_draft_tokens = 0
    per_pos = [0] * k
    while len(out) < max_tokens:
        keff = min(k, max_tokens - len(out) - 1)
        drafts = []
        if keff > 0:
            d = Draft(draft_dir, W, cfg["num_hidden_layers"], semantics)
            _, states = forward(cfg, W, seq[:-1])
            aux = np.concatenate([states[i] for i in d.aux_ids], axis=1)
            g = d.fuse(aux)
            for t in range(len(seq) - 1):
                lg, st = d.step(t, seq[t + 1], g[t])
            for j in range(keff):
                drafts.append(d.to_target(int(np.argmax(lg))))
                if j + 1 < keff:
                    lg, st = d.step(len(seq) - 1 + j, drafts[-1], st)
            num_drafts += 1
            num_draft_tokens += keff
        logits, _ = forward(cfg, W, seq + drafts)
        base = len(seq) - 1
        a = 0
        while a < len(drafts) and int(np.argmax(logits[base + a])) == drafts[a]:
            per_pos[a] += 1
            a += 1
        new = drafts[:a] + [int(np.argmax(logits[base + a]))]
        out += new
        seq += new
    print(json.dumps({"token_ids": out, "num_drafts": num_drafts, "num_draft_tokens": num_draft_tokens,
                      "num_accepted_tokens_per_pos": per_pos}))


if __name__ == "__main__":
    main()
