// ggmlquant: quantizes and dequantizes with ggml's own reference routines
// (libggml-base from llama.cpp), the oracle of frontend/gguf's decoders.
//
//   ggmlquant quant TYPE   < f32 values   > blocks   (quantize_row_*_ref)
//   ggmlquant dequant TYPE < blocks       > f32 values (dequantize_row_*)
//
// TYPE is a ggml type name (Q4_0, ..., Q6_K). The value count must be a
// whole number of blocks; input and output are raw little-endian bytes.
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
		fprintf(stderr, "usage: ggmlquant quant|dequant TYPE\n");
		return 2;
	}
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
