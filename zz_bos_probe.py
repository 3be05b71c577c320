import json, os, shutil, tempfile
from transformers import AutoTokenizer
import transformers
print("transformers", transformers.__version__)
base = "frontend/hf/testdata/models"
def variant(src, pp, add_bos, cls):
    d = tempfile.mkdtemp()
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(base, src, f), d)
    tj = json.load(open(os.path.join(d, "tokenizer.json")))
    if pp == "null": tj["post_processor"] = None
    elif pp == "bytelevel": tj["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True}
    json.dump(tj, open(os.path.join(d, "tokenizer.json"), "w"))
    tc = json.load(open(os.path.join(d, "tokenizer_config.json")))
    if add_bos is not None: tc["add_bos_token"] = add_bos
    if cls: tc["tokenizer_class"] = cls
    json.dump(tc, open(os.path.join(d, "tokenizer_config.json"), "w"))
    return d
for src in ("llama", "qwen2"):
    for pp in ("keep", "null", "bytelevel"):
        for add in (None, True, False):
            for cls in (None, "LlamaTokenizer", "GemmaTokenizer", "Qwen2Tokenizer"):
                try:
                    tok = AutoTokenizer.from_pretrained(variant(src, pp, add, cls))
                    ids = tok("Hello world").input_ids
                    print(f"{src:6s} pp={pp:9s} add_bos={str(add):5s} cls={str(cls):15s} -> {type(tok).__name__:22s} bos_first={ids[0]==tok.bos_token_id} ids={ids[:4]}")
                except Exception as e:
                    print(f"{src:6s} pp={pp:9s} add_bos={str(add):5s} cls={str(cls):15s} -> ERROR {type(e).__name__}: {str(e)[:80]}")
