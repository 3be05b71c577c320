"""The native side of bench/gpu: PyTorch (cuBLAS, TF32 off) and Hugging Face
transformers on CUDA, on the shapes and models that `benchgpu run` measured.

    python3 bench/gpu/native.py OURS_JSON NATIVE_JSON

Reads ours.json (the matmul shapes; each model's Hugging Face folder, prompt
and decode length, logits and greedy tokens) and writes native.json:
torch.matmul GFLOP/s (CUDA events, warm-ups, median of three batches), and
for each model LlamaForCausalLM in f32 with eager attention: prefill tok/s
and greedy decode with the KV cache, one token at a time, timed with
torch.cuda.synchronize. It also checks that the model is the same function:
the relative error of the prompt's last logits against ours, and how many
greedy tokens agree.
"""
import json
import os
import sys
import time
import traceback

import torch

ours_path, out_path = sys.argv[1], sys.argv[2]
ours = json.load(open(ours_path))
res = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "matmul": [], "llm": [], "errors": []}
try:
    import transformers

    res["transformers"] = transformers.__version__
except Exception as e:  # noqa: BLE001
    res["errors"].append("import transformers: %r" % e)

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_float32_matmul_precision("highest")
dev = torch.device("cuda")


def save():
    with open(out_path, "w") as f:
        json.dump(res, f, indent=2)


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, file=sys.stderr, flush=True)


def timed(fn, target_s=0.1):
    """Seconds per call of fn: warm-ups, then three batches timed with CUDA events, median."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(3):
        fn()
    e.record()
    e.synchronize()
    per = s.elapsed_time(e) / 1e3 / 3
    reps = int(max(1, min(2000, target_s / max(per, 1e-7))))
    times = []
    for _ in range(3):
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3 / reps)
    times.sort()
    return times[1]


# Copy bandwidth: the practical ceiling of memory-bound code.
try:
    x = torch.empty(1 << 28, dtype=torch.float32, device=dev)  # 1 GiB
    y = torch.empty_like(x)
    t = timed(lambda: y.copy_(x))
    res["copy_tb_s"] = 2 * x.numel() * 4 / t / 1e12
    log("copy %.2f TB/s" % res["copy_tb_s"])
    del x, y
except Exception:  # noqa: BLE001
    res["errors"].append("copy: " + traceback.format_exc(limit=2))
save()

# Matmul, f32, TF32 off; random operands in [-1, 1).
for m in ours.get("matmul", []):
    s = m["shape"]
    if s.get("b_dtype"):
        continue  # a stored b: its f32 shape is the native comparison
    M, N, K, T = s["M"], s["N"], s["K"], s["transpose_b"]
    r = {"name": s["name"], "M": M, "N": N, "K": K, "transpose_b": T}
    try:
        g = torch.Generator(device=dev).manual_seed(M * 31 + N)
        a = torch.rand(M, K, device=dev, generator=g) * 2 - 1
        b = torch.rand(*((N, K) if T else (K, N)), device=dev, generator=g) * 2 - 1
        bb = b.t() if T else b
        ref = (a[:4].double() @ bb.double()).float()
        got = torch.matmul(a, bb)[:4]
        r["rel_err"] = float((got - ref).norm() / ref.norm())
        t = timed(lambda: torch.matmul(a, bb))
        r["gflops"] = 2 * M * N * K / t / 1e9
        log("matmul %s: %.0f GFLOP/s (rel err %.1e)" % (s["name"], r["gflops"], r["rel_err"]))
        del a, b, bb
    except Exception:  # noqa: BLE001
        r["error"] = traceback.format_exc(limit=2)
        log(r["error"])
    res["matmul"].append(r)
    save()
torch.cuda.empty_cache()


def load(path):
    from transformers import LlamaForCausalLM

    try:
        model = LlamaForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="eager")
    except TypeError:
        model = LlamaForCausalLM.from_pretrained(path, torch_dtype=torch.float32, attn_implementation="eager")
    return model.to(dev).eval()


@torch.inference_mode()
def session(model, prompt, steps):
    """Prefill the prompt, then `steps` greedy decode steps with the KV cache."""
    ids = torch.tensor([prompt], device=dev)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = model(input_ids=ids, use_cache=True)
    logits = out.logits[0, -1]
    tok = int(torch.argmax(logits))
    pre = time.perf_counter() - t0
    first = logits.float().cpu()
    pkv = out.past_key_values
    toks, times = [tok], []
    d0 = time.perf_counter()
    for _ in range(steps):
        t1 = time.perf_counter()
        out = model(input_ids=torch.tensor([[tok]], device=dev), past_key_values=pkv, use_cache=True)
        pkv = out.past_key_values
        tok = int(torch.argmax(out.logits[0, -1]))
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t1)
        toks.append(tok)
    total = time.perf_counter() - d0
    return pre, total, sorted(times)[len(times) // 2] if times else 0, toks, first


outdir = os.path.dirname(os.path.abspath(ours_path))
for l in ours.get("llm", []):
    r = {"model": l["model"]}
    try:
        log("loading", l["hf_dir"])
        model = load(l["hf_dir"])
        r["params"] = sum(p.numel() for p in model.parameters())
        r["attn"] = getattr(model.config, "_attn_implementation", "?")
        prompt, steps = l["prompt"], l["decode_steps"]
        session(model, prompt, 2)  # warm-up
        best = None
        for _ in range(2):
            pre, total, med, toks, first = session(model, prompt, steps)
            if best is None or total < best[1]:
                best = (pre, total, med, toks, first)
            r.setdefault("prefill_runs_s", []).append(pre)
        pre, total, med, toks, first = best
        r["prefill_tok_s"] = len(prompt) / min(r["prefill_runs_s"])
        r["decode_tok_s"] = steps / total
        r["decode_median_tok_s"] = 1 / med if med else 0
        ref = l.get("greedy_tokens") or []
        r["tokens_total"] = len(ref)
        r["tokens_match"] = sum(1 for a, b in zip(ref, toks) if a == b)
        r["tokens"] = toks[: len(ref)]
        lf = l.get("logits_file")
        if lf:
            with open(os.path.join(outdir, lf), "rb") as f:
                o = torch.frombuffer(bytearray(f.read()), dtype=torch.float32)
            r["logits_rel_err"] = float((o - first).norm() / first.norm())
            r["logits_max_abs"] = float((o - first).abs().max())
        log("%s: prefill %.0f tok/s, decode %.1f tok/s (median step %.1f), logits rel err %.2g, tokens %d/%d"
            % (l["model"], r["prefill_tok_s"], r["decode_tok_s"], r["decode_median_tok_s"],
               r.get("logits_rel_err", -1), r["tokens_match"], r["tokens_total"]))
        del model
        torch.cuda.empty_cache()
    except Exception:  # noqa: BLE001
        r["error"] = traceback.format_exc(limit=3)
        log(r["error"])
    res["llm"].append(r)
    save()
save()
