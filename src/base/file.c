#define _GNU_SOURCE /* O_CLOEXEC */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *file_kind_name(mode_t mode)
{
    if (S_ISREG(mode))
        return "a regular file";
    if (S_ISDIR(mode))
        return "a directory";
    if (S_ISFIFO(mode))
        return "a FIFO";
    if (S_ISCHR(mode))
        return "a character device";
    if (S_ISBLK(mode))
        return "a block device";
    if (S_ISSOCK(mode))
        return "a socket";
    if (S_ISLNK(mode))
        return "a symbolic link";
    return "of an unknown kind";
}

int file_open_regular(const char *path, uint64_t *size, bmoe_error *err)
{
    /* stat first so that a device is refused without opening it (opening
     * some devices acts on them), then fstat the descriptor in case the path
     * changed in between. O_NONBLOCK: opening a FIFO would otherwise wait for
     * a writer forever. */
    struct stat st;
    if (stat(path, &st) != 0)
        return error_set(err, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return error_set(err, "%s: not a regular file (%s)", path, file_kind_name(st.st_mode));
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return error_set(err, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0) {
        error_set(err, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        error_set(err, "%s: not a regular file (%s)", path, file_kind_name(st.st_mode));
        close(fd);
        return -1;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        error_set(err, "%s: cannot clear O_NONBLOCK: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    *size = (uint64_t)st.st_size;
    return fd;
}
