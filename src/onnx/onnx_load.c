/* onnx/onnx_load.c - reading an ONNX file: parse with protobuf-c, check the
 * opset, read external data, validate the graph, and the summary accessors.
 *
 * Validation happens once here so that the builder can trust the model:
 * every initializer's declared size matches its data, every node input is
 * produced before it is used (ONNX requires topological order; a use before
 * the producer is a cycle or a misordered file), and nothing dangles.
 */
#define _XOPEN_SOURCE 700 /* realpath */
#include "onnx/onnx_internal.h"

#include "core/alloc.h"
#include "core/atomic_file.h"
#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The default-domain opsets whose ops the mappings read, each op's older
 * and newer forms as cases of one handler (ob_opset). */
#define TG_ONNX_MIN_OPSET 6
#define TG_ONNX_MAX_OPSET 21
/* ONNX's own limit for a single protobuf file */
#define TG_ONNX_MAX_BYTES ((int64_t)2 << 30)

/* ---- reading ------------------------------------------------------------- */

/* Open the model (or an external data file) for reading, refusing
 * anything that is not a regular file before it could block: a FIFO would
 * wait for a writer forever (tg_open_regular opens with O_NONBLOCK, then
 * fstat). `what` names the file in the message ("ONNX model"). */
static tg_status open_input(const char *path, const char *what, int *fd, struct stat *st)
{
    tg_status s = tg_open_regular(path, fd);
    if (s == TG_OK && fstat(*fd, st) != 0) {
        close(*fd);
        *fd = -1;
        return tg_error(TG_ERR_IO, "%s '%s': cannot read: %s", what, path, strerror(errno));
    }
    if (s == TG_ERR_NOT_FOUND)
        return tg_error(TG_ERR_IO, "cannot open %s '%s': no such readable file", what, path);
    if (s != TG_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", tg_error_message());
        return tg_error(s, "%s: %s", what, why);
    }
    return TG_OK;
}

/* The whole of the regular file open on fd, read into a buffer. */
static tg_status read_file(int fd, const char *path, int64_t n, uint8_t **out, size_t *size)
{
    if (n > TG_ONNX_MAX_BYTES)
        return tg_error(TG_ERR_FORMAT,
                        "%s: %lld bytes, above ONNX's 2 GiB limit for one file "
                        "(export the weights as external data)",
                        path, (long long)n);
    uint8_t *buf = tg_malloc((size_t)n + 1);
    if (!buf)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory for %lld bytes", path, (long long)n);
    size_t got = 0;
    while (got < (size_t)n) {
        ssize_t r = pread(fd, buf + got, (size_t)n - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (got != (size_t)n) {
        tg_free(buf);
        return tg_error(TG_ERR_IO, "%s: read %zu of %lld bytes", path, got, (long long)n);
    }
    *out = buf;
    *size = (size_t)n;
    return TG_OK;
}

/* The regular file open on fd mapped read-only, or NULL (then it is read). */
static void *map_file(int fd, int64_t n, size_t *size)
{
    if (n <= 0 || n > TG_ONNX_MAX_BYTES)
        return NULL;
    void *p = mmap(NULL, (size_t)n, PROT_READ, MAP_PRIVATE, fd, 0);
    *size = (size_t)n;
    return p == MAP_FAILED ? NULL : p;
}

static const char *entry(const Onnx__TensorProto *t, const char *key)
{
    for (size_t k = 0; k < t->n_external_data; k++)
        if (t->external_data[k]->key && !strcmp(t->external_data[k]->key, key))
            return t->external_data[k]->value;
    return NULL;
}

/* A location must stay inside the model's directory: relative, no "..". */
static bool location_escapes(const char *loc)
{
    if (loc[0] == '/' || loc[0] == '\0')
        return true;
    for (const char *p = loc; *p;) {
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return true;
        p += len + (end ? 1 : 0);
    }
    return false;
}

static tg_status parse_offset(const tg_onnx_model *m, const char *text, const char *what,
                              const char *key, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long v = text ? strtoll(text, &end, 10) : 0;
    if (text && (!*text || *end || v < 0 || errno == ERANGE))
        return tg_error(TG_ERR_FORMAT,
                        "%s: initializer %s: external data %s '%s' is not a byte count", m->path,
                        what, key, text);
    *out = text ? v : -1;
    return TG_OK;
}

/* The external data file `path` (location `loc` in `dir`) must resolve,
 * symbolic links followed, to a file inside the model's directory as it
 * resolves: ONNX allows only relative locations within it, and a link
 * beside the model (innocent.bin -> /etc/passwd) must not read a file
 * from elsewhere into a weight. The refusal names the location and the
 * rule, never what the link points to or its size. *real is the resolved
 * path, which is what is opened. */
static tg_status check_inside(const tg_onnx_model *m, const char *what, const char *loc,
                              const char *dir, const char *path, char *real)
{
    char base[PATH_MAX];
    if (!realpath(dir[0] ? dir : ".", base))
        return tg_error(TG_ERR_IO, "%s: initializer %s: cannot resolve the model's directory: %s",
                        m->path, what, strerror(errno));
    if (!realpath(path, real)) {
        if (errno == ENOENT || errno == ENOTDIR)
            return tg_error(TG_ERR_IO,
                            "%s: initializer %s: cannot open its external data file '%s' "
                            "(it must sit beside the model)",
                            m->path, what, path);
        return tg_error(TG_ERR_IO, "%s: initializer %s: cannot resolve its external data '%s': %s",
                        m->path, what, path, strerror(errno));
    }
    size_t n = strlen(base);
    bool root = n == 1 && base[0] == '/';
    if (strncmp(real, base, n) != 0 || (!root && real[n] != '/' && real[n] != '\0'))
        return tg_error(TG_ERR_FORMAT,
                        "%s: initializer %s: external data location '%s' resolves outside the "
                        "model's directory (through a symbolic link); ONNX external data must "
                        "be a file inside the model's directory",
                        m->path, what, loc);
    return TG_OK;
}

static tg_status read_external(tg_onnx_model *m, int k, const char *dir)
{
    const Onnx__TensorProto *t = m->graph->initializer[k];
    const char *what = t->name ? t->name : "initializer";
    const char *loc = entry(t, "location");
    if (!loc)
        return tg_error(TG_ERR_FORMAT, "%s: initializer %s has external data without a location",
                        m->path, what);
    if (!dir)
        return tg_error(TG_ERR_UNSUPPORTED,
                        "%s: initializer %s has external data ('%s'), which "
                        "needs the model loaded from a file",
                        m->path, what, loc);
    if (location_escapes(loc))
        return tg_error(TG_ERR_FORMAT,
                        "%s: initializer %s: external data location '%s' leaves "
                        "the model's directory (only relative paths inside it are read)",
                        m->path, what, loc);
    int64_t offset, length;
    TG_TRY(parse_offset(m, entry(t, "offset"), what, "offset", &offset));
    TG_TRY(parse_offset(m, entry(t, "length"), what, "length", &length));
    char path[4096];
    snprintf(path, sizeof path, "%s%s", dir, loc);
    char real[PATH_MAX];
    TG_TRY(check_inside(m, what, loc, dir, path, real));
    int fd = -1;
    struct stat st;
    if (tg_open_regular(real, &fd) != TG_OK || fstat(fd, &st) != 0) {
        char why[512];
        if (fd >= 0)
            close(fd);
        snprintf(why, sizeof why, "%s", tg_error_message());
        return tg_error(TG_ERR_IO,
                        "%s: initializer %s: cannot read its external data '%s' (it must be a "
                        "regular file beside the model): %s",
                        m->path, what, path, why);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return tg_error(TG_ERR_NOMEM, "%s: initializer %s: out of memory for a stream on '%s'",
                        m->path, what, path);
    }
    int64_t file_size = (int64_t)st.st_size;
    if (offset < 0)
        offset = 0;
    if (length < 0)
        length = file_size - offset;
    if (offset > file_size || length > file_size - offset) {
        fclose(f);
        return tg_error(TG_ERR_FORMAT,
                        "%s: initializer %s: external data '%s' has %lld bytes, "
                        "but offset %lld + length %lld go past its end",
                        m->path, what, path, (long long)file_size, (long long)offset,
                        (long long)length);
    }
    m->external[k] = tg_malloc((size_t)length + 1);
    m->external_size[k] = (size_t)length;
    bool ok = m->external[k] && fseek(f, (long)offset, SEEK_SET) == 0 &&
              fread(m->external[k], 1, (size_t)length, f) == (size_t)length;
    fclose(f);
    if (!ok)
        return tg_error(TG_ERR_IO, "%s: initializer %s: cannot read %lld bytes of '%s'", m->path,
                        what, (long long)length, path);
    return TG_OK;
}

/* Initializer names are unique: with two, which one a reader used would
 * depend on the reader (the last one won here). */
static tg_status check_unique_initializers(tg_onnx_model *m)
{
    const Onnx__GraphProto *g = m->graph;
    tg_onnx_names seen;
    if (!tg_onnx_names_init(&seen, g->n_initializer + 1))
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", m->path);
    tg_status s = TG_OK;
    for (size_t k = 0; k < g->n_initializer && s == TG_OK; k++) {
        int first = tg_onnx_names_get(&seen, g->initializer[k]->name);
        if (first >= 0)
            s = tg_error(TG_ERR_FORMAT,
                         "%s: initializer '%s' is given twice (initializers %d and %zu); each "
                         "name may hold one value",
                         m->path, g->initializer[k]->name, first, k);
        tg_onnx_names_put(&seen, g->initializer[k]->name, (int)k);
    }
    tg_onnx_names_free(&seen);
    return s;
}

/* Every initializer's dims against its data, without converting it. */
static tg_status check_initializers(tg_onnx_model *m, const char *dir)
{
    const Onnx__GraphProto *g = m->graph;
    m->external = tg_calloc(g->n_initializer + 1, sizeof *m->external);
    m->external_size = tg_calloc(g->n_initializer + 1, sizeof *m->external_size);
    if (!m->external || !m->external_size)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", m->path);
    for (size_t k = 0; k < g->n_initializer; k++) {
        const Onnx__TensorProto *t = g->initializer[k];
        if (!t->name || !*t->name)
            return tg_error(TG_ERR_FORMAT, "%s: initializer %zu has no name", m->path, k);
        if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
            TG_TRY(read_external(m, (int)k, dir));
        size_t es = tg_onnx_elem_size(t->data_type);
        int64_t n = 1;
        for (size_t d = 0; d < t->n_dims; d++) {
            if (t->dims[d] < 0 || (t->dims[d] > 0 && n > TG_ONNX_MAX_BYTES * 4 / t->dims[d]))
                return tg_error(TG_ERR_FORMAT, "%s: initializer %s: dimension %zu is %lld", m->path,
                                t->name, d, (long long)t->dims[d]);
            n *= t->dims[d];
        }
        size_t raw = m->external[k] ? m->external_size[k] : t->raw_data.len;
        bool has_raw = m->external[k] || t->has_raw_data;
        if (es && has_raw && raw != (size_t)n * es)
            return tg_error(TG_ERR_FORMAT,
                            "%s: initializer %s: dims declare %lld %s elements "
                            "(%lld bytes) but its data holds %zu bytes",
                            m->path, t->name, (long long)n, tg_onnx_elem_name(t->data_type),
                            (long long)(n * (int64_t)es), raw);
        if (t->data_type == ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT)
            m->float_elements += n;
    }
    return check_unique_initializers(m);
}

static tg_status check_opset(tg_onnx_model *m)
{
    const Onnx__ModelProto *p = m->proto;
    int64_t version = 0;
    bool found = false;
    for (size_t k = 0; k < p->n_opset_import; k++) {
        const char *d = p->opset_import[k]->domain;
        if (d && *d && strcmp(d, "ai.onnx"))
            continue;
        /* two entries would leave the op semantics to whichever came last */
        if (found)
            return tg_error(TG_ERR_FORMAT,
                            "%s: imports the default domain (ai.onnx) twice, as opset %lld and "
                            "opset %lld; a model imports each domain once",
                            m->path, (long long)version, (long long)p->opset_import[k]->version);
        version = p->opset_import[k]->version;
        found = true;
    }
    m->opset = -1;
    if (!found)
        return tg_error(TG_ERR_FORMAT, "%s: imports no default-domain (ai.onnx) opset", m->path);
    /* compared as read (int64): a version of 2^62 must not pass as 0 */
    if (version < TG_ONNX_MIN_OPSET || version > TG_ONNX_MAX_OPSET)
        return tg_error(TG_ERR_UNSUPPORTED,
                        "%s: opset %lld is not supported (opsets %d to %d are); "
                        "re-export with torch.onnx.export(..., opset_version=%d)",
                        m->path, (long long)version, TG_ONNX_MIN_OPSET, TG_ONNX_MAX_OPSET,
                        TG_ONNX_MAX_OPSET);
    m->opset = (int)version;
    return TG_OK;
}

/* Whether s is well-formed UTF-8 (no overlongs, surrogates or bytes past
 * U+10FFFF): names reach terminals, JSON and checkpoints. */
static bool valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = *p < 0x80 ? 0 : (*p >> 5) == 6 ? 1 : (*p >> 4) == 14 ? 2 : (*p >> 3) == 30 ? 3 : -1;
        if (n < 0 || (n == 1 && *p < 0xc2) || (n == 3 && *p > 0xf4))
            return false;
        for (int k = 1; k <= n; k++)
            if ((p[k] & 0xc0) != 0x80)
                return false;
        if ((n == 2 && *p == 0xe0 && p[1] < 0xa0) || (n == 2 && *p == 0xed && p[1] >= 0xa0) ||
            (n == 3 && *p == 0xf0 && p[1] < 0x90) || (n == 3 && *p == 0xf4 && p[1] >= 0x90))
            return false;
        p += n + 1;
    }
    return true;
}

/* s with bytes outside printable ASCII as \xNN, for a message. */
static const char *escaped(const char *s, char *buf, size_t cap)
{
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 5 < cap; p++)
        o += (size_t)(*p >= 0x20 && *p < 0x7f ? snprintf(buf + o, cap - o, "%c", *p)
                                              : snprintf(buf + o, cap - o, "\\x%02x", *p));
    buf[o] = '\0';
    return buf;
}

static tg_status check_name(const tg_onnx_model *m, const char *what, size_t k, const char *name)
{
    char buf[512];
    if (!name || valid_utf8(name))
        return TG_OK;
    return tg_error(TG_ERR_FORMAT,
                    "%s: %s %zu is named '%s', which is not UTF-8 (shown with its other bytes "
                    "as \\xNN); ONNX names are UTF-8 strings",
                    m->path, what, k, escaped(name, buf, sizeof buf));
}

/* Every name the messages, scopes and checkpoints could show. */
static tg_status check_names(const tg_onnx_model *m)
{
    const Onnx__GraphProto *g = m->graph;
    for (size_t k = 0; k < g->n_node; k++) {
        const Onnx__NodeProto *n = g->node[k];
        TG_TRY(check_name(m, "node", k, n->name));
        TG_TRY(check_name(m, "the op type of node", k, n->op_type));
        TG_TRY(check_name(m, "the domain of node", k, n->domain));
        for (size_t i = 0; i < n->n_input; i++)
            TG_TRY(check_name(m, "an input of node", k, n->input[i]));
        for (size_t o = 0; o < n->n_output; o++)
            TG_TRY(check_name(m, "an output of node", k, n->output[o]));
        for (size_t a = 0; a < n->n_attribute; a++) {
            /* the builder looks attributes up by name: one without is not
             * an attribute of anything */
            const char *name = n->attribute[a]->name;
            if (!name || !*name)
                return tg_error(TG_ERR_FORMAT,
                                "%s: node %zu ('%s', %s): attribute %zu has no name; every "
                                "attribute of an ONNX node is named",
                                m->path, k, n->name ? n->name : "", n->op_type ? n->op_type : "?",
                                a);
            TG_TRY(check_name(m, "an attribute of node", k, name));
        }
    }
    for (size_t k = 0; k < g->n_initializer; k++)
        TG_TRY(check_name(m, "initializer", k, g->initializer[k]->name));
    for (size_t k = 0; k < g->n_input; k++)
        TG_TRY(check_name(m, "graph input", k, g->input[k]->name));
    for (size_t k = 0; k < g->n_output; k++)
        TG_TRY(check_name(m, "graph output", k, g->output[k]->name));
    return TG_OK;
}

static const char *node_label(const Onnx__NodeProto *n, char *buf, size_t cap)
{
    snprintf(buf, cap, "node '%s' (%s)", n->name && *n->name ? n->name : "",
             n->op_type ? n->op_type : "?");
    return buf;
}

/* Producers before users; inputs that nothing produces are dangling. */
static tg_status check_topology(tg_onnx_model *m)
{
    const Onnx__GraphProto *g = m->graph;
    tg_onnx_names known, later;
    if (!tg_onnx_names_init(&known, g->n_input + g->n_initializer + g->n_node * 2) ||
        !tg_onnx_names_init(&later, g->n_node * 2)) {
        tg_onnx_names_free(&known);
        tg_onnx_names_free(&later);
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", m->path);
    }
    tg_status s = TG_OK;
    for (size_t k = 0; k < g->n_initializer; k++)
        tg_onnx_names_put(&known, g->initializer[k]->name, 1);
    for (size_t k = 0; k < g->n_input; k++)
        if (g->input[k]->name)
            tg_onnx_names_put(&known, g->input[k]->name, 1);
    char label[512];
    /* one writer per tensor: a second would leave its readers either value */
    for (size_t k = 0; k < g->n_node && s == TG_OK; k++)
        for (size_t o = 0; o < g->node[k]->n_output && s == TG_OK; o++) {
            const char *out = g->node[k]->output[o];
            int first = *out ? tg_onnx_names_get(&later, out) : -1;
            if (first >= 0)
                s = tg_error(TG_ERR_FORMAT,
                             "%s: %s writes '%s', already written by node %d ('%s'); a tensor "
                             "has one producer",
                             m->path, node_label(g->node[k], label, sizeof label), out, first,
                             g->node[first]->name ? g->node[first]->name : "");
            else if (*out)
                tg_onnx_names_put(&later, out, (int)k);
        }
    for (size_t k = 0; k < g->n_node && s == TG_OK; k++) {
        const Onnx__NodeProto *n = g->node[k];
        if (!n->op_type || !*n->op_type)
            s = tg_error(TG_ERR_FORMAT, "%s: node %zu ('%s') has no op type", m->path, k,
                         n->name ? n->name : "");
        for (size_t i = 0; i < n->n_input && s == TG_OK; i++) {
            const char *in = n->input[i];
            if (!*in || tg_onnx_names_get(&known, in) >= 0)
                continue; /* "" is an omitted optional input */
            int producer = tg_onnx_names_get(&later, in);
            if (producer >= 0)
                s = tg_error(TG_ERR_FORMAT,
                             "%s: %s uses '%s' before node %d ('%s') makes it: "
                             "the graph has a cycle or is not in topological order",
                             m->path, node_label(n, label, sizeof label), in, producer,
                             g->node[producer]->name ? g->node[producer]->name : "");
            else
                s = tg_error(TG_ERR_FORMAT,
                             "%s: %s reads '%s', which no node, input or "
                             "initializer provides (a dangling input)",
                             m->path, node_label(n, label, sizeof label), in);
        }
        for (size_t o = 0; o < n->n_output; o++)
            if (*n->output[o])
                tg_onnx_names_put(&known, n->output[o], 1);
    }
    for (size_t k = 0; k < g->n_output && s == TG_OK; k++)
        if (!g->output[k]->name || tg_onnx_names_get(&known, g->output[k]->name) < 0)
            s = tg_error(TG_ERR_FORMAT, "%s: graph output '%s' is produced by no node", m->path,
                         g->output[k]->name ? g->output[k]->name : "");
    tg_onnx_names_free(&known);
    tg_onnx_names_free(&later);
    return s;
}

static tg_status list_inputs(tg_onnx_model *m)
{
    const Onnx__GraphProto *g = m->graph;
    m->inputs = tg_calloc(g->n_input + 1, sizeof *m->inputs);
    if (!m->inputs)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", m->path);
    for (size_t k = 0; k < g->n_input; k++) {
        bool init = false;
        /* older exporters list initializers among the inputs too */
        for (size_t j = 0; j < g->n_initializer && !init; j++)
            init = g->input[k]->name && !strcmp(g->input[k]->name, g->initializer[j]->name);
        if (!g->input[k]->name)
            return tg_error(TG_ERR_FORMAT, "%s: graph input %zu has no name", m->path, k);
        if (!init)
            m->inputs[m->n_inputs++] = (int)k;
    }
    return TG_OK;
}

static tg_status load_bytes(tg_onnx_model *m, const uint8_t *buf, size_t size, const char *dir)
{
    m->proto = onnx__model_proto__unpack(NULL, size, buf);
    if (!m->proto)
        return tg_error(TG_ERR_FORMAT,
                        "%s: not an ONNX model (the protobuf is truncated or "
                        "corrupt, or this is another kind of file)",
                        m->path);
    if (!m->proto->graph)
        return tg_error(TG_ERR_FORMAT, "%s: the model has no graph", m->path);
    m->graph = m->proto->graph;
    TG_TRY(check_opset(m));
    TG_TRY(check_names(m));
    TG_TRY(check_initializers(m, dir));
    TG_TRY(list_inputs(m));
    return check_topology(m);
}

static tg_status load_common(const uint8_t *buf, size_t size, const char *name, const char *dir,
                             tg_onnx_model **out)
{
    *out = NULL;
    tg_onnx_model *m = tg_calloc(1, sizeof *m);
    if (!m)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", name);
    size_t len = strlen(name);
    m->path = tg_malloc(len + 1);
    if (!m->path) {
        tg_free(m);
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", name);
    }
    memcpy(m->path, name, len + 1);
    tg_status s = load_bytes(m, buf, size, dir);
    if (s != TG_OK) {
        tg_onnx_model_destroy(m);
        return s;
    }
    *out = m;
    return TG_OK;
}

tg_status tg_onnx_load(const char *path, tg_onnx_model **out)
{
    if (!path || !out)
        return tg_error(TG_ERR_INVALID_ARG, "tg_onnx_load: no path or no output given");
    *out = NULL;
    int fd = -1;
    struct stat st;
    TG_TRY(open_input(path, "ONNX model", &fd, &st));
    uint8_t *buf = NULL;
    size_t size = 0;
    /* map the file rather than copy it: ResNet-50 is ~100 MB and the parse
     * copies the tensors anyway; a file that cannot be mapped is read */
    void *map = map_file(fd, (int64_t)st.st_size, &size);
    tg_status rs = map ? TG_OK : read_file(fd, path, (int64_t)st.st_size, &buf, &size);
    close(fd);
    if (rs != TG_OK)
        return rs;
    /* external data is relative to the model's directory */
    char dir[4096];
    const char *slash = strrchr(path, '/');
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path + 1) : 0, path);
    tg_status s = load_common(map ? map : buf, size, path, dir, out);
    if (map)
        munmap(map, size);
    tg_free(buf);
    return s;
}

tg_status tg_onnx_load_buffer(const void *data, size_t size, const char *name, tg_onnx_model **out)
{
    if (!out || (!data && size))
        return tg_error(TG_ERR_INVALID_ARG, "tg_onnx_load_buffer: no data or no output given");
    *out = NULL;
    return load_common(data ? data : "", size, name ? name : "<memory>", NULL, out);
}

void tg_onnx_model_destroy(tg_onnx_model *m)
{
    if (!m)
        return;
    if (m->external)
        for (size_t k = 0; m->graph && k < m->graph->n_initializer; k++)
            tg_free(m->external[k]);
    tg_free(m->external);
    tg_free(m->external_size);
    tg_free(m->inputs);
    if (m->proto)
        onnx__model_proto__free_unpacked(m->proto, NULL);
    tg_free(m->path);
    tg_free(m);
}

/* ---- summary ------------------------------------------------------------- */

static tg_onnx_value value_of(const Onnx__ValueInfoProto *v)
{
    tg_onnx_value r = {v->name, "unknown", -1, {0}};
    for (int d = 0; d < TG_MAX_DIMS; d++)
        r.dim[d] = 1;
    const Onnx__TypeProto *t = v->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type)
        return r;
    r.dtype = tg_onnx_elem_name(t->tensor_type->elem_type);
    const Onnx__TensorShapeProto *s = t->tensor_type->shape;
    if (!s || s->n_dim > TG_MAX_DIMS)
        return r;
    r.ndim = (int)s->n_dim;
    for (size_t d = 0; d < s->n_dim; d++)
        r.dim[d] = s->dim[d]->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE
                       ? s->dim[d]->dim_value
                       : -1;
    return r;
}

const char *tg_onnx_path(const tg_onnx_model *m)
{
    return m->path;
}
int tg_onnx_opset(const tg_onnx_model *m)
{
    return m->opset;
}

const char *tg_onnx_producer(const tg_onnx_model *m)
{
    static _Thread_local char buf[256];
    snprintf(buf, sizeof buf, "%s%s%s", m->proto->producer_name ? m->proto->producer_name : "",
             m->proto->producer_version && *m->proto->producer_version ? " " : "",
             m->proto->producer_version ? m->proto->producer_version : "");
    return buf;
}

int tg_onnx_input_count(const tg_onnx_model *m)
{
    return m->n_inputs;
}

tg_onnx_value tg_onnx_input(const tg_onnx_model *m, int i)
{
    return value_of(m->graph->input[m->inputs[i]]);
}

int tg_onnx_output_count(const tg_onnx_model *m)
{
    return (int)m->graph->n_output;
}
tg_onnx_value tg_onnx_output(const tg_onnx_model *m, int i)
{
    return value_of(m->graph->output[i]);
}
const char *tg_onnx_dim_name(const tg_onnx_model *m, bool output, int i, int d)
{
    if (i < 0 || i >= (output ? tg_onnx_output_count(m) : m->n_inputs))
        return "";
    const Onnx__ValueInfoProto *v = output ? m->graph->output[i] : m->graph->input[m->inputs[i]];
    const Onnx__TypeProto *t = v->type;
    if (!t || t->value_case != ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE || !t->tensor_type ||
        !t->tensor_type->shape || d < 0 || (size_t)d >= t->tensor_type->shape->n_dim)
        return "";
    const Onnx__TensorShapeProto__Dimension *dim = t->tensor_type->shape->dim[d];
    return dim->value_case == ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM && dim->dim_param
               ? dim->dim_param
               : "";
}
int tg_onnx_initializer_count(const tg_onnx_model *m)
{
    return (int)m->graph->n_initializer;
}
int64_t tg_onnx_float_elements(const tg_onnx_model *m)
{
    return m->float_elements;
}
int tg_onnx_node_count(const tg_onnx_model *m)
{
    return (int)m->graph->n_node;
}

const char *tg_onnx_node_name(const tg_onnx_model *m, int i)
{
    return m->graph->node[i]->name ? m->graph->node[i]->name : "";
}

const char *tg_onnx_node_op(const tg_onnx_model *m, int i)
{
    return m->graph->node[i]->op_type;
}

bool tg_onnx_computed_in_f32(const char *dtype)
{
    return !strcmp(dtype, "double") || !strcmp(dtype, "float16");
}

/* Each input and output declared double or float16, named once. */
const char *tg_onnx_reduced_note(const tg_onnx_model *m)
{
    static _Thread_local char buf[512];
    size_t used = 0;
    buf[0] = '\0';
    int n_in = tg_onnx_input_count(m), n = n_in + tg_onnx_output_count(m);
    for (int k = 0; k < n && used < sizeof buf; k++) {
        tg_onnx_value v = k < n_in ? tg_onnx_input(m, k) : tg_onnx_output(m, k - n_in);
        if (tg_onnx_computed_in_f32(v.dtype))
            used +=
                (size_t)snprintf(buf + used, sizeof buf - used, "%s%s '%s' (%s)", used ? ", " : "",
                                 k < n_in ? "input" : "output", v.name, v.dtype);
    }
    if (used && used < sizeof buf)
        snprintf(buf + used, sizeof buf - used, " computed in float32");
    return buf;
}
