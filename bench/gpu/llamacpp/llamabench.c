// llamabench: llama.cpp's own speed on a GGUF file, the peer of tapml's
// bench on the same GPU: prefill of a prompt as one batch, then greedy
// decode steps one token at a time (the argmax of each step's logits on the
// host, as tapml's decode loop does), every layer offloaded (llama.cpp's
// default).
//
//   llamabench BACKENDS MODEL PROMPT_TOKENS DECODE_STEPS REPEATS
//
// BACKENDS is the folder of ggml's backends (the Vulkan build of npm
// @node-llama-cpp/linux-x64-vulkan). One warm-up run (prompt and 4 steps),
// then REPEATS runs, each in a fresh context, each printing a line:
//   run R prefill_tok_s P decode_tok_s D decode_median_tok_s M tokens T0,T1,...
// Build: clang -O2 llamabench.c -l:libllama.vulkan.v0.5.0.so
//   -l:libggml.vulkan.v0.5.0.so -l:libggml-base.so -L LIBS -Wl,-rpath,LIBS
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// Parameter structs are passed by value; an opaque buffer larger than them
// stands in, and the few fields set here are at offsets llama.h fixes:
// llama_context_params starts with n_ctx, n_batch, n_ubatch (uint32 each).
typedef struct {
	_Alignas(16) unsigned char bytes[2048];
} params;

typedef struct {
	int32_t n_tokens;
	int32_t *token;
	float *embd;
	int32_t *pos;
	int32_t *n_seq_id;
	int32_t **seq_id;
	int8_t *logits;
} llama_batch;

void ggml_backend_load_all_from_path(const char *dir);
void llama_log_set(void (*cb)(int level, const char *text, void *data), void *data);
void llama_backend_init(void);
params llama_model_default_params(void);
void *llama_model_load_from_file(const char *path, params p);
params llama_context_default_params(void);
void *llama_init_from_model(void *model, params p);
void llama_free(void *ctx);
llama_batch llama_batch_get_one(int32_t *tokens, int32_t n);
int32_t llama_decode(void *ctx, llama_batch batch);
void llama_synchronize(void *ctx);
float *llama_get_logits_ith(void *ctx, int32_t i);
const void *llama_model_get_vocab(const void *model);
int32_t llama_vocab_n_tokens(const void *vocab);

static void quiet(int level, const char *text, void *data) {
	(void)data;
	if (level >= 4) fputs(text, stderr);
}

static double now(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int argmax(const float *x, int n) {
	int best = 0;
	for (int i = 1; i < n; i++)
		if (x[i] > x[best]) best = i;
	return best;
}

static int cmp(const void *a, const void *b) {
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

// run decodes the prompt and steps greedy tokens in a fresh context; it
// prints a line unless label is NULL.
static int run(void *model, int n_vocab, int prompt, int steps, const char *label) {
	params cp = llama_context_default_params();
	uint32_t n_ctx = (uint32_t)(prompt + steps + 16), n_batch = (uint32_t)prompt;
	memcpy(cp.bytes, &n_ctx, 4);
	memcpy(cp.bytes + 4, &n_batch, 4);
	memcpy(cp.bytes + 8, &n_batch, 4);
	void *ctx = llama_init_from_model(model, cp);
	if (!ctx) {
		fprintf(stderr, "llamabench: no context\n");
		return 1;
	}
	int32_t *toks = malloc(sizeof(int32_t) * (size_t)(prompt + steps));
	for (int i = 0; i < prompt; i++) toks[i] = 1 + (i * 7919 + 13) % (n_vocab - 1);
	double t0 = now();
	if (llama_decode(ctx, llama_batch_get_one(toks, prompt)) != 0) {
		fprintf(stderr, "llamabench: prefill failed\n");
		return 1;
	}
	int32_t tok = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
	double pre = now() - t0;
	double *dt = malloc(sizeof(double) * (size_t)(steps + 1));
	double d0 = now();
	for (int s = 0; s < steps; s++) {
		toks[prompt + s] = tok;
		double s0 = now();
		if (llama_decode(ctx, llama_batch_get_one(&toks[prompt + s], 1)) != 0) {
			fprintf(stderr, "llamabench: decode step %d failed\n", s);
			return 1;
		}
		tok = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
		dt[s] = now() - s0;
	}
	double dec = now() - d0;
	if (label) {
		qsort(dt, (size_t)steps, sizeof(double), cmp);
		printf("%s prefill_tok_s %.1f decode_tok_s %.1f decode_median_tok_s %.1f tokens", label, prompt / pre,
		       steps / dec, 1 / dt[steps / 2]);
		for (int s = 0; s < steps && s < 8; s++) printf("%c%d", s ? ',' : ' ', toks[prompt + s]);
		printf("\n");
		fflush(stdout);
	}
	free(dt);
	free(toks);
	llama_free(ctx);
	return 0;
}

int main(int argc, char **argv) {
	if (argc != 6) {
		fprintf(stderr, "usage: llamabench BACKENDS MODEL PROMPT_TOKENS DECODE_STEPS REPEATS\n");
		return 2;
	}
	llama_log_set(quiet, NULL);
	ggml_backend_load_all_from_path(argv[1]);
	llama_backend_init();
	void *model = llama_model_load_from_file(argv[2], llama_model_default_params());
	if (!model) {
		fprintf(stderr, "llamabench: llama.cpp cannot load %s\n", argv[2]);
		return 1;
	}
	int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
	int prompt = atoi(argv[3]), steps = atoi(argv[4]), reps = atoi(argv[5]);
	if (prompt < 1 || steps < 1 || reps < 1) {
		fprintf(stderr, "llamabench: prompt, steps and repeats must be positive\n");
		return 2;
	}
	if (run(model, n_vocab, prompt, 4, NULL)) return 1;
	for (int r = 1; r <= reps; r++) {
		char label[32];
		snprintf(label, sizeof label, "run %d", r);
		if (run(model, n_vocab, prompt, steps, label)) return 1;
	}
	return 0;
}
