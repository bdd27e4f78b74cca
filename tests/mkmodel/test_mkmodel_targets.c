/* Where bmoe-mkmodel writes: a regular file is replaced only once the new
 * model is complete (a failed write leaves it byte for byte as it was); a
 * target that is not a regular file (a directory, a FIFO, a device, or a
 * link to one) is refused at once, without blocking, and left as it was; a
 * symbolic link to a file is written through and stays a link; a split run
 * that fails replaces none of the shards; and no run leaves a temporary file
 * behind. Every failure is one line with the tool's prefix once. */
#include <dirent.h>
#include <sys/sysmacros.h>

#include "mkmodel_run.h"

static const char old_text[] = "an older file that must survive a failed run\n";

/* Files in the scratch folder whose name starts with prefix. */
static int count_files(const char *prefix)
{
    DIR *dir = opendir(mk_dir);
    if (!dir)
        return -1;
    int count = 0;
    for (struct dirent *entry; (entry = readdir(dir)) != NULL;)
        if (strncmp(entry->d_name, prefix, strlen(prefix)) == 0)
            count++;
    closedir(dir);
    return count;
}

static bool holds(const char *path, const char *text)
{
    size_t size = 0;
    char *data = test_read_file(path, &size);
    bool same = data && size == strlen(text) && memcmp(data, text, size) == 0;
    free(data);
    return same;
}

static bool write_text(const char *path, const char *text)
{
    FILE *file = fopen(path, "wb");
    if (!file)
        return false;
    bool ok = fwrite(text, 1, strlen(text), file) == strlen(text);
    return fclose(file) == 0 && ok;
}

static bool is_model(const char *path)
{
    bmoe_error err;
    gguf_model *m = gguf_open(path, &err);
    bool ok = m && gguf_tensor_count(m) > 0;
    gguf_close(m);
    return ok;
}

/* The run failed with one line that names what, once prefixed. */
static void expect_one_line(const char *label, const char *fragment)
{
    char *errors = test_read_file(mk_stderr, NULL);
    CHECK_MSG(errors && mk_count_lines(errors) == 1 && strncmp(errors, "bmoe-mkmodel: ", 14) == 0 &&
                  strstr(errors + 14, "mkmodel: ") == NULL && strstr(errors, fragment),
              "%s printed: %s (wanted '%s')", label, errors ? errors : "(nothing)", fragment);
    free(errors);
}

static void test_failed_write_keeps_the_target(void)
{
    char target[1200];
    mk_path(target, sizeof target, "kept.gguf");
    CHECK(write_text(target, old_text));
    /* the tiny model is about 10 MB: the system stops it at 1 MB */
    int status = mk_run_limited(60, 1 << 20, "--shape tiny-llama --quiet -o '%s'", target);
    CHECK_MSG(status == 1, "limited run exited %d", status);
    expect_one_line("failed write", "File too large");
    CHECK(holds(target, old_text));
    CHECK(count_files("kept.gguf.tmp") == 0);

    status = mk_run_limited(60, 0, "--shape tiny-llama --quiet -o '%s'", target);
    CHECK_MSG(status == 0, "run exited %d", status);
    CHECK(is_model(target));
    CHECK(count_files("kept.gguf.tmp") == 0);
    unlink(target);
}

static void test_failed_split_keeps_every_shard(void)
{
    char prefix[1200], shard[3][1300];
    mk_path(prefix, sizeof prefix, "parts.gguf");
    for (int s = 0; s < 3; s++) {
        snprintf(shard[s], sizeof shard[s], "%s/parts-%05d-of-00003.gguf", mk_dir, s + 1);
        CHECK(write_text(shard[s], old_text));
    }
    /* the shards are 3.4 to 3.7 MB: the first one's write fails at 3 MB */
    int status = mk_run_limited(60, 3 << 20, "--shape tiny-llama --split 3 --quiet -o '%s'", prefix);
    CHECK_MSG(status == 1, "limited split run exited %d", status);
    expect_one_line("failed split", "File too large");
    for (int s = 0; s < 3; s++)
        CHECK_MSG(holds(shard[s], old_text), "shard %d was replaced", s + 1);
    CHECK(count_files("parts-") == 3);

    status = mk_run_limited(60, 0, "--shape tiny-llama --split 3 --quiet -o '%s'", prefix);
    CHECK_MSG(status == 0, "split run exited %d", status);
    bmoe_error err;
    gguf_model *m = gguf_open(shard[0], &err);
    CHECK_MSG(m && gguf_shard_count(m) == 3, "%s", m ? "wrong shard count" : err.message);
    gguf_close(m);
    CHECK(count_files("parts-") == 3);
    for (int s = 0; s < 3; s++)
        unlink(shard[s]);
}

static void test_symbolic_link(void)
{
    char real[1200], link[1200];
    mk_path(real, sizeof real, "real.gguf");
    mk_path(link, sizeof link, "link.gguf");
    CHECK(write_text(real, old_text));
    unlink(link);
    CHECK(symlink("real.gguf", link) == 0);
    int status = mk_run_limited(60, 0, "--shape tiny-llama --quiet -o '%s'", link);
    CHECK_MSG(status == 0, "run through a link exited %d", status);
    struct stat st;
    CHECK(lstat(link, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK(is_model(real));
    CHECK(count_files("real.gguf.tmp") == 0 && count_files("link.gguf.tmp") == 0);
    unlink(link);
    unlink(real);
}

/* Refused at once (a FIFO would block an open for writing), and unchanged. */
static void expect_refused(const char *path, mode_t kind, const char *fragment)
{
    int status = mk_run_limited(20, 0, "--shape tiny-llama --quiet -o '%s'", path);
    CHECK_MSG(status == 1, "%s: exited %d", path, status);
    expect_one_line(path, fragment);
    struct stat st;
    CHECK_MSG(lstat(path, &st) == 0 && (st.st_mode & S_IFMT) == kind, "%s was changed", path);
}

static void test_targets_that_are_not_files(void)
{
    char directory[1200], fifo[1200], link[1200], device[1200], device_link[1200];
    mk_path(directory, sizeof directory, "folder.gguf");
    mk_path(fifo, sizeof fifo, "fifo.gguf");
    mk_path(link, sizeof link, "fifo-link.gguf");
    mk_path(device, sizeof device, "null.gguf");
    mk_path(device_link, sizeof device_link, "null-link.gguf");
    mkdir(directory, 0755);
    expect_refused(directory, S_IFDIR, "not a regular file (a directory)");
    unlink(fifo);
    CHECK(mkfifo(fifo, 0600) == 0);
    expect_refused(fifo, S_IFIFO, "not a regular file (a FIFO)");
    unlink(link);
    CHECK(symlink("fifo.gguf", link) == 0);
    expect_refused(link, S_IFLNK, "not a regular file (a FIFO)");
    /* a /dev/null of our own where the system allows it (root), and a link
     * to it: the device must survive a refused run and a failed one */
    unlink(device);
    unlink(device_link);
    if (mknod(device, S_IFCHR | 0666, makedev(1, 3)) == 0) {
        expect_refused(device, S_IFCHR, "not a regular file (a character device)");
        CHECK(symlink("null.gguf", device_link) == 0);
        expect_refused(device_link, S_IFLNK, "not a regular file (a character device)");
        expect_refused(device, S_IFCHR, "not a regular file (a character device)");
    }
    /* split shards are all checked before anything is written */
    char prefix[1200], first[1300], second[1300];
    mk_path(prefix, sizeof prefix, "mixed.gguf");
    snprintf(first, sizeof first, "%s/mixed-00001-of-00002.gguf", mk_dir);
    snprintf(second, sizeof second, "%s/mixed-00002-of-00002.gguf", mk_dir);
    CHECK(write_text(first, old_text));
    unlink(second);
    CHECK(mkfifo(second, 0600) == 0);
    int status = mk_run_limited(20, 0, "--shape tiny-llama --split 2 --quiet -o '%s'", prefix);
    CHECK_MSG(status == 1, "mixed split exited %d", status);
    expect_one_line("mixed split", "not a regular file (a FIFO)");
    CHECK(holds(first, old_text));
    CHECK(count_files("mixed-") == 2);
    unlink(first);
    unlink(second);
    rmdir(directory);
    unlink(link);
    unlink(fifo);
    unlink(device_link);
    unlink(device);
}

int main(void)
{
    mk_setup("mkmodel_targets");
    test_failed_write_keeps_the_target();
    test_failed_split_keeps_every_shard();
    test_symbolic_link();
    test_targets_that_are_not_files();
    return test_finish();
}
