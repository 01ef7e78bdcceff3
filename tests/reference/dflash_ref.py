#!/usr/bin/python3
"""Independent numpy reference for DFlash block drafts, written from the published model code's
definitions (z-lab dflash/model.py: DFlashDraftModel with Qwen3 layers; vLLM qwen3_dflash.py),
not from eaglet's code. float64.

usage: dflash_ref.py DRAFT_DIR TARGET_DIR IN.bin OUT.bin
IN.bin: int32 n, int32 last_token, float32 features [n, len(target_layer_ids) * Ht] (the outputs
of the target layers target_layer_ids, concatenated in that order) for context positions 0..n-1.
OUT.bin: float32 logits [B - 1, V] of block positions n+1..n+B-1 (the block is
[last_token, MASK x (B - 1)] at positions n..n+B-1).

Sliding-window and causal layers follow vLLM's qwen3_dflash.py: layer_types names sliding layers
(else dflash_config.use_swa makes all slide), the window W is dflash_config.swa_window_size or
sliding_window, causality is is_causal, else dflash_config.causal, else "sliding layers are
causal". A query at position p sees keys t with t >= p - W + 1 on a sliding layer, and t <= p when
causal; a non-causal sliding window reaches W - 1 positions ahead too.
"""
import json
import struct
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from decoder_ref import load_safetensors, rms_norm, inv_freq, rotate  # noqa: E402


def main(draft_dir, target_dir, in_path, out_path):
    cfg = json.load(open(draft_dir + "/config.json"))
    W = load_safetensors(draft_dir + "/model.safetensors")
    TW = load_safetensors(target_dir + "/model.safetensors")
    dc = cfg.get("dflash_config", {})
    B = cfg.get("block_size", dc.get("block_size"))
    mask = dc["mask_token_id"]
    H, nh, nkv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps, L = cfg["head_dim"], cfg.get("rms_norm_eps", 1e-6), cfg["num_hidden_layers"]
    freqs = inv_freq(cfg, hd)
    types = cfg.get("layer_types", ["full_attention"] * L)
    sliding = [t == "sliding_attention" for t in types]
    if not any(sliding) and dc.get("use_swa", False):
        sliding = [True] * L
    window = dc.get("swa_window_size", cfg.get("sliding_window"))
    if "is_causal" in cfg:
        causal = [bool(cfg["is_causal"])] * L
    elif "causal" in dc:
        causal = [bool(dc["causal"])] * L
    else:
        causal = list(sliding)
    raw = open(in_path, "rb").read()
    n, last = struct.unpack("<ii", raw[:8])
    feats = np.frombuffer(raw[8:], dtype=np.float32).astype(np.float64).reshape(n, -1)

    def rope(x, pos):  # x [heads, hd] at one position
        ang = pos * freqs
        return rotate(x, np.cos(ang), np.sin(ang))

    # Context: ctx = hidden_norm(fc(features)); each layer's K = rope(k_norm(k_proj(ctx))), V = v_proj(ctx).
    ctx = rms_norm(feats @ W["fc.weight"].T, W["hidden_norm.weight"], eps)
    block = [last] + [mask] * (B - 1)
    x = TW["model.embed_tokens.weight"][block]  # [B, H]
    for i in range(L):
        P = f"layers.{i}."
        def kv(h):
            k = (h @ W[P + "self_attn.k_proj.weight"].T).reshape(len(h), nkv, hd)
            v = (h @ W[P + "self_attn.v_proj.weight"].T).reshape(len(h), nkv, hd)
            return rms_norm(k, W[P + "self_attn.k_norm.weight"], eps), v
        kc, vc = kv(ctx)
        kc = np.stack([rope(kc[t], t) for t in range(n)])
        h = rms_norm(x, W[P + "input_layernorm.weight"], eps)
        q = rms_norm((h @ W[P + "self_attn.q_proj.weight"].T).reshape(B, nh, hd), W[P + "self_attn.q_norm.weight"], eps)
        kb, vb = kv(h)
        q = np.stack([rope(q[j], n + j) for j in range(B)])
        kb = np.stack([rope(kb[j], n + j) for j in range(B)])
        K, V = np.concatenate([kc, kb]), np.concatenate([vc, vb])  # key t sits at position t
        out = np.zeros((B, nh, hd))
        for j in range(B):
            p, t = n + j, np.arange(n + B)
            seen = np.ones(n + B, dtype=bool)
            if causal[i]:
                seen &= t <= p
            if sliding[i]:
                seen &= t >= p - window + 1
                if not causal[i]:
                    seen &= t <= p + window - 1
            for hh in range(nh):
                g = hh // (nh // nkv)
                s = np.where(seen, K[:, g, :] @ q[j, hh] / np.sqrt(hd), -np.inf)
                p = np.exp(s - s.max())
                out[j, hh] = p @ V[:, g, :] / p.sum()
        x = x + out.reshape(B, -1) @ W[P + "self_attn.o_proj.weight"].T
        hn = rms_norm(x, W[P + "post_attention_layernorm.weight"], eps)
        gate, up = hn @ W[P + "mlp.gate_proj.weight"].T, hn @ W[P + "mlp.up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ W[P + "mlp.down_proj.weight"].T
    y = rms_norm(x[1:], W["norm.weight"], eps)
    head = TW.get("lm_head.weight", TW["model.embed_tokens.weight"])
    (y @ head.T).astype(np.float32).tofile(out_path)


if __name__ == "__main__":
    main(*sys.argv[1:5])
