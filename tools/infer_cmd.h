/* tools/infer_cmd.h - the parts of `tilegraph infer`: its flags and the
 * classification of test images (cmd_infer.c), throughput and latency
 * (infer_bench.c), and a language model's scoring and generation
 * (infer_text.c). Only these files include it. */
#ifndef TG_TOOLS_INFER_CMD_H
#define TG_TOOLS_INFER_CMD_H

#include "cli.h"
#include "device_flags.h"
#include "train_util.h"

typedef struct infer_args {
    const char *model, *load, *prompt;
    device_args dev;
    data_args data;
    int64_t index, count, batch, iterations, warmup, test_limit, generate, top_k;
    double temperature;
    bool json, allow_non_finite;
    bool index_given, batch_given, iterations_given; /* which mode: see cmd_infer */
    bool data_given, loader_given;                   /* --data or --dataset; --loader */
} infer_args;

/* The seed of --seed (randomSeed), 0 when not given. */
uint64_t infer_seed(const infer_args *a);

/* The options of an inference session: the device flags, --device-iterations
 * as the inference program's deviceIterations, --executable (which the
 * device flags give a training program only). NULL after printing why. */
tg_options *infer_options(const infer_args *a);

/* Load --load into s, or say nothing (the model's initialisation); 0 or -1 (printed). */
int infer_load(const infer_args *a, tg_session *s, const tg_model_spec *m);

/* Where the weights come from, for the output: the --load file, an ONNX
 * file's own initializers, or the zoo model's initialisation by --seed;
 * and its JSON value: "load", "onnx" or "init". Returns buf. */
const char *infer_weights(const infer_args *a, const tg_model_spec *m, char *buf, size_t cap);
const char *infer_weights_kind(const infer_args *a, const tg_model_spec *m);

/* Throughput and latency (--iterations, --batch-size, or no --load): the exit code. */
int infer_bench(const infer_args *a);

/* A language model on --data text:FILE: the held-out bits per token, as
 * training's evaluation computes them; the exit code. */
int infer_score(const infer_args *a);

/* --generate N: a causal language model continues --prompt; the exit code. */
int infer_generate(const infer_args *a);

#endif
