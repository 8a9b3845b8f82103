/* tools/train_util.c - model and data set-up, evaluation, shared by train and infer. */
#include "train_util.h"

#include "cli.h"

#include "core/alloc.h"
#include "core/error.h"
#include "data/loader.h"

#include <string.h>
#include <unistd.h>

int train_context_open(train_context *ctx, const char *model, const char *dataset,
                       const char *dir, int64_t train_limit, int64_t test_limit)
{
    memset(ctx, 0, sizeof *ctx);
    ctx->model = tg_model_find(model);
    if (!ctx->model) {
        fprintf(stderr, "tilegraph: %s\n", tg_error_message());
        return -1;
    }
    int kind = tg_dataset_kind_parse(dataset);
    if (kind < 0) {
        fprintf(stderr, "tilegraph: unknown dataset '%s' (fashion-mnist or mnist)\n", dataset);
        return -1;
    }
    if ((train_limit >= 0 &&
         tg_dataset_load(kind, dir, TG_SPLIT_TRAIN, train_limit, &ctx->train) != TG_OK) ||
        tg_dataset_load(kind, dir, TG_SPLIT_TEST, test_limit, &ctx->test) != TG_OK) {
        fprintf(stderr, "tilegraph: %s\n", tg_error_message());
        train_context_close(ctx);
        return -1;
    }
    const tg_dataset *d = ctx->test;
    if (d->c != ctx->model->channels || d->h != ctx->model->height || d->w != ctx->model->width) {
        fprintf(stderr, "tilegraph: model %s takes %dx%dx%d images but %s has %dx%dx%d\n",
                ctx->model->name, ctx->model->channels, ctx->model->height, ctx->model->width,
                d->name, d->c, d->h, d->w);
        train_context_close(ctx);
        return -1;
    }
    return 0;
}

void train_context_close(train_context *ctx)
{
    tg_session_destroy(ctx->eval_session);
    tg_model_graph_destroy(&ctx->eval_graph);
    tg_dataset_destroy(ctx->train);
    tg_dataset_destroy(ctx->test);
    memset(ctx, 0, sizeof *ctx);
}

tg_status train_session_create(tg_graph *g, int64_t seed, int64_t threads, tg_session **out)
{
    tg_options *o = tg_options_create();
    if (!o)
        return tg_error(TG_ERR_NOMEM, "out of memory");
    tg_status s = tg_options_set_int(o, "randomSeed", seed);
    if (s == TG_OK)
        s = tg_options_set_int(o, "threadsPerDevice", threads);
    if (s == TG_OK)
        s = tg_session_create(g, o, out);
    tg_options_destroy(o);
    return s;
}

int tg_argmax(const float *v, int n)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return best;
}

int64_t tg_count_correct(const float *scores, const int32_t *labels, int64_t n, int classes)
{
    int64_t correct = 0;
    for (int64_t i = 0; i < n; i++)
        correct += tg_argmax(scores + i * classes, classes) == labels[i];
    return correct;
}

static tg_status eval_session(train_context *ctx, int64_t batch, int64_t threads)
{
    if (ctx->eval_session && ctx->eval_batch == batch)
        return TG_OK;
    tg_session_destroy(ctx->eval_session);
    tg_model_graph_destroy(&ctx->eval_graph);
    ctx->eval_session = NULL;
    ctx->eval_batch = batch;
    TG_TRY(tg_model_graph_create(ctx->model, (int)batch, NULL, &ctx->eval_graph));
    return train_session_create(ctx->eval_graph.graph, 0, threads, &ctx->eval_session);
}

tg_status evaluate(train_context *ctx, const tg_session *trained, int64_t batch, int64_t threads,
                   bool progress, double *accuracy)
{
    if (batch > ctx->test->n)
        batch = ctx->test->n;
    TG_TRY(eval_session(ctx, batch, threads));
    tg_session *s = ctx->eval_session;
    TG_TRY(tg_session_copy_weights(s, trained));
    tg_loader_config lc = tg_loader_defaults(ctx->test, batch);
    lc.shuffle = false;
    lc.drop_last = false;
    lc.mean = ctx->model->mean;
    lc.std = ctx->model->std;
    tg_loader *loader = NULL;
    TG_TRY(tg_loader_create(ctx->test, &lc, &loader));
    int classes = ctx->model->classes;
    int64_t sample = tg_loader_sample_size(loader);
    float *images = tg_calloc((size_t)(batch * sample), sizeof(float));
    float *scores = tg_malloc((size_t)(batch * classes) * sizeof(float));
    int32_t *labels = tg_malloc((size_t)batch * sizeof(int32_t));
    tg_status st = images && scores && labels ? TG_OK : tg_error(TG_ERR_NOMEM, "out of memory");
    int64_t correct = 0, seen = 0, steps = tg_loader_steps_per_epoch(loader);
    cli_progress bar;
    cli_progress_start(&bar, "evaluate", steps, progress && isatty(STDERR_FILENO));
    for (int64_t k = 0; st == TG_OK && k < steps; k++) {
        int64_t count = 0;
        st = tg_loader_next(loader, images, labels, &count);
        /* a short final batch runs padded; only its real samples count */
        if (st == TG_OK)
            st = tg_session_write(s, ctx->eval_graph.images, images,
                                  (size_t)(batch * sample) * sizeof(float));
        if (st == TG_OK)
            st = tg_session_run(s);
        if (st == TG_OK)
            st = tg_session_read(s, ctx->eval_graph.output, scores,
                                 (size_t)(batch * classes) * sizeof(float));
        if (st == TG_OK) {
            correct += tg_count_correct(scores, labels, count, classes);
            seen += count;
        }
        cli_progress_update(&bar, k + 1, NULL);
    }
    if (progress && st == TG_OK) {
        /* the epoch line that follows says the result; clear the bar */
        if (bar.tty)
            fprintf(stderr, "\r\033[K");
    }
    *accuracy = seen ? 100.0 * (double)correct / (double)seen : 0.0;
    tg_free(images);
    tg_free(scores);
    tg_free(labels);
    tg_loader_destroy(loader);
    return st;
}

void print_setup(const train_context *ctx, const tg_session *s, int64_t batch,
                 int64_t steps_per_epoch)
{
    char arena[32];
    printf("model %s: %s\n", ctx->model->name, ctx->model->description);
    printf("data: %s (%lld samples), %s (%lld samples)\n", ctx->train->name,
           (long long)ctx->train->n, ctx->test->name, (long long)ctx->test->n);
    printf("batch %lld, %lld steps per epoch, %d thread%s, device memory %s, %.2f MFLOP per step\n",
           (long long)batch, (long long)steps_per_epoch, tg_session_threads(s),
           tg_session_threads(s) == 1 ? "" : "s",
           cli_bytes((double)tg_session_arena_bytes(s), arena, sizeof arena),
           tg_session_flops(s) / 1e6);
    fflush(stdout);
}
