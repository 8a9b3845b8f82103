/* core/atomic_file.c - write-to-temporary-then-rename, stale temporaries,
 * writability probes and non-blocking "regular file only" opens.
 *
 * Why each step: the temporary lives in PATH's directory because rename(2)
 * is atomic only within one file system; fsync before the rename because
 * otherwise a crash can leave the new name pointing at unwritten blocks;
 * fsync of the directory after it so the rename itself is durable. A reader
 * opens with O_NONBLOCK because open(2) of a FIFO blocks until a writer
 * appears - before fstat could tell us it is a FIFO.
 */
#define _GNU_SOURCE /* O_CLOEXEC, dirent, kill */
#include "core/atomic_file.h"

#include "core/alloc.h"
#include "core/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

const char *tg_file_kind(unsigned mode)
{
    if (S_ISREG(mode))
        return "a regular file";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    return "a special file";
}

static tg_status not_regular(const char *path, unsigned mode)
{
    return tg_error(TG_ERR_IO, "%s is %s, not a regular file: give the path of a file", path,
                    tg_file_kind(mode));
}

/* ---- names ------------------------------------------------------------------------- */

/* The directory holding `path` ("." for a bare name) into dir[cap], which
 * must hold strlen(path) + 2 bytes; false when it cannot. */
static bool parent_dir_into(const char *path, char *dir, size_t cap)
{
    if (strlen(path) + 2 > cap)
        return false;
    strcpy(dir, path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    return true;
}

/* The same, newly allocated. */
static char *parent_dir(const char *path)
{
    size_t cap = strlen(path) + 2;
    char *dir = tg_malloc(cap);
    if (dir)
        parent_dir_into(path, dir, cap);
    return dir;
}

static char *temp_name(const char *path, long pid)
{
    size_t n = strlen(path) + 32;
    char *tmp = tg_malloc(n);
    if (tmp)
        snprintf(tmp, n, "%s.tmp.%ld", path, pid);
    return tmp;
}

/* 1 when `name` is `base`.tmp.PID; the PID is returned in *pid. */
static int is_temp_of(const char *name, const char *base, long *pid)
{
    size_t n = strlen(base);
    if (strncmp(name, base, n) != 0 || strncmp(name + n, ".tmp.", 5) != 0)
        return 0;
    const char *digits = name + n + 5;
    if (!*digits)
        return 0;
    char *end;
    errno = 0;
    long v = strtol(digits, &end, 10);
    if (*end || errno || v <= 0 || digits[0] < '1' || digits[0] > '9')
        return 0;
    *pid = v;
    return 1;
}

/* 1 when `name` starts with `prefix` and ends in .tmp.PID of a PID that
 * does not run (ESRCH; EPERM means it runs under another user). */
static int stale_with_prefix(const char *name, const char *prefix)
{
    if (strncmp(name, prefix, strlen(prefix)) != 0)
        return 0;
    const char *t = strstr(name, ".tmp.");
    while (t && strstr(t + 1, ".tmp."))
        t = strstr(t + 1, ".tmp.");
    long pid;
    if (!t)
        return 0;
    char base[512];
    size_t n = (size_t)(t - name);
    if (n >= sizeof base)
        return 0;
    memcpy(base, name, n);
    base[n] = '\0';
    if (!is_temp_of(name, base, &pid) || pid == (long)getpid())
        return 0;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int tg_atomic_file_clean_stale_prefix(const char *dir, const char *prefix)
{
    int removed = 0;
    DIR *d = dir && prefix ? opendir(dir) : NULL;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (!stale_with_prefix(e->d_name, prefix))
            continue;
        char full[1536];
        if ((size_t)snprintf(full, sizeof full, "%s/%s", dir, e->d_name) < sizeof full)
            removed += unlink(full) == 0;
    }
    if (d)
        closedir(d);
    return removed;
}

int tg_atomic_file_clean_stale(const char *path)
{
    if (!path || !*path)
        return 0;
    /* on the stack: a clean-up that needs no memory cannot be skipped for the lack of it */
    char dir[PATH_MAX], full[PATH_MAX];
    if (!parent_dir_into(path, dir, sizeof dir))
        return 0;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    int removed = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        long pid;
        if (!is_temp_of(e->d_name, base, &pid) || pid == (long)getpid())
            continue;
        /* ESRCH: no such process. EPERM means it runs under another user. */
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        if ((size_t)snprintf(full, sizeof full, "%s/%s", dir, e->d_name) >= sizeof full)
            continue;
        removed += unlink(full) == 0;
    }
    if (d)
        closedir(d);
    return removed;
}

/* ---- writing ----------------------------------------------------------------------- */

static tg_status begin(const char *path, tg_atomic_file *af)
{
    memset(af, 0, sizeof *af);
    if (!path || !*path)
        return tg_error(TG_ERR_INVALID_ARG, "no output file name given");
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return not_regular(path, st.st_mode);
    af->path = tg_strdup(path);
    af->tmp = temp_name(path, (long)getpid());
    if (!af->path || !af->tmp) {
        tg_free(af->path);
        tg_free(af->tmp);
        memset(af, 0, sizeof *af);
        return tg_error(TG_ERR_NOMEM, "'%s': out of memory", path);
    }
    tg_atomic_file_clean_stale(path);
    return TG_OK;
}

static void release(tg_atomic_file *af)
{
    tg_free(af->path);
    tg_free(af->tmp);
    memset(af, 0, sizeof *af);
}

tg_status tg_atomic_file_reserve(const char *path, tg_atomic_file *af)
{
    TG_TRY(begin(path, af));
    if (unlink(af->tmp) != 0 && errno != ENOENT) {
        tg_status s = tg_error(TG_ERR_IO, "'%s': cannot remove old temporary '%s': %s", path,
                               af->tmp, strerror(errno));
        release(af);
        return s;
    }
    return TG_OK;
}

tg_status tg_atomic_file_open(const char *path, tg_atomic_file *af)
{
    TG_TRY(begin(path, af));
    int fd = open(af->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        tg_status s = tg_error(TG_ERR_IO, "cannot write '%s' (temporary '%s'): %s", path, af->tmp,
                               strerror(errno));
        release(af);
        return s;
    }
    /* Keep the permissions of the file being replaced. */
    struct stat old;
    if (stat(path, &old) == 0 && S_ISREG(old.st_mode))
        (void)fchmod(fd, old.st_mode & 07777);
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        close(fd);
        unlink(af->tmp);
        release(af);
        return tg_error(TG_ERR_NOMEM, "'%s': out of memory for a stream", path);
    }
    return TG_OK;
}

/* fsync the directory, so that the rename itself is durable. Some file
 * systems refuse fsync on a directory (EINVAL); that is not a failure. */
static tg_status sync_dir(const char *path)
{
    char dir[PATH_MAX]; /* on the stack: durability must not depend on free memory */
    if (!parent_dir_into(path, dir, sizeof dir))
        return TG_OK; /* no such path opens; the data is renamed and synced */
    tg_status s = TG_OK;
    int fd = open(dir, O_RDONLY | O_CLOEXEC | O_DIRECTORY);
    if (fd >= 0) {
        if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
            s = tg_error(TG_ERR_IO, "'%s': written, but syncing directory '%s' failed: %s", path,
                         dir, strerror(errno));
        close(fd);
    }
    return s;
}

/* fsync a file written by someone else under the reserved name. */
static int sync_path(const char *tmp)
{
    int fd = open(tmp, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    int r = fsync(fd);
    int e = errno;
    close(fd);
    errno = e;
    return r;
}

tg_status tg_atomic_file_commit(tg_atomic_file *af)
{
    if (!af || !af->tmp)
        return tg_error(TG_ERR_INVALID_ARG, "atomic file: commit of a file that is not open");
    tg_status s = TG_OK;
    const char *step = NULL;
    if (af->f) {
        if (fflush(af->f) != 0 || ferror(af->f))
            step = "write";
        else if (fsync(fileno(af->f)) != 0)
            step = "fsync";
        int e = errno;
        if (fclose(af->f) != 0 && !step)
            step = "close", e = errno;
        af->f = NULL;
        errno = e;
    } else if (sync_path(af->tmp) != 0) {
        step = "fsync";
    }
    if (!step && rename(af->tmp, af->path) != 0)
        step = "rename";
    if (step) {
        s = tg_error(TG_ERR_IO,
                     "cannot write '%s': %s failed on temporary '%s': %s (the old file, if any, "
                     "is unchanged)",
                     af->path, step, af->tmp, strerror(errno ? errno : EIO));
        unlink(af->tmp);
    } else {
        s = sync_dir(af->path);
    }
    release(af);
    return s;
}

void tg_atomic_file_abort(tg_atomic_file *af)
{
    if (!af)
        return;
    if (af->f)
        fclose(af->f);
    af->f = NULL;
    if (af->tmp)
        unlink(af->tmp);
    release(af);
}

tg_status tg_atomic_file_write(const char *path, const void *buf, size_t len)
{
    tg_atomic_file af;
    TG_TRY(tg_atomic_file_open(path, &af));
    if (len && fwrite(buf, 1, len, af.f) != len) {
        tg_status s = tg_error(TG_ERR_IO, "cannot write '%s' (temporary '%s'): %s", path, af.tmp,
                               strerror(errno ? errno : EIO));
        tg_atomic_file_abort(&af);
        return s;
    }
    return tg_atomic_file_commit(&af);
}

/* ---- probes ------------------------------------------------------------------------ */

tg_status tg_probe_writable(const char *what, const char *path)
{
    what = what ? what : "output";
    if (!path || !*path)
        return tg_error(TG_ERR_INVALID_ARG, "%s: no file name given", what);
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        return tg_error(TG_ERR_IO, "%s: '%s' is %s, not a regular file: give a file name", what,
                        path, tg_file_kind(st.st_mode));
    char *dir = parent_dir(path);
    char *tmp = temp_name(path, (long)getpid());
    tg_status s = TG_OK;
    if (!dir || !tmp) {
        s = tg_error(TG_ERR_NOMEM, "%s: out of memory", what);
    } else if (stat(dir, &st) != 0) {
        s = tg_error(TG_ERR_IO, "%s: cannot write '%s': directory '%s' %s", what, path, dir,
                     errno == ENOENT ? "does not exist: create it first" : strerror(errno));
    } else if (!S_ISDIR(st.st_mode)) {
        s = tg_error(TG_ERR_IO, "%s: cannot write '%s': '%s' is %s, not a directory", what, path,
                     dir, tg_file_kind(st.st_mode));
    } else {
        /* O_EXCL so that a probe never truncates someone's file. */
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            s = tg_error(TG_ERR_IO, "%s: cannot write '%s': %s (creating a file in '%s' failed)",
                         what, path, strerror(errno), dir);
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
    }
    tg_free(dir);
    tg_free(tmp);
    return s;
}

static tg_status make_dirs(const char *what, const char *dir)
{
    char *p = tg_strdup(dir);
    if (!p)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", what);
    tg_status s = TG_OK;
    for (char *c = p + 1; s == TG_OK; c++) {
        if (*c != '/' && *c != '\0')
            continue;
        char keep = *c;
        *c = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            s = tg_error(TG_ERR_IO, "%s: cannot create directory '%s': %s", what, p,
                         strerror(errno));
        *c = keep;
        if (!keep)
            break;
    }
    tg_free(p);
    return s;
}

tg_status tg_probe_writable_dir(const char *what, const char *dir)
{
    what = what ? what : "output directory";
    if (!dir || !*dir)
        return tg_error(TG_ERR_INVALID_ARG, "%s: no directory given", what);
    struct stat st;
    if (stat(dir, &st) != 0)
        TG_TRY(make_dirs(what, dir));
    else if (!S_ISDIR(st.st_mode))
        return tg_error(TG_ERR_IO, "%s: '%s' is %s, not a directory", what, dir,
                        tg_file_kind(st.st_mode));
    size_t n = strlen(dir) + 32;
    char *probe = tg_malloc(n);
    if (!probe)
        return tg_error(TG_ERR_NOMEM, "%s: out of memory", what);
    snprintf(probe, n, "%s/.probe", dir);
    tg_status s = tg_probe_writable(what, probe);
    tg_free(probe);
    return s;
}

/* ---- reading ----------------------------------------------------------------------- */

tg_status tg_check_regular(const char *path)
{
    if (!path || !*path)
        return tg_error(TG_ERR_INVALID_ARG, "no input file name given");
    struct stat st;
    if (stat(path, &st) != 0)
        return tg_error(errno == ENOENT ? TG_ERR_NOT_FOUND : TG_ERR_IO, "%s: cannot open: %s", path,
                        strerror(errno));
    if (!S_ISREG(st.st_mode))
        return not_regular(path, st.st_mode);
    return TG_OK;
}

tg_status tg_open_regular(const char *path, int *fd)
{
    *fd = -1;
    if (!path || !*path)
        return tg_error(TG_ERR_INVALID_ARG, "no input file name given");
    /* O_NONBLOCK: opening a FIFO must not wait for a writer. */
    int f = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (f < 0)
        return tg_error(errno == ENOENT ? TG_ERR_NOT_FOUND : TG_ERR_IO, "%s: cannot open: %s", path,
                        strerror(errno));
    struct stat st;
    if (fstat(f, &st) != 0) {
        tg_status s = tg_error(TG_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
        close(f);
        return s;
    }
    if (!S_ISREG(st.st_mode)) {
        close(f);
        return not_regular(path, st.st_mode);
    }
    int flags = fcntl(f, F_GETFL);
    if (flags >= 0)
        (void)fcntl(f, F_SETFL, flags & ~O_NONBLOCK);
    *fd = f;
    return TG_OK;
}

tg_status tg_fopen_regular(const char *path, FILE **out)
{
    *out = NULL;
    int fd;
    TG_TRY(tg_open_regular(path, &fd));
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        close(fd);
        return tg_error(TG_ERR_NOMEM, "'%s': out of memory for a stream", path);
    }
    *out = f;
    return TG_OK;
}
