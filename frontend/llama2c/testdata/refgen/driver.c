// driver around llama2.c's run.c (compiled with -DTESTING): prints encode() ids
// and the token id sequence of generate(), for golden files.
#define TESTING
#include "run.c"

static int hexval(int c) { return c <= '9' ? c - '0' : (c | 32) - 'a' + 10; }

int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: driver encode tok.bin vocab_size < cases | driver gen model.bin tok.bin steps [prompt]\n"); return 1; }
    if (strcmp(argv[1], "encode") == 0) {
        Tokenizer t;
        build_tokenizer(&t, argv[2], atoi(argv[3]));
        char line[1 << 16];
        while (fgets(line, sizeof line, stdin)) {
            // line: HEX BOS EOS
            char hex[1 << 15]; int bos, eos;
            if (line[0] == '#' || line[0] == '\n') continue;
            if (sscanf(line, "%s %d %d", hex, &bos, &eos) != 3) { fprintf(stderr, "bad line %s", line); return 1; }
            char text[1 << 14]; int n = 0;
            if (strcmp(hex, "-") != 0) {
                for (int i = 0; hex[i] && hex[i+1]; i += 2) text[n++] = (char)(hexval(hex[i]) * 16 + hexval(hex[i+1]));
            }
            text[n] = '\0';
            int *toks = malloc((n + 3) * sizeof(int)); int nt = 0;
            encode(&t, text, bos, eos, toks, &nt);
            printf("%s %d %d |", hex, bos, eos);
            for (int i = 0; i < nt; i++) printf(" %d", toks[i]);
            printf("\n");
            free(toks);
        }
        free_tokenizer(&t);
        return 0;
    }
    if (strcmp(argv[1], "gen") == 0) {
        Transformer tr; build_transformer(&tr, argv[2]);
        Tokenizer t; build_tokenizer(&t, argv[3], tr.config.vocab_size);
        int steps = atoi(argv[4]);
        if (steps == 0 || steps > tr.config.seq_len) steps = tr.config.seq_len;
        char *prompt = argc > 5 ? argv[5] : "";
        int *pt = malloc((strlen(prompt) + 3) * sizeof(int)); int np = 0;
        encode(&t, prompt, 1, 0, pt, &np);
        int token = pt[0], next, pos = 0;
        printf("%d", token);
        while (pos < steps) {
            float *logits = forward(&tr, token, pos);
            if (pos < np - 1) next = pt[pos + 1]; else next = sample_argmax(logits, tr.config.vocab_size);
            pos++;
            if (next == 1) break;
            printf(" %d", next);
            token = next;
        }
        printf("\n");
        return 0;
    }
    return 1;
}
