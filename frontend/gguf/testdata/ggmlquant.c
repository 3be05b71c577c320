// ggmlquant: quantizes and dequantizes with ggml's own reference routines
// (libggml-base from llama.cpp), the oracle of frontend/gguf's decoders.
//
//   ggmlquant quant TYPE   < f32 values   > blocks   (quantize_row_*_ref)
//   ggmlquant dequant TYPE < blocks       > f32 values (dequantize_row_*)
//   ggmlquant gguf OUT     < description  (ggml's GGUF writer)
//
// TYPE is a ggml type name (Q4_0, ..., Q6_K). The value count must be a
// whole number of blocks; input and output are raw little-endian bytes.
// A gguf description is lines "u32 KEY N", "f32 KEY X", "str KEY TEXT" and
// "tensor NAME TYPEID NDIMS NE0 NE1 NBYTES" each followed by NBYTES of data.
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ggml's exported routines; block pointers are void* here (same ABI).
#define ROUTINES(t)                                                        \
	void quantize_row_##t##_ref(const float *x, void *y, int64_t k);   \
	void dequantize_row_##t(const void *x, float *y, int64_t k);
ROUTINES(q4_0) ROUTINES(q4_1) ROUTINES(q5_0) ROUTINES(q5_1) ROUTINES(q8_0)
ROUTINES(q2_K) ROUTINES(q3_K) ROUTINES(q4_K) ROUTINES(q5_K) ROUTINES(q6_K)

// ggml's tensor and GGUF API, declared here with opaque pointers.
struct ggml_init_params {
	size_t mem_size;
	void *mem_buffer;
	bool no_alloc;
};
void *ggml_init(struct ggml_init_params params);
void *ggml_new_tensor(void *ctx, int type, int n_dims, const int64_t *ne);
void *ggml_set_name(void *tensor, const char *name);
void *ggml_get_data(const void *tensor);
size_t ggml_nbytes(const void *tensor);
void *gguf_init_empty(void);
void gguf_set_val_u32(void *ctx, const char *key, uint32_t val);
void gguf_set_val_f32(void *ctx, const char *key, float val);
void gguf_set_val_str(void *ctx, const char *key, const char *val);
void gguf_add_tensor(void *ctx, const void *tensor);
bool gguf_write_to_file(const void *ctx, const char *fname, bool only_meta);

static int write_gguf(const char *path) {
	struct ggml_init_params ip = {(size_t)64 << 20, NULL, false}; // enough for the test models
	void *ctx = ggml_init(ip), *g = gguf_init_empty();
	char kind[16], key[256], text[4096];
	while (scanf("%15s %255s", kind, key) == 2) {
		if (strcmp(kind, "u32") == 0) {
			unsigned v;
			if (scanf("%u", &v) != 1) return fprintf(stderr, "bad u32 %s\n", key), 2;
			gguf_set_val_u32(g, key, v);
		} else if (strcmp(kind, "f32") == 0) {
			float v;
			if (scanf("%f", &v) != 1) return fprintf(stderr, "bad f32 %s\n", key), 2;
			gguf_set_val_f32(g, key, v);
		} else if (strcmp(kind, "str") == 0) {
			if (scanf(" %4095[^\n]", text) != 1) return fprintf(stderr, "bad str %s\n", key), 2;
			gguf_set_val_str(g, key, text);
		} else if (strcmp(kind, "tensor") == 0) {
			int type, ndims;
			int64_t ne[2];
			size_t nbytes;
			if (scanf("%d %d %ld %ld %zu", &type, &ndims, &ne[0], &ne[1], &nbytes) != 5)
				return fprintf(stderr, "bad tensor %s\n", key), 2;
			getchar(); // the newline before the data
			void *t = ggml_new_tensor(ctx, type, ndims, ne);
			ggml_set_name(t, key);
			if (ggml_nbytes(t) != nbytes)
				return fprintf(stderr, "tensor %s: %zu bytes given, ggml wants %zu\n", key, nbytes, ggml_nbytes(t)), 2;
			if (fread(ggml_get_data(t), 1, nbytes, stdin) != nbytes)
				return fprintf(stderr, "tensor %s: short data\n", key), 2;
			gguf_add_tensor(g, t);
		} else {
			return fprintf(stderr, "unknown line kind %s\n", kind), 2;
		}
	}
	return gguf_write_to_file(g, path, false) ? 0 : (fprintf(stderr, "writing %s failed\n", path), 1);
}

struct format {
	const char *name;
	int elems, bytes;
	void (*quant)(const float *, void *, int64_t);
	void (*dequant)(const void *, float *, int64_t);
};

#define FORMAT(n, t, e, b) {n, e, b, quantize_row_##t##_ref, dequantize_row_##t}
static const struct format formats[] = {
	FORMAT("Q4_0", q4_0, 32, 18),  FORMAT("Q4_1", q4_1, 32, 20),
	FORMAT("Q5_0", q5_0, 32, 22),  FORMAT("Q5_1", q5_1, 32, 24),
	FORMAT("Q8_0", q8_0, 32, 34),  FORMAT("Q2_K", q2_K, 256, 84),
	FORMAT("Q3_K", q3_K, 256, 110), FORMAT("Q4_K", q4_K, 256, 144),
	FORMAT("Q5_K", q5_K, 256, 176), FORMAT("Q6_K", q6_K, 256, 210),
};

static char *read_all(size_t *n) {
	size_t cap = 1 << 16;
	char *buf = malloc(cap);
	*n = 0;
	for (size_t r; (r = fread(buf + *n, 1, cap - *n, stdin)) > 0;) {
		*n += r;
		if (*n == cap) buf = realloc(buf, cap *= 2);
	}
	return buf;
}

int main(int argc, char **argv) {
	if (argc != 3) {
		fprintf(stderr, "usage: ggmlquant quant|dequant TYPE, or ggmlquant gguf OUT\n");
		return 2;
	}
	if (strcmp(argv[1], "gguf") == 0) return write_gguf(argv[2]);
	const struct format *f = NULL;
	for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++)
		if (strcmp(formats[i].name, argv[2]) == 0) f = &formats[i];
	if (!f) {
		fprintf(stderr, "ggmlquant: unknown type %s\n", argv[2]);
		return 2;
	}
	size_t n;
	char *in = read_all(&n);
	int quant = strcmp(argv[1], "quant") == 0;
	size_t unit = quant ? 4 * (size_t)f->elems : (size_t)f->bytes;
	if (n % unit != 0) {
		fprintf(stderr, "ggmlquant: %zu input bytes are not whole blocks of %zu\n", n, unit);
		return 2;
	}
	size_t blocks = n / unit;
	size_t k = blocks * f->elems;
	size_t outn = quant ? blocks * f->bytes : 4 * k;
	char *out = malloc(outn ? outn : 1);
	if (quant)
		f->quant((const float *)in, out, (int64_t)k);
	else
		f->dequant(in, (float *)out, (int64_t)k);
	fwrite(out, 1, outn, stdout);
	return 0;
}
