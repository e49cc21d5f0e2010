/*
 * file.c: read-only file mapping. Model files and external weights are
 * mapped, not copied, so large models cost no extra memory.
 */
#define _POSIX_C_SOURCE 200809L
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

kiln_status base_file_map_open(const char *path, base_file_map *out, base_diag *d)
{
    memset(out, 0, sizeof(*out));
    int fd = open(path, O_RDONLY);
    if (fd < 0) return base_diag_add(d, KILN_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return base_diag_add(d, KILN_ERR_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return base_diag_add(d, KILN_ERR_IO, "'%s' is not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return KILN_OK;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return base_diag_add(d, KILN_ERR_IO, "cannot map '%s': %s", path, strerror(errno));
    out->data = p;
    out->size = (size_t)st.st_size;
    out->mapped = true;
    return KILN_OK;
}

void base_file_map_close(base_file_map *m)
{
    if (m->data) {
        if (m->mapped) munmap(m->data, m->size);
        else base_free(m->data);
    }
    memset(m, 0, sizeof(*m));
}
