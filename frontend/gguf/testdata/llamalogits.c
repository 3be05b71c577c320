// llamalogits: llama.cpp's logits for a GGUF model, the oracle of
// frontend/gguf's model building.
//
//   llamalogits BACKENDS MODEL PROMPT_TOKENS... -- DECODE_TOKENS...
//   llamalogits BACKENDS MODEL tokenize < texts
//
// BACKENDS is the folder of ggml's CPU backends. The prompt is decoded as
// one batch, then each decode token alone; after each call the logits of
// the last position go to stdout as n_vocab little-endian f32s. llama.cpp's
// default context is kept (a KV cache of F16), on one thread: its threads
// spin while they wait, which on a busy machine with few cores costs a
// tiny model a second per run.
//
// tokenize reads NUL-terminated texts and writes, for each, its token
// count and ids as little-endian int32s: llama_tokenize with special
// tokens added (BOS as the vocabulary says) and parsed in the text.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The parameter structs are passed and returned by value; this program
// never reads their fields, so an opaque buffer larger than them stands in
// (x86-64 and AArch64 pass and return structs this large through memory).
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
llama_batch llama_batch_get_one(int32_t *tokens, int32_t n);
int32_t llama_decode(void *ctx, llama_batch batch);
void llama_set_n_threads(void *ctx, int32_t n_threads, int32_t n_threads_batch);
float *llama_get_logits_ith(void *ctx, int32_t i);
const void *llama_model_get_vocab(const void *model);
int32_t llama_vocab_n_tokens(const void *vocab);
int32_t llama_tokenize(const void *vocab, const char *text, int32_t text_len, int32_t *tokens,
                       int32_t n_tokens_max, bool add_special, bool parse_special);

static void quiet(int level, const char *text, void *data) {
	(void)data;
	if (level >= 4) fputs(text, stderr); // GGML_LOG_LEVEL_ERROR
}

static int decode(void *ctx, int32_t *toks, int n, int n_vocab) {
	if (llama_decode(ctx, llama_batch_get_one(toks, n)) != 0) {
		fprintf(stderr, "llamalogits: llama_decode of %d tokens failed\n", n);
		return 1;
	}
	fwrite(llama_get_logits_ith(ctx, -1), sizeof(float), n_vocab, stdout);
	return 0;
}

static int tokenize(const void *vocab) {
	size_t cap = 1 << 16, n = 0;
	char *text = malloc(cap);
	int32_t *ids = malloc(sizeof(int32_t) * cap);
	for (int c; (c = getchar()) != EOF;) {
		if (n + 1 >= cap) text = realloc(text, cap *= 2), ids = realloc(ids, sizeof(int32_t) * cap);
		if (c != 0) {
			text[n++] = (char)c;
			continue;
		}
		int32_t k = llama_tokenize(vocab, text, (int32_t)n, ids, (int32_t)cap, true, true);
		if (k < 0) {
			fprintf(stderr, "llamalogits: llama_tokenize failed (%d)\n", k);
			return 1;
		}
		fwrite(&k, sizeof k, 1, stdout);
		fwrite(ids, sizeof(int32_t), (size_t)k, stdout);
		n = 0;
	}
	return 0;
}

int main(int argc, char **argv) {
	if (argc < 4) {
		fprintf(stderr, "usage: llamalogits BACKENDS MODEL PROMPT_TOKENS... -- DECODE_TOKENS...\n");
		return 2;
	}
	llama_log_set(quiet, NULL);
	ggml_backend_load_all_from_path(argv[1]);
	llama_backend_init();
	void *model = llama_model_load_from_file(argv[2], llama_model_default_params());
	if (!model) {
		fprintf(stderr, "llamalogits: llama.cpp cannot load %s\n", argv[2]);
		return 1;
	}
	if (strcmp(argv[3], "tokenize") == 0) return tokenize(llama_model_get_vocab(model));
	void *ctx = llama_init_from_model(model, llama_context_default_params());
	if (!ctx) {
		fprintf(stderr, "llamalogits: no context for %s\n", argv[2]);
		return 1;
	}
	llama_set_n_threads(ctx, 1, 1);
	int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
	int32_t *toks = calloc(argc, sizeof(int32_t));
	int n = 0, i = 3;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) toks[n++] = atoi(argv[i]);
	if (n == 0 || decode(ctx, toks, n, n_vocab)) return 1;
	for (i++; i < argc; i++) {
		int32_t tok = atoi(argv[i]);
		if (decode(ctx, &tok, 1, n_vocab)) return 1;
	}
	return 0;
}
