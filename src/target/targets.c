/* target/targets.c - the built-in targets, in the order `tilegraph devices`
 * lists them, and finding one by name: the one place a new target is added.
 */
#include "target/target.h"

#include "core/error.h"

#include <string.h>

static const tg_target_ops *const targets[] = {&tg_target_cpu_ops, &tg_target_mk2_ops};

#define TG_N_TARGETS ((int)(sizeof targets / sizeof targets[0]))

/* The "devices" option's upper limit (core/options.c): one replica is placed
 * over at most this many devices, whatever the target. */
#define TG_OPTION_MAX_DEVICES 64

int tg_target_count(void)
{
    return TG_N_TARGETS;
}

const tg_target_ops *tg_target_at(int i)
{
    return i >= 0 && i < TG_N_TARGETS ? targets[i] : NULL;
}

const tg_target_ops *tg_target_find(const char *name)
{
    for (int i = 0; name && i < TG_N_TARGETS; i++)
        if (strcmp(targets[i]->name, name) == 0)
            return targets[i];
    return NULL;
}

bool tg_target_tiled(const tg_target_ops *t)
{
    return t && t->plan;
}

const tg_target_ops *tg_target_of_config(const tg_config *c)
{
    return tg_target_find(c->target.name);
}

tg_status tg_target_info_get(int i, tg_target_info *out)
{
    const tg_target_ops *t = tg_target_at(i);
    if (!out || !t)
        return tg_error(TG_ERR_INVALID_ARG, "tg_target_info_get: no target %d (there are %d)", i,
                        TG_N_TARGETS);
    TG_TRY(t->describe(out));
    out->max_devices = TG_OPTION_MAX_DEVICES;
    return TG_OK;
}

tg_status tg_target_from_config(const tg_config *c, tg_target_desc *out)
{
    const tg_target_ops *t = tg_target_of_config(c);
    if (!t)
        return tg_error(TG_ERR_INVALID_ARG, "target: no target named '%s'", c->target.name);
    return t->limits(c, out);
}
