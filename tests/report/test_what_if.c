/* tests/report/test_what_if.c - the memory remedies through the public API
 * only (tilegraph/plan.h): tg_program_what_if compiles the model once per
 * remedy into a plan, which tg_what_if_print prints as `tilegraph compile`
 * does and tg_compiled_write_profile keeps. This file includes nothing of
 * src/: what the command does with a compiled program, another program can. */
#include "tg_test.h"

#include "tilegraph/models.h"
#include "tilegraph/optim.h"
#include "tilegraph/options.h"
#include "tilegraph/plan.h"
#include "tilegraph/program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* mnist-pipeline over 1,000,000 bytes a device: it needs about twice that */
static void test_over_capacity(void)
{
    tg_model_graph mg = {0};
    tg_optimizer opt = tg_optimizer_sgd(0.05f, 0.0f);
    const tg_model_spec *spec = tg_model_find("mnist-pipeline");
    TG_CHECK_OK(tg_model_graph_create_ex(spec, 4, &opt, NULL, &mg));
    tg_options *o = tg_options_create();
    TG_CHECK_OK(tg_options_set(o, "memoryPerDevice", "1000000"));
    tg_compiled *c = NULL;
    TG_CHECK(tg_compiled_create(mg.graph, o, &c) == TG_ERR_CAPACITY);
    TG_CHECK_OK(tg_options_set(o, "debug.allowOutOfMemory", "true"));
    TG_CHECK_OK(tg_compiled_create(mg.graph, o, &c));
    TG_CHECK(tg_what_if_wanted(c));

    tg_what_if_model m = {spec, NULL, &opt, 4, o};
    tg_what_if_plan plan;
    TG_CHECK_OK(tg_program_what_if(c, &m, &plan));
    TG_CHECK(plan.capacity == 1000000 && plan.need > plan.capacity);
    TG_CHECK(!strcmp(plan.unit, "the largest device"));
    TG_CHECK(plan.n == 12);
    int computed = 0;
    for (int i = 0; i < plan.n; i++) {
        const tg_what_if_row *r = &plan.rows[i];
        TG_CHECK(r->what[0] && r->outcome[0] && r->shown[0]);
        TG_CHECK(r->need == plan.need && r->capacity == plan.capacity);
        if (r->after >= 0) { /* compiled again: the figure and whether it fits */
            computed++;
            TG_CHECK(strstr(r->shown, " -> ") != NULL);
            TG_CHECK(!strncmp(r->outcome, r->after <= r->capacity ? "fits" : "still over",
                              r->after <= r->capacity ? 4 : 10));
        } else { /* not computed: why, in both */
            TG_CHECK(strstr(r->outcome, r->shown) == r->outcome ||
                     strstr(r->shown, r->outcome) == r->shown);
        }
    }
    TG_CHECK(computed >= 8);
    /* half the micro-batch needs less, and says by how much */
    TG_CHECK(!strcmp(plan.rows[0].what, "half the micro-batch"));
    TG_CHECK(plan.rows[0].after > 0 && plan.rows[0].after < plan.need);
    TG_CHECK(strstr(plan.rows[0].shown, "saves") != NULL);

    /* printed: the header, then a line per row with its text */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    TG_CHECK(f != NULL);
    if (f) {
        tg_what_if_print(&plan, f);
        fclose(f);
        TG_CHECK(!strncmp(text, "\ninsights: the largest device needs ", 36));
        TG_CHECK(strstr(text, "(1000000") == NULL); /* bytes shown for people */
        for (int i = 0; i < plan.n; i++)
            TG_CHECK(strstr(text, plan.rows[i].what) && strstr(text, plan.rows[i].shown));
        free(text);
    }
    tg_compiled_destroy(c);
    tg_options_destroy(o);
    tg_model_graph_destroy(&mg);
}

int main(void)
{
    TG_RUN(test_over_capacity);
    return tg_test_finish();
}
