# Debian 12 has no python3-transformers; convert_hf_to_gguf.py falls back to config.json when
# AutoConfig fails, which is all a Llama checkpoint needs.
class AutoConfig:
    @staticmethod
    def from_pretrained(*a, **k):
        raise OSError("transformers shim: read config.json instead")
class AutoTokenizer:
    @staticmethod
    def from_pretrained(*a, **k):
        raise OSError("transformers shim: no tokenizer support")
