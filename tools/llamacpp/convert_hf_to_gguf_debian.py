# Runs llama.cpp's convert_hf_to_gguf.py on Debian 12 (python3-torch 1.13 and python3-numpy from
# apt; no transformers, tqdm or sentencepiece there):
#   LLAMA_CPP_DIR=/path/to/llama.cpp /usr/bin/python3 tools/llamacpp/convert_hf_to_gguf_debian.py \
#       HF_DIR --outtype f32|bf16 --outfile OUT.gguf [--target-model-dir TARGET_DIR]
# (an EAGLE-3 or DFlash draft needs --target-model-dir: the converter reads the target's config and vocabulary).
# The converter itself writes every tensor (names, llama's q/k permutation, shapes, types). Only
# the vocabulary is written here, from tokenizer.json (an SPM-style BPE with byte fallback, which
# llama.cpp reads through transformers), or placeholder tokens for test models without one. The
# shims make AutoConfig fail (the converter then reads config.json) and stub tqdm's progress bar.
import json, os, sys
llama_cpp = os.environ.get('LLAMA_CPP_DIR') or sys.exit('set LLAMA_CPP_DIR to a llama.cpp checkout')
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'shim'))
sys.path.insert(0, os.path.join(llama_cpp, 'gguf-py'))
sys.path.insert(0, llama_cpp)
import torch
# torch 1.13 (Debian 12) predates these dtypes; the converter only names them in lookup tables.
for name in ['float8_e4m3fn', 'float8_e5m2', 'float8_e4m3fnuz', 'float8_e5m2fnuz', 'uint16', 'uint32', 'uint64']:
    if not hasattr(torch, name):
        setattr(torch, name, type(name, (), {})())
import gguf
import conversion.llama as cl
import convert_hf_to_gguf as c

def set_vocab(self):
    n = self.hparams['vocab_size']
    # EAGLE-3 drafts (--target-model-dir) carry the target's vocabulary, as the converter's own set_vocab does.
    src = self.target_model_dir if getattr(self, 'is_eagle3', False) and self.target_model_dir else self.dir_model
    if not (src / 'tokenizer.json').is_file():  # test models: placeholder tokens
        tj = {'model': {'vocab': {f'<0x{i:02X}>' if 3 <= i < 3 + 256 else f'[T{i}]': i for i in range(n)}}}
    else:
        tj = json.load(open(src / 'tokenizer.json'))
    vocab = tj['model']['vocab']
    n = self.hparams['vocab_size']
    tokens = [f'[PAD{i}]' for i in range(n)]
    for t, i in vocab.items():
        tokens[i] = t
    rank = {}
    for r, m in enumerate(tj['model'].get('merges', [])):
        a, b = m.split(' ') if isinstance(m, str) else m
        rank.setdefault(a + b, r)
    scores, types = [], []
    for i, t in enumerate(tokens):
        if i in (1, 2):
            types.append(gguf.TokenType.CONTROL); scores.append(0.0)
        elif i == 0:
            types.append(gguf.TokenType.UNKNOWN); scores.append(0.0)
        elif t.startswith('<0x') and t.endswith('>') and len(t) == 6:
            types.append(gguf.TokenType.BYTE); scores.append(0.0)
        else:
            types.append(gguf.TokenType.NORMAL); scores.append(-float(rank.get(t, 100000 + i)))
    self.gguf_writer.add_tokenizer_model('llama')
    self.gguf_writer.add_tokenizer_pre('default')
    self.gguf_writer.add_token_list(tokens)
    self.gguf_writer.add_token_scores(scores)
    self.gguf_writer.add_token_types(types)
    self.gguf_writer.add_bos_token_id(1)
    self.gguf_writer.add_eos_token_id(2)
    self.gguf_writer.add_unk_token_id(0)
    self.gguf_writer.add_add_bos_token(True)

import conversion.qwen as cq
cl.LlamaModel.set_vocab = set_vocab
cq.Qwen2Model.set_vocab = set_vocab
cq.Qwen3Model.set_vocab = set_vocab
sys.argv = ['convert_hf_to_gguf.py'] + sys.argv[1:]
c.main()
