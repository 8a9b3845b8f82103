/* tests/tools/test_infer.c - `tilegraph infer` beyond classifying images
 * (issue 42 item 3): throughput and latency records whose host step is
 * --batch-size x --replicas x --device-iterations; a language model's
 * held-out score equal to what training's evaluation reported for the same
 * checkpoint; greedy generation equal to the argmax of the logits of one
 * teacher-forced run through the library; sampling reproducible by seed and
 * different across seeds; bad input refused by name. gpt-tiny on a slice of
 * Debian's GPL-3 keeps it to seconds. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include "core/arena.h"
#include "core/json.h"
#include "tilegraph/checkpoint.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];
static double train_loss; /* train's held-out loss of g.safetensors */

#define CORPUS "/usr/share/common-licenses/GPL-3"
#define SEQ 16
#define GPT "--model gpt-tiny --seq-len 16 "
#define EXPECT(args, code, text) TG_CLI_EXPECT(tmpdir, args, code, text)

static void test_throughput_record(void)
{
    tg_arena *arena = tg_arena_create(1 << 16);
    const tg_json *r =
        tg_cli_json(tmpdir, arena,
                    "infer --model fashion-basic --batch-size 4 --iterations 3 --warmup 1 --json",
                    __FILE__, __LINE__);
    if (r) {
        TG_CHECK(tg_cli_num(r, "samples_per_step") == 4 && tg_cli_num(r, "iterations") == 3);
        TG_CHECK(tg_cli_num(r, "images_per_s") > 0);
        double p50 = tg_cli_num(r, "latency_ms_p50"), p99 = tg_cli_num(r, "latency_ms_p99");
        TG_CHECK(p50 > 0 && p50 <= p99 && p99 <= tg_cli_num(r, "latency_ms_max"));
        TG_CHECK(tg_cli_num(r, "latency_ms_min") <= p50);
        TG_CHECK(!strcmp(tg_cli_str(r, "weights"), "init"));
        TG_CHECK(!strcmp(tg_cli_str(r, "inputs"), "synthetic"));
    }
    /* PopTorch's names: a host step is batch x replicas x deviceIterations */
    r = tg_cli_json(tmpdir, arena,
                    "infer --model fashion-basic --batch-size 2 --replicas 2 --device-iterations 3 "
                    "--iterations 2 --warmup 0 --json",
                    __FILE__, __LINE__);
    if (r) {
        TG_CHECK(tg_cli_num(r, "samples_per_step") == 12);
        TG_CHECK(tg_cli_num(r, "replicas") == 2 && tg_cli_num(r, "device_iterations") == 3);
    }
    /* a language model counts sequences and their tokens */
    r = tg_cli_json(tmpdir, arena, "infer " GPT "--batch-size 2 --iterations 2 --json", __FILE__,
                    __LINE__);
    if (r) {
        TG_CHECK(tg_cli_num(r, "samples_per_step") == 2 && tg_cli_num(r, "seq_len") == SEQ);
        TG_CHECK_NEAR(tg_cli_num(r, "tokens_per_s"), SEQ * tg_cli_num(r, "sequences_per_s"),
                      1e-9 * tg_cli_num(r, "tokens_per_s"));
    }
    tg_arena_destroy(arena);
    EXPECT("infer --model fashion-basic --iterations 2", 0, "images/s, latency p50");
}

static void test_bad_input(void)
{
    EXPECT("infer --batch-size 0", 2, "--batch-size must be between 1 and");
    EXPECT("infer --iterations 100000000", 2, "--iterations must be between 1 and");
    EXPECT("infer --model no-such-model --iterations 2", 1, "unknown model 'no-such-model'");
    EXPECT("infer --model fashion-basic --generate 3 --prompt a", 1,
           "--generate needs a causal language model");
    EXPECT("infer --model bert-tiny --generate 3 --prompt a", 1,
           "bert-tiny predicts masked tokens");
    EXPECT("infer " GPT "--generate 3", 2, "--generate needs --prompt");
    EXPECT("infer " GPT "--generate 3 --prompt ''", 2, "--prompt is empty");
    EXPECT("infer " GPT "--prompt abc", 2, "--prompt applies to generation");
    EXPECT("infer --model fashion-basic --iterations 2 --resize 8x8", 1,
           "--resize applies to --data's samples");
    EXPECT("infer --model fashion-basic --iterations 2 --index 3", 2, "--index chooses test");
    EXPECT("infer --iterations 2 --gradient-accumulation 4", 2,
           "--gradient-accumulation applies to training");
    EXPECT("infer --iterations 2 --flip 0.5", 2, "--flip applies to training");
}

/* The flags train's --help marks "training: " (the flag table's
 * CLI_TRAINING) are not in infer's --help, and each given to infer is
 * refused by name; infer's help keeps what it takes. */
static void test_help_lists_what_infer_takes(void)
{
    static char train_help[1 << 16], infer_help[1 << 16];
    TG_CHECK(tg_cli_run(tmpdir, "train --help", 0) == 0);
    snprintf(train_help, sizeof train_help, "%s", tg_cli_output);
    TG_CHECK(tg_cli_run(tmpdir, "infer --help", 0) == 0);
    snprintf(infer_help, sizeof infer_help, "%s", tg_cli_output);
    TG_CHECK(
        strstr(infer_help, "\n  --batch-size N ") && strstr(infer_help, "\n  --iterations N ") &&
        strstr(infer_help, "\n  --executable FILE ") && strstr(infer_help, "\n  --precision "));
    int training = 0;
    for (const char *line = train_help; (line = strstr(line, "\n  --")) != NULL; line++) {
        char name[64] = {0};
        const char *help = strstr(line, " training: ");
        const char *eol = strchr(line + 1, '\n');
        if (sscanf(line + 3, "%63s", name) != 1 || !help || (eol && help > eol))
            continue;
        training++;
        char listed[80], args[96], want[96];
        snprintf(listed, sizeof listed, "\n  %s ", name);
        if (strstr(infer_help, listed))
            tg_test_fail(__FILE__, __LINE__, "infer --help lists %s, a training flag", name);
        snprintf(args, sizeof args, "infer --iterations 2 %s", name);
        snprintf(want, sizeof want, "%s applies to training", name);
        EXPECT(args, 2, want);
    }
    printf("  %d training flags, none in infer --help, each refused\n", training);
    TG_CHECK(training >= 12); /* flip, loss, accumulation, output mode, loss scaling, ... */
}

/* train a few steps, save: the checkpoint the rest read, and its held-out loss */
static double train_gpt(const char *extra, const char *save)
{
    char args[1024];
    snprintf(args, sizeof args,
             "train " GPT "--data text:" CORPUS " --batch-size 4 --train-limit 64 --epochs 1 "
             "--seed 3 --quiet --json --save %s/%s %s",
             tmpdir, save, extra);
    tg_arena *arena = tg_arena_create(1 << 16);
    const tg_json *r = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    double loss = r ? tg_cli_num(r, "test_loss") : NAN;
    tg_arena_destroy(arena);
    return loss;
}

static void test_score_matches_training(void)
{
    char args[1024];
    snprintf(args, sizeof args,
             "infer " GPT "--data text:" CORPUS " --load %s/g.safetensors --json", tmpdir);
    tg_arena *arena = tg_arena_create(1 << 16);
    const tg_json *r = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    if (r) {
        double loss = tg_cli_num(r, "test_loss");
        /* the same evaluation code, batch and windows: the same double sum */
        TG_CHECK_NEAR(loss, train_loss, 1e-12 * fabs(train_loss));
        TG_CHECK_NEAR(tg_cli_num(r, "test_bits_per_token"), loss / log(2.0), 1e-12);
        TG_CHECK_NEAR(tg_cli_num(r, "test_perplexity"), exp(loss), 1e-9 * exp(loss));
        TG_CHECK(!strcmp(tg_cli_str(r, "token_unit"), "byte"));
        TG_CHECK(tg_cli_num(r, "tokens_scored") > 1000);
    }
    tg_arena_destroy(arena);
    /* the initialisation scores worse than the trained weights */
    r = NULL;
    snprintf(args, sizeof args, "infer " GPT "--data text:" CORPUS " --json");
    arena = tg_arena_create(1 << 16);
    r = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    TG_CHECK(r && tg_cli_num(r, "test_loss") > train_loss + 0.3);
    tg_arena_destroy(arena);
    snprintf(args, sizeof args, "infer " GPT "--data text:" CORPUS " --load %s/g.safetensors",
             tmpdir);
    EXPECT(args, 0, "bits/byte");
}

/* The tokens `infer --generate` printed into out (at most max); their count. */
static int generated(const char *ckpt, const char *extra, int32_t *out, int max)
{
    char args[1024];
    snprintf(args, sizeof args, "infer " GPT "--load %s/%s --json %s", tmpdir, ckpt, extra);
    tg_arena *arena = tg_arena_create(1 << 16);
    const tg_json *r = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__), *t = NULL;
    int n = 0;
    if (r && tg_json_get_array(r, "tokens", &t) == TG_OK)
        for (const tg_json *v; n < max && (v = tg_json_at(t, (size_t)n)); n++)
            out[n] = (int32_t)v->number;
    tg_arena_destroy(arena);
    return n;
}

/* The library's logits of one run over `tokens` (SEQ of them): the argmax
 * at each position. g0 holds weights trained at --lr 0, the initialisation,
 * whose argmax differs from position to position (a few steps of training
 * predict a space everywhere, which any position's logits would match). */
static void argmax_positions(const int32_t *tokens, int32_t *pred)
{
    const tg_model_spec *m = tg_model_find("gpt-tiny");
    tg_model_input in = tg_model_default_input(m);
    in.seq_len = in.width = SEQ;
    in.classes = 256;
    tg_model_graph mg;
    tg_session *s = NULL;
    static float logits[SEQ * 256];
    char path[512];
    snprintf(path, sizeof path, "%s/g0.safetensors", tmpdir);
    TG_CHECK_OK(tg_model_graph_create_ex(m, 1, NULL, &in, &mg));
    TG_CHECK_OK(tg_session_create(mg.graph, NULL, &s));
    TG_CHECK_OK(tg_checkpoint_load(s, path, "gpt-tiny"));
    TG_CHECK_OK(tg_session_write(s, mg.images, tokens, SEQ * sizeof(int32_t)));
    TG_CHECK_OK(tg_session_run(s));
    TG_CHECK_OK(tg_session_read(s, mg.output, logits, sizeof logits));
    for (int p = 0; p < SEQ; p++) {
        int best = 0;
        for (int c = 1; c < 256; c++)
            best = logits[p * 256 + c] > logits[p * 256 + best] ? c : best;
        pred[p] = best;
    }
    tg_session_destroy(s);
    tg_model_graph_destroy(&mg);
}

static void test_greedy_is_argmax(void)
{
    /* "The " then 20 tokens: the first 12 fill the context, the rest slide it */
    int32_t gen[32], seq[64] = {'T', 'h', 'e', ' '}, pred[SEQ];
    int n = generated("g0.safetensors", "--generate 20 --prompt 'The '", gen, 32);
    TG_CHECK(n == 20);
    if (n != 20)
        return;
    memcpy(seq + 4, gen, sizeof(int32_t) * 20);
    int distinct = 0;
    for (int i = 4; i < 24; i++)
        distinct += seq[i] != seq[i - 1];
    TG_CHECK(distinct > 5);      /* a test that could tell one position from another */
    argmax_positions(seq, pred); /* the first window, teacher-forced */
    for (int p = 3; p < SEQ - 1; p++)
        if (pred[p] != seq[p + 1])
            tg_test_fail(__FILE__, __LINE__, "position %d: greedy gave %d, the argmax is %d", p,
                         seq[p + 1], pred[p]);
    /* past the context: the last token follows the 16 before it */
    argmax_positions(seq + 24 - 1 - SEQ, pred);
    TG_CHECK(pred[SEQ - 1] == seq[23]);
    /* the text the initialisation generates is mostly not UTF-8: it prints
     * as U+FFFD, so that the output is text (a script reading it decodes it) */
    char text_args[512];
    snprintf(text_args, sizeof text_args,
             "infer " GPT "--load %s/g0.safetensors --generate 30 --prompt 'The '", tmpdir);
    EXPECT(text_args, 0, "The ");
    TG_CHECK(tg_json_utf8_valid(tg_cli_output, strlen(tg_cli_output)));
    TG_CHECK(strstr(tg_cli_output, "\xEF\xBF\xBD") != NULL);
    /* without --seq-len: the window the checkpoint was trained on (16, not the model's 64) */
    snprintf(text_args, sizeof text_args,
             "infer --model gpt-tiny --load %s/g0.safetensors --generate 20 --prompt 'The ' --json",
             tmpdir);
    tg_arena *arena = tg_arena_create(1 << 16);
    const tg_json *r = tg_cli_json(tmpdir, arena, text_args, __FILE__, __LINE__), *t = NULL;
    TG_CHECK(r && tg_cli_num(r, "seq_len") == SEQ);
    for (int i = 0; r && tg_json_get_array(r, "tokens", &t) == TG_OK && i < 20; i++)
        TG_CHECK(tg_json_at(t, (size_t)i) && tg_json_at(t, (size_t)i)->number == gen[i]);
    tg_arena_destroy(arena);
    /* the text line shows the prompt and its continuation */
    char args[512];
    snprintf(args, sizeof args, "infer " GPT "--load %s/g.safetensors --generate 4 --prompt 'The '",
             tmpdir);
    EXPECT(args, 0, "The ");
}

static void test_sampling_by_seed(void)
{
    int32_t a[40], b[40], c[40], g[40];
    int na =
        generated("g.safetensors", "--generate 40 --prompt 'The ' --temperature 1 --seed 5", a, 40);
    int nb =
        generated("g.safetensors", "--generate 40 --prompt 'The ' --temperature 1 --seed 5", b, 40);
    int nc =
        generated("g.safetensors", "--generate 40 --prompt 'The ' --temperature 1 --seed 6", c, 40);
    int ng = generated("g.safetensors", "--generate 40 --prompt 'The '", g, 40);
    TG_CHECK(na == 40 && nb == 40 && nc == 40 && ng == 40);
    TG_CHECK(memcmp(a, b, sizeof a) == 0);
    TG_CHECK(memcmp(a, c, sizeof a) != 0);
    TG_CHECK(memcmp(a, g, sizeof a) != 0); /* sampling, not the greedy choice */
    /* top-k 1 is the greedy choice whatever the temperature */
    int32_t k1[40];
    int nk = generated("g.safetensors",
                       "--generate 40 --prompt 'The ' --temperature 2 --top-k 1 --seed 7", k1, 40);
    TG_CHECK(nk == 40 && memcmp(k1, g, sizeof g) == 0);
}

static void test_char_vocabulary(void)
{
    double loss = train_gpt("--tokens char", "c.safetensors");
    TG_CHECK(isfinite(loss));
    char args[512];
    snprintf(args, sizeof args,
             "infer " GPT "--load %s/c.safetensors --generate 5 --prompt 'caf\xc3\xa9'", tmpdir);
    EXPECT(args, 1, "the character '\xc3\xa9' (U+00E9) at byte 3 is not in the vocabulary");
    snprintf(args, sizeof args, "infer " GPT "--load %s/c.safetensors --generate 5 --prompt 'the '",
             tmpdir);
    EXPECT(args, 0, "the ");
    /* scoring refuses another numbering of the tokens */
    snprintf(args, sizeof args, "infer " GPT "--data text:" CORPUS " --load %s/c.safetensors",
             tmpdir);
    EXPECT(args, 1, "was trained on other tokens");
}

/* An exported causal LM (tests/onnx/fixtures/tiny_lm.onnx): scored as
 * training's evaluation scored it; without --load, the file's own weights. */
static void test_onnx_lm_score(void)
{
    char args[1024];
    const char *lm =
        "--model " TG_SOURCE_DIR "/tests/onnx/fixtures/tiny_lm.onnx --data text:" CORPUS;
    snprintf(args, sizeof args,
             "train %s --train-limit 64 --epochs 1 --quiet --seed 1 --json --save %s/lm.st", lm,
             tmpdir);
    tg_arena *arena = tg_arena_create(1 << 16);
    const tg_json *r = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    double trained = r ? tg_cli_num(r, "test_loss") : NAN;
    snprintf(args, sizeof args, "infer %s --load %s/lm.st --json", lm, tmpdir);
    r = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    TG_CHECK(r && fabs(tg_cli_num(r, "test_loss") - trained) <= 1e-12 * fabs(trained));
    snprintf(args, sizeof args, "infer %s --json", lm);
    r = tg_cli_json(tmpdir, arena, args, __FILE__, __LINE__);
    TG_CHECK(r && !strcmp(tg_cli_str(r, "weights"), "onnx"));
    tg_arena_destroy(arena);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tg_infer_XXXXXX");
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_throughput_record);
    TG_RUN(test_bad_input);
    TG_RUN(test_help_lists_what_infer_takes);
    if (access(CORPUS, R_OK) == 0) {
        train_loss = train_gpt("", "g.safetensors");
        TG_CHECK(isfinite(train_loss));
        TG_RUN(test_score_matches_training);
        TG_CHECK(isfinite(train_gpt("--lr 0", "g0.safetensors")));
        TG_RUN(test_greedy_is_argmax);
        TG_RUN(test_sampling_by_seed);
        TG_RUN(test_char_vocabulary);
        TG_RUN(test_onnx_lm_score);
    } else {
        printf("  skip the language model tests: %s is missing\n", CORPUS);
    }
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
