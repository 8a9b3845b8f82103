/* tools/args.c - table-driven command-line flags with generated --help.
 *
 * Every subcommand describes its flags in one table; parsing, range checks,
 * error messages and --help come from it, so they cannot disagree.
 * Accepts "--flag value" and "--flag=value"; booleans take no value.
 */
#include "cli.h"

#include "tilegraph/devices.h"
#include "tilegraph/options.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The default of a flag from its value; NULL for none (booleans, lists,
 * and a negative or NULL value, which means "not set"). */
static const char *default_text(const cli_flag *f, char *buf, size_t cap)
{
    switch (f->type) {
    case CLI_INT:
        if (*(int64_t *)f->value < 0)
            return NULL;
        snprintf(buf, cap, "%lld", (long long)*(int64_t *)f->value);
        return buf;
    case CLI_FLOAT:
        if (*(double *)f->value < 0)
            return NULL;
        snprintf(buf, cap, "%g", *(double *)f->value);
        return buf;
    case CLI_STRING:
        return *(const char **)f->value;
    case CLI_BOOL:
    case CLI_LIST:
        break;
    }
    return NULL;
}

bool cli_flag_training_only(const cli_flag *f)
{
    return f->help && strncmp(f->help, CLI_TRAINING, strlen(CLI_TRAINING)) == 0;
}

/* The help; with `inference`, of the flags an inference program reads. */
static void print_help(const cli_command *cmd, FILE *out, bool inference)
{
    fprintf(out, "%s\n\nusage: %s\n\noptions:\n", cmd->summary, cmd->usage);
    int width = 0;
    for (int i = 0; i < cmd->n_flags; i++) {
        if (inference && cli_flag_training_only(&cmd->flags[i]))
            continue;
        int w = (int)strlen(cmd->flags[i].name) +
                (cmd->flags[i].arg ? (int)strlen(cmd->flags[i].arg) + 1 : 0);
        if (w > width)
            width = w;
    }
    for (int i = 0; i < cmd->n_flags; i++) {
        const cli_flag *f = &cmd->flags[i];
        if (inference && cli_flag_training_only(f))
            continue;
        char left[96];
        snprintf(left, sizeof left, "%s%s%s", f->name, f->arg ? " " : "", f->arg ? f->arg : "");
        fprintf(out, "  %-*s  %s", width, left, f->help);
        char value[64];
        const char *def = f->def ? f->def : default_text(f, value, sizeof value);
        if (def)
            fprintf(out, " (default %s)", def);
        fputc('\n', out);
    }
    fprintf(out, "  %-*s  %s\n", width, "--help", "show this help");
    if (cmd->details)
        fprintf(out, "\n%s\n", cmd->details);
}

void cli_print_help(const cli_command *cmd, FILE *out)
{
    print_help(cmd, out, false);
}

static int set_value(const cli_command *cmd, const cli_flag *f, const char *v)
{
    char *end = NULL;
    errno = 0;
    switch (f->type) {
    case CLI_INT: {
        long long x = strtoll(v, &end, 10);
        if (!*v || *end || errno) {
            fprintf(stderr, "tilegraph %s: %s expects an integer, not '%s'\n", cmd->name, f->name,
                    v);
            return -1;
        }
        if (f->min <= f->max && ((double)x < f->min || (double)x > f->max)) {
            fprintf(stderr, "tilegraph %s: %s must be between %.0f and %.0f, not %lld\n", cmd->name,
                    f->name, f->min, f->max, x);
            return -1;
        }
        *(int64_t *)f->value = x;
        return 0;
    }
    case CLI_FLOAT: {
        double x = strtod(v, &end);
        if (!*v || *end || errno || !isfinite(x)) {
            fprintf(stderr, "tilegraph %s: %s expects a number, not '%s'\n", cmd->name, f->name, v);
            return -1;
        }
        if (f->min <= f->max && (x < f->min || x > f->max)) {
            fprintf(stderr, "tilegraph %s: %s must be between %g and %g, not %g\n", cmd->name,
                    f->name, f->min, f->max, x);
            return -1;
        }
        *(double *)f->value = x;
        return 0;
    }
    case CLI_STRING:
        *(const char **)f->value = v;
        return 0;
    case CLI_BOOL:
        *(bool *)f->value = true;
        return 0;
    case CLI_LIST: {
        char *list = f->value;
        size_t used = strlen(list), need = used + (used ? 1 : 0) + strlen(v);
        if (need >= CLI_LIST_CAP) {
            fprintf(stderr,
                    "tilegraph %s: %s: the values given add up to more than %d characters\n",
                    cmd->name, f->name, CLI_LIST_CAP - 1);
            return -1;
        }
        snprintf(list + used, CLI_LIST_CAP - used, "%s%s", used ? "," : "", v);
        return 0;
    }
    }
    return -1;
}

/* The flag a user most likely meant by a[0..n) (--epoch: --epochs), or
 * NULL: the one flag it is a prefix of or that is a prefix of it, else the
 * nearest by edit distance within a third of its length. */
static const char *nearest_flag(const cli_command *cmd, const char *a, size_t n)
{
    const char *prefix = NULL, *best = NULL;
    int prefixes = 0, best_d = (int)(n / 3 > 2 ? n / 3 : 2) + 1;
    for (int k = 0; k < cmd->n_flags; k++) {
        const char *name = cmd->flags[k].name;
        size_t m = strlen(name);
        if (n > 3 && m > 3 && strncmp(name, a, n < m ? n : m) == 0)
            prefix = name, prefixes++;
        int d = tg_options_name_distance(a, n, name);
        if (d < best_d)
            best_d = d, best = name;
    }
    return prefixes == 1 ? prefix : best;
}

static int parse(const cli_command *cmd, int argc, char **argv, bool inference)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            print_help(cmd, stdout, inference);
            return 1;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        const cli_flag *f = NULL;
        for (int k = 0; k < cmd->n_flags && !f; k++)
            if (strlen(cmd->flags[k].name) == len && strncmp(cmd->flags[k].name, a, len) == 0)
                f = &cmd->flags[k];
        if (!f) {
            const char *near = nearest_flag(cmd, a, len);
            fprintf(stderr, "tilegraph %s: unknown option '%.*s'%s%s%s (see tilegraph %s --help)\n",
                    cmd->name, (int)len, a, near ? " (did you mean " : "", near ? near : "",
                    near ? "?)" : "", cmd->name);
            return -1;
        }
        if (inference && cli_flag_training_only(f)) {
            fprintf(stderr,
                    "tilegraph %s: %s applies to training (an inference program has no weight "
                    "update, loss or optimizer): drop it\n",
                    cmd->name, f->name);
            return -1;
        }
        const char *v = NULL;
        if (f->type == CLI_BOOL) {
            if (eq) {
                fprintf(stderr, "tilegraph %s: %s takes no value\n", cmd->name, f->name);
                return -1;
            }
        } else if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            fprintf(stderr, "tilegraph %s: %s needs a value (%s)\n", cmd->name, f->name,
                    f->arg ? f->arg : "value");
            return -1;
        }
        if (set_value(cmd, f, v ? v : "") != 0)
            return -1;
    }
    return 0;
}

int cli_parse(const cli_command *cmd, int argc, char **argv)
{
    return parse(cmd, argc, argv, false);
}

int cli_parse_inference(const cli_command *cmd, int argc, char **argv)
{
    return parse(cmd, argc, argv, true);
}

tg_optimizer cli_optimizer(int kind, float lr, float momentum)
{
    return kind == TG_OPT_SGD     ? tg_optimizer_sgd(lr, momentum)
           : kind == TG_OPT_ADAM  ? tg_optimizer_adam(lr)
           : kind == TG_OPT_ADAMW ? tg_optimizer_adamw(lr)
                                  : tg_optimizer_lamb(lr);
}

char *cli_target_help(char *buf, size_t cap)
{
    size_t used = 0;
    int n = tg_target_count();
    if (cap)
        buf[0] = '\0';
    for (int i = 0; i < n && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%s",
                                 i == 0       ? ""
                                 : i == n - 1 ? " or "
                                              : ", ",
                                 tg_target_name(i));
    if (used < cap)
        snprintf(buf + used, cap - used, " (`tilegraph devices` describes them)");
    return buf;
}
