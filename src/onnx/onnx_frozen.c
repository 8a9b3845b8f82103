/* onnx/onnx_frozen.c - which float initializers an import keeps fixed.
 *
 * PyTorch trains only what the optimizer holds: buffers (a causal mask, an
 * offset) and parameters with requires_grad=False stay as they are. An ONNX
 * file does not say which initializers were which, so an exporter that knows
 * lists the trainable ones under TG_ONNX_PARAMETERS_KEY, and a caller with a
 * file that does not can name the fixed ones by a pattern (cfg->freeze, the
 * command's --freeze). Fixed initializers become state: no gradient, no
 * optimizer state, still in checkpoints under their names.
 */
#include "onnx/onnx_build.h"

#include "core/alloc.h"

#include <regex.h>
#include <string.h>

static bool is_float(const Onnx__TensorProto *t)
{
    return t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT ||
           t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16 ||
           t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16 ||
           t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE;
}

/* The file's list of parameters, or NULL if it has none. */
static const char *listed_parameters(const tg_onnx_model *m)
{
    for (size_t k = 0; k < m->proto->n_metadata_props; k++) {
        const Onnx__StringStringEntryProto *e = m->proto->metadata_props[k];
        if (e->key && e->value && !strcmp(e->key, TG_ONNX_PARAMETERS_KEY))
            return e->value;
    }
    return NULL;
}

/* Whether `name` is a whole line of `list`. */
static bool listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && !memcmp(p, name, n))
            return true;
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}

/* Mark in frozen[] (if non-NULL) the float initializers `pattern` matches;
 * fails on a bad pattern or one matching none. */
static tg_status match_pattern(const tg_onnx_model *m, const char *pattern, bool *frozen)
{
    const Onnx__GraphProto *g = m->graph;
    regex_t re;
    int rc = regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char why[256];
        regerror(rc, &re, why, sizeof why);
        return tg_error(TG_ERR_INVALID_ARG,
                        "%s: freeze pattern '%s' is not a POSIX extended regular expression (%s)",
                        m->path, pattern, why);
    }
    int matched = 0;
    const char *some = NULL;
    for (size_t k = 0; k < g->n_initializer; k++) {
        const Onnx__TensorProto *t = g->initializer[k];
        if (!is_float(t))
            continue;
        some = some ? some : t->name;
        if (regexec(&re, t->name, 0, NULL, 0) == 0) {
            if (frozen)
                frozen[k] = true;
            matched++;
        }
    }
    regfree(&re);
    if (!matched)
        return tg_error(TG_ERR_NOT_FOUND,
                        "%s: freeze pattern '%s' matches no float initializer (%s%s); give a "
                        "pattern over the names `tilegraph import FILE --params` lists",
                        m->path, pattern, some ? "such as " : "the file has none",
                        some ? some : "");
    return TG_OK;
}

tg_status tg_onnx_check_freeze(const tg_onnx_model *m, const char *pattern)
{
    if (!m || !pattern)
        return tg_error(TG_ERR_INVALID_ARG, "tg_onnx_check_freeze: no model or pattern given");
    return match_pattern(m, pattern, NULL);
}

tg_status ob_frozen_init(onnx_builder *b)
{
    const Onnx__GraphProto *g = b->m->graph;
    const char *list = listed_parameters(b->m);
    bool pattern = b->cfg->freeze && *b->cfg->freeze;
    b->frozen = NULL;
    if (!list && !pattern)
        return TG_OK;
    b->frozen = tg_calloc(g->n_initializer + 1, sizeof *b->frozen);
    if (!b->frozen)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", b->m->path);
    for (size_t k = 0; list && k < g->n_initializer; k++)
        b->frozen[k] = is_float(g->initializer[k]) && !listed(list, g->initializer[k]->name);
    return pattern ? match_pattern(b->m, b->cfg->freeze, b->frozen) : TG_OK;
}

void ob_frozen_free(onnx_builder *b)
{
    tg_free(b->frozen);
    b->frozen = NULL;
}
