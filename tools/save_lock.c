/* tools/save_lock.c - the lock of a checkpoint path (save_lock.h). */
#include "save_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int save_lock_take(save_lock *l, const char *command, const char *path)
{
    snprintf(l->path, sizeof l->path, "%s.lock", path);
    l->fd = open(l->path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (l->fd < 0) {
        fprintf(stderr, "tilegraph %s: --save %s: cannot create the lock '%s': %s\n", command, path,
                l->path, strerror(errno));
        return -1;
    }
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(l->fd, F_SETLK, &fl) != 0) {
        char owner[32] = "";
        ssize_t n = pread(l->fd, owner, sizeof owner - 1, 0);
        owner[n > 0 ? n : 0] = '\0';
        close(l->fd);
        l->fd = -1;
        fprintf(stderr,
                "tilegraph %s: --save %s: another run (pid %s) is writing that checkpoint; "
                "the one ending last would replace the other's weights. Wait for it, or "
                "give this run another --save FILE (nothing was trained)\n",
                command, path, owner[0] ? owner : "unknown");
        return -1;
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld", (long)getpid());
    /* the pid only serves the message of a run that is refused: best effort */
    if (ftruncate(l->fd, 0) == 0)
        (void)!pwrite(l->fd, pid, (size_t)len, 0);
    return 0;
}

void save_lock_release(save_lock *l)
{
    if (l->fd < 0)
        return;
    /* removed while still held: a run that opened it meanwhile sees the
     * lock and is refused; one that comes later makes a new file */
    unlink(l->path);
    close(l->fd);
    l->fd = -1;
}
