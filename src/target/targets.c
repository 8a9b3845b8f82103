/* target/targets.c - the registered targets, in the order `tilegraph devices`
 * lists them, finding one by name and asking its capabilities: the one place
 * a new target is added (one line in `targets`, beside its own file).
 */
#include "target/target.h"

#include "compile/program.h"
#include "target/tiled.h"

#include "core/error.h"

#include <stdio.h>
#include <string.h>

static const tg_target_ops *const targets[] = {
    &tg_target_cpu_ops,
    &tg_target_mk2_ops,
    &tg_target_tiny_ops,
};

#define TG_N_TARGETS ((int)(sizeof targets / sizeof targets[0]))

int tg_target_count(void)
{
    return TG_N_TARGETS;
}

const tg_target_ops *tg_target_at(int i)
{
    return i >= 0 && i < TG_N_TARGETS ? targets[i] : NULL;
}

const char *tg_target_name(int i)
{
    return i >= 0 && i < TG_N_TARGETS ? targets[i]->name : NULL;
}

const tg_target_ops *tg_target_find(const char *name)
{
    for (int i = 0; name && i < TG_N_TARGETS; i++)
        if (strcmp(targets[i]->name, name) == 0)
            return targets[i];
    return NULL;
}

char *tg_target_names(char *out, size_t cap, const char *last_sep)
{
    size_t used = 0;
    if (cap)
        out[0] = '\0';
    for (int i = 0; i < TG_N_TARGETS && used < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s%s",
                                 i == 0                  ? ""
                                 : i == TG_N_TARGETS - 1 ? last_sep
                                                         : ", ",
                                 targets[i]->name);
    return out;
}

bool tg_target_tiled(const tg_target_ops *t)
{
    return t && t->plan;
}

bool tg_target_has_cycle_model(const tg_target_ops *t)
{
    return t && t->simulate;
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
    out->max_devices = TG_MAX_DEVICES;
    out->takes_description = t->takes_description;
    return TG_OK;
}

tg_status tg_target_check(const char *name)
{
    if (tg_target_find(name))
        return TG_OK;
    char names[256];
    return tg_error(TG_ERR_CONFIG,
                    "option 'target': '%s' is not a target; the targets are %s (`tilegraph "
                    "devices` describes them)",
                    name ? name : "", tg_target_names(names, sizeof names, " or "));
}

tg_status tg_target_from_config(const tg_config *c, tg_target_desc *out)
{
    TG_TRY(tg_target_check(c->target.name));
    return tg_target_of_config(c)->limits(c, out);
}

int64_t tg_target_device_need(const tg_program *p, int d)
{
    return p->tile_plan ? p->tile_plan->devices[d].max_bytes : (int64_t)p->devices[d].arena_bytes;
}

int64_t tg_target_capacity(const tg_program *p, const char **unit)
{
    *unit = p->tile_plan ? "the fullest tile" : "the largest device";
    return p->tile_plan ? p->tile_plan->target.tile_memory : p->config.memory.per_device;
}

const tg_target_desc *tg_target_planned(const tg_program *p)
{
    return p->tile_plan ? &p->tile_plan->target : NULL;
}
