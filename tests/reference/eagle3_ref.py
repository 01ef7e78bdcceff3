#!/usr/bin/python3
"""Independent numpy reference for an EAGLE-3 draft step, written from the EAGLE-3 description
(../shared/docs/eagle3-reference.md section 3), not from eaglet's code. float64.

usage: eagle3_ref.py DRAFT_DIR TARGET_DIR IN.bin OUT.bin T
IN.bin: int32 tokens [T+1], then float32 aux [T, 3*Ht]. Positions 0..T-1 use g = fc(aux) and
tokens[0..T-1]; position T uses tokens[T] and g = the draft's own state from position T-1.
OUT.bin: float32 logits [T+1, Vd], then states [T+1, H] (next g per position).
"""
import json
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from decoder_ref import load_safetensors, rms_norm, inv_freq, rotate  # noqa: E402


def main():
    draft_dir, target_dir, in_path, out_path, T = sys.argv[1:6]
    T = int(T)
    top = json.load(open(draft_dir + "/config.json"))
    layer = top.get("transformer_layer_config", top)
    W = load_safetensors(draft_dir + "/model.safetensors")
    TW = load_safetensors(target_dir + "/model.safetensors")
    H, I = layer["hidden_size"], layer["intermediate_size"]
    nh, nkv = layer["num_attention_heads"], layer.get("num_key_value_heads", layer["num_attention_heads"])
    hd = layer.get("head_dim", H // nh)
    eps = layer.get("rms_norm_eps", 1e-6)
    Ht = top.get("target_hidden_size", H)
    nbr = top.get("norm_before_residual", "transformer_layer_config" in top)
    P = "midlayer." if "midlayer.hidden_norm.weight" in W else "layers.0."
    raw = open(in_path, "rb").read()
    tokens = np.frombuffer(raw[:4 * (T + 1)], dtype=np.int32)
    aux = np.frombuffer(raw[4 * (T + 1):], dtype=np.float32).reshape(T, 3 * Ht).astype(np.float64)
    if top.get("norm_before_fc"):
        aux = rms_norm(aux, W["input_norm.weight"], eps)
    if top.get("fc_norm"):
        aux = np.concatenate([rms_norm(aux[:, i * Ht:(i + 1) * Ht], W[f"fc_norm.{i}.weight"], eps) for i in range(3)], axis=1)
    g0 = aux @ W["fc.weight"].T
    embed = W.get("embed_tokens.weight", TW["model.embed_tokens.weight"])
    lm_head = W.get("lm_head.weight", TW.get("lm_head.weight"))
    freqs = inv_freq(layer, hd)
    keys, values = [], []

    def step(pos, tok, g):
        e = rms_norm(embed[tok], W[P + "input_layernorm.weight"], eps)
        h = rms_norm(g, W[P + "hidden_norm.weight"], eps)
        residual = h if nbr else g
        x = np.concatenate([e, h])
        q = (x @ W[P + "self_attn.q_proj.weight"].T).reshape(nh, hd)
        k = (x @ W[P + "self_attn.k_proj.weight"].T).reshape(nkv, hd)
        v = (x @ W[P + "self_attn.v_proj.weight"].T).reshape(nkv, hd)
        ang = pos * freqs
        q, k = rotate(q, np.cos(ang), np.sin(ang)), rotate(k, np.cos(ang), np.sin(ang))
        keys.append(k)
        values.append(v)
        K, V = np.stack(keys), np.stack(values)  # [S, nkv, hd]
        out = np.zeros((nh, hd))
        for hh in range(nh):
            kv = hh // (nh // nkv)
            s = K[:, kv, :] @ q[hh] / np.sqrt(hd)
            p = np.exp(s - s.max())
            p /= p.sum()
            out[hh] = p @ V[:, kv, :]
        h1 = residual + out.reshape(-1) @ W[P + "self_attn.o_proj.weight"].T
        hn = rms_norm(h1, W[P + "post_attention_layernorm.weight"], eps)
        gate = hn @ W[P + "mlp.gate_proj.weight"].T
        up = hn @ W[P + "mlp.up_proj.weight"].T
        o = h1 + (gate / (1 + np.exp(-gate)) * up) @ W[P + "mlp.down_proj.weight"].T
        normed = rms_norm(o, W["norm.weight"], eps)
        return normed @ lm_head.T, (normed if top.get("norm_output") else o)

    logits, states = [], []
    for t in range(T):
        lg, st = step(t, tokens[t], g0[t])
        logits.append(lg)
        states.append(st)
    lg, st = step(T, tokens[T], states[-1])
    logits.append(lg)
    states.append(st)
    with open(out_path, "wb") as f:
        f.write(np.array(logits, dtype=np.float32).tobytes())
        f.write(np.array(states, dtype=np.float32).tobytes())


if __name__ == "__main__":
    main()
