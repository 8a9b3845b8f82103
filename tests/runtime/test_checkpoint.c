/* tests/runtime/test_checkpoint.c - checkpoints: a round trip restores
 * weights, optimizer state and the update counter exactly; a corrupt,
 * mismatched or missing file is an error that changes nothing, and so is
 * running out of memory at any allocation of a save or a load; a flipped
 * data bit is refused naming the tensor (each tensor's CRC-32 is in the
 * metadata), a checkpoint without checksums still loads, and a negative
 * second moment is refused naming it (issue 46, row 13). */
#include "tg_test.h"

#include "core/alloc.h"
#include "core/error.h"
#include "data/safetensors.h"
#include "runtime/session_internal.h"
#include "tilegraph/checkpoint.h"
#include "tilegraph/models.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static tg_session *trained_with(tg_model_graph *mg, const char *model, int steps, tg_optimizer opt)
{
    TG_CHECK_OK(tg_model_graph_create(tg_model_find(model), 2, &opt, mg));
    tg_session *s = NULL;
    TG_CHECK_OK(tg_session_create(mg->graph, NULL, &s));
    float img[2 * 784];
    int32_t lab[2] = {3, 7};
    for (int i = 0; i < 2 * 784; i++)
        img[i] = (float)((i * 13) % 17) / 8.0f - 1.0f;
    for (int k = 0; s && k < steps; k++) {
        tg_session_write(s, mg->images, img, sizeof img);
        tg_session_write(s, mg->labels, lab, sizeof lab);
        TG_CHECK_OK(tg_session_run(s));
    }
    return s;
}

static tg_session *trained(tg_model_graph *mg, const char *model, int steps)
{
    return trained_with(mg, model, steps, tg_optimizer_adamw(0.01f));
}

/* All parameters and state of a and b are byte-identical. */
static bool same_state(const tg_session *a, const tg_session *b)
{
    const tg_graph *g = tg_session_graph(a);
    for (int i = 0; i < tg_graph_tensor_count(g); i++) {
        const tg_tensor *t = tg_graph_tensor(g, i);
        if (t->op != TG_OP_PARAM && t->op != TG_OP_STATE)
            continue;
        const tg_tensor *u = tg_graph_find(tg_session_graph(b), t->name);
        if (!u || memcmp(tg_session_data(a, t), tg_session_data(b, u), tg_nbytes(t)) != 0)
            return false;
    }
    return true;
}

static void test_round_trip(void)
{
    tg_model_graph ma, mb;
    tg_session *a = trained(&ma, "mnist-pipeline", 3), *b = trained(&mb, "mnist-pipeline", 0);
    char path[128];
    snprintf(path, sizeof path, "%s/ckpt.safetensors", dir);
    TG_CHECK_OK(tg_checkpoint_save(a, path, "mnist-pipeline"));
    TG_CHECK(!same_state(a, b));
    TG_CHECK_OK(tg_checkpoint_load(b, path, "mnist-pipeline"));
    TG_CHECK(same_state(a, b));
    TG_CHECK(tg_session_step(b) == 3);
    tg_session_destroy(a);
    tg_session_destroy(b);
    tg_model_graph_destroy(&ma);
    tg_model_graph_destroy(&mb);
}

/* LAMB's state has Adam's names ("<param>/exp_avg", "<param>/exp_avg_sq"):
 * a checkpoint restores it, and a resumed run continues exactly. */
static void test_lamb_round_trip_resumes_exactly(void)
{
    tg_optimizer opt = tg_optimizer_lamb(0.01f);
    opt.max_grad_norm = 0.5f;
    tg_model_graph ma, mb;
    tg_session *a = trained_with(&ma, "mnist-pipeline", 3, opt);
    tg_session *b = trained_with(&mb, "mnist-pipeline", 0, opt);
    /* every parameter has "<param>/exp_avg" and "<param>/exp_avg_sq" */
    int params = 0, named = 0;
    for (int i = 0; i < tg_graph_tensor_count(ma.graph); i++) {
        const tg_tensor *t = tg_graph_tensor(ma.graph, i);
        if (t->op != TG_OP_PARAM)
            continue;
        char m[512], v[512];
        snprintf(m, sizeof m, "%s/exp_avg", t->name);
        snprintf(v, sizeof v, "%s/exp_avg_sq", t->name);
        params++;
        named += tg_graph_find(ma.graph, m) && tg_graph_find(ma.graph, v);
    }
    TG_CHECK(params > 0 && named == params);
    char path[128];
    snprintf(path, sizeof path, "%s/lamb.safetensors", dir);
    TG_CHECK_OK(tg_checkpoint_save(a, path, "mnist-pipeline"));
    TG_CHECK_OK(tg_checkpoint_load(b, path, "mnist-pipeline"));
    TG_CHECK(same_state(a, b));
    /* one more identical step on each: still identical (state and step count restored) */
    float img[2 * 784];
    int32_t lab[2] = {1, 4};
    for (int i = 0; i < 2 * 784; i++)
        img[i] = (float)((i * 7) % 11) / 5.0f - 1.0f;
    tg_session *both[2] = {a, b};
    tg_model_graph *mgs[2] = {&ma, &mb};
    for (int k = 0; k < 2 && a && b; k++) {
        TG_CHECK_OK(tg_session_write(both[k], mgs[k]->images, img, sizeof img));
        TG_CHECK_OK(tg_session_write(both[k], mgs[k]->labels, lab, sizeof lab));
        TG_CHECK_OK(tg_session_run(both[k]));
    }
    TG_CHECK(same_state(a, b));
    tg_session_destroy(a);
    tg_session_destroy(b);
    tg_model_graph_destroy(&ma);
    tg_model_graph_destroy(&mb);
}

static void test_bad_files_change_nothing(void)
{
    tg_model_graph ma, mb;
    tg_session *a = trained(&ma, "mnist-pipeline", 1), *f = trained(&mb, "fashion-basic", 1);
    tg_model_graph mc;
    tg_session *c = trained(&mc, "mnist-pipeline", 2);
    char good[128], other[128], bad[128];
    snprintf(good, sizeof good, "%s/a.safetensors", dir);
    snprintf(other, sizeof other, "%s/f.safetensors", dir);
    snprintf(bad, sizeof bad, "%s/bad.safetensors", dir);
    TG_CHECK_OK(tg_checkpoint_save(a, good, "mnist-pipeline"));
    TG_CHECK_OK(tg_checkpoint_save(f, other, "fashion-basic"));
    /* another model's checkpoint: named as such */
    TG_CHECK(tg_checkpoint_load(c, other, "mnist-pipeline") == TG_ERR_CONFIG);
    TG_CHECK(strstr(tg_error_message(), "fashion-basic") != NULL);
    /* the same, without the model check: a missing tensor, named */
    TG_CHECK(tg_checkpoint_load(c, other, NULL) != TG_OK);
    TG_CHECK(strstr(tg_error_message(), "layer1.conv.weight") != NULL);
    /* a truncated copy of a good file */
    FILE *in = fopen(good, "rb"), *out = fopen(bad, "wb");
    char buf[4096];
    size_t n = in ? fread(buf, 1, sizeof buf, in) : 0;
    if (out) {
        fwrite(buf, 1, n / 2, out);
        fclose(out);
    }
    if (in)
        fclose(in);
    TG_CHECK(tg_checkpoint_load(c, bad, "mnist-pipeline") != TG_OK);
    TG_CHECK(strstr(tg_error_message(), "bad.safetensors") != NULL);
    /* none of the failures touched c: it still equals a fresh copy of itself */
    tg_model_graph md;
    tg_session *d = trained(&md, "mnist-pipeline", 2);
    TG_CHECK(same_state(c, d));
    /* and a missing file */
    snprintf(bad, sizeof bad, "%s/none.safetensors", dir);
    TG_CHECK(tg_checkpoint_load(c, bad, NULL) != TG_OK);
    TG_CHECK(strstr(tg_error_message(), "none.safetensors") != NULL);
    tg_session_destroy(a);
    tg_session_destroy(c);
    tg_session_destroy(d);
    tg_session_destroy(f);
    tg_model_graph_destroy(&ma);
    tg_model_graph_destroy(&mb);
    tg_model_graph_destroy(&mc);
    tg_model_graph_destroy(&md);
}

/* The file `path` re-written through the safetensors writer without its
 * checksums (as tilegraph wrote checkpoints before them), with `edit`
 * applied to the tensors' copies first (may be NULL). */
static void rewrite_unsigned(const char *path, const char *to, void (*edit)(tg_st_tensor *, size_t))
{
    tg_safetensors *f = NULL;
    TG_CHECK_OK(tg_safetensors_load(path, &f));
    if (!f)
        return;
    size_t n = tg_safetensors_count(f), m = tg_safetensors_metadata_count(f), k = 0;
    tg_st_tensor *t = calloc(n + 1, sizeof *t);
    tg_st_meta *meta = calloc(m + 1, sizeof *meta);
    for (size_t i = 0; i < n; i++) {
        t[i] = *tg_safetensors_tensor(f, i);
        void *copy = malloc(t[i].nbytes + 1);
        memcpy(copy, t[i].data, t[i].nbytes);
        t[i].data = copy;
    }
    for (size_t i = 0; i < m; i++)
        if (strcmp(tg_safetensors_metadata_at(f, i)->key, "tilegraph_crc32") != 0)
            meta[k++] = *tg_safetensors_metadata_at(f, i);
    TG_CHECK(k == m - 1); /* the checksums were there */
    if (edit)
        edit(t, n);
    TG_CHECK_OK(tg_safetensors_write(to, t, n, meta, k));
    for (size_t i = 0; i < n; i++)
        free((void *)t[i].data);
    free(t);
    free(meta);
    tg_safetensors_destroy(f);
}

static void negative_second_moment(tg_st_tensor *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strstr(t[i].name, "exp_avg_sq") && t[i].dtype == TG_ST_F32) {
            float v = -1e-6f;
            memcpy((char *)t[i].data + 4, &v, sizeof v); /* element 1 */
            return;
        }
}

static void test_checksums_and_second_moments(void)
{
    tg_model_graph ma, mc, md;
    tg_session *a = trained(&ma, "mnist-pipeline", 2), *c = trained(&mc, "mnist-pipeline", 0);
    tg_session *d = trained(&md, "mnist-pipeline", 0);
    char good[128], bad[128];
    snprintf(good, sizeof good, "%s/signed.safetensors", dir);
    snprintf(bad, sizeof bad, "%s/flipped.safetensors", dir);
    TG_CHECK_OK(tg_checkpoint_save(a, good, "mnist-pipeline"));
    size_t len = 0;
    char *bytes = tg_test_read_file(good, &len);
    tg_safetensors *f = NULL;
    TG_CHECK(bytes && tg_safetensors_parse(bytes, len, "signed", &f) == TG_OK);
    size_t n = f ? tg_safetensors_count(f) : 0;
    TG_CHECK(n > 3);
    /* the parser copies the data: the tensors tile it from its start, which
     * follows the 8-byte length and the header */
    const char *base = NULL;
    for (size_t i = 0; i < n; i++)
        if (!base || (const char *)tg_safetensors_tensor(f, i)->data < base)
            base = tg_safetensors_tensor(f, i)->data;
    size_t hlen = 0;
    for (int i = 7; bytes && i >= 0; i--)
        hlen = hlen << 8 | (unsigned char)bytes[i];
    /* one bit of the first, a middle and the last tensor's data, in turn */
    size_t picks[3] = {0, n / 2, n ? n - 1 : 0};
    for (int k = 0; k < 3 && f; k++) {
        const tg_st_tensor *e = tg_safetensors_tensor(f, picks[k]);
        size_t at = 8 + hlen + (size_t)((const char *)e->data - base) + e->nbytes / 2;
        TG_CHECK(at < len);
        bytes[at] ^= 0x10;
        FILE *out = fopen(bad, "wb");
        TG_CHECK(out && fwrite(bytes, 1, len, out) == len);
        if (out)
            fclose(out);
        bytes[at] ^= 0x10;
        char want[300];
        snprintf(want, sizeof want, "tensor '%s' does not match its checksum", e->name);
        TG_CHECK(tg_checkpoint_load(c, bad, "mnist-pipeline") == TG_ERR_FORMAT);
        if (!strstr(tg_error_message(), want) || !strstr(tg_error_message(), "flipped"))
            tg_test_fail(__FILE__, __LINE__, "want \"%s\" in: %s", want, tg_error_message());
    }
    TG_CHECK(same_state(c, d)); /* refused before anything was copied */
    tg_safetensors_destroy(f);
    free(bytes);
    /* a checkpoint without checksums (an older tilegraph's) loads, with a note */
    snprintf(bad, sizeof bad, "%s/unsigned.safetensors", dir);
    rewrite_unsigned(good, bad, NULL);
    TG_CHECK_OK(tg_checkpoint_load(c, bad, "mnist-pipeline"));
    TG_CHECK(same_state(a, c));
    /* a negative exp_avg_sq is refused, named, whatever the checksums say */
    rewrite_unsigned(good, bad, negative_second_moment);
    TG_CHECK(tg_checkpoint_load(d, bad, "mnist-pipeline") == TG_ERR_FORMAT);
    TG_CHECK(strstr(tg_error_message(), "exp_avg_sq' is an optimizer's second moment") &&
             strstr(tg_error_message(), "at element 1"));
    tg_model_graph me;
    tg_session *e = trained(&me, "mnist-pipeline", 0);
    TG_CHECK(same_state(d, e));
    /* ... but not when only the weights are loaded (the moments start again) */
    TG_CHECK_OK(tg_checkpoint_load_ex(d, bad, "mnist-pipeline", TG_CHECKPOINT_WEIGHTS_ONLY));
    tg_session_destroy(a);
    tg_session_destroy(c);
    tg_session_destroy(d);
    tg_session_destroy(e);
    tg_model_graph_destroy(&ma);
    tg_model_graph_destroy(&mc);
    tg_model_graph_destroy(&md);
    tg_model_graph_destroy(&me);
}

/* Each allocation of a save, then of a load, failed in turn (N being what
 * a clean one asks for): TG_ERR_NOMEM with a message, nothing leaked, the
 * file on disk still the last good one, the loading session unchanged. */
static void test_allocation_failures_change_nothing(void)
{
    tg_model_graph ma, mc, md, me;
    tg_session *a = trained(&ma, "mnist-pipeline", 2), *c = trained(&mc, "mnist-pipeline", 1);
    tg_session *d = trained(&md, "mnist-pipeline", 1); /* what c must stay */
    tg_session *e = trained(&me, "mnist-pipeline", 0); /* loads the file cleanly */
    char path[128];
    snprintf(path, sizeof path, "%s/faults.safetensors", dir);
    const char *what[] = {"save", "load"};
    for (int op = 0; a && c && d && e && op < 2; op++) {
        int64_t live = tg_alloc_live_bytes(), before = tg_alloc_count();
        /* a clean save of a, or (after c's failed saves) a clean load of the file */
        TG_CHECK_OK(op == 0 ? tg_checkpoint_save(a, path, "mnist-pipeline")
                            : tg_checkpoint_load(e, path, "mnist-pipeline"));
        int64_t n_allocs = tg_alloc_count() - before;
        printf("  %s: %lld allocations, each failed in turn\n", what[op], (long long)n_allocs);
        TG_CHECK(n_allocs >= 2 && tg_alloc_live_bytes() == live);
        for (int64_t n = 1; n <= n_allocs; n++) {
            tg_alloc_fail_after(n);
            tg_status s = op == 0 ? tg_checkpoint_save(c, path, "mnist-pipeline")
                                  : tg_checkpoint_load(c, path, "mnist-pipeline");
            tg_alloc_fail_after(0);
            if (s != TG_ERR_NOMEM || !strstr(tg_error_message(), "out of memory"))
                tg_test_fail(__FILE__, __LINE__, "%s, allocation %lld of %lld failed: %s, \"%s\"",
                             what[op], (long long)n, (long long)n_allocs, tg_status_name(s),
                             tg_error_message());
            if (tg_alloc_live_bytes() != live)
                tg_test_fail(__FILE__, __LINE__, "%s, allocation %lld failed: %lld bytes leaked",
                             what[op], (long long)n, (long long)(tg_alloc_live_bytes() - live));
        }
    }
    /* the file stayed a's through c's failed saves; c's failed loads left it as it was */
    TG_CHECK(same_state(a, e) && tg_session_step(e) == 2);
    TG_CHECK(same_state(c, d) && tg_session_step(c) == 1);
    tg_session_destroy(a);
    tg_session_destroy(c);
    tg_session_destroy(d);
    tg_session_destroy(e);
    tg_model_graph_destroy(&ma);
    tg_model_graph_destroy(&mc);
    tg_model_graph_destroy(&md);
    tg_model_graph_destroy(&me);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tg_ckpt_XXXXXX");
    if (!TG_MKDTEMP(dir))
        return 1;
    TG_RUN(test_round_trip);
    TG_RUN(test_lamb_round_trip_resumes_exactly);
    TG_RUN(test_bad_files_change_nothing);
    TG_RUN(test_checksums_and_second_moments);
    TG_RUN(test_allocation_failures_change_nothing);
    tg_test_remove_dir(dir);
    return tg_test_finish();
}
