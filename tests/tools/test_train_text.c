/* tests/tools/test_train_text.c - `tilegraph train` on text (issue item 5):
 * gpt-tiny and bert-tiny learn from Debian's GPL-3 (the loss falls, the
 * epoch lines and --json carry perplexity and bits per token), a run
 * pipelined over 2 devices or replicated twice ends with the same weights,
 * bit for bit, as one device accumulating the same micro-batches (replicas
 * that accumulate too sum in another order: within rounding), and a bad
 * --data text: is an error naming what is wrong. Short windows and a slice
 * of the corpus keep it to seconds. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include "core/arena.h"
#include "core/json.h"
#include "data/safetensors.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static char tmpdir[256];

#define CORPUS "/usr/share/common-licenses/GPL-3"
#define BASE                                                                                       \
    "train --model gpt-tiny --data text:" CORPUS " --seq-len 16 --batch-size 4 "                   \
    "--optimizer adam --lr 0.001 --seed 3 --quiet "
#define COMMON BASE "--train-limit 48 "
/* 4 host steps of 2 micro-batches: enough for the weights to move apart
 * wherever a way of running could differ */
/* one thread per device: the default gives one device both cores and each of
 * two devices one, and kernels sum in an order that depends on it
 * (docs/numerics.md, "Bit-reproducibility") */
#define SHORT BASE "--train-limit 32 --epochs 1 --threads-per-device 1 "

static char *path(const char *name)
{
    return tg_test_path(tmpdir, name);
}

/* Run train --json: its epoch records (one JSON object a line) into
 * rows[0..max); their count, 0 (and a test failure) when it fails. */
static int epochs(tg_arena *arena, const char *args, const tg_json **rows, int max, int line)
{
    int rc = tg_cli_run(tmpdir, args, 0), n = 0;
    for (char *p = tg_cli_output, *nl; rc == 0 && *p && n < max; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl)
            nl = p + strlen(p) - 1;
        tg_json *r = NULL;
        if (tg_json_parse(arena, p, (size_t)(nl - p), args, &r) != TG_OK)
            break;
        rows[n++] = r;
    }
    if (rc != 0 || n == 0)
        tg_test_fail(__FILE__, line, "tilegraph %s: exit %d, output:\n%.1500s", args, rc,
                     tg_cli_output);
    return n;
}

static void test_gpt_learns_and_reports(void)
{
    tg_arena *arena = tg_arena_create(1 << 16);
    const tg_json *rows[3];
    if (epochs(arena, COMMON "--epochs 3 --json", rows, 3, __LINE__) == 3) {
        const tg_json *first = rows[0], *last = rows[2];
        double l1 = tg_cli_num(first, "train_loss"), l3 = tg_cli_num(last, "train_loss");
        /* ln 256 = 5.55 nats at the start; the bytes of English fall fast */
        TG_CHECK(l1 < 5.3 && l3 < l1 - 0.3);
        double test_loss = tg_cli_num(last, "test_loss");
        if (!(test_loss < 4.0)) /* a uniform guess is ln 256 = 5.55 */
            tg_test_fail(__FILE__, __LINE__, "test loss %g after 3 epochs", test_loss);
        TG_CHECK_NEAR(tg_cli_num(last, "train_perplexity"), exp(l3), 1e-6 * exp(l3));
        TG_CHECK_NEAR(tg_cli_num(last, "train_bits_per_token"), l3 / log(2.0), 1e-9);
        double t = tg_cli_num(last, "test_loss");
        TG_CHECK_NEAR(tg_cli_num(last, "test_bits_per_token"), t / log(2.0), 1e-9);
        TG_CHECK(strcmp(tg_cli_str(last, "token_unit"), "byte") == 0);
        TG_CHECK(tg_cli_num(last, "seq_len") == 16);
        TG_CHECK_NEAR(tg_cli_num(last, "tokens_per_s"), 16 * tg_cli_num(last, "samples_per_s"),
                      1e-6 * tg_cli_num(last, "tokens_per_s"));
        double acc = tg_cli_num(last, "test_accuracy");
        TG_CHECK(acc > 10 && acc <= 100); /* next-byte accuracy: spaces and 'e' at least */
    }
    tg_arena_destroy(arena);
    /* the text lines say the same, per byte */
    TG_CLI_EXPECT(tmpdir, COMMON "--epochs 1", 0, "bits/byte), test loss");
    TG_CHECK(strstr(tg_cli_output, "tokens/s") && strstr(tg_cli_output, "perplexity"));
}

static void test_char_tokens_and_bert(void)
{
    char args[1024];
    snprintf(args, sizeof args, COMMON "--epochs 1 --tokens char --save %s", path("char.st"));
    TG_CLI_EXPECT(tmpdir, args, 0, "bits/char");
    /* the checkpoint keeps the vocabulary: byte tokens cannot load it */
    snprintf(args, sizeof args, COMMON "--epochs 1 --load %s", path("char.st"));
    TG_CLI_EXPECT(tmpdir, args, 1, "was trained on other tokens (char:10,32,");
    snprintf(args, sizeof args, COMMON "--epochs 1 --tokens char --load %s", path("char.st"));
    TG_CLI_EXPECT(tmpdir, args, 0, "bits/char");
    /* BERT learns the masked tokens: its loss falls too */
    tg_arena *arena = tg_arena_create(1 << 16);
    const tg_json *rows[3];
    if (epochs(arena,
               "train --model bert-tiny --data text:" CORPUS
               " --seq-len 16 --train-limit 96 --batch-size 8 --optimizer adam "
               "--lr 0.001 --seed 3 --quiet --epochs 3 --json",
               rows, 3, __LINE__) == 3) {
        const tg_json *first = rows[0], *last = rows[2];
        TG_CHECK(tg_cli_num(last, "train_loss") < tg_cli_num(first, "train_loss") - 0.3);
        TG_CHECK(isfinite(tg_cli_num(last, "test_loss")));
    }
    tg_arena_destroy(arena);
    /* micro-batches of one 16-token window: some hold no masked token,
     * whose loss is 0 with no gradient (it was 0/0 = NaN: "diverged" at
     * step 26) */
    TG_CLI_EXPECT(tmpdir,
                  "train --model bert-tiny --data text:" CORPUS
                  " --seq-len 16 --batch-size 1 --train-limit 64 --test-limit 16 --epochs 1 "
                  "--seed 3",
                  0, "test loss");
}

/* Every tensor of checkpoints a and b holds the same bytes. */
static void expect_same_weights(const char *a, const char *b, const char *what)
{
    tg_safetensors *x = NULL, *y = NULL;
    TG_CHECK_OK(tg_safetensors_load(a, &x));
    TG_CHECK_OK(tg_safetensors_load(b, &y));
    if (x && y) {
        TG_CHECK(tg_safetensors_count(x) == tg_safetensors_count(y));
        TG_CHECK(tg_safetensors_count(x) > 40); /* 4 layers of 12 tensors and the rest */
        TG_CHECK(tg_safetensors_find(x, "transformer.h.3.attn.c_attn.weight") != NULL);
        for (size_t i = 0; i < tg_safetensors_count(x); i++) {
            const tg_st_tensor *p = tg_safetensors_tensor(x, i);
            const tg_st_tensor *q = tg_safetensors_find(y, p->name);
            if (!q || q->nbytes != p->nbytes || memcmp(p->data, q->data, p->nbytes) != 0)
                tg_test_fail(__FILE__, __LINE__, "%s: %s differs from one device's", what, p->name);
        }
    }
    tg_safetensors_destroy(x);
    tg_safetensors_destroy(y);
}

/* The largest |a - b| over every f32 value of checkpoints a and b. */
static double weights_apart(const char *a, const char *b)
{
    tg_safetensors *x = NULL, *y = NULL;
    double worst = -1;
    TG_CHECK_OK(tg_safetensors_load(a, &x));
    TG_CHECK_OK(tg_safetensors_load(b, &y));
    for (size_t i = 0; x && y && i < tg_safetensors_count(x); i++) {
        const tg_st_tensor *p = tg_safetensors_tensor(x, i);
        const tg_st_tensor *q = tg_safetensors_find(y, p->name);
        if (!q || q->nbytes != p->nbytes || p->dtype != TG_ST_F32) {
            worst = INFINITY;
            continue;
        }
        const float *u = p->data, *v = q->data;
        for (size_t k = 0; k < p->nbytes / sizeof(float); k++)
            worst = fmax(worst, fabs((double)u[k] - v[k]));
    }
    tg_safetensors_destroy(x);
    tg_safetensors_destroy(y);
    return worst;
}

/* Replicas that accumulate too (docs/models.md, issue 46 row 23): each sums
 * its own micro-batches, then the replicas' sums are added, where one device
 * adds the same micro-batches one after the other: 2 replicas x 2 agree
 * with one device x 4 to rounding (6.6e-7 after these 2 Adam steps), 4
 * replicas x 1 bit for bit. */
static void test_replicas_accumulating_agree_to_rounding(void)
{
    char args[1024];
    snprintf(args, sizeof args, SHORT "--gradient-accumulation 4 --save %s", path("a4.st"));
    TG_CLI_EXPECT(tmpdir, args, 0, "saved");
    snprintf(args, sizeof args, SHORT "--replicas 2 --gradient-accumulation 2 --save %s",
             path("r2a2.st"));
    TG_CLI_EXPECT(tmpdir, args, 0, "1 device x 2 replicas");
    snprintf(args, sizeof args, SHORT "--replicas 4 --save %s", path("r4.st"));
    TG_CLI_EXPECT(tmpdir, args, 0, "1 device x 4 replicas");
    double apart = weights_apart(path("a4.st"), path("r2a2.st"));
    TG_CHECK(apart >= 0 && apart <= 1e-5);
    expect_same_weights(path("a4.st"), path("r4.st"), "4 replicas");
    /* the control: another micro-batch order is not within rounding */
    snprintf(args, sizeof args, SHORT "--gradient-accumulation 2 --save %s", path("a2.st"));
    TG_CLI_EXPECT(tmpdir, args, 0, "saved");
    TG_CHECK(weights_apart(path("a4.st"), path("a2.st")) > 1e-4);
}

static void test_pipelined_and_replicated_are_bit_identical(void)
{
    char args[1024];
    snprintf(args, sizeof args, SHORT "--gradient-accumulation 2 --save %s", path("one.st"));
    TG_CLI_EXPECT(tmpdir, args, 0, "saved");
    snprintf(args, sizeof args, SHORT "--gradient-accumulation 2 --strategy pipelined --save %s",
             path("pipe.st"));
    TG_CLI_EXPECT(tmpdir, args, 0, "2 devices x 1 replica");
    expect_same_weights(path("one.st"), path("pipe.st"), "pipelined (blocks B1|B2)");
    snprintf(args, sizeof args, SHORT "--gradient-accumulation 2 --split transformer.h.3 --save %s",
             path("split.st"));
    TG_CLI_EXPECT(tmpdir, args, 0, "2 devices x 1 replica");
    expect_same_weights(path("one.st"), path("split.st"), "--split at layer 3");
    snprintf(args, sizeof args, SHORT "--replicas 2 --save %s", path("rep.st"));
    TG_CLI_EXPECT(tmpdir, args, 0, "1 device x 2 replicas");
    expect_same_weights(path("one.st"), path("rep.st"), "2 replicas");
}

/* An exported causal LM (tests/onnx/fixtures/make_lm_fixture.py): int64
 * token ids in, so the command feeds it i32 ids from the text; it learns,
 * and its fixed window is the default --seq-len. */
static void test_onnx_language_model(void)
{
    const char *lm = "train --model " TG_SOURCE_DIR "/tests/onnx/fixtures/tiny_lm.onnx --data "
                     "text:" CORPUS " --train-limit 400 --lr 0.01 --quiet --seed 1 ";
    tg_arena *arena = tg_arena_create(1 << 16);
    const tg_json *rows[2];
    char args[1024];
    snprintf(args, sizeof args, "%s--epochs 2 --json", lm);
    if (epochs(arena, args, rows, 2, __LINE__) == 2) {
        TG_CHECK(tg_cli_num(rows[1], "train_loss") < tg_cli_num(rows[0], "train_loss") - 0.3);
        TG_CHECK(tg_cli_num(rows[1], "seq_len") == 16);
        TG_CHECK(tg_cli_num(rows[1], "test_loss") < 4.0);
    }
    tg_arena_destroy(arena);
    snprintf(args, sizeof args, "%s--epochs 1 --seq-len 32", lm);
    TG_CLI_EXPECT(tmpdir, args, 1, "input 'input_ids' is [16, 16] but the data gives [16, 32]");
}

/* An exported BERT (make_lm_fixture.py's tiny_bert.onnx) from the command:
 * three int64 inputs, of which the text gives the ids and the command the
 * attention mask (ones) and token types (zeros); --lm masked trains it on
 * BERT's masked tokens, and it learns. It was refused as having 3 inputs. */
static void test_onnx_bert_masked(void)
{
    const char *bert = "train --model " TG_SOURCE_DIR "/tests/onnx/fixtures/tiny_bert.onnx --data "
                       "text:" CORPUS " --lm masked --train-limit 800 --lr 0.003 --quiet --seed 1 ";
    tg_arena *arena = tg_arena_create(1 << 16);
    const tg_json *rows[2];
    char args[1024];
    snprintf(args, sizeof args, "%s--epochs 2 --json", bert);
    if (epochs(arena, args, rows, 2, __LINE__) == 2)
        TG_CHECK(tg_cli_num(rows[1], "train_loss") < tg_cli_num(rows[0], "train_loss") - 0.3);
    tg_arena_destroy(arena);
    snprintf(args, sizeof args, "%s--epochs 1 --split q --gradient-accumulation 2", bert);
    TG_CLI_EXPECT(tmpdir, args, 0, "2 devices x 1 replica");
    /* an input the text cannot fill, a vocabulary without room for the mask
     * token, --lm on a zoo model or with a bad kind: each named */
    snprintf(args, sizeof args,
             "train --model " TG_SOURCE_DIR "/tests/onnx/fixtures/tiny_bert_extra.onnx "
             "--data text:" CORPUS " --lm masked");
    TG_CLI_EXPECT(tmpdir, args, 1, "input 3 'speaker_ids' (int64, 2 dims) is not one the text");
    snprintf(args, sizeof args,
             "train --model " TG_SOURCE_DIR "/tests/onnx/fixtures/tiny_lm.onnx --data text:" CORPUS
             " --lm masked");
    TG_CLI_EXPECT(tmpdir, args, 1, "needs one more for the mask token");
    snprintf(args, sizeof args, "train --model gpt-tiny --data text:" CORPUS " --lm masked");
    TG_CLI_EXPECT(tmpdir, args, 1, "only an ONNX language model's objective can be chosen");
    snprintf(args, sizeof args, "%s--lm maskd", bert);
    TG_CLI_EXPECT(tmpdir, args, 1, "--lm 'maskd' is not causal or masked");
}

static void test_bad_text_data(void)
{
    const char *gpt = "train --model gpt-tiny --quiet --data ";
    char args[1024];
    snprintf(args, sizeof args, "%stext:", gpt);
    TG_CLI_EXPECT(tmpdir, args, 1, "needs a file: text:FILE");
    snprintf(args, sizeof args, "%stext:%s", gpt, path("missing.txt"));
    TG_CLI_EXPECT(tmpdir, args, 1, "missing.txt");
    snprintf(args, sizeof args, "%stext:" CORPUS " --seq-len 5000", gpt);
    TG_CLI_EXPECT(tmpdir, args, 1, "seq-len + 1 = 5001");
    snprintf(args, sizeof args, "%stext:" CORPUS " --tokens words", gpt);
    TG_CLI_EXPECT(tmpdir, args, 1, "--tokens 'words' is not byte or char");
    snprintf(args, sizeof args, "%stext:" CORPUS " --flip 0.5", gpt);
    TG_CLI_EXPECT(tmpdir, args, 1, "--flip applies to images");
    FILE *f = fopen(path("latin1.txt"), "wb");
    if (f) {
        for (int i = 0; i < 400; i++)
            fputs(i % 7 ? "caf\xe9 " : "na\xefve ", f);
        fclose(f);
    }
    snprintf(args, sizeof args, "%stext:%s --tokens char", gpt, path("latin1.txt"));
    TG_CLI_EXPECT(tmpdir, args, 1, "not UTF-8 text: byte 0xef at offset 2");
    f = fopen(path("empty.txt"), "wb");
    if (f)
        fclose(f);
    snprintf(args, sizeof args, "%stext:%s", gpt, path("empty.txt"));
    TG_CLI_EXPECT(tmpdir, args, 1, "empty");
    /* a language model needs text, and an image model cannot take it */
    TG_CLI_EXPECT(tmpdir, "train --model gpt-tiny --quiet", 1, "is a language model");
    TG_CLI_EXPECT(tmpdir, "train --model fashion-basic --quiet --data text:" CORPUS, 1,
                  "classifies images");
    TG_CLI_EXPECT(tmpdir, "train --model fashion-basic --quiet --seq-len 8", 1,
                  "--seq-len applies to text");
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_train_text_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_gpt_learns_and_reports);
    TG_RUN(test_char_tokens_and_bert);
    TG_RUN(test_pipelined_and_replicated_are_bit_identical);
    TG_RUN(test_replicas_accumulating_agree_to_rounding);
    TG_RUN(test_onnx_language_model);
    TG_RUN(test_onnx_bert_masked);
    TG_RUN(test_bad_text_data);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
