/* tests/data/test_safetensors.c - round trips, every kind of corrupt file,
 * and the atomicity of the writer under failing writes and allocations. */
#include "core/alloc.h"
#include "data/safetensors.h"
#include "tg_test.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static const char *path_in_dir(const char *name)
{
    return tg_test_path(dir, name);
}

/* ---- a checkpoint-like set of tensors ------------------------------------------ */

static float w1[250];
static uint16_t h16[3], b16[4];
static uint8_t u8s[7];
static int32_t i32s[4];
static int64_t i64s[2];
static double f64s[1];
static uint8_t bools[5];

static void fill(unsigned seed)
{
    for (int i = 0; i < 250; i++)
        w1[i] = (float)(i * 0.25 - 3.0) + (float)seed;
    for (int i = 0; i < 3; i++)
        h16[i] = tg_f32_to_f16((float)i + 0.5f + (float)seed);
    for (int i = 0; i < 4; i++)
        b16[i] = tg_f32_to_bf16(-(float)i - (float)seed);
    for (int i = 0; i < 7; i++)
        u8s[i] = (uint8_t)(i * 30 + seed);
    for (int i = 0; i < 4; i++)
        i32s[i] = -1000 * i + (int32_t)seed;
    i64s[0] = INT64_MIN + seed;
    i64s[1] = INT64_MAX - seed;
    f64s[0] = 3.141592653589793 + seed;
    for (int i = 0; i < 5; i++)
        bools[i] = (uint8_t)((i + seed) & 1);
}

#define NT 10
static tg_st_tensor tensors[NT];
static const tg_st_meta meta[] = {{"format", "pt"},
                                  {"model", "fashion-basic"},
                                  {"step", "12"},
                                  {"note", "quote \" slash \\ newline \n caf\xC3\xA9"}};

static void make_tensors(void)
{
    tg_st_tensor t[NT] = {
        {"u8", TG_ST_U8, 1, {7}, u8s, 0},
        {"layer1.conv.weight", TG_ST_F32, 4, {10, 1, 5, 5}, w1, 0},
        {"half", TG_ST_F16, 1, {3}, h16, 0},
        {"brain", TG_ST_BF16, 2, {2, 2}, b16, 0},
        {"ints", TG_ST_I32, 2, {4, 1}, i32s, 0},
        {"longs", TG_ST_I64, 1, {2}, i64s, 0},
        {"scalar", TG_ST_F64, 0, {0}, f64s, 0},
        {"empty", TG_ST_F32, 2, {0, 3}, NULL, 0},
        {"flags", TG_ST_BOOL, 1, {5}, bools, 0},
        {"weird name \xE2\x9C\x93 \"q\"", TG_ST_I8, 1, {2}, u8s, 0},
    };
    memcpy(tensors, t, sizeof t);
}

static void check_loaded(const tg_safetensors *st)
{
    TG_CHECK(tg_safetensors_count(st) == NT);
    for (int i = 0; i < NT; i++) {
        const tg_st_tensor *want = &tensors[i];
        const tg_st_tensor *got = tg_safetensors_find(st, want->name);
        TG_CHECK(got != NULL);
        if (!got)
            continue;
        TG_CHECK(got->dtype == want->dtype && got->ndim == want->ndim);
        size_t numel = 1;
        for (int d = 0; d < want->ndim; d++) {
            TG_CHECK(got->shape[d] == want->shape[d]);
            numel *= (size_t)want->shape[d];
        }
        size_t bytes = numel * tg_st_dtype_size(want->dtype);
        TG_CHECK(got->nbytes == bytes);
        if (bytes)
            TG_CHECK(memcmp(got->data, want->data, bytes) == 0);
        /* The writer's ordering and padding make every tensor aligned. */
        TG_CHECK((uintptr_t)got->data % tg_st_dtype_size(want->dtype) == 0);
    }
    /* File order: 8-byte elements first, then 4, 2, 1. */
    size_t prev = 8;
    for (size_t i = 0; i < tg_safetensors_count(st); i++) {
        size_t e = tg_st_dtype_size(tg_safetensors_tensor(st, i)->dtype);
        TG_CHECK(e <= prev);
        prev = e;
    }
    TG_CHECK(tg_safetensors_tensor(st, NT) == NULL);
    TG_CHECK(tg_safetensors_metadata_count(st) == 4);
    TG_CHECK(tg_safetensors_metadata(st, "model") &&
             strcmp(tg_safetensors_metadata(st, "model"), "fashion-basic") == 0);
    TG_CHECK(tg_safetensors_metadata(st, "note") &&
             strcmp(tg_safetensors_metadata(st, "note"), meta[3].value) == 0);
    TG_CHECK(tg_safetensors_metadata(st, "nope") == NULL);
    TG_CHECK(tg_safetensors_find(st, "nope") == NULL);
}

static void test_round_trip(void)
{
    fill(0);
    make_tensors();
    const char *p = path_in_dir("model.safetensors");
    TG_CHECK_OK(tg_safetensors_write(p, tensors, NT, meta, 4));
    tg_safetensors *st = NULL;
    TG_CHECK_OK(tg_safetensors_load(p, &st));
    if (!st)
        return;
    check_loaded(st);
    TG_CHECK(strcmp(tg_safetensors_name(st), p) == 0);

    /* Typed lookup. */
    const void *data;
    TG_CHECK_OK(tg_safetensors_get(st, "layer1.conv.weight", TG_ST_F32, 4, (int64_t[]){10, 1, 5, 5},
                                   &data));
    TG_CHECK(data && ((const float *)data)[249] == w1[249]);
    TG_CHECK(tg_safetensors_get(st, "layer2", TG_ST_F32, 1, (int64_t[]){1}, &data) ==
             TG_ERR_NOT_FOUND);
    TG_CHECK(strstr(tg_error_message(), "model.safetensors: no tensor 'layer2'"));
    TG_CHECK(tg_safetensors_get(st, "half", TG_ST_F32, 1, (int64_t[]){3}, &data) == TG_ERR_DTYPE);
    TG_CHECK(strstr(tg_error_message(), "tensor 'half' is f16, expected f32"));
    TG_CHECK(tg_safetensors_get(st, "layer1.conv.weight", TG_ST_F32, 4, (int64_t[]){10, 1, 3, 3},
                                &data) == TG_ERR_SHAPE);
    TG_CHECK(strstr(tg_error_message(), "has shape [10, 1, 5, 5], expected [10, 1, 3, 3]"));
    TG_CHECK(data == NULL);
    tg_safetensors_destroy(st);

    /* The in-memory image is the file, byte for byte, and parses the same. */
    void *buf = NULL;
    size_t len = 0;
    TG_CHECK_OK(tg_safetensors_encode(tensors, NT, meta, 4, &buf, &len));
    FILE *f = fopen(p, "rb");
    unsigned char *disk = tg_malloc(len + 16);
    size_t dl = f ? fread(disk, 1, len + 16, f) : 0;
    if (f)
        fclose(f);
    TG_CHECK(dl == len && memcmp(disk, buf, len) == 0);
    uint64_t hlen = 0;
    memcpy(&hlen, buf, 8); /* little-endian host */
    TG_CHECK(hlen % 8 == 0 && ((char *)buf)[8] == '{');
    TG_CHECK_OK(tg_safetensors_parse(buf, len, "mem", &st));
    if (st)
        check_loaded(st);
    tg_safetensors_destroy(st);
    tg_free(disk);
    tg_free(buf);

    /* No tensors at all is a valid (tiny) file. */
    TG_CHECK_OK(tg_safetensors_encode(NULL, 0, NULL, 0, &buf, &len));
    TG_CHECK(len == 16 && memcmp((char *)buf + 8, "{}      ", 8) == 0);
    TG_CHECK_OK(tg_safetensors_parse(buf, len, "empty", &st));
    TG_CHECK(st && tg_safetensors_count(st) == 0 && tg_safetensors_metadata_count(st) == 0);
    tg_safetensors_destroy(st);
    tg_free(buf);
}

/* ---- corrupt files -------------------------------------------------------------- */

static unsigned char file_buf[4096];

/* A file with `header` (JSON text) and data_len zero bytes of data. */
static size_t make_file(const char *header, size_t data_len)
{
    size_t h = strlen(header);
    uint64_t n = h;
    memcpy(file_buf, &n, 8);
    memcpy(file_buf + 8, header, h);
    memset(file_buf + 8 + h, 0, data_len);
    return 8 + h + data_len;
}

static void expect_bad(const unsigned char *buf, size_t len, const char *msg, int line)
{
    tg_safetensors *st = (tg_safetensors *)1;
    tg_status s = tg_safetensors_parse(buf, len, "model.safetensors", &st);
    if (s == TG_OK || st != NULL)
        tg_test_fail(__FILE__, line, "accepted a bad file, expected '%s'", msg);
    else if (!strstr(tg_error_message(), msg) || !strstr(tg_error_message(), "model.safetensors"))
        tg_test_fail(__FILE__, line, "message '%s' lacks '%s'", tg_error_message(), msg);
    if (s == TG_OK)
        tg_safetensors_destroy(st);
}
#define BAD(header, data_len, msg) expect_bad(file_buf, make_file(header, data_len), msg, __LINE__)

static void test_corrupt_files(void)
{
    const char *ok = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}";
    tg_safetensors *st = NULL;
    size_t n = make_file(ok, 8);
    TG_CHECK_OK(tg_safetensors_parse(file_buf, n, "ok", &st));
    tg_safetensors_destroy(st);

    expect_bad(file_buf, 5, "5 bytes, too short for the 8-byte header length", __LINE__);
    uint64_t huge = (uint64_t)1 << 63;
    memcpy(file_buf, &huge, 8);
    expect_bad(file_buf, n,
               "header length 9223372036854775808 is more than the 100000000-byte limit", __LINE__);
    huge = 5000;
    memcpy(file_buf, &huge, 8);
    expect_bad(file_buf, n, "header length 5000 runs past the end of the file", __LINE__);
    huge = 0;
    memcpy(file_buf, &huge, 8);
    expect_bad(file_buf, 8, "header does not start with '{'", __LINE__);

    BAD(" {}", 0, "header does not start with '{'");
    BAD("[1]", 0, "header does not start with '{'");
    BAD("{\"a\":1,}", 0, "model.safetensors header:1:8: expected a string key");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 8, "header:1:");
    BAD("{\"__metadata__\":{\"k\":1}}", 0,
        "__metadata__ value for key 'k' must be a string, found number");
    BAD("{\"__metadata__\":[]}", 0, "__metadata__ must be an object");
    BAD("{\"a\":[]}", 0, "tensor 'a': entry must be an object, found array");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 8,
        "tensor 'a': unknown field 'x'");
    BAD("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "tensor 'a': missing field 'dtype'");
    BAD("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 8,
        "tensor 'a': missing field 'shape'");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "missing field 'data_offsets'");
    BAD("{\"a\":{\"dtype\":\"F31\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
        "tensor 'a': unknown dtype 'F31'");
    BAD("{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
        "unknown dtype 'f32'");
    BAD("{\"a\":{\"dtype\":5,\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype must be a string");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]}}", 8,
        "shape must be an array");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
        "shape[0] must be a non-negative integer");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8,
        "shape[0] must be a non-negative integer");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8,
        "shape has 9 dimensions, at most 8");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8,
        "shape [4294967296, 4294967296] f32 is too large");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8,
        "data_offsets must be [begin, end]");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,-8]}}", 8,
        "data_offsets must be [begin, end]");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8,
        "data_offsets [8, 0) end before they begin");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
        "data_offsets [0, 8) run past the end of the 4-byte data section");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,18446744073709551615]}}", 8,
        "data_offsets must be [begin, end]");
    /* The canonical message. */
    BAD("{\"layer1.conv.weight\":{\"dtype\":\"F32\",\"shape\":[10,1,5,5],\"data_offsets\":[0,996]}"
        "}",
        996,
        "model.safetensors: tensor 'layer1.conv.weight': data_offsets [0, 996) span 996 bytes but "
        "shape "
        "[10, 1, 5, 5] f32 needs 1000");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
        12, "tensor 'b' [4, 12) overlaps tensor 'a' [0, 8)");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        8, "overlaps");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
        20, "bytes [8, 12) of the data section belong to no tensor (before tensor 'b')");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12,
        "bytes [0, 4) of the data section");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 9,
        "the data section has 9 bytes but the tensors cover only 8 (trailing data)");
    BAD("{}", 3, "has 3 bytes but the tensors cover only 0");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}",
        8, "duplicate key 'a'");
    BAD("{\"a\\u0000b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
        "NUL character");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}\x01", 8, "header:1:");
    /* Zero-size tensors sit anywhere between others, but not inside one. */
    n = make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                  "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]},"
                  "\"y\":{\"dtype\":\"U8\",\"shape\":[3,0],\"data_offsets\":[0,0]}}       ",
                  8);
    TG_CHECK_OK(tg_safetensors_parse(file_buf, n, "zero", &st));
    TG_CHECK(st && tg_safetensors_count(st) == 3 && tg_safetensors_find(st, "z")->nbytes == 0);
    tg_safetensors_destroy(st);
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]}}",
        8, "tensor 'z' [4, 4) overlaps tensor 'a' [0, 8)");

    /* From a file: the same checks, and the file's name. */
    const char *p = path_in_dir("bad.safetensors");
    FILE *f = fopen(p, "wb");
    n = make_file("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 6);
    fwrite(file_buf, 1, n, f);
    fclose(f);
    TG_CHECK(tg_safetensors_load(p, &st) == TG_ERR_FORMAT && st == NULL);
    TG_CHECK(
        strstr(tg_error_message(), "bad.safetensors: tensor 'a': data_offsets [0, 8) run past"));
    TG_CHECK(tg_safetensors_load(path_in_dir("missing.safetensors"), &st) == TG_ERR_NOT_FOUND);
    TG_CHECK(strstr(tg_error_message(), "missing.safetensors: cannot open"));
    TG_CHECK(tg_safetensors_load(dir, &st) == TG_ERR_IO);
    f = fopen(p, "wb");
    fwrite("abc", 1, 3, f);
    fclose(f);
    TG_CHECK(tg_safetensors_load(p, &st) == TG_ERR_FORMAT &&
             strstr(tg_error_message(), "too short"));
}

/* ---- writer input checks and atomicity ---------------------------------------------- */

static int temp_files_left(void)
{
    return tg_test_count_temps(dir);
}

/* The file at p holds fill(seed)'s values. */
static int holds_version(const char *p, unsigned seed)
{
    tg_safetensors *st = NULL;
    if (tg_safetensors_load(p, &st) != TG_OK)
        return 0;
    const tg_st_tensor *t = tg_safetensors_find(st, "layer1.conv.weight");
    int ok = t && ((const float *)t->data)[0] == (float)(-3.0 + seed);
    tg_safetensors_destroy(st);
    return ok;
}

static void test_writer_rejects_bad_input(void)
{
    fill(0);
    make_tensors();
    const char *p = path_in_dir("inputs.safetensors");
    tg_st_tensor t[2] = {{"a", TG_ST_F32, 1, {2}, w1, 0}, {"a", TG_ST_F32, 1, {2}, w1, 0}};
    TG_CHECK(tg_safetensors_write(p, t, 2, NULL, 0) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_error_message(), "two tensors are named 'a'"));
    t[1].name = "__metadata__";
    TG_CHECK(tg_safetensors_write(p, t, 2, NULL, 0) == TG_ERR_INVALID_ARG);
    t[1].name = "b\xFF";
    TG_CHECK(tg_safetensors_write(p, t, 2, NULL, 0) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_error_message(), "not valid UTF-8"));
    t[1] = (tg_st_tensor){"b", TG_ST_F32, 1, {2}, NULL, 0};
    TG_CHECK(tg_safetensors_write(p, t, 2, NULL, 0) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_error_message(), "tensor 'b' has no data"));
    t[1] = (tg_st_tensor){"b", TG_ST_F32, 1, {-2}, w1, 0};
    TG_CHECK(tg_safetensors_write(p, t, 2, NULL, 0) == TG_ERR_SHAPE);
    t[1] = (tg_st_tensor){"b", TG_ST_F32, 9, {2}, w1, 0};
    TG_CHECK(tg_safetensors_write(p, t, 2, NULL, 0) == TG_ERR_SHAPE);
    t[1] = (tg_st_tensor){"b", TG_ST_F32, 3, {1 << 30, 1 << 30, 1 << 30}, w1, 0};
    TG_CHECK(tg_safetensors_write(p, t, 2, NULL, 0) == TG_ERR_SHAPE);
    t[1] = (tg_st_tensor){"b", (tg_st_dtype)99, 1, {2}, w1, 0};
    TG_CHECK(tg_safetensors_write(p, t, 2, NULL, 0) == TG_ERR_DTYPE);
    tg_st_meta m[2] = {{"k", "v"}, {"k", "w"}};
    TG_CHECK(tg_safetensors_write(p, t, 1, m, 2) == TG_ERR_INVALID_ARG);
    TG_CHECK(strstr(tg_error_message(), "metadata key 'k' appears twice"));
    TG_CHECK(access(p, F_OK) != 0); /* nothing was created */
    TG_CHECK(tg_safetensors_write(path_in_dir("no/such/dir/x.safetensors"), t, 1, NULL, 0) ==
             TG_ERR_IO);
    TG_CHECK(strstr(tg_error_message(), "cannot write") &&
             strstr(tg_error_message(), "No such file or directory"));
    TG_CHECK(temp_files_left() == 0);
}

static void test_atomic_write_on_full_disk(void)
{
    /* RLIMIT_FSIZE makes write() fail with EFBIG part-way, even for root, like
     * a full disk would. */
    const char *p = path_in_dir("ckpt.safetensors");
    fill(1);
    make_tensors();
    TG_CHECK_OK(tg_safetensors_write(p, tensors, NT, meta, 4));
    TG_CHECK(holds_version(p, 1));
    struct rlimit old;
    getrlimit(RLIMIT_FSIZE, &old);
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = old;
    lim.rlim_cur = 700; /* the header fits, the data does not */
    TG_CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    fill(2);
    tg_status s = tg_safetensors_write(p, tensors, NT, meta, 4);
    setrlimit(RLIMIT_FSIZE, &old);
    signal(SIGXFSZ, prev);
    TG_CHECK(s == TG_ERR_IO && strstr(tg_error_message(), "write failed"));
    TG_CHECK(strstr(tg_error_message(), "ckpt.safetensors.tmp."));
    TG_CHECK(holds_version(p, 1)); /* the old file is intact */
    TG_CHECK(temp_files_left() == 0);
    TG_CHECK_OK(tg_safetensors_write(p, tensors, NT, meta, 4));
    TG_CHECK(holds_version(p, 2));
}

static void test_atomic_write_on_allocation_failure(void)
{
    const char *p = path_in_dir("alloc.safetensors");
    fill(3);
    make_tensors();
    TG_CHECK_OK(tg_safetensors_write(p, tensors, NT, meta, 4));
    fill(4);
    int64_t live = tg_alloc_live_bytes();
    int failures = 0, done = 0;
    for (int n = 1; n < 200 && !done; n++) {
        tg_alloc_fail_after(n);
        tg_status s = tg_safetensors_write(p, tensors, NT, meta, 4);
        tg_alloc_fail_after(0);
        if (s == TG_OK) {
            done = 1;
            break;
        }
        failures++;
        TG_CHECK(s == TG_ERR_NOMEM);
        TG_CHECK(holds_version(p, 3));
        TG_CHECK(temp_files_left() == 0);
        TG_CHECK(tg_alloc_live_bytes() == live);
    }
    TG_CHECK(done && failures >= 4); /* several allocations, some after the temp file exists */
    TG_CHECK(holds_version(p, 4));
}

static void test_read_only_directory(void)
{
    if (geteuid() == 0) {
        printf("  (skipped: root ignores directory permissions)\n");
        return;
    }
    char ro[300];
    snprintf(ro, sizeof ro, "%s/ro", dir);
    mkdir(ro, 0755);
    char p[400];
    snprintf(p, sizeof p, "%s/x.safetensors", ro);
    fill(5);
    make_tensors();
    TG_CHECK_OK(tg_safetensors_write(p, tensors, NT, meta, 4));
    chmod(ro, 0555);
    fill(6);
    TG_CHECK(tg_safetensors_write(p, tensors, NT, meta, 4) == TG_ERR_IO);
    chmod(ro, 0755);
    TG_CHECK(holds_version(p, 5));
}

static void test_loader_allocation_failures(void)
{
    fill(0);
    make_tensors();
    void *buf;
    size_t len;
    TG_CHECK_OK(tg_safetensors_encode(tensors, NT, meta, 4, &buf, &len));
    int64_t live = tg_alloc_live_bytes();
    int ok = 0;
    for (int n = 1; n < 300 && !ok; n++) {
        tg_safetensors *st = NULL;
        tg_alloc_fail_after(n);
        tg_status s = tg_safetensors_parse(buf, len, "m", &st);
        tg_alloc_fail_after(0);
        TG_CHECK(s == TG_OK || s == TG_ERR_NOMEM);
        ok = s == TG_OK;
        tg_safetensors_destroy(st);
        TG_CHECK(tg_alloc_live_bytes() == live);
    }
    TG_CHECK(ok);
    tg_free(buf);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tg_test_st_XXXXXX");
    if (!TG_MKDTEMP(dir))
        return 1;
    int64_t live = tg_alloc_live_bytes();
    TG_RUN(test_round_trip);
    TG_RUN(test_corrupt_files);
    TG_RUN(test_writer_rejects_bad_input);
    TG_RUN(test_atomic_write_on_full_disk);
    TG_RUN(test_atomic_write_on_allocation_failure);
    TG_RUN(test_read_only_directory);
    TG_RUN(test_loader_allocation_failures);
    tg_test_check_no_leak(live);
    tg_test_remove_dir(dir);
    return tg_test_finish();
}
