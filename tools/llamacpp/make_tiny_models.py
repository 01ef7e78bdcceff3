# Tiny random Llama / Qwen2 / Qwen3 checkpoints and EAGLE-3 / DFlash drafts (F32 safetensors) for
# llama.cpp's converter: the fixtures of tests/test_gguf_llamacpp.cpp (usage: make_tiny_models.py OUT_DIR).
import json, struct, sys, os
import numpy as np

def write_safetensors(path, tensors):
    header, off, blobs = {}, 0, []
    kinds = {np.dtype('int64'): ('I64', '<i8'), np.dtype('bool'): ('BOOL', '|b1')}
    for name, a in tensors:
        dtype, code = kinds.get(a.dtype, ('F32', '<f4'))
        b = a.astype(code).tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        off += len(b); blobs.append(b)
    h = json.dumps(header).encode()
    h += b' ' * ((8 - len(h) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(h))); f.write(h)
        for b in blobs: f.write(b)

def make(arch, out, seed):
    rng = np.random.default_rng(seed)
    H, I, L, nh, nkv, hd, V = 32, 64, 2, 2, 1, 16, 64
    cfg = {"architectures": [arch], "hidden_size": H, "intermediate_size": I, "num_hidden_layers": L,
           "num_attention_heads": nh, "num_key_value_heads": nkv, "head_dim": hd, "vocab_size": V,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 256,
           "hidden_act": "silu", "tie_word_embeddings": False, "bos_token_id": 1, "eos_token_id": 2,
           "model_type": {"LlamaForCausalLM": "llama", "Qwen2ForCausalLM": "qwen2", "Qwen3ForCausalLM": "qwen3"}[arch]}
    os.makedirs(out, exist_ok=True)
    json.dump(cfg, open(out + '/config.json', 'w'), indent=1)
    r = lambda *s: (rng.standard_normal(s) * 0.2).astype(np.float32)
    t = [("model.embed_tokens.weight", r(V, H)), ("lm_head.weight", r(V, H)), ("model.norm.weight", 1 + r(H))]
    for l in range(L):
        p = f"model.layers.{l}."
        t += [(p + "self_attn.q_proj.weight", r(nh * hd, H)), (p + "self_attn.k_proj.weight", r(nkv * hd, H)),
              (p + "self_attn.v_proj.weight", r(nkv * hd, H)), (p + "self_attn.o_proj.weight", r(H, nh * hd)),
              (p + "mlp.gate_proj.weight", r(I, H)), (p + "mlp.up_proj.weight", r(I, H)),
              (p + "mlp.down_proj.weight", r(H, I)), (p + "input_layernorm.weight", 1 + r(H)),
              (p + "post_attention_layernorm.weight", 1 + r(H))]
        if arch == "Qwen2ForCausalLM":
            t += [(p + "self_attn.q_proj.bias", r(nh * hd)), (p + "self_attn.k_proj.bias", r(nkv * hd)),
                  (p + "self_attn.v_proj.bias", r(nkv * hd))]
        if arch == "Qwen3ForCausalLM":
            t += [(p + "self_attn.q_norm.weight", 1 + r(hd)), (p + "self_attn.k_norm.weight", 1 + r(hd))]
    write_safetensors(out + '/model.safetensors', t)

# An EAGLE-3 draft for the tiny llama (TorchSpec/EAGLE key layout, "midlayer."), with a reduced
# draft vocabulary (d2t offsets, t2d mask) and GQA, so the conversion's q/k permutation and its
# d2t rewrite (offsets -> absolute ids) are both exercised.
def make_draft(out, seed):
    rng = np.random.default_rng(seed)
    H, I, nh, nkv, hd, V, Vd = 32, 64, 2, 1, 16, 64, 48
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": H,
           "intermediate_size": I, "num_hidden_layers": 1, "num_attention_heads": nh, "num_key_value_heads": nkv,
           "head_dim": hd, "vocab_size": V, "draft_vocab_size": Vd, "target_hidden_size": H,
           "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 256, "hidden_act": "silu",
           "tie_word_embeddings": False, "eagle_aux_hidden_state_layer_ids": [0, 1, 2]}
    os.makedirs(out, exist_ok=True)
    json.dump(cfg, open(out + '/config.json', 'w'), indent=1)
    r = lambda *s: (rng.standard_normal(s) * 0.2).astype(np.float32)
    ids = np.sort(rng.choice(V, Vd, replace=False))
    t2d = np.zeros(V, dtype=bool)
    t2d[ids] = True
    p = "midlayer."
    t = [("fc.weight", r(H, 3 * H)), ("lm_head.weight", r(Vd, H)), ("norm.weight", 1 + r(H)),
         ("d2t", (ids - np.arange(Vd)).astype(np.int64)), ("t2d", t2d),
         (p + "self_attn.q_proj.weight", r(nh * hd, 2 * H)), (p + "self_attn.k_proj.weight", r(nkv * hd, 2 * H)),
         (p + "self_attn.v_proj.weight", r(nkv * hd, 2 * H)), (p + "self_attn.o_proj.weight", r(H, nh * hd)),
         (p + "mlp.gate_proj.weight", r(I, H)), (p + "mlp.up_proj.weight", r(I, H)), (p + "mlp.down_proj.weight", r(H, I)),
         (p + "input_layernorm.weight", 1 + r(H)), (p + "hidden_norm.weight", 1 + r(H)),
         (p + "post_attention_layernorm.weight", 1 + r(H))]
    write_safetensors(out + '/model.safetensors', t)

# A DFlash block draft for the tiny llama (z-lab's DFlashDraftModel: Qwen3 layers with q/k norms,
# fc over the taps of target layers 0 and 1, hidden_norm, norm; no embedding or head of its own).
def make_dflash(out, seed):
    rng = np.random.default_rng(seed)
    H, I, L, nh, nkv, hd, V = 32, 64, 2, 2, 1, 16, 64
    cfg = {"architectures": ["DFlashDraftModel"], "model_type": "qwen3", "hidden_size": H, "intermediate_size": I,
           "num_hidden_layers": L, "num_attention_heads": nh, "num_key_value_heads": nkv, "head_dim": hd,
           "vocab_size": V, "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 256,
           "hidden_act": "silu", "tie_word_embeddings": False, "attention_bias": False, "block_size": 4,
           "num_target_layers": 2, "layer_types": ["full_attention"] * L,
           "dflash_config": {"block_size": 4, "mask_token_id": 63, "target_layer_ids": [0, 1]}}
    os.makedirs(out, exist_ok=True)
    json.dump(cfg, open(out + '/config.json', 'w'), indent=1)
    r = lambda *s: (rng.standard_normal(s) * 0.2).astype(np.float32)
    t = [("fc.weight", r(H, 2 * H)), ("hidden_norm.weight", 1 + r(H)), ("norm.weight", 1 + r(H))]
    for l in range(L):
        p = f"layers.{l}."
        t += [(p + "self_attn.q_proj.weight", r(nh * hd, H)), (p + "self_attn.k_proj.weight", r(nkv * hd, H)),
              (p + "self_attn.v_proj.weight", r(nkv * hd, H)), (p + "self_attn.o_proj.weight", r(H, nh * hd)),
              (p + "self_attn.q_norm.weight", 1 + r(hd)), (p + "self_attn.k_norm.weight", 1 + r(hd)),
              (p + "mlp.gate_proj.weight", r(I, H)), (p + "mlp.up_proj.weight", r(I, H)),
              (p + "mlp.down_proj.weight", r(H, I)), (p + "input_layernorm.weight", 1 + r(H)),
              (p + "post_attention_layernorm.weight", 1 + r(H))]
    write_safetensors(out + '/model.safetensors', t)

for i, a in enumerate(["LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM"]):
    make(a, sys.argv[1] + '/' + a.replace('ForCausalLM', '').lower(), 11 + i)
make_draft(sys.argv[1] + '/llama-eagle3', 21)
make_dflash(sys.argv[1] + '/llama-dflash', 31)
