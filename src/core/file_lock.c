/* core/file_lock.c - fcntl locks on a path (tilegraph/files.h: tg_file_lock). */
#include "tilegraph/files.h"

#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

tg_status tg_file_lock(const char *path, int *fd, char owner[32])
{
    owner[0] = '\0';
    *fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (*fd < 0)
        return tg_error(TG_ERR_IO, "cannot create the lock '%s': %s", path, strerror(errno));
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    if (fcntl(*fd, F_SETLK, &fl) != 0) {
        ssize_t n = pread(*fd, owner, 31, 0);
        owner[n > 0 ? n : 0] = '\0';
        if (!owner[0])
            snprintf(owner, 32, "unknown");
        close(*fd);
        *fd = -1;
        return tg_error(TG_ERR_IO, "'%s' is held by another run (pid %s)", path, owner);
    }
    char pid[32];
    int len = snprintf(pid, sizeof pid, "%ld", (long)getpid());
    /* the pid only serves the message of a run that is refused: best effort */
    if (ftruncate(*fd, 0) == 0)
        (void)!pwrite(*fd, pid, (size_t)len, 0);
    return TG_OK;
}

long tg_file_lock_holder(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    long pid = fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK ? (long)fl.l_pid : 0;
    close(fd);
    return pid;
}
