/* tools/infer_text.c - `tilegraph infer` with a language model: the
 * held-out part of --data text:FILE scored as training's evaluation scores
 * it (the same code, evaluate_loaded), and a causal model continuing
 * --prompt, greedily or sampling at --temperature. */
#include "infer_cmd.h"

#include "tilegraph/analyse.h"
#include "tilegraph/checkpoint.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SCORE_DEFAULT_BATCH 500 /* train's --eval-batch-size */

/* "byte" or "char": what a token of ctx's text is. */
static const char *token_unit(const train_context *ctx)
{
    tg_text_tokens kind = TG_TOKENS_BYTE;
    tg_dataset_vocab(ctx->test, &kind, NULL);
    return tg_text_tokens_name(kind);
}

static void print_score(const infer_args *a, const train_context *ctx, const eval_result *e)
{
    const char *unit = token_unit(ctx);
    double bits = e->loss / log(2.0), ppl = exp(e->loss);
    if (a->json) {
        tg_record_field f[] = {
            {"model", TG_RECORD_STRING, ctx->model->name, 0, 0},
            {"weights", TG_RECORD_STRING, infer_weights_kind(a, ctx->model), 0, 0},
            {"token_unit", TG_RECORD_STRING, unit, 0, 0},
            {"seq_len", TG_RECORD_INT, NULL, ctx->input.seq_len, 0},
            {"tokens_scored", TG_RECORD_INT, NULL, e->scored, 0},
            {"test_loss", TG_RECORD_NUMBER, NULL, 0, e->loss},
            {"test_perplexity", TG_RECORD_NUMBER, NULL, 0, ppl},
            {"test_bits_per_token", TG_RECORD_NUMBER, NULL, 0, bits},
            {"test_accuracy", TG_RECORD_NUMBER, NULL, 0, e->accuracy},
        };
        tg_print_record(stdout, f, (int)(sizeof f / sizeof f[0]));
        return;
    }
    char weights[600];
    printf("model %s, weights %s: %lld held-out tokens of %s (windows of %d)\n", ctx->model->name,
           infer_weights(a, ctx->model, weights, sizeof weights), (long long)e->scored,
           tg_dataset_describe(ctx->test).name, ctx->input.seq_len);
    printf("test: loss %.4f, perplexity %.2f, %.4f bits/%s, accuracy %.2f%%\n", e->loss, ppl, bits,
           unit, e->accuracy);
}

int infer_score(const infer_args *a)
{
    train_context ctx;
    if (train_context_open(&ctx, a->model, &a->data, -1, a->test_limit) != 0)
        return 1;
    device_args dev = a->dev;
    if (dev.eval_iterations < 0)
        dev.eval_iterations = *device_int(&dev, "deviceIterations");
    int64_t batch = a->batch > 0 ? a->batch : SCORE_DEFAULT_BATCH;
    char *vocab = text_vocab_record(ctx.test);
    eval_result e;
    int status = 1;
    if (!vocab)
        fprintf(stderr, "tilegraph infer: out of memory\n");
    else if (a->load && text_vocab_check(a->load, vocab, "infer") != 0)
        ; /* printed */
    else if (evaluate_prepare(&ctx, &dev, batch) != TG_OK)
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
    else if (infer_load(a, ctx.eval_session, ctx.model) != 0)
        ; /* printed */
    else if (evaluate_loaded(&ctx, !a->json, &e) != TG_OK)
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
    else {
        print_score(a, &ctx, &e);
        status = 0;
    }
    free(vocab);
    train_context_close(&ctx);
    return status;
}

/* ---- generation ---------------------------------------------------------------- */

/* A causal model's vocabulary: bytes (token t is byte t), or the code
 * points of the text a checkpoint was trained on with --tokens char. */
typedef struct gen_vocab {
    int n;              /* tokens the prompt may use */
    int32_t *cps;       /* char tokens: code point of each, ascending; NULL for bytes */
    const char *source; /* where the vocabulary comes from, for messages */
} gen_vocab;

/* The vocabulary --load records ("char:10,32,..."), or bytes; 0 or -1 (printed). */
static int read_vocab(const infer_args *a, int classes, gen_vocab *v)
{
    *v = (gen_vocab){classes < 256 ? classes : 256, NULL, "bytes"};
    if (!a->load)
        return 0;
    size_t cap = 1 << 22;
    char *rec = malloc(cap), *p = NULL;
    if (!rec || tg_checkpoint_read_meta(a->load, "text_tokens", rec, cap) != TG_OK ||
        strncmp(rec, "char:", 5)) {
        free(rec); /* no record (the API's checkpoint) or "byte" */
        return 0;
    }
    v->cps = malloc((strlen(rec) / 2 + 1) * sizeof *v->cps);
    v->n = 0;
    for (p = rec + 5; v->cps && *p;) {
        char *end;
        long cp = strtol(p, &end, 10);
        if (end == p || cp < 0 || cp > 0x10FFFF || (*end && *end != ','))
            break;
        v->cps[v->n++] = (int32_t)cp;
        p = *end ? end + 1 : end;
    }
    bool ok = v->cps && !*p && v->n > 0 && v->n <= classes;
    free(rec);
    if (!ok) {
        fprintf(stderr,
                "tilegraph infer: %s: its record of the tokens (metadata text_tokens) is not a "
                "list of at most %d code points; save it again with tilegraph train --save\n",
                a->load, classes);
        return -1;
    }
    v->source = a->load;
    return 0;
}

/* The code point at s (UTF-8) into *cp; its length, 0 when malformed. */
static int utf8_decode(const unsigned char *s, int32_t *cp)
{
    int len = s[0] < 0x80         ? 1
              : (s[0] >> 5) == 6  ? 2
              : (s[0] >> 4) == 14 ? 3
              : (s[0] >> 3) == 30 ? 4
                                  : 0;
    int32_t c = len == 1 ? s[0] : len == 2 ? s[0] & 31 : len == 3 ? s[0] & 15 : s[0] & 7;
    for (int i = 1; i < len; i++) {
        if ((s[i] >> 6) != 2)
            return 0;
        c = (c << 6) | (s[i] & 63);
    }
    *cp = c;
    return len;
}

static int utf8_encode(int32_t cp, char *out)
{
    if (cp < 0x80)
        return out[0] = (char)cp, 1;
    if (cp < 0x800)
        return out[0] = (char)(0xC0 | cp >> 6), out[1] = (char)(0x80 | (cp & 63)), 2;
    if (cp < 0x10000)
        return out[0] = (char)(0xE0 | cp >> 12), out[1] = (char)(0x80 | ((cp >> 6) & 63)),
               out[2] = (char)(0x80 | (cp & 63)), 3;
    return out[0] = (char)(0xF0 | cp >> 18), out[1] = (char)(0x80 | ((cp >> 12) & 63)),
           out[2] = (char)(0x80 | ((cp >> 6) & 63)), out[3] = (char)(0x80 | (cp & 63)), 4;
}

/* bytes[0..n) (NUL after them) as UTF-8 into out (room for 3n + 1, NUL
 * added): each byte that starts no valid character is U+FFFD, as a
 * decoder's errors="replace". Unless final, an incomplete character at the
 * end is left for the next call. Returns the bytes consumed. */
static size_t utf8_sanitize(const char *bytes, size_t n, bool final, char *out)
{
    const unsigned char *b = (const unsigned char *)bytes;
    size_t i = 0, o = 0;
    while (i < n) {
        int need = b[i] < 0x80         ? 1
                   : (b[i] >> 5) == 6  ? 2
                   : (b[i] >> 4) == 14 ? 3
                   : (b[i] >> 3) == 30 ? 4
                                       : 0;
        bool tail_ok = true;
        for (size_t k = i + 1; k < n && k < i + (size_t)need; k++)
            tail_ok = tail_ok && (b[k] >> 6) == 2;
        if (!final && need > 1 && i + (size_t)need > n && tail_ok)
            break; /* the rest of the character comes with the next token */
        int32_t cp = 0;
        int len = i + (size_t)need <= n ? utf8_decode(b + i, &cp) : 0;
        if (len > 0 && cp > 0 && cp <= 0x10FFFF && !(cp >= 0xD800 && cp < 0xE000) &&
            utf8_encode(cp, out + o) == len)
            o += (size_t)len, i += (size_t)len;
        else
            memcpy(out + o, "\xEF\xBF\xBD", 3), o += 3, i++;
    }
    out[o] = '\0';
    return i;
}

static int cmp_i32(const void *x, const void *y)
{
    int32_t a = *(const int32_t *)x, b = *(const int32_t *)y;
    return (a > b) - (a < b);
}

/* The prompt as tokens (room for strlen(prompt)); their count, -1 after
 * printing the character or byte the vocabulary lacks. */
static int64_t tokenize(const char *prompt, const gen_vocab *v, int32_t *out)
{
    const unsigned char *s = (const unsigned char *)prompt;
    int64_t n = 0;
    for (size_t i = 0; s[i];) {
        if (!v->cps) {
            if (s[i] >= v->n) {
                fprintf(stderr,
                        "tilegraph infer: --prompt: byte %zu (0x%02x) is not in the model's "
                        "vocabulary of %d bytes: give a prompt of bytes below 0x%02x\n",
                        i, s[i], v->n, v->n);
                return -1;
            }
            out[n++] = s[i++];
            continue;
        }
        int32_t cp = 0;
        int len = utf8_decode(s + i, &cp);
        const int32_t *hit = len ? bsearch(&cp, v->cps, (size_t)v->n, sizeof cp, cmp_i32) : NULL;
        if (!hit && !len) {
            fprintf(stderr,
                    "tilegraph infer: --prompt: byte %zu is not UTF-8, and %s was "
                    "trained on characters: give the prompt as UTF-8 text\n",
                    i, v->source);
            return -1;
        }
        if (!hit) {
            char shown[8];
            shown[utf8_encode(cp, shown)] = '\0';
            fprintf(stderr,
                    "tilegraph infer: --prompt: the character '%s' (U+%04X) at byte %zu is not "
                    "in the vocabulary %s was trained on (%d characters): leave it out\n",
                    shown, (unsigned)cp, i, v->source, v->n);
            return -1;
        }
        out[n++] = (int32_t)(hit - v->cps);
        i += (size_t)len;
    }
    return n;
}

/* splitmix64: the sampling's random numbers, the same for the same --seed. */
static double next_uniform(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

static int cmp_float_desc(const void *x, const void *y)
{
    float a = *(const float *)x, b = *(const float *)y;
    return (a < b) - (a > b);
}

/* The next token from logits[n]: the largest (temperature 0), or drawn from
 * softmax(logits / T) over the top_k largest (0: all). tmp has room for n. */
static int pick_token(const float *logits, int n, double temperature, int64_t top_k, float *tmp,
                      uint64_t *rng)
{
    if (temperature <= 0)
        return tg_argmax(logits, n);
    float floor = -INFINITY;
    if (top_k > 0 && top_k < n) {
        memcpy(tmp, logits, (size_t)n * sizeof *tmp);
        qsort(tmp, (size_t)n, sizeof *tmp, cmp_float_desc);
        floor = tmp[top_k - 1]; /* ties with the k-th stay in */
    }
    double max = logits[tg_argmax(logits, n)], sum = 0;
    for (int i = 0; i < n; i++)
        sum += logits[i] >= floor ? exp(((double)logits[i] - max) / temperature) : 0;
    double u = next_uniform(rng) * sum, acc = 0;
    int last = 0;
    for (int i = 0; i < n; i++) {
        if (logits[i] < floor)
            continue;
        acc += exp(((double)logits[i] - max) / temperature);
        last = i;
        if (u < acc)
            return i;
    }
    return last; /* u rounded to the sum */
}

/* Token t as text into buf (room for 5). */
static int token_text(const gen_vocab *v, int32_t t, char *buf)
{
    if (!v->cps)
        return buf[0] = (char)t, 1;
    return t >= 0 && t < v->n ? utf8_encode(v->cps[t], buf) : 0;
}

/* What generation holds (gen_close frees it). */
typedef struct gen_run {
    const tg_model_spec *model;
    tg_model_input in;
    tg_model_graph mg;
    tg_options *o;
    tg_session *s;
    gen_vocab vocab;
    int32_t *seq, *window;
    float *scores, *tmp;
    int64_t len; /* tokens in seq: the prompt's, then each generated */
} gen_run;

/* The model checked to be causal, built at batch 1 with --load's weights. */
static int gen_prepare(const infer_args *a, gen_run *r)
{
    if (a->data_given) {
        fprintf(stderr, "tilegraph infer: --generate takes no --data: the vocabulary is the "
                        "checkpoint's (--load)\n");
        return -1;
    }
    if (tg_model_open(a->model, TG_LOSS_CROSS_ENTROPY, &r->model) != TG_OK) {
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
        return -1;
    }
    if (r->model->task != TG_TASK_CAUSAL_LM) {
        fprintf(stderr,
                "tilegraph infer: --generate needs a causal language model (gpt-tiny, or an ONNX "
                "one that predicts the next token); %s %s\n",
                r->model->name,
                r->model->task == TG_TASK_MASKED_LM ? "predicts masked tokens, not the next one"
                : r->model->task == TG_TASK_SEGMENT ? "segments images"
                                                    : "classifies images");
        return -1;
    }
    r->in = tg_model_default_input(r->model);
    if (a->data.seq_len > 0)
        r->in.seq_len = r->in.width = (int)a->data.seq_len;
    if (read_vocab(a, r->in.classes, &r->vocab) != 0)
        return -1;
    if (r->vocab.cps && !r->model->onnx)
        r->in.classes = r->vocab.n; /* as training built it for the text's characters */
    if (tg_model_graph_create_ex(r->model, 1, NULL, &r->in, &r->mg) != TG_OK) {
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
        return -1;
    }
    if (!(r->o = infer_options(a)))
        return -1;
    if (tg_session_create(r->mg.graph, r->o, &r->s) != TG_OK) {
        fprintf(stderr, "tilegraph infer: %s\n", tg_error_message());
        return -1;
    }
    if (tg_session_samples_per_run(r->s, r->mg.images) != 1) {
        fprintf(stderr, "tilegraph infer: --generate runs one sequence at a time: drop "
                        "--replicas and --device-iterations\n");
        return -1;
    }
    if (infer_load(a, r->s, r->model) != 0) {
        fprintf(stderr, "tilegraph infer: (a checkpoint trained with --seq-len N needs the same "
                        "--seq-len N here)\n");
        return -1;
    }
    return 0;
}

/* The next token after seq[0..len): the last seq_len of them (the context)
 * run left-aligned, the padding after them unseen by a causal model. */
static tg_status gen_step(const infer_args *a, gen_run *r, uint64_t *rng, int32_t *next)
{
    int64_t S = r->in.seq_len, w = r->len < S ? r->len : S, V = r->in.classes;
    memset(r->window, 0, (size_t)S * sizeof *r->window);
    memcpy(r->window, r->seq + r->len - w, (size_t)w * sizeof *r->window);
    CLI_TRY(tg_session_write(r->s, r->mg.images, r->window, (size_t)S * sizeof(int32_t)));
    CLI_TRY(tg_session_run(r->s));
    CLI_TRY(tg_session_read(r->s, r->mg.output, r->scores, (size_t)(S * V) * sizeof(float)));
    /* only the vocabulary's tokens: an ONNX model may score more ids */
    int n = (int)(r->vocab.cps ? r->vocab.n : V < r->vocab.n ? V : r->vocab.n);
    *next = pick_token(r->scores + (w - 1) * V, n, a->temperature, a->top_k, r->tmp, rng);
    return TG_OK;
}

static void print_generated_json(const infer_args *a, const gen_run *r, int64_t prompt_len,
                                 int64_t cut)
{
    printf("{\"model\":");
    cli_json_string(r->model->name);
    printf(",\"weights\":\"%s\",\"seq_len\":%d,\"prompt_tokens\":%lld,\"prompt_cut\":%lld,"
           "\"temperature\":%.17g,\"top_k\":%lld,\"seed\":%llu,\"tokens\":[",
           infer_weights_kind(a, r->model), r->in.seq_len, (long long)prompt_len, (long long)cut,
           a->temperature, (long long)a->top_k, (unsigned long long)infer_seed(a));
    for (int64_t i = prompt_len; i < r->len; i++)
        printf("%s%d", i > prompt_len ? "," : "", (int)r->seq[i]);
    /* byte tokens need not make UTF-8, which JSON text must be (the tokens
     * are exact) */
    int64_t n = r->len - prompt_len;
    char *bytes = malloc((size_t)n * 4 + 1), *text = malloc((size_t)n * 4 * 3 + 1);
    size_t used = 0;
    for (int64_t i = prompt_len; bytes && i < r->len; i++)
        used += (size_t)token_text(&r->vocab, r->seq[i], bytes + used);
    if (bytes && text) {
        bytes[used] = '\0';
        utf8_sanitize(bytes, used, true, text);
    }
    free(bytes);
    printf("],\"text\":");
    cli_json_string(text ? text : "");
    printf("}\n");
    free(text);
}

static void gen_close(gen_run *r)
{
    free(r->seq);
    free(r->window);
    free(r->scores);
    free(r->tmp);
    free(r->vocab.cps);
    tg_session_destroy(r->s);
    tg_options_destroy(r->o);
    tg_model_graph_destroy(&r->mg);
    tg_model_close(r->model);
}

/* Print held[0..n) as UTF-8 (see utf8_sanitize): bytes that start a
 * character not complete yet are kept, moved to held's start; their count. */
static size_t print_text(char *held, size_t n, bool final)
{
    char out[3 * sizeof(char[16]) + 1];
    held[n] = '\0';
    size_t used = utf8_sanitize(held, n, final, out);
    fputs(out, stdout);
    if (isatty(STDOUT_FILENO))
        fflush(stdout);
    memmove(held, held + used, n - used);
    return n - used;
}

int infer_generate(const infer_args *a)
{
    gen_run r = {0};
    int status = 1;
    if (!*a->prompt) {
        fprintf(stderr, "tilegraph infer: --prompt is empty: give at least one character to "
                        "continue\n");
        return 2;
    }
    if (gen_prepare(a, &r) != 0)
        goto done;
    int64_t S = r.in.seq_len, cap = (int64_t)strlen(a->prompt) + a->generate;
    r.seq = malloc((size_t)cap * sizeof *r.seq);
    r.window = malloc((size_t)S * sizeof *r.window);
    r.scores = malloc((size_t)(S * r.in.classes) * sizeof *r.scores);
    r.tmp = malloc((size_t)r.in.classes * sizeof *r.tmp);
    if (!r.seq || !r.window || !r.scores || !r.tmp) {
        fprintf(stderr, "tilegraph infer: out of memory\n");
        goto done;
    }
    if ((r.len = tokenize(a->prompt, &r.vocab, r.seq)) < 0)
        goto done;
    int64_t prompt_len = r.len, cut = prompt_len > S ? prompt_len - S : 0;
    if (cut && !a->json)
        fprintf(stderr,
                "tilegraph infer: the prompt's %lld tokens are more than the context of %lld: "
                "the model sees its last %lld\n",
                (long long)prompt_len, (long long)S, (long long)S);
    uint64_t rng = infer_seed(a);
    char held[16]; /* generated bytes not yet printed: a character's start */
    size_t pending = 0;
    if (!a->json) {
        fputs(a->prompt, stdout);
        fflush(stdout);
    }
    for (int64_t k = 0; k < a->generate; k++) {
        if (gen_step(a, &r, &rng, &r.seq[r.len]) != TG_OK) {
            fprintf(stderr, "\ntilegraph infer: %s\n", tg_error_message());
            goto done;
        }
        int32_t t = r.seq[r.len++];
        if (!a->json) { /* held has room: at most 3 bytes wait for a 4-byte token */
            pending += (size_t)token_text(&r.vocab, t, held + pending);
            pending = print_text(held, pending, false);
        }
    }
    if (a->json)
        print_generated_json(a, &r, prompt_len, cut);
    else
        print_text(held, pending, true), printf("\n");
    status = 0;
done:
    gen_close(&r);
    return status;
}
