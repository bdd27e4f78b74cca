#define _GNU_SOURCE /* O_CLOEXEC, O_NOFOLLOW, realpath */
#include "file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Names tried for a temporary file before giving up: collisions only come
 * from another process writing the same target at the same moment. */
#define FILE_TEMPORARY_ATTEMPTS 100

/* The bits a replaced file keeps: read, write and execute for its owner,
 * group and others. Not set-user-ID, set-group-ID or sticky: the new file
 * is the writer's, and another user's set-user-ID bit would make the
 * writer's bytes run as that user. */
#define FILE_KEPT_MODE_BITS (S_IRWXU | S_IRWXG | S_IRWXO)

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
        return error_set_status(err, BMOE_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "%s: not a regular file (%s)", path, file_kind_name(st.st_mode));
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return error_set_status(err, BMOE_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(fd, &st) != 0) {
        error_set_status(err, BMOE_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "%s: not a regular file (%s)", path, file_kind_name(st.st_mode));
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

/* The folder part of path ("." for a bare name, "/" for a name in the
 * root), as a new string; NULL when out of memory. */
static char *folder_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
}

bool file_same(const char *path, const char *other)
{
    if (strcmp(path, other) == 0) /* even where nothing can be looked up (a missing folder) */
        return true;
    struct stat a, b;
    bool a_exists = stat(path, &a) == 0, b_exists = stat(other, &b) == 0;
    if (a_exists || b_exists)
        return a_exists && b_exists && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    /* neither exists yet: two writers would still create one file */
    const char *a_slash = strrchr(path, '/'), *b_slash = strrchr(other, '/');
    if (strcmp(a_slash ? a_slash + 1 : path, b_slash ? b_slash + 1 : other) != 0)
        return false;
    char *a_folder = folder_of(path), *b_folder = folder_of(other);
    bool same = a_folder && b_folder && stat(a_folder, &a) == 0 && stat(b_folder, &b) == 0 &&
                a.st_dev == b.st_dev && a.st_ino == b.st_ino;
    free(a_folder);
    free(b_folder);
    return same;
}

/* The file a replacement of path writes over: path itself, or the file a
 * symbolic link at path leads to, with its type and permission bits in
 * *mode (0 when there is no file yet). NULL with err when path exists but
 * is not (a link to) a regular file we may write. */
static char *replacement_target(const char *path, mode_t *mode, bmoe_error *err)
{
    *mode = 0;
    struct stat st;
    if (lstat(path, &st) != 0) {
        if (errno == ENOENT) {
            char *target = strdup(path);
            if (!target)
                error_set(err, "%s: out of memory", path);
            return target;
        }
        error_set_status(err, BMOE_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
        return NULL;
    }
    char *target;
    if (S_ISLNK(st.st_mode)) {
        target = realpath(path, NULL);
        if (!target) {
            error_set(err, "%s: a symbolic link that cannot be followed: %s", path, strerror(errno));
            return NULL;
        }
        if (stat(target, &st) != 0) {
            error_set_status(err, BMOE_ERR_IO, "%s: cannot stat %s: %s", path, target, strerror(errno));
            free(target);
            return NULL;
        }
    } else {
        target = strdup(path);
        if (!target) {
            error_set(err, "%s: out of memory", path);
            return NULL;
        }
    }
    if (!S_ISREG(st.st_mode)) {
        error_set_status(err, BMOE_ERR_INVALID_ARGUMENT, "%s: not a regular file (%s), not replacing it", path, file_kind_name(st.st_mode));
        free(target);
        return NULL;
    }
    if (access(target, W_OK) != 0) {
        error_set(err, "%s: cannot write: %s", path, strerror(errno));
        free(target);
        return NULL;
    }
    *mode = S_IFREG | (st.st_mode & FILE_KEPT_MODE_BITS);
    return target;
}

/* Gives the temporary the replaced file's permission bits exactly (the
 * umask may have taken some away at creation). A file system that cannot
 * hold them fails the output rather than change who may use the file. */
static int keep_mode(file_replacement *r, const char *path, mode_t mode, bmoe_error *err)
{
    mode &= FILE_KEPT_MODE_BITS;
    struct stat st;
    if (fstat(r->fd, &st) != 0)
        return error_set(err, "%s: cannot stat the temporary file %s: %s", path, r->temporary, strerror(errno));
    if ((st.st_mode & FILE_KEPT_MODE_BITS) != mode && fchmod(r->fd, mode) != 0)
        return error_set(err, "%s: cannot give the temporary file %s the mode %04o: %s", path, r->temporary,
                         (unsigned)mode, strerror(errno));
    return 0;
}

int file_replacement_begin(file_replacement *r, const char *path, bmoe_error *err)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    if (!*path)
        return error_set(err, "no file name given");
    mode_t mode;
    r->target = replacement_target(path, &mode, err);
    if (!r->target)
        return -1;
    size_t size = strlen(r->target) + 64;
    r->temporary = malloc(size);
    if (!r->temporary) {
        file_replacement_release(r);
        return error_set(err, "%s: out of memory", path);
    }
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    for (int attempt = 0; attempt < FILE_TEMPORARY_ATTEMPTS; attempt++) {
        snprintf(r->temporary, size, "%s.tmp-%ld-%ld", r->target, (long)getpid(),
                 (long)(now.tv_nsec / 1000) + attempt);
        /* created with no more permission than the file it replaces: no
         * other user may open it in the moment before keep_mode */
        r->fd = open(r->temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                     mode != 0 ? mode & FILE_KEPT_MODE_BITS : 0666);
        if (r->fd >= 0) {
            if (mode != 0 && keep_mode(r, path, mode, err) != 0) {
                file_replacement_release(r);
                return -1;
            }
            return 0;
        }
        if (errno != EEXIST)
            break;
    }
    error_set(err, "%s: cannot create the temporary file %s: %s", path, r->temporary, strerror(errno));
    free(r->temporary);
    r->temporary = NULL; /* never created: nothing to remove */
    file_replacement_release(r);
    return -1;
}

/* Syncs the folder holding path, so that the rename survives a crash. */
static int sync_directory_of(const char *path, bmoe_error *err)
{
    char *directory = folder_of(path);
    if (!directory)
        return error_set(err, "%s: out of memory", path);
    int status = 0;
    int fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    /* EINVAL: the file system cannot sync a folder; the rename stands. */
    if (fd < 0 || (fsync(fd) != 0 && errno != EINVAL))
        status = error_set(err, "%s: written, but syncing its folder %s failed: %s", path, directory,
                           strerror(errno));
    if (fd >= 0)
        close(fd);
    free(directory);
    return status;
}

int file_replacement_commit(file_replacement *r, bmoe_error *err)
{
    if (r->fd < 0 || !r->temporary)
        return error_set(err, "%s: nothing to commit", r->target ? r->target : "(no file)");
    if (fsync(r->fd) != 0)
        return error_set(err, "%s: cannot sync %s: %s", r->target, r->temporary, strerror(errno));
    int closed = close(r->fd);
    r->fd = -1;
    if (closed != 0)
        return error_set(err, "%s: cannot close %s: %s", r->target, r->temporary, strerror(errno));
    if (rename(r->temporary, r->target) != 0)
        return error_set(err, "%s: cannot rename %s over it: %s", r->target, r->temporary, strerror(errno));
    free(r->temporary);
    r->temporary = NULL;
    return sync_directory_of(r->target, err);
}

void file_replacement_release(file_replacement *r)
{
    if (r->fd >= 0)
        close(r->fd);
    if (r->temporary)
        unlink(r->temporary);
    free(r->temporary);
    free(r->target);
    memset(r, 0, sizeof *r);
    r->fd = -1;
}
