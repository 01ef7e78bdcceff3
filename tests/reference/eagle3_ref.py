#!/usr/bin/python3
"""Independent numpy reference for EAGLE-3 drafts, written from the public model code's definitions
(vLLM llama_eagle3.py / qwen3_eagle3.py, speculators' config, SpecForge before and after its PR #879;
summarised in ../shared/docs/eagle3-reference.md section 3), not from eaglet's code. float64.

usage: eagle3_ref.py DRAFT_DIR TARGET_DIR IN.bin OUT.bin T [SEMANTICS]
IN.bin: int32 tokens [T+1], then float32 aux [T, 3*Ht]. Positions 0..T-1 use g = fc(aux) and
tokens[0..T-1]; position T uses tokens[T] and g = the draft's own state from position T-1.
OUT.bin: float32 logits [T+1, Vd], then states [T+1, H] (next g per position).
SEMANTICS: vllm (default) or specforge-legacy (SpecForge PR #568 to #879: the state fed back is
always pre-norm; norm_output only decides whether lm_head reads norm(out)).
"""
import json
import sys

import numpy as np

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from decoder_ref import load_safetensors, rms_norm, inv_freq, rotate  # noqa: E402

QWEN3_ARCHS = ("Eagle3Qwen3ForCausalLM", "PeagleQwen3ForCausalLM", "Qwen3ForCausalLM")


class Draft:
    def __init__(self, draft_dir, target_W, target_layers, semantics="vllm"):
        top = json.load(open(draft_dir + "/config.json"))
        speculators = "transformer_layer_config" in top
        layer = top.get("transformer_layer_config", top)
        ec = top.get("eagle_config") or {}
        W = load_safetensors(draft_dir + "/model.safetensors")
        self.W = W
        self.H, self.nh = layer["hidden_size"], layer["num_attention_heads"]
        self.nkv = layer.get("num_key_value_heads", self.nh)
        self.hd = layer.get("head_dim", self.H // self.nh)
        self.eps = layer.get("rms_norm_eps", 1e-6)
        self.Ht = top.get("target_hidden_size", self.H)
        arch = (top.get("architectures") or [""])[0]
        self.qwen3 = layer.get("model_type") == "qwen3" if speculators else arch in QWEN3_ARCHS
        self.bias = layer.get("attention_bias", False)
        # vLLM: eagle_config first, then the top level; speculators' norm_before_residual defaults to true.
        flag = lambda key, default: bool(ec.get(key, top.get(key, default)))  # noqa: E731
        self.norm_before_residual = flag("norm_before_residual", speculators)
        self.norm_before_fc = flag("norm_before_fc", False)
        self.fc_norm = flag("fc_norm", False)
        norm_output = flag("norm_output", False)
        if semantics == "vllm":
            self.head_norm, self.feed_norm = True, norm_output
        else:
            self.head_norm, self.feed_norm = norm_output, False
        rope = dict(layer.get("rope_parameters") or {})
        if rope.get("rope_type", "default") != "default":
            rope["rope_scaling"] = dict(rope)
        rope.update({k: layer[k] for k in ("rope_theta", "rope_scaling") if k in layer})
        self.freqs = inv_freq(rope, self.hd)
        # Aux ids: top level as vLLM reads them; only under eagle_config as SGLang reads them (first id 1: +1).
        if top.get("eagle_aux_hidden_state_layer_ids"):
            ids = list(top["eagle_aux_hidden_state_layer_ids"])
        elif ec.get("eagle_aux_hidden_state_layer_ids"):
            ids = list(ec["eagle_aux_hidden_state_layer_ids"])
            if ids[0] == 1:
                ids = [i + 1 for i in ids]
        else:
            L = target_layers
            ids = [2, L // 2, L - 3]
        self.aux_ids = sorted(ids)
        # vLLM: num_hidden_layers layers; layer 0 is midlayer.* or layers.0.*, later ones layers.i.*.
        self.num_layers = layer.get("num_hidden_layers", 1)
        first = "midlayer." if "midlayer.hidden_norm.weight" in W else "layers.0."
        self.prefixes = [first] + [f"layers.{i}." for i in range(1, self.num_layers)]
        self.embed = W.get("embed_tokens.weight", target_W["model.embed_tokens.weight"])
        self.lm_head = W.get("lm_head.weight", target_W.get("lm_head.weight"))
        self.d2t = W.get("d2t")
        self.keys = [[] for _ in range(self.num_layers)]
        self.values = [[] for _ in range(self.num_layers)]

    def to_target(self, draft_id):
        return int(draft_id + (self.d2t[draft_id] if self.d2t is not None else 0))

    def fuse(self, aux):
        W, Ht = self.W, self.Ht
        if self.norm_before_fc:
            aux = rms_norm(aux, W["input_norm.weight"], self.eps)
        if self.fc_norm:
            aux = np.concatenate([rms_norm(aux[:, i * Ht:(i + 1) * Ht], W[f"fc_norm.{i}.weight"], self.eps)
                                  for i in range(3)], axis=1)
        return aux @ W["fc.weight"].T

    def layer(self, i, pos, x, residual):
        """Decoder layer i on one position: residual + attention(x), then + mlp (vLLM's Llama/Qwen3 layer)."""
        W, P, eps, nh, nkv, hd = self.W, self.prefixes[i], self.eps, self.nh, self.nkv, self.hd
        proj = {n: x @ W[P + f"self_attn.{n}_proj.weight"].T for n in "qkv"}
        if self.bias:
            for n in "qkv":
                proj[n] = proj[n] + W[P + f"self_attn.{n}_proj.bias"]
        q, k, v = proj["q"].reshape(nh, hd), proj["k"].reshape(nkv, hd), proj["v"].reshape(nkv, hd)
        if self.qwen3:
            q = rms_norm(q, W[P + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, W[P + "self_attn.k_norm.weight"], eps)
        ang = pos * self.freqs
        q, k = rotate(q, np.cos(ang), np.sin(ang)), rotate(k, np.cos(ang), np.sin(ang))
        self.keys[i].append(k)
        self.values[i].append(v)
        K, V = np.stack(self.keys[i]), np.stack(self.values[i])  # [S, nkv, hd]
        out = np.zeros((nh, hd))
        for hh in range(nh):
            kv = hh // (nh // nkv)
            s = K[:, kv, :] @ q[hh] / np.sqrt(hd)
            p = np.exp(s - s.max())
            out[hh] = p @ V[:, kv, :] / p.sum()
        h1 = residual + out.reshape(-1) @ W[P + "self_attn.o_proj.weight"].T
        if self.bias and not self.qwen3:  # vLLM's Llama layer has an o_proj bias; Qwen3's has none
            h1 = h1 + W[P + "self_attn.o_proj.bias"]
        hn = rms_norm(h1, W[P + "post_attention_layernorm.weight"], eps)
        gate = hn @ W[P + "mlp.gate_proj.weight"].T
        up = hn @ W[P + "mlp.up_proj.weight"].T
        return h1 + (gate / (1 + np.exp(-gate)) * up) @ W[P + "mlp.down_proj.weight"].T

    def step(self, pos, tok, g):
        """One position appended to the draft's cache: returns (logits [Vd], next state [H])."""
        W, P, eps = self.W, self.prefixes[0], self.eps
        e = rms_norm(self.embed[tok], W[P + "input_layernorm.weight"], eps)
        h = rms_norm(g, W[P + "hidden_norm.weight"], eps)
        o = self.layer(0, pos, np.concatenate([e, h]), h if self.norm_before_residual else g)
        for i in range(1, self.num_layers):
            o = self.layer(i, pos, rms_norm(o, W[self.prefixes[i] + "input_layernorm.weight"], eps), o)
        normed = rms_norm(o, W["norm.weight"], eps)
        return (normed if self.head_norm else o) @ self.lm_head.T, (normed if self.feed_norm else o)


def main():
    draft_dir, target_dir, in_path, out_path, T = sys.argv[1:6]
    semantics = sys.argv[6] if len(sys.argv) > 6 else "vllm"
    T = int(T)
    tcfg = json.load(open(target_dir + "/config.json"))
    d = Draft(draft_dir, load_safetensors(target_dir + "/model.safetensors"), tcfg["num_hidden_layers"], semantics)
    raw = open(in_path, "rb").read()
    tokens = np.frombuffer(raw[:4 * (T + 1)], dtype=np.int32)
    aux = np.frombuffer(raw[4 * (T + 1):], dtype=np.float32).reshape(T, 3 * d.Ht).astype(np.float64)
    g0 = d.fuse(aux)
    logits, states = [], []
    for t in range(T):
        lg, st = d.step(t, tokens[t], g0[t])
        logits.append(lg)
        states.append(st)
    lg, st = d.step(T, tokens[T], states[-1])
    logits.append(lg)
    states.append(st)
    with open(out_path, "wb") as f:
        f.write(np.array(logits, dtype=np.float32).tobytes())
        f.write(np.array(states, dtype=np.float32).tobytes())


if __name__ == "__main__":
    main()
