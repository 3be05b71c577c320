#!/usr/bin/env python3
"""Writes tiny Hugging Face checkpoints of every architecture tapml supports,
with transformers' own outputs, as test fixtures.

Run it where transformers and torch are installed (the GPU machine of the
device tool has transformers 5.17 and torch 2.11; CPU is enough):

    python3 scripts/hf_fixtures.py OUTDIR [NAME ...]

For each fixture it writes OUTDIR/NAME/ with what save_pretrained writes
(config.json, model.safetensors, generation_config.json) and what a
tokenizer's save_pretrained writes (tokenizer.json, tokenizer_config.json),
plus the reference:

- reference.safetensors: prompt_ids i32[S] (the prompt as the tokenizer
  encodes it, special tokens included), prompt_logits f32[S, V] (one forward
  pass over the prompt), tokens i32[N] (greedy tokens), step_logits f32[N, V]
  (row 0: the last prompt position's logits through generate, row i > 0: the
  logits after feeding tokens[i-1], with the cache);
- reference.json: the prompt text, versions, the features the fixture
  exercises, the tokenizer's BOS/EOS and add_bos_token, and the config.

Weights are random from a fixed seed, scaled so that every feature changes
the logits (unit-variance projections, noisy norm weights and biases,
soft-capping and sliding windows small enough to bite). The models compute in
float32 with eager attention; generation never stops at EOS (the reference
is about the function, tapml's own tests check stopping).
"""
import json
import math
import os
import sys
import traceback

import torch
import transformers
from safetensors.torch import save_file
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

PROMPT = "Once upon a time, a little robot found a red ball in the garden."
STEPS = 17  # generated tokens: 1 from the prompt's logits + 16 decode steps
VOCAB = 320  # the model's vocabulary (the tokenizer has fewer: padded, as real models are)
SEED = 1234

CORPUS = [
    "Once upon a time there was a little girl who loved to play in the garden.",
    "The robot found a red ball and gave it to the dog. They were happy.",
    "One day, a small cat saw a big tree. It wanted to climb it, but it was scared.",
    "Tom and Lily went to the park. They played with the ball and ate ice cream.",
    "def add(a, b):\n    return a + b  # numbers 0123456789",
    "Hello, world! How are you today? I'm fine, thanks.",
] * 20

# Common shape: 4 query heads, 2 key/value heads of 8 dims.
BASE = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)


def fixture(name, model_type, bos, features, embed_std=None, bos_via_config=False, eos_list=False, **kw):
    return dict(name=name, model_type=model_type, bos=bos, features=features, embed_std=embed_std,
                bos_via_config=bos_via_config, eos_list=eos_list, kw=kw)


# bos: whether the family's real tokenizer prepends BOS (the fixture's
# tokenizer does the same, so tapml must follow the tokenizer's files).
FIXTURES = [
    fixture("llama", "llama", True, ["rms_norm", "swiglu", "rope half", "gqa", "eos list"], eos_list=True,
            tie_word_embeddings=False),
    # transformers 5 ignores tokenizer_config.json's add_bos_token when
    # tokenizer.json exists: no BOS here (measured: 5.17 encodes without it).
    fixture("llama_bos_config", "llama", False, ["add_bos_token in tokenizer_config only (ignored)"],
            bos_via_config=True),
    fixture("llama_tied", "llama", True, ["tied embeddings"], tie_word_embeddings=True),
    fixture("llama_rope_linear", "llama", True, ["rope linear"],
            rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}),
    fixture("llama_rope_dynamic", "llama", True, ["rope dynamic"], max_position_embeddings=16,
            rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}),
    fixture("llama_rope_llama3", "llama", True, ["rope llama3"],
            rope_parameters={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 16, "rope_theta": 500000.0}),
    fixture("llama_rope_yarn", "llama", True, ["rope yarn"],
            rope_parameters={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16,
                             "rope_theta": 10000.0}),
    fixture("mistral", "mistral", True, ["sliding window"], sliding_window=4, head_dim=8),
    fixture("qwen2", "qwen2", False, ["qkv bias", "no bos"], tie_word_embeddings=True),
    fixture("qwen3", "qwen3", False, ["q/k rms norm", "head_dim"], head_dim=16, tie_word_embeddings=True),
    fixture("gemma", "gemma", True, ["(1+w) rms norm", "scaled embedding", "gelu-tanh gate"], embed_std=0.05,
            head_dim=8),
    fixture("gemma2", "gemma2", True, ["soft-capping", "alternating sliding window", "pre+post norms"],
            embed_std=0.05, head_dim=8, sliding_window=4, attn_logit_softcapping=1.0, final_logit_softcapping=0.5,
            query_pre_attn_scalar=16),
    fixture("gemma3", "gemma3_text", True, ["q/k norm", "local/global rope bases", "sliding window"],
            embed_std=0.05, head_dim=8, sliding_window=4, query_pre_attn_scalar=16,
            layer_types=["sliding_attention", "full_attention"]),
    fixture("phi3", "phi3", True, ["fused qkv", "fused gate_up"], tie_word_embeddings=False),
    fixture("phi3_longrope", "phi3", True, ["rope longrope"], max_position_embeddings=64,
            original_max_position_embeddings=16,
            rope_parameters={"rope_type": "longrope", "rope_theta": 10000.0,
                             "short_factor": [1.0 + 0.1 * i for i in range(4)],
                             "long_factor": [1.0 + 0.5 * i for i in range(4)],
                             "original_max_position_embeddings": 16}),
    fixture("phi", "phi", False, ["partial rotary", "parallel block", "layer norm", "gelu", "biases"],
            partial_rotary_factor=0.5, num_key_value_heads=4),
    fixture("stablelm", "stablelm", False, ["partial rotary", "layer norm", "qkv bias"],
            partial_rotary_factor=0.25, use_qkv_bias=True),
    fixture("olmo2", "olmo2", False, ["post norms", "q/k norm"]),
    fixture("granite", "granite", False, ["multipliers"], embedding_multiplier=3.0, residual_multiplier=0.5,
            attention_multiplier=0.2, logits_scaling=2.0),
    fixture("cohere", "cohere", True, ["parallel block", "layer norm without bias", "logit scale",
                                       "interleaved rope"], logit_scale=0.5),
    fixture("starcoder2", "starcoder2", False, ["layer norm", "biases", "gelu mlp", "sliding window"],
            sliding_window=4, use_bias=True),
    fixture("gpt_neox", "gpt_neox", False, ["parallel residual", "partial rotary"],
            partial_rotary_factor=0.25, use_parallel_residual=True),
    fixture("gpt2", "gpt2", False, ["learned positions", "layer norm", "gelu", "tied"],
            n_embd=32, n_layer=2, n_head=4, n_positions=128, n_inner=64),
    fixture("gpt2_untied", "gpt2", False, ["untied lm_head"],
            n_embd=32, n_layer=2, n_head=4, n_positions=128, n_inner=64, tie_word_embeddings=False),
    fixture("gpt_bigcode", "gpt_bigcode", False, ["multi-query"],
            n_embd=32, n_layer=2, n_head=4, n_positions=128, n_inner=64, multi_query=True),
    fixture("falcon", "falcon", False, ["multi-query", "parallel attention"],
            num_attention_heads=4, multi_query=True, parallel_attn=True, new_decoder_architecture=False,
            bias=False, alibi=False),
    fixture("mixtral", "mixtral", True, ["moe top-2 of 4", "sliding window"], num_local_experts=4, num_experts_per_tok=2,
            sliding_window=4),
    fixture("qwen2_moe", "qwen2_moe", False, ["moe top-2 of 4", "shared expert with sigmoid gate"],
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=64,
            decoder_sparse_step=1, norm_topk_prob=False, tie_word_embeddings=False),
    fixture("qwen3_moe", "qwen3_moe", False, ["moe top-2 of 4", "normalized top-k", "q/k norm"],
            num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, decoder_sparse_step=1,
            norm_topk_prob=True, head_dim=8, tie_word_embeddings=False),
    fixture("rwkv", "rwkv", False, ["rwkv recurrence"], attention_hidden_size=32, context_length=128,
            num_hidden_layers=2),
    fixture("mamba", "mamba", False, ["selective scan", "causal conv with state"], state_size=8, expand=2,
            conv_kernel=4, num_hidden_layers=2, tie_word_embeddings=True),
]

SPECIALS = ["<s>", "</s>", "<unk>", "<pad>"]


def make_tokenizer(dir, bos, via_config=False):
    """Trains a byte-level BPE on CORPUS and saves it as a fast tokenizer
    whose post-processor prepends <s> when bos is true. With via_config the
    post-processor adds nothing and tokenizer_config.json asks for BOS
    (add_bos_token, as Llama checkpoints do): whatever transformers then
    does is the reference."""
    tok = Tokenizer(models.BPE(unk_token=None))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    if bos and not via_config:
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B",
                                                           special_tokens=[("<s>", tok.token_to_id("<s>"))])
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", unk_token="<unk>",
                                   pad_token="<pad>")
    fast.save_pretrained(dir)
    if via_config:
        path = os.path.join(dir, "tokenizer_config.json")
        with open(path) as f:
            tc = json.load(f)
        tc.update(add_bos_token=True, add_eos_token=False)
        with open(path, "w") as f:
            json.dump(tc, f, indent=2)
    return AutoTokenizer.from_pretrained(dir)


def randomize(model, gen, embed_std):
    """Replaces the initial weights: unit-variance matrices (std
    1/sqrt(fan_in)), embeddings of std embed_std, and noise on vectors, so
    that every part of the model moves the logits. Recurrence parameters
    (Mamba's A, D, dt; RWKV's time_*) keep their initial values plus small
    noise: they must stay in their stable range."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            noise = torch.randn(p.shape, generator=gen)
            if "time_" in name or leaf in ("A_log", "D") or "dt_proj" in name:
                p.add_(0.05 * noise)
            elif p.dim() >= 2 and ("embed" in name or "wte" in name or "wpe" in name or "embeddings" in name):
                p.copy_(embed_std * noise)
            elif p.dim() >= 2:
                fan_in = p.shape[-1] if p.dim() == 2 else p[0].numel()
                p.copy_(noise / math.sqrt(fan_in))
            else:
                p.add_(0.1 * noise)


def build(spec, out):
    d = os.path.join(out, spec["name"])
    os.makedirs(d, exist_ok=True)
    tok = make_tokenizer(d, spec["bos"], spec["bos_via_config"])
    kw = dict(BASE)
    if spec["model_type"] in ("gpt2", "gpt_bigcode"):
        for k in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                  "num_key_value_heads", "max_position_embeddings"):
            kw.pop(k)
    if spec["model_type"] in ("rwkv", "mamba"):
        for k in ("num_attention_heads", "num_key_value_heads", "max_position_embeddings"):
            kw.pop(k)
    if spec["model_type"] == "mamba":
        kw.pop("intermediate_size")  # expand · hidden_size
    kw.update(spec["kw"])
    kw.update(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    cfg = AutoConfig.for_model(spec["model_type"], **kw)
    cfg._attn_implementation = "eager"
    torch.manual_seed(SEED)
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    # Tied embeddings with a residual stream dominated by the token's own
    # embedding make the model repeat its input (logit_t = E[t]·E[t] wins):
    # a smaller embedding lets the blocks decide the next token.
    embed_std = spec["embed_std"]
    if embed_std is None:
        embed_std = 0.25 if getattr(cfg, "tie_word_embeddings", False) else 1.0
    randomize(model, torch.Generator().manual_seed(SEED), embed_std)
    model.eval()
    model.save_pretrained(d, safe_serialization=True)
    # The saved files are the fixture: reload them, so the reference is what
    # a user of these files gets.
    model = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager", dtype=torch.float32)
    model.eval()

    ids = tok(PROMPT, return_tensors="pt").input_ids
    with torch.no_grad():
        prompt_logits = model(ids).logits[0]
        gen = model.generate(ids, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False,
                             output_logits=True, return_dict_in_generate=True, eos_token_id=None,
                             pad_token_id=tok.pad_token_id)
    tokens = gen.sequences[0, ids.shape[1]:]
    step_logits = torch.cat([l.float() for l in gen.logits], dim=0)
    save_file({
        "prompt_ids": ids[0].to(torch.int32).contiguous(),
        "prompt_logits": prompt_logits.float().contiguous(),
        "tokens": tokens.to(torch.int32).contiguous(),
        "step_logits": step_logits.contiguous(),
    }, os.path.join(d, "reference.safetensors"))
    ref = dict(
        name=spec["name"], architecture=cfg.architectures[0] if cfg.architectures else type(model).__name__,
        model_type=spec["model_type"], features=spec["features"], prompt=PROMPT,
        prompt_ids=ids[0].tolist(), tokens=tokens.tolist(), steps=STEPS,
        tokenizer=dict(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                       prepends_bos=bool(ids[0, 0].item() == tok.bos_token_id), vocab=len(tok)),
        transformers=transformers.__version__, torch=torch.__version__, seed=SEED,
        config=cfg.to_diff_dict(),
    )
    if spec["eos_list"]:
        # A list of EOS ids, one of which the greedy continuation meets at
        # step 5: `run` must stop there (the reference itself ran on).
        eos = [tok.eos_token_id, int(tokens[5])]
        gc_path = os.path.join(d, "generation_config.json")
        with open(gc_path) as f:
            gc = json.load(f)
        gc["eos_token_id"] = eos
        with open(gc_path, "w") as f:
            json.dump(gc, f, indent=2)
        ref["eos_token_id"] = eos
        ref["stops_after"] = next(i for i, t in enumerate(tokens.tolist()) if t in eos) + 1
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1, sort_keys=True, default=str)
    # A check that the cached steps agree with a full forward pass over the
    # whole sequence (a cache bug in the reference would poison the fixture).
    with torch.no_grad():
        full = model(gen.sequences[:, :-1]).logits[0, ids.shape[1] - 1:]
    drift = (full - step_logits).abs().max().item() / max(step_logits.abs().max().item(), 1e-30)
    return ref, drift


def legacy_rope(out, src, dst, rename_type=None):
    """Copies fixture src to dst with config.json in the form transformers 4
    wrote (rope_theta and rope_scaling instead of rope_parameters; Phi-3's
    longrope under its old name "su" when rename_type says so), as most
    checkpoints on the Hub still are. The model, and so the reference, is
    the same."""
    import shutil
    s, d = os.path.join(out, src), os.path.join(out, dst)
    if not os.path.isdir(s):
        return
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(s, d)
    path = os.path.join(d, "config.json")
    with open(path) as f:
        cfg = json.load(f)
    rp = dict(cfg.pop("rope_parameters"))
    cfg["rope_theta"] = rp.pop("rope_theta")
    if rp.get("rope_type", "default") != "default":
        if rename_type:
            rp["type"] = rename_type
            rp.pop("rope_type")
        cfg["rope_scaling"] = rp
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(d, "reference.json")) as f:
        ref = json.load(f)
    ref["name"] = dst
    ref["features"] = ref["features"] + ["transformers 4 config form"]
    with open(os.path.join(d, "reference.json"), "w") as f:
        json.dump(ref, f, indent=1, sort_keys=True)


def main():
    out = sys.argv[1]
    only = set(sys.argv[2:])
    os.makedirs(out, exist_ok=True)
    summary = []
    for spec in FIXTURES:
        if only and spec["name"] not in only:
            continue
        try:
            ref, drift = build(spec, out)
            size = sum(os.path.getsize(os.path.join(out, spec["name"], f))
                       for f in os.listdir(os.path.join(out, spec["name"])))
            line = f"ok   {spec['name']:20s} {ref['architecture']:24s} {size / 1024:7.1f} KiB  " \
                   f"prompt {len(ref['prompt_ids'])} tokens, cached-vs-full rel drift {drift:.2e}, tokens {ref['tokens']}"
        except Exception as e:  # one broken fixture must not hide the others
            traceback.print_exc()
            line = f"FAIL {spec['name']:20s} {type(e).__name__}: {e}"
        print(line, flush=True)
        summary.append(line)
    legacy_rope(out, "llama_rope_llama3", "llama_rope_llama3_v4")
    legacy_rope(out, "phi3_longrope", "phi3_su_v4", rename_type="su")
    legacy_rope(out, "llama", "llama_v4")
    with open(os.path.join(out, "SUMMARY.txt"), "w") as f:
        f.write(f"transformers {transformers.__version__}, torch {torch.__version__}\n" + "\n".join(summary) + "\n")


if __name__ == "__main__":
    main()
