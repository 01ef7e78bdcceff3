#!/usr/bin/python3
"""Writes scaled-down MiniMax-M3 / MiniMax-M2 checkpoints with the real tensor names, prefixes,
dtypes and config fields, in BF16, FP8-block (M2's release format) or MXFP8 (M3's), plus a
byte-level tokenizer with the MiniMax special tokens and chat template.

  make_synthetic_minimax.py OUT_DIR --variant m3|m3-vl|m2 --quant bf16|fp8|mxfp8 [--preset small|speed]

`small` (tests): hidden 256, head_dim 128, 6 layers (2 dense + 4 MSA/MoE) for M3, 8 experts top-2,
MSA blocks of 128 with a budget of 2, so block selection matters beyond 256 tokens.
`speed` (benchmarks): an M3-shaped model of a few GB (hidden 2048, 10 layers, 64 experts top-4).
The same --seed gives the same underlying weights in every --quant, so the variants compute
nearly the same function. Needs only python3-numpy.
"""
import argparse
import json
import os
import struct

import numpy as np

SPECIALS = ["]~!b[", "]~b]", "[e~[", "<mm:think>", "</mm:think>", "<response>", "</response>", "<reserved>"]
BOS, EOS = "]~!b[", "[e~["

# The MiniMax chat format: role markers `]~b]` (assistant = "ai"), end marker `[e~[`, reasoning
# inside <mm:think>, tool results inside <response>; the generation prompt opens an "ai" turn.
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% set role = 'ai' if m['role'] == 'assistant' else m['role'] %}]~b]{{ role }}\n"
    "{% if m['role'] == 'assistant' and m['reasoning_content'] is defined and m['reasoning_content'] %}"
    "<mm:think>{{ m['reasoning_content'] }}</mm:think>{% endif %}"
    "{% if m['role'] == 'tool' %}<response>{{ m['content'] }}</response>{% else %}{{ m['content'] }}{% endif %}"
    "[e~[\n{% endfor %}"
    "{% if add_generation_prompt %}]~b]ai\n"
    "{% if enable_thinking is defined and not enable_thinking %}</mm:think>"
    "{% elif enable_thinking is defined and enable_thinking %}<mm:think>{% endif %}{% endif %}"
)


# ---------------------------------------------------------------- number formats
def e4m3_values():
    """Value of every e4m3fn code (NaN for S.1111.111)."""
    c = np.arange(256)
    s, e, m = c >> 7, (c >> 3) & 15, c & 7
    mag = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7.0))
    v = np.where(s == 1, -mag, mag)
    v[(e == 15) & (m == 7)] = np.nan
    return v


_POS = e4m3_values()[:127]  # codes 0x00..0x7e, ascending values 0 .. 448


def to_e4m3(x):
    """Round to the nearest e4m3 code (ties to the even code), saturating at +-448."""
    a = np.minimum(np.abs(x), 448.0)
    hi = np.clip(np.searchsorted(_POS, a), 1, 126)
    lo = hi - 1
    dlo, dhi = a - _POS[lo], _POS[hi] - a
    code = np.where((dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0)), hi, lo)
    code = np.where(a >= _POS[126], 126, code)
    return (code | np.where(x < 0, 0x80, 0)).astype(np.uint8)


def to_bf16_bits(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def quant_mx(w):
    n, k = w.shape
    g = w.reshape(n, k // 32, 32)
    amax = np.max(np.abs(g), axis=2)
    e = np.floor(np.log2(np.maximum(amax, 2.0 ** -120))) - 8  # e4m3 max is 1.75 * 2^8
    codes = to_e4m3(g / (2.0 ** e)[..., None]).reshape(n, k)
    return codes, (e + 127).astype(np.uint8)


def quant_block(w):
    n, k = w.shape
    bn, bk = -(-n // 128), -(-k // 128)
    scales = np.zeros((bn, bk), dtype=np.float32)
    codes = np.zeros((n, k), dtype=np.uint8)
    for i in range(bn):
        for j in range(bk):
            blk = w[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128]
            s = np.float32(max(np.max(np.abs(blk)), 1e-12) / 448.0)
            scales[i, j] = s
            codes[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128] = to_e4m3(blk / np.float64(s))
    return codes, scales


def fast_codes(rng, n, k):
    """Random e4m3 codes with magnitudes in [2^-3, 2^2) (for the big speed model)."""
    r = rng.integers(0, 256, size=(n, k), dtype=np.uint8)
    exp = ((r >> 3) % 5 + 4).astype(np.uint8)
    return (r & 0x87) | (exp << 3)


# ---------------------------------------------------------------- checkpoint writing
class Writer:
    """Collects (name, dtype, shape, producer) and streams them into one safetensors file."""

    def __init__(self):
        self.items = []

    def add(self, name, dtype, shape, produce):
        self.items.append((name, dtype, list(shape), produce))

    def write(self, path):
        size = {"F32": 4, "BF16": 2, "U8": 1, "F8_E4M3": 1}
        header, off = {}, 0
        for name, dt, shape, _ in self.items:
            n = int(np.prod(shape)) * size[dt]
            header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + n]}
            off += n
        header["__metadata__"] = {"format": "pt"}
        hb = json.dumps(header).encode()
        hb += b" " * (-len(hb) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(hb)))
            f.write(hb)
            for name, dt, shape, produce in self.items:
                data = np.ascontiguousarray(produce())
                assert data.nbytes == int(np.prod(shape)) * size[dt], name
                f.write(data.tobytes())


def presets(variant, preset):
    m2 = variant == "m2"
    if preset == "small":
        p = dict(hidden=256, heads=4, kv_heads=2, head_dim=128, layers=4 if m2 else 6, dense_layers=0 if m2 else 2,
                 experts=16 if m2 else 8, top_k=4 if m2 else 2, expert_inter=128, shared_inter=0 if m2 else 128,
                 dense_inter=512, vocab=264, topk_blocks=2, block_size=128)
    else:
        p = dict(hidden=2048, heads=16, kv_heads=4, head_dim=128, layers=10, dense_layers=0 if m2 else 2,
                 experts=64, top_k=4, expert_inter=1024, shared_inter=0 if m2 else 1024, dense_inter=4096,
                 vocab=32000, topk_blocks=16, block_size=128)
    return p


def make_config(variant, quant, p):
    L = p["layers"]
    moe = [0] * p["dense_layers"] + [1] * (L - p["dense_layers"])
    common = {
        "hidden_size": p["hidden"], "num_hidden_layers": L, "num_attention_heads": p["heads"],
        "num_key_value_heads": p["kv_heads"], "head_dim": p["head_dim"], "rotary_dim": 64, "rope_theta": 5e6,
        "rms_norm_eps": 1e-6, "vocab_size": p["vocab"], "tie_word_embeddings": False,
        "intermediate_size": p["expert_inter"], "num_local_experts": p["experts"],
        "num_experts_per_tok": p["top_k"], "scoring_func": "sigmoid", "use_routing_bias": True,
        "max_position_embeddings": 8192, "bos_token_id": 256 + SPECIALS.index(BOS),
        "eos_token_id": 256 + SPECIALS.index(EOS), "torch_dtype": "bfloat16",
    }
    if variant == "m2":
        cfg = dict(common, architectures=["MiniMaxM2ForCausalLM"], model_type="minimax_m2", hidden_act="silu",
                   use_qk_norm=True, qk_norm_type="per_layer", partial_rotary_factor=0.5)
    else:
        cfg = dict(common, architectures=["MiniMaxM3SparseForCausalLM"], model_type="minimax_m3",
                   partial_rotary_factor=0.5, use_gemma_norm=True, use_qk_norm=True, qk_norm_type="per_head",
                   attention_output_gate=False, hidden_act="swigluoai", swiglu_alpha=1.702, swiglu_limit=7.0,
                   dense_intermediate_size=p["dense_inter"], shared_intermediate_size=p["shared_inter"],
                   n_shared_experts=1, routed_scaling_factor=2.0, moe_layer_freq=moe,
                   sparse_attention_config={
                       "sparse_index_dim": 128, "sparse_num_index_heads": p["kv_heads"],
                       "sparse_topk_blocks": p["topk_blocks"], "sparse_block_size": p["block_size"],
                       "sparse_score_type": "max", "sparse_init_block": 0, "sparse_local_block": 1,
                       "sparse_attention_freq": moe})
    if quant != "bf16":
        cfg["quantization_config"] = (
            {"quant_method": "mxfp8", "activation_scheme": "dynamic", "weight_block_size": [1, 32],
             "ignored_layers": ["lm_head", "model.embed_tokens", "block_sparse_moe.gate"]}
            if quant == "mxfp8" else
            {"quant_method": "fp8", "activation_scheme": "dynamic", "fmt": "e4m3", "weight_block_size": [128, 128]})
    if variant == "m3-vl":
        text = dict(cfg, architectures=["MiniMaxM3SparseForCausalLM"])
        q = text.pop("quantization_config", None)
        cfg = {"architectures": ["MiniMaxM3SparseForConditionalGeneration"], "model_type": "minimax_m3_vl",
               "text_config": text, "vision_config": {"hidden_size": 64}, "image_token_index": 200025,
               "bos_token_id": text["bos_token_id"], "eos_token_id": text["eos_token_id"]}
        if q:
            cfg["quantization_config"] = q
    return cfg


def build(out, variant, quant, preset, seed):
    p = presets(variant, preset)
    rng = np.random.default_rng(seed)
    big = preset == "speed"
    H, hd, L = p["hidden"], p["head_dim"], p["layers"]
    m2 = variant == "m2"
    pre = "language_model." if variant == "m3-vl" else ""
    w = Writer()

    def dense(shape, std):  # drawn now, so every --quant sees the same weights
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def bf16(name, shape, std):
        if big:
            w.add(name, "BF16", shape, lambda: to_bf16_bits(rng.standard_normal(shape, dtype=np.float32) * std))
        else:
            v = to_bf16_bits(dense(shape, std))
            w.add(name, "BF16", shape, lambda: v)

    def f32(name, shape, std, mean=0.0):
        v = (dense(shape, std) + mean).astype(np.float32)
        w.add(name, "F32", shape, lambda: v)

    def linear(name, n, k):
        std = 1.0 / np.sqrt(k)
        if quant == "bf16":
            return bf16(name, (n, k), std)
        if big:
            codes = lambda: fast_codes(rng, n, k)
            if quant == "mxfp8":
                w.add(name, "F8_E4M3", (n, k), codes)
                w.add(name + "_scale_inv", "U8", (n, k // 32), lambda: np.full((n, k // 32), 127 - 6, np.uint8))
            else:
                bn, bk = -(-n // 128), -(-k // 128)
                w.add(name, "F8_E4M3", (n, k), codes)
                w.add(name + "_scale_inv", "F32", (bn, bk), lambda: np.full((bn, bk), 2.0 ** -6, np.float32))
            return
        v = dense((n, k), std)
        codes, scales = quant_mx(v) if quant == "mxfp8" else quant_block(v)
        w.add(name, "F8_E4M3", (n, k), lambda: codes)
        w.add(name + "_scale_inv", "U8" if quant == "mxfp8" else "F32", scales.shape, lambda: scales)

    def norm(name, n):  # Gemma norms store w - 1
        f32(name, (n,), 0.1, 0.0 if not m2 else 1.0)

    bf16(pre + "model.embed_tokens.weight", (p["vocab"], H), 1.0)
    bf16(pre + "lm_head.weight", (p["vocab"], H), 1.0 / np.sqrt(H))
    norm(pre + "model.norm.weight", H)
    moe = [0] * p["dense_layers"] + [1] * (L - p["dense_layers"])
    for l in range(L):
        b = f"{pre}model.layers.{l}."
        norm(b + "input_layernorm.weight", H)
        norm(b + "post_attention_layernorm.weight", H)
        linear(b + "self_attn.q_proj.weight", p["heads"] * hd, H)
        linear(b + "self_attn.k_proj.weight", p["kv_heads"] * hd, H)
        linear(b + "self_attn.v_proj.weight", p["kv_heads"] * hd, H)
        linear(b + "self_attn.o_proj.weight", H, p["heads"] * hd)
        norm(b + "self_attn.q_norm.weight", hd if not m2 else p["heads"] * hd)
        norm(b + "self_attn.k_norm.weight", hd if not m2 else p["kv_heads"] * hd)
        if not m2 and moe[l]:
            linear(b + "self_attn.index_q_proj.weight", p["kv_heads"] * 128, H)
            linear(b + "self_attn.index_k_proj.weight", 128, H)
            norm(b + "self_attn.index_q_norm.weight", 128)
            norm(b + "self_attn.index_k_norm.weight", 128)
        if not moe[l]:
            linear(b + "mlp.gate_proj.weight", p["dense_inter"], H)
            linear(b + "mlp.up_proj.weight", p["dense_inter"], H)
            linear(b + "mlp.down_proj.weight", H, p["dense_inter"])
            continue
        m = b + "block_sparse_moe."
        f32(m + "gate.weight", (p["experts"], H), 2.0 / np.sqrt(H))
        f32(m + "e_score_correction_bias", (p["experts"],), 0.05)
        for e in range(p["experts"]):
            linear(f"{m}experts.{e}.w1.weight", p["expert_inter"], H)
            linear(f"{m}experts.{e}.w3.weight", p["expert_inter"], H)
            linear(f"{m}experts.{e}.w2.weight", H, p["expert_inter"])
        if p["shared_inter"]:
            linear(m + "shared_experts.gate_proj.weight", p["shared_inter"], H)
            linear(m + "shared_experts.up_proj.weight", p["shared_inter"], H)
            linear(m + "shared_experts.down_proj.weight", H, p["shared_inter"])
    if variant == "m3-vl":  # present in the release, never read by the text model
        bf16("vision_tower.patch_embed.weight", (64, 48), 0.02)
        bf16("language_model.model.mtp.0.enorm.weight", (H,), 0.02)

    os.makedirs(out, exist_ok=True)
    w.write(os.path.join(out, "model.safetensors"))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(make_config(variant, quant, p), f, indent=1)
    write_tokenizer(out)


def byte_unicode():
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def write_tokenizer(out):
    bu = byte_unicode()
    vocab = {bu[b]: b for b in range(256)}
    added = [{"id": 256 + i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(SPECIALS)]
    tok = {
        "version": "1.0", "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                  "merges": []},
    }
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        json.dump(tok, f)
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": BOS, "eos_token": EOS, "add_bos_token": False, "chat_template": CHAT_TEMPLATE,
                   "tokenizer_class": "GPT2Tokenizer"}, f, indent=1)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--variant", choices=["m3", "m3-vl", "m2"], default="m3")
    ap.add_argument("--quant", choices=["bf16", "fp8", "mxfp8"], default="bf16")
    ap.add_argument("--preset", choices=["small", "speed"], default="small")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    build(a.out, a.variant, a.quant, a.preset, a.seed)


if __name__ == "__main__":
    main()
