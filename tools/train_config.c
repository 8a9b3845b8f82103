/* tools/train_config.c - the training configuration of a checkpoint
 * (train_config.h). */
#include "train_config.h"

#include "tilegraph/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One "flag=value;" appended. */
static void add(char *buf, size_t cap, const char *flag, const char *value)
{
    size_t used = strlen(buf);
    if (used < cap)
        snprintf(buf + used, cap - used, "%s=%s;", flag, value);
}

/* The shortest text that reads back as the same float (0.05, not
 * 0.0500000007): 9 digits always do. */
static void add_num(char *buf, size_t cap, const char *flag, double v)
{
    char t[40];
    for (int digits = 1; digits <= 9; digits++) {
        snprintf(t, sizeof t, "%.*g", digits, v);
        if ((float)strtod(t, NULL) == (float)v)
            break;
    }
    add(buf, cap, flag, t);
}

void train_config_text(const tg_optimizer *opt, const tg_options_summary *sum, int64_t epochs,
                       double warmup_epochs, int64_t step_epochs, char *buf, size_t cap)
{
    buf[0] = '\0';
    add(buf, cap, "--optimizer", tg_optimizer_name(opt->kind));
    add_num(buf, cap, "--lr", opt->lr.lr);
    if (opt->kind == TG_OPT_SGD) {
        add_num(buf, cap, "--momentum", opt->momentum);
        add(buf, cap, "--nesterov", opt->nesterov ? "yes" : "no");
    } else {
        add(buf, cap, "--no-bias-correction", opt->bias_correction ? "no" : "yes");
    }
    add_num(buf, cap, "--weight-decay", opt->weight_decay);
    add_num(buf, cap, "--max-grad-norm", opt->max_grad_norm);
    const char *kind = opt->lr.kind == TG_LR_STEP     ? "step"
                       : opt->lr.kind == TG_LR_COSINE ? "cosine"
                                                      : "constant";
    add(buf, cap, "--lr-schedule", kind);
    if (opt->lr.kind == TG_LR_STEP) {
        add_num(buf, cap, "--lr-step-epochs", (double)step_epochs);
        add_num(buf, cap, "--lr-gamma", opt->lr.gamma);
    } else if (opt->lr.kind == TG_LR_COSINE) {
        add_num(buf, cap, "--lr-min", opt->lr.min_lr);
        add_num(buf, cap, "--epochs", (double)epochs);
    }
    add_num(buf, cap, "--lr-warmup-epochs", warmup_epochs);
    add(buf, cap, "--precision", sum->precision);
    add(buf, cap, "--loss-scaling", sum->loss_scaling);
    if (strcmp(sum->loss_scaling, "none"))
        add_num(buf, cap, "--loss-scale", sum->loss_scale);
    add(buf, cap, "--accum-type", sum->accum_type);
    add(buf, cap, "--first-moment-type", sum->first_moment_type);
    add(buf, cap, "--second-moment-type", sum->second_moment_type);
    add(buf, cap, "--stochastic-rounding",
        sum->stochastic_rounding < 0 ? "auto"
        : sum->stochastic_rounding   ? "on"
                                     : "off");
}

/* The value of `flag` in a configuration text, into v; false when absent. */
static bool lookup(const char *text, const char *flag, char *v, size_t cap)
{
    size_t n = strlen(flag);
    for (const char *p = text; p && *p;) {
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > n && !strncmp(p, flag, n) && p[n] == '=') {
            snprintf(v, cap, "%.*s", (int)(len - n - 1), p + n + 1);
            return true;
        }
        p = end ? end + 1 : NULL;
    }
    return false;
}

int train_config_diff(const char *had, const char *now, char *diff, size_t cap)
{
    int n = 0;
    diff[0] = '\0';
    /* the entries both record: one that applies to one side only (SGD's
     * momentum, a step schedule's gamma) follows from an entry both have
     * (--optimizer, --lr-schedule), whose difference says it */
    for (const char *p = had; p && *p;) {
        const char *end = strchr(p, ';'), *eq = strchr(p, '=');
        if (!eq || (end && eq > end))
            break;
        char flag[64], a[128] = "", b[128] = "";
        snprintf(flag, sizeof flag, "%.*s", (int)(eq - p), p);
        if (lookup(had, flag, a, sizeof a) && lookup(now, flag, b, sizeof b) && strcmp(a, b)) {
            size_t used = strlen(diff);
            snprintf(diff + used, cap > used ? cap - used : 0, "%s%s %s there, %s here",
                     n ? "; " : "", flag, a, b);
            n++;
        }
        p = end ? end + 1 : NULL;
    }
    return n;
}

/* --resume: the checkpoint's training configuration must be this run's, or
 * the run would not be the one it continues (another optimizer starts from
 * zero moments at the checkpoint's step, with the wrong bias correction).
 * --resume-weights-only accepts another one, saying what differs; a
 * checkpoint from before the configuration was recorded is taken as
 * before, with a note. Sets *flags for the load. */
int train_config_check_resume(const char *path, const char *config, bool weights_only,
                              unsigned *flags)
{
    char had[TRAIN_CONFIG_CAP], diff[2048];
    if (tg_checkpoint_read_meta(path, TRAIN_CONFIG_KEY, had, sizeof had) != TG_OK) {
        fprintf(stderr,
                "tilegraph train: note: --resume %s: the checkpoint records no training "
                "configuration (written before tilegraph recorded it): its optimizer, schedule "
                "and precision are assumed to be this run's, unchecked\n",
                path);
        return 0;
    }
    int n = train_config_diff(had, config, diff, sizeof diff);
    if (n == 0)
        return 0;
    if (!weights_only) {
        fprintf(stderr,
                "tilegraph train: --resume %s: the run was trained with another "
                "configuration: %s. Give the run's flags to continue it, or "
                "--resume-weights-only to continue from its weights and position with a fresh "
                "optimizer\n",
                path, diff);
        return -1;
    }
    fprintf(stderr,
            "tilegraph train: --resume-weights-only: %s: %s; its optimizer state and update "
            "count are not loaded (the optimizer starts afresh)\n",
            path, diff);
    *flags |= TG_CHECKPOINT_WEIGHTS_ONLY;
    return 0;
}
