/* tests/onnx/test_onnx_cli.c - the command with ONNX models: `tilegraph
 * import` (text, JSON, errors, help) and `--model FILE.onnx` for compile
 * (one device, a split at a PyTorch module name, the mk2 target), train with
 * --save, and infer from that checkpoint. */
#include "tg_test.h"
#include "tg_test_cli.h"

#include "core/arena.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FIXTURE TG_SOURCE_DIR "/tests/onnx/fixtures/tiny_cnn.onnx"

static char tmpdir[] = "/tmp/tg_onnx_cli_XXXXXX";

static void test_import_text_and_json(void)
{
    TG_CLI_EXPECT(tmpdir, "import " FIXTURE " --batch-size 4", 0, "opset 13");
    TG_CHECK(strstr(tg_cli_output, "[batch, 1, 28, 28]") != NULL);
    TG_CHECK(strstr(tg_cli_output, "parameters: 18 tensors, 2554 elements") != NULL);
    TG_CHECK(strstr(tg_cli_output, "layer2") != NULL);
    TG_CHECK(strstr(tg_cli_output, "BatchNormalization   5") != NULL);
    tg_arena *a = tg_arena_create(1 << 16);
    const tg_json *j =
        tg_cli_json(tmpdir, a, "import " FIXTURE " --json --params", __FILE__, __LINE__);
    TG_CHECK(j && tg_cli_num(j, "opset") == 13);
    TG_CHECK(j && tg_cli_num(j, "parameter_count") == 18);
    const tg_json *ops = j ? tg_json_get(j, "ops") : NULL;
    TG_CHECK(ops && tg_cli_num(ops, "Conv") == 5);
    tg_arena_destroy(a);
}

static void test_import_errors_and_help(void)
{
    TG_CLI_EXPECT(tmpdir, "import --help", 0, "tilegraph import FILE.onnx");
    TG_CLI_EXPECT(tmpdir, "import", 2, "give the ONNX file");
    TG_CLI_EXPECT(tmpdir, "import /nonexistent.onnx", 1, "/nonexistent.onnx");
    /* a checkpoint is not a model */
    TG_CLI_EXPECT(tmpdir, "import " TG_SOURCE_DIR "/tests/onnx/fixtures/tiny_cnn.input.pb", 1,
                  "not an ONNX model");
    TG_CLI_EXPECT(tmpdir, "train --model /nonexistent.onnx", 1, "/nonexistent.onnx");
}

static void test_model_option(void)
{
    TG_CLI_EXPECT(tmpdir, "compile --model " FIXTURE " --batch-size 8", 0, "tiny_cnn.onnx");
    TG_CLI_EXPECT(tmpdir,
                  "compile --model " FIXTURE " --batch-size 8 --split layer2.0 "
                  "--gradient-accumulation 4",
                  0, "2 devices");
    TG_CLI_EXPECT(tmpdir, "compile --model " FIXTURE " --split nothere --gradient-accumulation 4",
                  1, "nothere");
    TG_CLI_EXPECT(tmpdir, "compile --model " FIXTURE " --batch-size 8 --target mk2", 0,
                  "tiny_cnn.onnx");
    char args[1024];
    snprintf(args, sizeof args,
             "train --model " FIXTURE " --data synthetic --epochs 1 --train-limit 64 "
             "--test-limit 32 --batch-size 16 --save %s/w.safetensors",
             tmpdir);
    TG_CLI_EXPECT(tmpdir, args, 1, "takes 1x28x28 images");
    snprintf(args, sizeof args,
             "train --model " FIXTURE " --data synthetic --resize 28x28 --epochs 1 "
             "--train-limit 64 --test-limit 32 --batch-size 16 --save %s/w.safetensors",
             tmpdir);
    /* synthetic data has 3 channels: refused naming both shapes */
    TG_CHECK(tg_cli_run(tmpdir, args, 1) != 0 && strstr(tg_cli_output, "1x28x28") != NULL);
    snprintf(args, sizeof args,
             "train --model " FIXTURE " --epochs 1 --train-limit 200 --test-limit 50 "
             "--batch-size 20 --save %s/w.safetensors",
             tmpdir);
    /* Debian's Fashion-MNIST, the default data set, when installed */
    if (access("/usr/share/datasets/fashion-mnist", R_OK) == 0) {
        TG_CLI_EXPECT(tmpdir, args, 0, "test accuracy");
        snprintf(args, sizeof args, "infer --model " FIXTURE " --load %s/w.safetensors --index 0",
                 tmpdir);
        TG_CLI_EXPECT(tmpdir, args, 0, "predicted");
    }
}

/* --normalize: the data set's statistics for a model exported from a
 * PyTorch script that normalised in its data loader; it changes training,
 * and bad values are refused naming the text. */
static void test_normalize(void)
{
    TG_CLI_EXPECT(tmpdir, "train --model " FIXTURE " --normalize 0.5", 1, "MEAN/STD");
    TG_CLI_EXPECT(tmpdir, "train --model " FIXTURE " --normalize 0.2/0", 1, "std positive");
    /* finite as a double, infinite as the float the loader keeps */
    TG_CLI_EXPECT(tmpdir, "train --model " FIXTURE " --normalize 1e40/1", 1, "'1e40/1'");
    TG_CLI_EXPECT(tmpdir, "train --model " FIXTURE " --normalize 0.1,x/0.3", 1, "0.1,x/0.3");
    TG_CLI_EXPECT(tmpdir, "train --model " FIXTURE " --normalize 0.1,0.2/0.3,0.4", 1,
                  "gives 2 channels but the images have 1");
    if (access("/usr/share/datasets/fashion-mnist", R_OK) != 0)
        return;
    const char *base = "train --model " FIXTURE " --epochs 1 --train-limit 200 --test-limit 50 "
                       "--batch-size 20 --json";
    char args[1024];
    tg_arena *a = tg_arena_create(1 << 16);
    const tg_json *plain = tg_cli_json(tmpdir, a, base, __FILE__, __LINE__);
    snprintf(args, sizeof args, "%s --normalize 0.2860/0.3530", base);
    const tg_json *norm = tg_cli_json(tmpdir, a, args, __FILE__, __LINE__);
    TG_CHECK(plain && norm);
    if (plain && norm)
        TG_CHECK(tg_cli_num(plain, "train_loss") != tg_cli_num(norm, "train_loss"));
    tg_arena_destroy(a);
}

/* Exports whose output dims PyTorch declares by name (its exporter could
 * not work them out): `import` prints the names and the built shape, and
 * --model takes the built sizes (the declared ones were read as unknown
 * and the models refused: "must be the logits ..."). Fixtures made by
 * fixtures/make_symbolic_fixtures.py. */
static void test_symbolic_output_dims(void)
{
    const char *lm = TG_SOURCE_DIR "/tests/onnx/fixtures/symbolic_lm.onnx";
    const char *seg = TG_SOURCE_DIR "/tests/onnx/fixtures/symbolic_seg.onnx";
    char args[1024];
    snprintf(args, sizeof args, "import %s", lm);
    TG_CLI_EXPECT(tmpdir, args, 0, "[batch, Addlogits_dim_1, 256] (built: [1, 16, 256])");
    TG_CHECK(strstr(tg_cli_output, "int64   [batch, 16]") != NULL);
    snprintf(args, sizeof args, "import %s --batch-size 3", seg);
    TG_CLI_EXPECT(tmpdir, args, 0,
                  "[batch, Resizelogits_dim_1, Resizelogits_dim_2, Resizelogits_dim_3] (built: "
                  "[3, 4, 32, 32])");
    tg_arena *a = tg_arena_create(1 << 16);
    snprintf(args, sizeof args, "import %s --json", lm);
    const tg_json *j = tg_cli_json(tmpdir, a, args, __FILE__, __LINE__);
    const tg_json *outs = j ? tg_json_get(j, "outputs") : NULL;
    const tg_json *o = outs ? tg_json_at(outs, 0) : NULL;
    const tg_json *names = o ? tg_json_get(o, "dim_names") : NULL;
    const tg_json *n1 = names ? tg_json_at(names, 1) : NULL;
    TG_CHECK(n1 && n1->type == TG_JSON_STRING && !strcmp(n1->string, "Addlogits_dim_1"));
    tg_arena_destroy(a);
    snprintf(args, sizeof args,
             "train --model %s --data text:/usr/share/common-licenses/GPL-3 --epochs 1 "
             "--train-limit 32 --test-limit 16 --batch-size 8",
             lm);
    TG_CLI_EXPECT(tmpdir, args, 0, "perplexity");
    snprintf(args, sizeof args,
             "train --model %s --data shapes --epochs 1 --train-limit 16 --test-limit 8 "
             "--batch-size 8",
             seg);
    TG_CLI_EXPECT(tmpdir, args, 0, "test mean IoU");
}

int main(void)
{
    if (!TG_MKDTEMP(tmpdir))
        return 1;
    TG_RUN(test_import_text_and_json);
    TG_RUN(test_import_errors_and_help);
    TG_RUN(test_model_option);
    TG_RUN(test_normalize);
    TG_RUN(test_symbolic_output_dims);
    tg_test_remove_dir(tmpdir);
    return tg_test_finish();
}
