#!/usr/bin/python3
"""Independent numpy reference for MiniMax-M3 (incl. the multimodal wrapper) and MiniMax-M2,
written from the model description in shared/docs/minimax-m3.md and eagle3-reference.md section 7
(vLLM semantics), not from eaglet's code. Computes in float64 over the whole prompt at once.

usage: minimax_ref.py MODEL_DIR OUT.bin TOKENS(comma-separated) TAPS(comma-separated or '-')
Writes float32 logits [T, V] then taps [T, len(TAPS), H] to OUT.bin, and the MSA block selections
as JSON lines "layer pos index_head b0 b1 ..." to OUT.bin.msa.
"""
import json
import struct
import sys

import numpy as np


def e4m3_table():
    c = np.arange(256)
    s, e, m = c >> 7, (c >> 3) & 15, c & 7
    mag = np.where(e == 0, m * 2.0 ** -9, (1.0 + m / 8.0) * 2.0 ** (e - 7.0))
    v = np.where(s == 1, -mag, mag)
    v[(e == 15) & (m == 7)] = np.nan
    return v


E4M3 = e4m3_table()


def load(dir_):
    with open(dir_ + "/model.safetensors", "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    raw = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        buf = data[8 + n + b:8 + n + e]
        dt = info["dtype"]
        if dt == "F32":
            a = np.frombuffer(buf, np.float32).astype(np.float64)
        elif dt == "BF16":
            a = (np.frombuffer(buf, np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        elif dt == "F8_E4M3":
            a = E4M3[np.frombuffer(buf, np.uint8)]
        elif dt == "U8":
            a = np.frombuffer(buf, np.uint8)
        else:
            raise SystemExit(f"unexpected dtype {dt} for {name}")
        raw[name] = a.reshape(info["shape"])
    out = {}
    for name, a in raw.items():
        if name.endswith("_scale_inv"):
            continue
        sname = name + "_scale_inv"
        if sname in raw:
            s = raw[sname]
            if s.dtype == np.uint8:  # MXFP8: E8M0 exponent per 32 inputs
                scale = np.where(s == 255, np.nan, 2.0 ** (s.astype(np.float64) - 127))
                a = a * np.repeat(scale, 32, axis=1)
            else:  # FP8 block: one scale per 128 x 128
                full = np.repeat(np.repeat(s, 128, axis=0), 128, axis=1)
                a = a * full[:a.shape[0], :a.shape[1]]
        out[name] = a
    return out


def rms(x, w, eps, gemma):
    y = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    return y * ((1.0 + w) if gemma else w)


def rope(x, pos, rot, theta):
    # NeoX pairs (i, i + rot/2) on the first `rot` dims; the rest untouched.
    inv = 1.0 / theta ** (np.arange(0, rot, 2, dtype=np.float64) / rot)
    ang = pos[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    half = rot // 2
    a, b = x[..., :half], x[..., half:rot]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin, x[..., rot:]], axis=-1)


def act(g, u, c, oai):
    if not oai:
        return g / (1 + np.exp(-g)) * u
    limit, alpha, beta = c.get("swiglu_limit", 7.0), c.get("swiglu_alpha", 1.702), c.get("swiglu_beta", 1.0)
    g = np.minimum(g, limit)
    u = np.clip(u, -limit, limit)
    return g / (1 + np.exp(-alpha * g)) * (u + beta)


def mlp(x, wg, wu, wd, c, oai):
    return act(x @ wg.T, x @ wu.T, c, oai) @ wd.T


def msa_select(iq, ik, T, sa, layer, log):
    """Per query t and index head g: top-k blocks by max score, forced local/init inside budget."""
    bs, topk = sa["sparse_block_size"], sa["sparse_topk_blocks"]
    init, local = sa.get("sparse_init_block", 0), sa.get("sparse_local_block", 1)
    G = iq.shape[1]
    sel = np.zeros((G, T, T), dtype=bool)  # key mask per index head
    for g in range(G):
        s = iq[:, g, :] @ ik.T  # [T, T]
        for t in range(T):
            nb = t // bs + 1
            score = np.array([s[t, b * bs:min((b + 1) * bs, t + 1)].max() for b in range(nb)])
            score[:min(init, nb)] = 1e30
            score[max(0, nb - local):] = 1e29
            order = sorted(range(nb), key=lambda b: (-score[b], b))[:min(topk, nb)]
            blocks = sorted(order)
            log.append(f"{layer} {t} {g} " + " ".join(map(str, blocks)))
            for b in blocks:
                sel[g, t, b * bs:min((b + 1) * bs, t + 1)] = True
    return sel


def main():
    mdir, out_path, toks, taps_arg = sys.argv[1:5]
    tokens = [int(t) for t in toks.split(",")]
    taps = [] if taps_arg == "-" else [int(t) for t in taps_arg.split(",")]
    root = json.load(open(mdir + "/config.json"))
    arch = root["architectures"][0]
    c = root.get("text_config", root) if arch == "MiniMaxM3SparseForConditionalGeneration" else root
    pre = "language_model." if arch == "MiniMaxM3SparseForConditionalGeneration" else ""
    m2 = arch == "MiniMaxM2ForCausalLM"
    W = load(mdir)
    H, L, nh, nkv, hd = c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    eps, theta = c.get("rms_norm_eps", 1e-6), c.get("rope_theta", 1e4)
    rot = c.get("rotary_dim", int(hd * c.get("partial_rotary_factor", 1.0)))
    gemma = (not m2) and c.get("use_gemma_norm", True)
    per_head = c.get("qk_norm_type", "per_layer" if m2 else "per_head") == "per_head"
    oai = c.get("hidden_act", "silu") == "swigluoai"
    moe_flags = c.get("moe_layer_freq", [1] * L)
    sa = c.get("sparse_attention_config")
    sparse_flags = sa["sparse_attention_freq"] if sa else [0] * L
    T = len(tokens)
    pos = np.arange(T, dtype=np.float64)
    x = W[pre + "model.embed_tokens.weight"][tokens]
    tap_out = np.zeros((T, len(taps), H))
    msa_log = []

    def take(i):
        for j, t in enumerate(taps):
            if t == i:
                tap_out[:, j, :] = x

    take(0)
    causal = np.tril(np.ones((T, T), dtype=bool))
    for l in range(L):
        p = f"{pre}model.layers.{l}."
        h = rms(x, W[p + "input_layernorm.weight"], eps, gemma)
        q = h @ W[p + "self_attn.q_proj.weight"].T
        k = h @ W[p + "self_attn.k_proj.weight"].T
        v = (h @ W[p + "self_attn.v_proj.weight"].T).reshape(T, nkv, hd)
        if per_head:
            q = rms(q.reshape(T, nh, hd), W[p + "self_attn.q_norm.weight"], eps, gemma)
            k = rms(k.reshape(T, nkv, hd), W[p + "self_attn.k_norm.weight"], eps, gemma)
        else:
            q = rms(q, W[p + "self_attn.q_norm.weight"], eps, gemma).reshape(T, nh, hd)
            k = rms(k, W[p + "self_attn.k_norm.weight"], eps, gemma).reshape(T, nkv, hd)
        q, k = rope(q, pos, rot, theta), rope(k, pos, rot, theta)
        masks = None
        if sparse_flags[l]:
            G, D = sa["sparse_num_index_heads"], sa["sparse_index_dim"]
            iq = rms((h @ W[p + "self_attn.index_q_proj.weight"].T).reshape(T, G, D), W[p + "self_attn.index_q_norm.weight"], eps, gemma)
            ik = rms(h @ W[p + "self_attn.index_k_proj.weight"].T, W[p + "self_attn.index_k_norm.weight"], eps, gemma)
            iq = rope(iq, pos, rot, theta)
            ik = rope(ik[:, None, :], pos, rot, theta)[:, 0, :]
            masks = msa_select(iq, ik, T, sa, l, msa_log)
        o = np.zeros((T, nh, hd))
        group = nh // nkv
        for hh in range(nh):
            kv = hh // group
            s = q[:, hh, :] @ k[:, kv, :].T / np.sqrt(hd)
            mask = causal if masks is None else masks[kv]
            s = np.where(mask, s, -np.inf)
            s = np.exp(s - s.max(axis=1, keepdims=True))
            s /= s.sum(axis=1, keepdims=True)
            o[:, hh, :] = s @ v[:, kv, :]
        x = x + o.reshape(T, nh * hd) @ W[p + "self_attn.o_proj.weight"].T
        h = rms(x, W[p + "post_attention_layernorm.weight"], eps, gemma)
        if not moe_flags[l]:
            f = mlp(h, W[p + "mlp.gate_proj.weight"], W[p + "mlp.up_proj.weight"], W[p + "mlp.down_proj.weight"], c, oai)
        else:
            m = p + "block_sparse_moe."
            E, K = c["num_local_experts"], c["num_experts_per_tok"]
            sc = 1 / (1 + np.exp(-(h @ W[m + "gate.weight"].T)))
            biased = sc + (W[m + "e_score_correction_bias"] if c.get("use_routing_bias", True) else 0)
            f = np.zeros_like(h)
            for t in range(T):
                chosen = sorted(range(E), key=lambda e: (-biased[t, e], e))[:K]
                wsum = sum(sc[t, e] for e in chosen)
                for e in chosen:
                    ep = f"{m}experts.{e}."
                    f[t] += sc[t, e] / wsum * mlp(h[t:t + 1], W[ep + "w1.weight"], W[ep + "w3.weight"], W[ep + "w2.weight"], c, oai)[0]
            f *= c.get("routed_scaling_factor", 1.0)
            if c.get("shared_intermediate_size", 0):
                sp = m + "shared_experts."
                f += mlp(h, W[sp + "gate_proj.weight"], W[sp + "up_proj.weight"], W[sp + "down_proj.weight"], c, oai)
        x = x + f
        take(l + 1)
    logits = rms(x, W[pre + "model.norm.weight"], eps, gemma) @ W[pre + "lm_head.weight"].T
    with open(out_path, "wb") as fo:
        fo.write(logits.astype(np.float32).tobytes())
        fo.write(tap_out.astype(np.float32).tobytes())
    with open(out_path + ".msa", "w") as fo:
        fo.write("\n".join(msa_log) + ("\n" if msa_log else ""))


if __name__ == "__main__":
    main()
