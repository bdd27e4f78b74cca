/* The writer and the files it meets: it writes a temporary file beside the
 * target and renames it over the target only when complete, so a failed or
 * abandoned write leaves an existing file byte for byte as it was and leaves
 * no temporary behind; targets that are not regular files (a directory, a
 * FIFO, a character device) are refused before anything is opened, without
 * blocking; a symbolic link is written through and stays a link. */
#include <dirent.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "gguf_test_util.h"
#include "test.h"

static char folder[512];

static const char old_text[] = "not a model, but a file someone cares about\n";

static void path_in_folder(char *buffer, size_t size, const char *name)
{
    snprintf(buffer, size, "%s/%s", folder, name);
}

/* Files in the folder whose name starts with prefix. */
static int count_files(const char *prefix)
{
    DIR *dir = opendir(folder);
    if (!dir)
        return -1;
    int count = 0;
    for (struct dirent *entry; (entry = readdir(dir)) != NULL;)
        if (strncmp(entry->d_name, prefix, strlen(prefix)) == 0)
            count++;
    closedir(dir);
    return count;
}

static bool file_holds(const char *path, const char *text)
{
    size_t size = 0;
    char *data = test_read_file(path, &size);
    bool same = data && size == strlen(text) && memcmp(data, text, size) == 0;
    free(data);
    return same;
}

/* A small valid model: one key, one F32 tensor of n floats. */
static gguf_writer *start_model(const char *path, int64_t n, bmoe_error *err)
{
    gguf_writer *w = gguf_writer_create(path, err);
    if (!w)
        return NULL;
    gguf_writer_add_string(w, "general.architecture", "files");
    const int64_t ne[1] = {n};
    gguf_writer_add_tensor_info(w, "t", TYPE_F32, 1, ne);
    gguf_writer_begin_data(w);
    return w;
}

static void write_floats(gguf_writer *w, int64_t n)
{
    float value = 0.5f;
    for (int64_t i = 0; i < n; i++)
        gguf_writer_write_data(w, &value, sizeof value);
}

/* A model that opens and holds one tensor of n floats. */
static bool is_model(const char *path, int64_t n)
{
    bmoe_error err = {0};
    gguf_model *m = gguf_open(path, &err);
    bool ok = m && gguf_tensor_count(m) == 1 && gguf_tensor_at(m, 0)->ne[0] == n;
    gguf_close(m);
    return ok;
}

static void test_failures_keep_the_target(void)
{
    char path[600];
    path_in_folder(path, sizeof path, "kept.gguf");
    CHECK(write_whole_file(path, old_text, strlen(old_text)));
    bmoe_error err = {0};

    /* a misuse found at finish */
    gguf_writer *w = start_model(path, 8, &err);
    CHECK_MSG(w != NULL, "%s", err.message);
    write_floats(w, 3);
    CHECK(gguf_writer_finish(w, &err) == -1 && strstr(err.message, "'t' got 12 of 32 bytes"));
    CHECK(file_holds(path, old_text));
    CHECK(count_files("kept.gguf.tmp") == 0);

    /* abandoned half way */
    w = start_model(path, 8, &err);
    write_floats(w, 8);
    gguf_writer_destroy(w);
    CHECK(file_holds(path, old_text));
    CHECK(count_files("kept.gguf.tmp") == 0);

    /* completed but never published */
    w = start_model(path, 8, &err);
    write_floats(w, 8);
    CHECK_MSG(gguf_writer_complete(w, &err) == 0, "%s", err.message);
    CHECK(file_holds(path, old_text));
    gguf_writer_destroy(w);
    CHECK(file_holds(path, old_text));
    CHECK(count_files("kept.gguf.tmp") == 0);

    /* a write the system refuses: files may not grow past 64 KiB here */
    struct rlimit saved, small;
    CHECK(getrlimit(RLIMIT_FSIZE, &saved) == 0);
    small = saved;
    small.rlim_cur = 65536;
    void (*previous)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0);
    w = start_model(path, 1 << 16, &err);
    CHECK_MSG(w != NULL, "%s", err.message);
    write_floats(w, 1 << 16);
    int status = gguf_writer_finish(w, &err);
    CHECK(setrlimit(RLIMIT_FSIZE, &saved) == 0);
    signal(SIGXFSZ, previous);
    CHECK(status == -1);
    CHECK_MSG(strstr(err.message, path) && strstr(err.message, "write failed: File too large"), "message '%s'",
              err.message);
    CHECK(file_holds(path, old_text));
    CHECK(count_files("kept.gguf.tmp") == 0);

    /* and a good write replaces it */
    w = start_model(path, 8, &err);
    write_floats(w, 8);
    CHECK_MSG(gguf_writer_finish(w, &err) == 0, "%s", err.message);
    CHECK(is_model(path, 8));
    CHECK(count_files("kept.gguf.tmp") == 0);
    unlink(path);
}

static void test_symbolic_links(void)
{
    char real[600], link[600], dangling[600];
    path_in_folder(real, sizeof real, "real.gguf");
    path_in_folder(link, sizeof link, "link.gguf");
    path_in_folder(dangling, sizeof dangling, "dangling.gguf");
    CHECK(write_whole_file(real, old_text, strlen(old_text)));
    unlink(link);
    CHECK(symlink("real.gguf", link) == 0);
    bmoe_error err = {0};

    /* a failure through the link keeps the file it points to */
    gguf_writer *w = start_model(link, 8, &err);
    CHECK_MSG(w != NULL, "%s", err.message);
    write_floats(w, 2);
    CHECK(gguf_writer_finish(w, &err) == -1);
    CHECK(file_holds(real, old_text));

    /* success writes through: the link stays a link to the new file */
    w = start_model(link, 8, &err);
    write_floats(w, 8);
    CHECK_MSG(gguf_writer_finish(w, &err) == 0, "%s", err.message);
    struct stat st;
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(is_model(real, 8) && is_model(link, 8));
    CHECK(count_files("real.gguf.tmp") == 0 && count_files("link.gguf.tmp") == 0);

    /* a link to nothing is refused and left alone */
    unlink(dangling);
    CHECK(symlink("nothing-here.gguf", dangling) == 0);
    CHECK(gguf_writer_create(dangling, &err) == NULL && strstr(err.message, "symbolic link"));
    CHECK(lstat(dangling, &st) == 0 && S_ISLNK(st.st_mode));
    unlink(dangling);
    unlink(link);
    unlink(real);
}

/* The target is refused up front; it is still there, of the same kind. */
static void expect_refused(const char *path, mode_t kind, const char *kind_name)
{
    bmoe_error err = {0};
    alarm(20); /* opening a FIFO for writing would wait for a reader */
    gguf_writer *w = gguf_writer_create(path, &err);
    alarm(0);
    CHECK_MSG(w == NULL, "%s: accepted", path);
    gguf_writer_destroy(w);
    CHECK_MSG(strstr(err.message, path) && strstr(err.message, kind_name), "%s: message '%s'", path, err.message);
    struct stat st;
    CHECK_MSG(lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == kind, "%s: changed", path);
}

static void test_targets_that_are_not_files(void)
{
    char directory[600], fifo[600], device[600], fifo_link[600];
    path_in_folder(directory, sizeof directory, "directory.gguf");
    path_in_folder(fifo, sizeof fifo, "fifo.gguf");
    path_in_folder(device, sizeof device, "null-device.gguf");
    path_in_folder(fifo_link, sizeof fifo_link, "fifo-link.gguf");
    mkdir(directory, 0755);
    expect_refused(directory, S_IFDIR, "not a regular file (a directory)");
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    expect_refused(fifo, S_IFIFO, "not a regular file (a FIFO)");
    unlink(fifo_link);
    CHECK(symlink("fifo.gguf", fifo_link) == 0);
    expect_refused(fifo_link, S_IFLNK, "not a regular file (a FIFO)");
    /* a /dev/null of our own, where the system lets us make one (root) */
    unlink(device);
    if (mknod(device, S_IFCHR | 0666, makedev(1, 3)) == 0) {
        expect_refused(device, S_IFCHR, "not a regular file (a character device)");
        unlink(device);
    }
    bmoe_error err = {0};
    CHECK(gguf_writer_create("", &err) == NULL && strstr(err.message, "no file name"));
    CHECK(count_files("directory.gguf") == 1 && count_files("fifo.gguf") == 1);
    CHECK(count_files("fifo-link.gguf") == 1);
    rmdir(directory);
    unlink(fifo_link);
    unlink(fifo);
}

int main(void)
{
    snprintf(folder, sizeof folder, "%s/gguf_files", test_tmp_dir());
    mkdir(folder, 0755);
    test_failures_keep_the_target();
    test_symbolic_links();
    test_targets_that_are_not_files();
    return test_finish();
}
