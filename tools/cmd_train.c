/* tools/cmd_train.c - `tilegraph train`: train a model from the zoo on
 * Fashion-MNIST (or MNIST) and report test accuracy and throughput. Its
 * flags: train_args.c; what it prints: train_print.c.
 *
 * The loop is the whole training step, top to bottom: load a batch, write it
 * to the device, run the compiled program (forward, backward, update), read
 * the loss and predictions back.
 */
#include "train_cmd.h"

#include "save_lock.h"
#include "save_rescue.h"

#include "tilegraph/checkpoint.h"
#include "tilegraph/dist.h"
#include "tilegraph/models.h"
#include "tilegraph/session.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Where the checkpoints went when --save's place could not take them
 * (save_rescue.h): one run per process. */
static save_rescue rescue = {"", 1.0};

typedef struct checkpoint_write {
    tg_session *s;
    const char *model;
    const char *const *kv;
    size_t n_pairs;
} checkpoint_write;

static tg_status write_checkpoint(const char *path, void *ctx)
{
    const checkpoint_write *w = ctx;
    return tg_checkpoint_save_meta(w->s, path, w->model, w->kv, w->n_pairs);
}

/* The checkpoint of --save, with the loader position for --resume. */
static tg_status save_checkpoint(const train_args *a, tg_session *s, const char *model,
                                 const train_pos *pos)
{
    char epoch[32], step[32], seed[32], per[32], seq_len[32];
    snprintf(epoch, sizeof epoch, "%lld", (long long)pos->epoch);
    snprintf(step, sizeof step, "%lld", (long long)pos->step);
    snprintf(seed, sizeof seed, "%lld", (long long)a->seed);
    snprintf(per, sizeof per, "%lld", (long long)pos->per_step);
    snprintf(seq_len, sizeof seq_len, "%d", a->seq_len);
    /* text_seq_len: the window the weights are built for (positions), which
     * infer takes as its --seq-len */
    const char *kv[] = {"train_epoch",
                        epoch,
                        "train_epoch_step",
                        step,
                        "train_seed",
                        seed,
                        "train_samples_per_step",
                        per,
                        TRAIN_CONFIG_KEY,
                        a->config,
                        "text_tokens",
                        a->vocab,
                        "text_hash",
                        a->text_hash,
                        "text_seq_len",
                        seq_len};
    /* in an MPI job every instance holds the same weights (checked here, on
     * all of them) and instance 0 writes them */
    CLI_TRY(tg_dist_sync(s));
    if (tg_dist_instance() != 0)
        return TG_OK;
    checkpoint_write w = {s, model, kv, a->vocab ? 8 : 5};
    return save_rescue_write_to(&rescue, "train", a->save, write_checkpoint, &w);
}

/* A host step's loss sum and accuracy counts, and whether this instance
 * was asked to stop, summed over the instances of an MPI job so that the
 * progress and the epoch's figures are the job's, as one process of R
 * replicas reports. The sum travels while the next host step runs
 * (tg_dist_sum_f64_start): that step meets the other instances in its
 * gradient exchange anyway, and a blocking sum would make them meet twice
 * a step (docs/distributed.md, "Measuring"). The figures and the stop
 * agreement come a host step later; in one process, at once. */
enum { STEP_TOTALS = 6 };
typedef struct job_totals {
    /* loss sum, losses, correct, scored, instances signalled, their signals' sum */
    double v[STEP_TOTALS];
    bool pending; /* v is being summed */
} job_totals;

/* The step's totals, once summed: into the epoch's figures and, when any
 * instance was asked to stop, the signal every instance stops on (its own,
 * else the one the others got: mpirun sends them all the same). */
static tg_status totals_finish(job_totals *t, epoch_stats *st, train_pos *pos)
{
    if (!t->pending)
        return TG_OK;
    double t0 = cli_now();
    CLI_TRY(tg_dist_sum_f64_finish());
    st->exchange.step_totals += cli_now() - t0;
    t->pending = false;
    st->loss_sum += t->v[0];
    st->losses += (int64_t)t->v[1];
    st->correct += (int64_t)t->v[2];
    st->scored += (int64_t)t->v[3];
    int sig = cli_stop_signal();
    if (t->v[4] > 0)
        pos->job_signal = sig ? sig : (int)(t->v[5] / t->v[4] + 0.5);
    return TG_OK;
}

/* After a host step: the last step's totals finished, this one's started. */
static tg_status totals_next(job_totals *t, const step_buffers *b, epoch_stats *st, train_pos *pos)
{
    CLI_TRY(totals_finish(t, st, pos));
    int sig = cli_stop_signal();
    double v[STEP_TOTALS] = {b->loss_sum,       (double)b->losses_count, (double)b->correct,
                             (double)b->scored, sig ? 1.0 : 0.0,         (double)sig};
    memcpy(t->v, v, sizeof v);
    t->pending = true;
    if (!tg_dist_active())
        return totals_finish(t, st, pos);
    double t0 = cli_now();
    CLI_TRY(tg_dist_sum_f64_start(t->v, STEP_TOTALS));
    st->exchange.step_totals += cli_now() - t0;
    return TG_OK;
}

/* Stop here? A signal, or --max-steps reached. */
static bool should_stop(const train_args *a, train_pos *pos)
{
    /* in an MPI job only the signal the instances agreed on (job_totals): a
     * signal seen by one alone stops nobody yet */
    int sig = tg_dist_active() ? pos->job_signal : cli_stop_signal();
    if (sig) {
        pos->stop = sig;
        cli_stop_agreed(sig);
    } else if (a->max_steps && pos->done >= a->max_steps)
        pos->stop = -1;
    return pos->stop != 0;
}

/* The training loop's series for the profile (one row each per host step;
 * nothing when no profile is written): the step's samples (this instance's;
 * `analyse instances` divides them by the traced host step), samples/s of
 * this step as the host timed it (loading excluded), its mean
 * loss (in an MPI job, of this instance's replicas), and the loader's queue
 * depth after it. */
static void record_counters(tg_session *s, tg_loader *loader, const step_buffers *b, int64_t count,
                            double seconds)
{
    tg_session_record_counter(s, "samples", (double)count);
    tg_session_record_counter(s, "samples/s", seconds > 0 ? (double)count / seconds : NAN);
    tg_session_record_counter(s, "loss",
                              b->losses_count ? b->loss_sum / (double)b->losses_count : NAN);
    tg_session_record_counter(s, "loader queue depth", (double)tg_loader_queue_depth(loader));
}

/* The progress line's figures so far. */
static void format_status(const epoch_stats *st, double seconds, char *status, size_t cap)
{
    char acc[24] = "n/a";
    if (st->scored)
        snprintf(acc, sizeof acc, "%5.2f%%", 100.0 * (double)st->correct / (double)st->scored);
    snprintf(status, cap, "loss %.4f | acc %s | %.0f samples/s",
             st->loss_sum / (double)(st->losses ? st->losses : 1), acc,
             (double)st->seen / (seconds > 0 ? seconds : 1e-9));
}

/* One epoch of training from host step pos->step; returns TG_OK or the
 * first failure. Stops early, at a host-step boundary, when should_stop. */
static tg_status train_epoch(const train_args *a, tg_session *s, const tg_model_graph *mg,
                             tg_loader *loader, train_pos *pos, step_buffers *b, epoch_stats *st)
{
    cli_progress bar;
    char label[32], status[160] = "";
    int64_t epoch = pos->epoch;
    snprintf(label, sizeof label, "epoch %lld/%lld", (long long)epoch + 1, (long long)a->epochs);
    memset(st, 0, sizeof *st);
    int64_t skipped_before = tg_session_skipped_updates(s);
    tg_loader_start_epoch(loader, epoch);
    int64_t steps = tg_loader_steps_per_epoch(loader);
    /* A resumed run skips the steps its checkpoint had done: the order of an
     * epoch depends on (seed, epoch) only, so this lands on the same samples. */
    for (int64_t k = 0; k < pos->step; k++) {
        int64_t count = 0;
        CLI_TRY(load_step(loader, b, &count));
    }
    CLI_TRY(train_exchange_begin(&st->exchange, s));
    cli_progress_start(&bar, label, steps, !a->quiet && !a->json);
    bar.done = pos->step; /* a resumed epoch starts where its checkpoint stopped */
    double t0 = cli_now();
    job_totals totals = {{0}, false};
    for (int64_t k = pos->step; k < steps && !should_stop(a, pos); k++) {
        int64_t count = 0;
        CLI_TRY(load_step(loader, b, &count));
        double step_t0 = cli_now();
        CLI_TRY(run_step(s, mg, b, count));
        CLI_TRY(totals_next(&totals, b, st, pos));
        record_counters(s, loader, b, count, cli_now() - step_t0);
        pos->step = k + 1;
        pos->done++;
        st->seen +=
            count * tg_dist_instances(); /* the job's samples: every instance took as many */
        st->steps++;
        format_status(st, cli_now() - t0, status, sizeof status);
        cli_progress_update(&bar, k + 1, status);
        if (a->every_steps && pos->done % a->every_steps == 0)
            CLI_TRY(save_checkpoint(a, s, pos->model, pos));
    }
    CLI_TRY(totals_finish(&totals, st, pos)); /* the last host step's */
    st->seconds = cli_now() - t0;
    format_status(st, st->seconds, status, sizeof status);
    CLI_TRY(train_exchange_end(&st->exchange, s, st->steps, st->seconds, &st->share));
    st->skipped = tg_session_skipped_updates(s) - skipped_before;
    st->loss_scale = tg_session_loss_scale(s);
    st->auto_stages = tg_session_auto_stages(s, NULL);
    cli_progress_finish(&bar, status);
    return TG_OK;
}

/* The text's tokens (training and held-out parts) hashed, FNV-1a 64, with
 * their count: "0123abcd0123abcd (31234 tokens)". Another text of the same
 * length and alphabet has the same vocabulary record but not this. */
static void text_hash(const train_context *ctx, char *out, size_t cap)
{
    uint64_t h = 0xcbf29ce484222325ull;
    int64_t total = 0;
    const tg_dataset *parts[2] = {ctx->train, ctx->test};
    for (int k = 0; k < 2; k++) {
        const int32_t *tokens = NULL;
        int64_t n = parts[k] ? tg_dataset_tokens(parts[k], &tokens) : 0;
        const unsigned char *b = (const unsigned char *)tokens;
        for (int64_t i = 0; tokens && i < n * (int64_t)sizeof *tokens; i++)
            h = (h ^ b[i]) * 0x100000001b3ull;
        total += n;
    }
    snprintf(out, cap, "%016llx (%lld tokens)", (unsigned long long)h, (long long)total);
}

/* --resume of a language model: its text must be this run's, or the
 * position it continues from means nothing (--load takes another text). */
static int check_text(const char *path, const char *hash)
{
    char had[64] = "";
    if (tg_checkpoint_read_meta(path, "text_hash", had, sizeof had) != TG_OK || !strcmp(had, hash))
        return 0; /* a checkpoint without the record (older, or the API's) is taken */
    fprintf(stderr,
            "tilegraph train: --resume %s continues a run on another text: its tokens hashed %s, "
            "this text's %s; give the text it was trained on, or --load it to train on this one "
            "from its weights\n",
            path, had, hash);
    return -1;
}

/* --resume: where the checkpoint's run stopped. Its seed and host-step size
 * must be this run's, or the data order would differ. */
static int resume_position(const train_args *a, int64_t per_step, int64_t steps_per_epoch,
                           train_pos *pos)
{
    const char *keys[] = {"train_epoch", "train_epoch_step", "train_seed",
                          "train_samples_per_step"};
    int64_t v[4];
    for (int i = 0; i < 4; i++) {
        char buf[32], *end = NULL;
        if (tg_checkpoint_read_meta(a->resume, keys[i], buf, sizeof buf) != TG_OK) {
            fprintf(stderr,
                    "tilegraph train: --resume: %s (only a checkpoint written by train "
                    "--save can be resumed; use --load to start from its weights)\n",
                    tg_error_message());
            return -1;
        }
        errno = 0;
        v[i] = strtoll(buf, &end, 10);
        if (errno || !*buf || *end || v[i] < 0) {
            fprintf(stderr,
                    "tilegraph train: --resume %s: metadata '%s' is '%s', not a "
                    "non-negative integer\n",
                    a->resume, keys[i], buf);
            return -1;
        }
    }
    if (v[2] != a->seed || v[3] != per_step) {
        fprintf(stderr,
                "tilegraph train: --resume %s: the run used --seed %lld and %lld samples "
                "per host step, this one --seed %lld and %lld; give the same --seed, "
                "--batch-size, --gradient-accumulation, --device-iterations and "
                "--replicas to continue it\n",
                a->resume, (long long)v[2], (long long)v[3], (long long)a->seed,
                (long long)per_step);
        return -1;
    }
    if (v[1] > steps_per_epoch) {
        fprintf(stderr,
                "tilegraph train: --resume %s: stopped at host step %lld of an epoch, "
                "but an epoch has %lld here: is --data or --train-limit different?\n",
                a->resume, (long long)v[1], (long long)steps_per_epoch);
        return -1;
    }
    pos->epoch = v[0];
    pos->step = v[1];
    /* --max-steps and --checkpoint-every N count the run's host steps in
     * all, as a Trainer's global step does: those before the resume too */
    pos->done = v[0] * steps_per_epoch + v[1];
    return 0;
}

/* Profiles are closed (and renamed into place) after the checkpoint is safe;
 * a profile failure is reported once and makes the exit code non-zero.
 * Returns a bit per profile that failed: 1 training, 2 inference. */
static int finish_profiles(tg_session *train, tg_session *eval)
{
    int failed = 0;
    tg_session *list[2] = {train, eval};
    for (int i = 0; i < 2; i++)
        if (tg_session_finish_profile(list[i]) != TG_OK) {
            fprintf(stderr,
                    "tilegraph train: %s (the profile was not written; the checkpoint "
                    "is not affected)\n",
                    tg_error_message());
            failed |= 1 << i;
        }
    return failed;
}

/* In an MPI job: instance 0 alone prints (the others' stdout goes nowhere;
 * their errors still reach stderr), and each instance profiles into its own
 * DIR/instance-K. */
static int join_as_instance(train_args *a, char *dir, size_t cap)
{
    if (!tg_dist_active())
        return 0;
    int k = tg_dist_instance();
    if (k > 0 && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "tilegraph train: instance %d: cannot silence stdout\n", k);
        return 1;
    }
    char b1[32], b2[32];
    const char *profile_dir = device_given(&a->dev, "autoReport.directory", b1, sizeof b1);
    if (profile_dir || device_given(&a->dev, "autoReport.all", b2, sizeof b2)) {
        snprintf(dir, cap, "%s/instance-%d", profile_dir ? profile_dir : "./profile", k);
        *device_text(&a->dev, "autoReport.directory") = dir;
    }
    return 0;
}

/* An MPI job's instance loads only its replicas' samples of each host step:
 * per device iteration, the chunk of its R/N replicas (docs/distributed.md). */
static void split_for_instance(tg_loader_config *lc, int64_t replicas, int64_t per_update)
{
    int N = tg_dist_instances();
    if (N < 2 || replicas % N)
        return; /* N not dividing R: the session refuses it, naming both */
    lc->split_parts = N;
    lc->split_index = tg_dist_instance();
    lc->split_chunk = per_update / N;
}

/* What a run holds from its start to its end (cmd_train frees it all). */
typedef struct train_run {
    train_context ctx;
    tg_optimizer opt;
    tg_options *o;
    tg_loader *loader;
    tg_model_graph mg;
    tg_session *s;
    step_buffers b;
    train_pos pos;
    int64_t steps_per_epoch;
    unsigned load_flags; /* tg_checkpoint_load_ex's, for --load and --resume */
    /* the epochs' results */
    eval_result test;
    double seconds;
    int64_t samples;
    bool saved;     /* --save holds the weights at pos */
    bool evaluated; /* test holds the weights' figures */
} train_run;

/* A language model's unit, sequence length and token record, from the data. */
static int text_task(train_args *a, train_run *r)
{
    tg_text_tokens kind = TG_TOKENS_BYTE;
    tg_dataset_vocab(r->ctx.test, &kind, NULL);
    a->unit = kind == TG_TOKENS_CHAR ? "char" : "byte";
    a->seq_len = r->ctx.input.seq_len;
    if (!(a->vocab = text_vocab_record(r->ctx.test))) {
        fprintf(stderr, "tilegraph train: out of memory\n");
        return -1;
    }
    text_hash(&r->ctx, a->text_hash, sizeof a->text_hash);
    return 0;
}

/* Everything the run needs before the graph: the options, the loader, the
 * position to resume at, the loop's shape (agreed by an MPI job's
 * instances), the optimizer and the configuration a checkpoint records. */
static int run_plan(train_args *a, train_run *r)
{
    r->o = device_options(&a->dev, "train", false);
    if (!r->o || train_apply_options(a, r->o) != 0)
        return -1;
    /* a host step's samples, as the session will take them: the loader and
     * the learning rate schedule (which counts weight updates) need them
     * before the session exists */
    tg_options_summary sum;
    if (tg_options_summarize(r->o, a->batch, &sum) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        return -1;
    }
    int64_t per_update = sum.samples_per_update, per_step = sum.samples_per_step;
    r->pos.per_step = per_step;
    tg_loader_config lc;
    tg_status ls = loader_config(&r->ctx, r->ctx.train, per_step, true, &lc);
    lc.seed = (uint64_t)a->seed;
    split_for_instance(&lc, sum.replicas, per_update);
    if (ls == TG_OK)
        ls = tg_loader_create(r->ctx.train, &lc, &r->loader);
    if (ls != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        return -1;
    }
    r->steps_per_epoch = tg_loader_steps_per_epoch(r->loader);
    if (a->resume && resume_position(a, per_step, r->steps_per_epoch, &r->pos) != 0)
        return -1;
    const train_context *ctx = &r->ctx;
    train_loop_shape shape = {a->epochs,
                              a->max_steps,
                              a->every_steps,
                              a->every_epochs,
                              tg_dataset_describe(ctx->train).samples,
                              ctx->test ? tg_dataset_describe(ctx->test).samples : 0,
                              r->steps_per_epoch,
                              per_step,
                              a->batch,
                              a->eval_batch,
                              a->seed,
                              r->pos.epoch,
                              r->pos.step,
                              ctx->model->name,
                              tg_dataset_describe(ctx->train).name,
                              ctx->test ? tg_dataset_describe(ctx->test).name : "",
                              a->opt.optimizer,
                              a->opt.schedule,
                              a->opt.lr,
                              a->opt.momentum,
                              a->opt.weight_decay,
                              a->opt.gamma,
                              a->opt.min_lr,
                              a->opt.warmup_epochs,
                              a->opt.max_grad_norm,
                              a->opt.step_epochs,
                              a->opt.nesterov,
                              a->opt.no_bias_correction,
                              a->save != NULL};
    if (train_agree_loop(&shape) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        return -1;
    }
    int64_t updates_per_epoch = r->steps_per_epoch * per_step / per_update;
    if (optim_make(&a->opt, "train", a->epochs, updates_per_epoch, &r->opt) != 0)
        return -1;
    train_config_text(&r->opt, &sum, a->epochs, a->opt.warmup_epochs, a->opt.step_epochs, a->config,
                      sizeof a->config);
    /* a run with nothing left to train only evaluates: its flags do not matter */
    r->load_flags = a->allow_non_finite ? TG_CHECKPOINT_ALLOW_NON_FINITE : 0;
    if (a->resume && r->pos.epoch < a->epochs &&
        train_config_check_resume(a->resume, a->config, a->resume_weights_only, &r->load_flags) !=
            0)
        return -1;
    return 0;
}

/* The training and evaluation programs compiled, the starting weights
 * loaded, the step's buffers made; the setup printed. */
static int run_compile(const train_args *a, train_run *r)
{
    double compile_start = cli_now();
    if (tg_model_graph_create_ex(r->ctx.model, (int)a->batch, &r->opt, &r->ctx.input, &r->mg) !=
            TG_OK ||
        tg_session_create(r->mg.graph, r->o, &r->s) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        return -1;
    }
    /* PopTorch's line, so a user sees that and how long the graph compiled
     * (the graph, its passes and the plans: all before the first step) */
    if (!a->json) {
        char t[32];
        printf("Graph compilation: 100%% (%s)\n",
               cli_duration(cli_now() - compile_start, t, sizeof t));
    }
    /* The evaluation program is compiled now, not after the first epoch:
     * one that cannot fit fails before any training (docs/reliability.md). */
    tg_status es = evaluate_prepare(&r->ctx, &a->dev, a->eval_batch);
    if (es != TG_OK) {
        /* the memory hint only where memory was what failed */
        fprintf(stderr, "tilegraph train: evaluation: %s (nothing was trained%s)\n",
                tg_error_message(),
                es == TG_ERR_CAPACITY || es == TG_ERR_NOMEM
                    ? "; a smaller --eval-batch-size needs less memory"
                    : "");
        return -1;
    }
    const char *start = a->resume ? a->resume : a->load;
    if (start && a->vocab && text_vocab_check(start, a->vocab, "train") != 0)
        return -1;
    if (a->resume && a->vocab && check_text(a->resume, a->text_hash) != 0)
        return -1;
    if (start && tg_checkpoint_load_ex(r->s, start, r->ctx.model->name, r->load_flags) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        return -1;
    }
    if (step_buffers_init(&r->b, r->s, &r->mg) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        return -1;
    }
    if (!a->json) {
        print_setup(&r->ctx, r->s, a->batch, r->steps_per_epoch);
        char num[32];
        const char *threads = device_given(&a->dev, "threadsPerDevice", num, sizeof num);
        if (!threads || strtoll(threads, NULL, 10) <= 0) /* docs/multi-device.md, Threads */
            printf("threads: %d per device, the default from the cores this process may use "
                   "(--threads N fixes it)\n",
                   tg_session_threads(r->s));
        fflush(stdout); /* before the progress lines on stderr */
    }
    return 0;
}

/* The epochs from r->pos on, each trained, saved when due and evaluated,
 * until --epochs or a stop; then --save and, for a run that trained
 * nothing, the evaluation of the weights it loaded. */
static int run_epochs(const train_args *a, train_run *r)
{
    train_pos *pos = &r->pos;
    const char *model = r->ctx.model->name;
    if (pos->epoch >= a->epochs)
        train_say_nothing_left(a, pos);
    for (; pos->epoch < a->epochs && !pos->stop; pos->epoch++, pos->step = 0) {
        epoch_stats st;
        r->saved = false;
        tg_status ts = train_epoch(a, r->s, &r->mg, r->loader, pos, &r->b, &st);
        if (ts == TG_OK && pos->step < r->steps_per_epoch)
            break;       /* stopped inside the epoch: the position stays there */
        if (ts == TG_OK) /* an MPI job's instances end each epoch with the same weights */
            ts = tg_dist_check_weights(r->s);
        if (ts != TG_OK) {
            train_explain_failure(a, ts);
            return -1;
        }
        /* The weights the epoch trained are written before its evaluation,
         * which can fail: the final --save after the last epoch, the
         * --checkpoint-every Ne ones after theirs. */
        train_pos next = *pos;
        next.epoch++, next.step = 0;
        if (a->save &&
            (next.epoch >= a->epochs || (a->every_epochs && next.epoch % a->every_epochs == 0))) {
            if (save_checkpoint(a, r->s, model, &next) != TG_OK) {
                fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
                return -1;
            }
            r->saved = true;
        }
        ts = evaluate(&r->ctx, r->s, &a->dev, a->eval_batch, !a->quiet && !a->json, &r->test);
        if (ts != TG_OK) {
            train_explain_failure(a, ts);
            if (r->saved)
                fprintf(stderr,
                        "tilegraph train: the weights of epoch %lld were saved to %s before "
                        "the evaluation failed\n",
                        (long long)next.epoch, a->save);
            return -1;
        }
        r->evaluated = true;
        r->seconds += st.seconds;
        r->samples += st.seen;
        train_print_epoch(a, pos->epoch, &st, &r->test);
        if (!pos->stop)
            should_stop(a, pos);
    }
    if (pos->stop && pos->step >= r->steps_per_epoch)
        pos->epoch++, pos->step = 0; /* stopped at an epoch's end: resume at the next */
    if (a->save && !r->saved && save_checkpoint(a, r->s, model, pos) != TG_OK) {
        fprintf(stderr, "tilegraph train: %s\n", tg_error_message());
        return -1;
    }
    /* a resumed run that had nothing left to train reports the weights it
     * loaded, not an accuracy it never measured */
    if (!r->evaluated && !pos->stop) {
        tg_status es =
            evaluate(&r->ctx, r->s, &a->dev, a->eval_batch, !a->quiet && !a->json, &r->test);
        if (es != TG_OK) {
            train_explain_failure(a, es);
            return -1;
        }
        if (a->json)
            train_print_resumed_json(a, pos, &r->test);
    }
    return 0;
}

/* The profiles closed and the run's end reported; the exit code. */
static int run_finish(const train_args *a, train_run *r, const char *job_profile_dir)
{
    const train_pos *pos = &r->pos;
    int profile_failed = finish_profiles(r->s, r->ctx.eval_session);
    if (pos->stop) {
        if (tg_dist_instance() == 0) /* every instance of a job stopped at this step */
            fprintf(stderr, "tilegraph train: stopped %s at epoch %lld, host step %lld%s%s\n",
                    pos->stop > 0 ? "by a signal" : "by --max-steps", (long long)pos->epoch + 1,
                    (long long)pos->step, a->save ? "; continue with --resume " : "",
                    a->save ? a->save : "");
        return pos->stop > 0 ? cli_signal_exit_code(pos->stop) : profile_failed != 0;
    }
    if (!a->json) {
        train_print_profiles(a, job_profile_dir, profile_failed);
        train_print_result(a, &r->test, r->samples, r->seconds);
    }
    return profile_failed != 0;
}

int cmd_train(int argc, char **argv)
{
    train_args a;
    int r = train_parse_args(&a, argc, argv);
    if (r)
        return r > 0 ? 0 : 2;
    if (train_check_args(&a) != 0)
        return 2;
    char instance_dir[1024];
    char num[32];
    const char *given_dir = device_given(&a.dev, "autoReport.directory", num, sizeof num);
    const char *job_profile_dir = given_dir ? given_dir : "./profile";
    if (join_as_instance(&a, instance_dir, sizeof instance_dir) != 0)
        return 1;
    if (train_probe_outputs(&a) != 0 || train_probe_inputs(&a) != 0)
        return 1;
    /* instance 0 of an MPI job writes the checkpoint, so it alone locks it */
    save_lock lock = {-1, ""};
    if (a.save && tg_dist_instance() == 0 && save_lock_take(&lock, "train", a.save) != 0)
        return 1;
    cli_stop_at_step_boundaries();
    const char *target = a.save;
    train_run run = {0};
    run.test = (eval_result){0, NAN, 0, NAN, 0, {0}, {0}};
    if (train_context_open(&run.ctx, a.model, &a.data, a.train_limit, a.test_limit) != 0) {
        save_lock_release(&lock);
        return 1;
    }
    run.pos.model = run.ctx.model->name;
    train_task_defaults(&a, run.ctx.text);
    int status = 1;
    if ((!run.ctx.text || text_task(&a, &run) == 0) && run_plan(&a, &run) == 0 &&
        run_compile(&a, &run) == 0 && run_epochs(&a, &run) == 0) {
        if (rescue.where[0]) /* what the run reports ("saved:", --resume) is where it went */
            a.save = rescue.where;
        status = run_finish(&a, &run, job_profile_dir);
    }
    if (rescue.where[0]) { /* the weights are safe, but not where they were asked for */
        fprintf(stderr, "tilegraph train: the checkpoint is at %s, not %s\n", rescue.where, target);
        status = status ? status : 1;
    }
    step_buffers_free(&run.b);
    tg_session_destroy(run.s);
    tg_model_graph_destroy(&run.mg);
    tg_loader_destroy(run.loader);
    tg_options_destroy(run.o);
    train_context_close(&run.ctx);
    free(a.vocab);
    save_lock_release(&lock);
    return status;
}
