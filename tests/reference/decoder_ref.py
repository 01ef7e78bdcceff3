#!/usr/bin/python3
"""Independent numpy reference for Llama / Qwen2 / Qwen3 decoders, written from the Hugging Face
modelling code's definitions (not from eaglet's). Computes in float64.

usage: decoder_ref.py MODEL_DIR OUT.bin TOKENS(comma-separated) TAPS(comma-separated or '-')
Writes float32: logits [T, V] then taps [T, len(TAPS), H] (residual stream entering layer id).
"""
import json
import struct
import sys

import numpy as np


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        raw = data[base + b:base + e]
        if info["dtype"] == "F32":
            arr = np.frombuffer(raw, dtype=np.float32)
        elif info["dtype"] == "BF16":
            arr = (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype={"I64": np.int64, "BOOL": np.bool_}[info["dtype"]])
        out[name] = arr.reshape(info["shape"]).astype(np.float64) if arr.dtype != np.bool_ and arr.dtype != np.int64 else arr.reshape(info["shape"])
    return out


def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def inv_freq(cfg, dim):
    theta = cfg.get("rope_theta", 10000.0)
    f = 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.float64) / dim))
    sc = cfg.get("rope_scaling")
    if sc and sc.get("rope_type", sc.get("type")) == "llama3":
        factor, low, high = sc["factor"], sc.get("low_freq_factor", 1.0), sc.get("high_freq_factor", 4.0)
        old = sc.get("original_max_position_embeddings", 8192)
        wavelen = 2 * np.pi / f
        smooth = (old / wavelen - low) / (high - low)
        scaled = np.where(wavelen > old / low, f / factor, f)
        mid = (wavelen >= old / high) & (wavelen <= old / low)
        f = np.where(mid, (1 - smooth) * f / factor + smooth * f, scaled)
    return f


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def forward(cfg, W, tokens):
    """Logits [T, V] and the residual stream entering every layer, states[j] [T, H] (j = 0..L)."""
    arch = cfg["architectures"][0]
    H, L = cfg["hidden_size"], cfg["num_hidden_layers"]
    nh, nkv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = cfg.get("head_dim", H // nh)
    eps = cfg.get("rms_norm_eps", 1e-6)
    T = len(tokens)
    x = W["model.embed_tokens.weight"][tokens]
    pos = np.arange(T, dtype=np.float64)
    ang = np.outer(pos, inv_freq(cfg, hd))
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    states = [x.copy()]
    for l in range(L):
        p = f"model.layers.{l}."
        h = rms_norm(x, W[p + "input_layernorm.weight"], eps)
        q = h @ W[p + "self_attn.q_proj.weight"].T
        k = h @ W[p + "self_attn.k_proj.weight"].T
        v = h @ W[p + "self_attn.v_proj.weight"].T
        if arch == "Qwen2ForCausalLM":
            q += W[p + "self_attn.q_proj.bias"]
            k += W[p + "self_attn.k_proj.bias"]
            v += W[p + "self_attn.v_proj.bias"]
        q, k, v = q.reshape(T, nh, hd), k.reshape(T, nkv, hd), v.reshape(T, nkv, hd)
        if arch == "Qwen3ForCausalLM":
            q = rms_norm(q, W[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, W[p + "self_attn.k_norm.weight"], eps)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        rep = nh // nkv
        k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        a = np.einsum("hts,shd->thd", s, v).reshape(T, nh * hd)
        x = x + a @ W[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, W[p + "post_attention_layernorm.weight"], eps)
        g = h @ W[p + "mlp.gate_proj.weight"].T
        u = h @ W[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ W[p + "mlp.down_proj.weight"].T
        states.append(x.copy())
    lm = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return rms_norm(x, W["model.norm.weight"], eps) @ lm.T, states


def main():
    model_dir, out_path, tokens, taps = sys.argv[1:5]
    tokens = [int(t) for t in tokens.split(",")]
    taps = [] if taps == "-" else [int(t) for t in taps.split(",")]
    cfg = json.load(open(model_dir + "/config.json"))
    W = load_safetensors(model_dir + "/model.safetensors")
    logits, states = forward(cfg, W, tokens)
    with open(out_path, "wb") as f:
        f.write(logits.astype(np.float32).tobytes())
        if taps:
            f.write(np.stack([states[t] for t in taps], axis=1).astype(np.float32).tobytes())


if __name__ == "__main__":
    main()
