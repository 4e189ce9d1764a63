/*
 * The C side of the longhaul gfal2 plugin: the one place that touches gfal2's and
 * glib's types. It fills gfal2's `gfal_plugin_interface` from the installed header (so
 * the compiler lays the struct out, not us), turns each gfal2 callback into a call of a
 * `longhaul_gfal_*` function of the Rust crate with plain C types, and offers the Rust
 * side a few helpers (`lh_shim_*`): set a GError, read a gfal2 option, ask gfal2 for
 * another plugin's checksum, report progress and events to the copy's listeners.
 *
 * Rust owns all decisions (which URLs and operations are claimed, what a copy does);
 * nothing here allocates beyond a directory handle's small struct.
 */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>

#include <gfal_plugins_api.h>

/* ---- What the Rust side offers (src/ffi.rs; keep the two in step) ------------------- */

/* An entry's metadata, as the Rust side gives it (st_mode with the file type bits). */
struct lh_stat {
    uint32_t mode;
    uint64_t size;
    int64_t mtime_secs;
    uint32_t mtime_nanos;
};

/* gfal2's copy parameters, read here so the Rust side never sees gfalt_params_t. */
struct lh_copy_params {
    int replace_existing;
    int create_parent;
    int strict;
    int checksum_mode; /* gfalt_checksum_mode_t's bits: 1 source, 2 target */
    char checksum_type[64];
    char checksum_value[256];
    uint32_t nbstreams;
    uint64_t timeout_secs;
};

int longhaul_gfal_claims_url(const char *url);
int longhaul_gfal_claims_copy(const char *src, const char *dst);
int longhaul_gfal_stat(gfal2_context_t ctx, const char *url, struct lh_stat *out, GError **err);
void *longhaul_gfal_opendir(gfal2_context_t ctx, const char *url, GError **err);
int longhaul_gfal_readdir(void *listing, char *name, size_t name_cap, struct lh_stat *st);
void longhaul_gfal_closedir(void *listing);
int longhaul_gfal_mkdir(gfal2_context_t ctx, const char *url, uint32_t mode, int parents,
                        GError **err);
int longhaul_gfal_unlink(gfal2_context_t ctx, const char *url, GError **err);
int longhaul_gfal_rmdir(gfal2_context_t ctx, const char *url, GError **err);
int longhaul_gfal_checksum(gfal2_context_t ctx, const char *url, const char *type, char *out,
                           size_t out_cap, int64_t offset, uint64_t length, GError **err);
int longhaul_gfal_copy(gfal2_context_t ctx, gfalt_params_t params,
                       const struct lh_copy_params *p, const char *src, const char *dst,
                       GError **err);

/* ---- Helpers for the Rust side ------------------------------------------------------ */

#define LH_PLUGIN_NAME "longhaul"
#define LH_OPTION_GROUP "LONGHAUL"

static GQuark lh_domain(void)
{
    return g_quark_from_static_string(GFAL2_QUARK_PLUGINS "::LONGHAUL");
}

void lh_shim_set_error(GError **err, int code, const char *msg)
{
    gfal2_set_error(err, lh_domain(), code, "longhaul", "%s", msg);
}

/* Which side of a copy failed, as FTS3 reads it from the message (GFALT_ERROR_*). */
void lh_shim_set_copy_error(GError **err, int code, int side, int note, const char *msg)
{
    const char *sides[] = {GFALT_ERROR_SOURCE, GFALT_ERROR_DESTINATION, GFALT_ERROR_TRANSFER};
    const char *notes[] = {NULL,
                           GFALT_ERROR_CHECKSUM,
                           GFALT_ERROR_CHECKSUM_MISMATCH,
                           GFALT_ERROR_EXISTS,
                           GFALT_ERROR_OVERWRITE,
                           GFALT_ERROR_PARENT,
                           GFALT_ERROR_SIZE_MISMATCH};
    const char *s = (side >= 0 && side < 3) ? sides[side] : GFALT_ERROR_TRANSFER;
    const char *n = (note >= 0 && note < 7) ? notes[note] : NULL;
    gfalt_set_error(err, lh_domain(), code, "longhaul_copy", s, n, "%s", msg);
}

/* The option LONGHAUL:key (gfal2's config files or set_opt_string) into buf; its length,
 * or -1 when it is not set or does not fit. */
int lh_shim_get_opt(gfal2_context_t ctx, const char *key, char *buf, size_t cap)
{
    GError *tmp = NULL;
    gchar *v = gfal2_get_opt_string(ctx, LH_OPTION_GROUP, key, &tmp);
    if (tmp != NULL) {
        g_error_free(tmp);
    }
    if (v == NULL) {
        return -1;
    }
    size_t n = strlen(v);
    int ret = -1;
    if (n < cap) {
        memcpy(buf, v, n + 1);
        ret = (int)n;
    }
    g_free(v);
    return ret;
}

/* gfal2's checksum of any URL (another plugin's, e.g. file://): 0, or the errno with its
 * message in msg. */
int lh_shim_checksum(gfal2_context_t ctx, const char *url, const char *type, char *out,
                     size_t out_cap, char *msg, size_t msg_cap)
{
    GError *tmp = NULL;
    int ret = gfal2_checksum(ctx, url, type, 0, 0, out, out_cap, &tmp);
    if (ret == 0 && tmp == NULL) {
        return 0;
    }
    int code = EIO;
    if (tmp != NULL) {
        code = tmp->code != 0 ? tmp->code : EIO;
        snprintf(msg, msg_cap, "%s", tmp->message != NULL ? tmp->message : "");
        g_error_free(tmp);
    } else {
        snprintf(msg, msg_cap, "gfal2_checksum failed without saying why");
    }
    return code;
}

/* Tells the copy's monitor callbacks (FTS3's progress markers) where the copy stands. */
void lh_shim_monitor(gfalt_params_t params, const char *src, const char *dst, uint64_t bytes,
                     uint64_t average_bps, uint64_t instant_bps, int64_t elapsed_secs)
{
    struct _gfalt_transfer_status status;
    memset(&status, 0, sizeof(status));
    status.bytes_transfered = (size_t)bytes;
    status.average_baudrate = (size_t)average_bps;
    status.instant_baudrate = (size_t)instant_bps;
    status.transfer_time = (time_t)elapsed_secs;
    plugin_trigger_monitor(params, &status, src, dst);
}

/* Stages of a copy, numbered as the Rust side's `Stage`. */
void lh_shim_event(gfalt_params_t params, int side, int stage, const char *description)
{
    GQuark stages[] = {GFAL_EVENT_PREPARE_ENTER,   GFAL_EVENT_PREPARE_EXIT,
                       GFAL_EVENT_TRANSFER_ENTER,  GFAL_EVENT_TRANSFER_EXIT,
                       GFAL_EVENT_CHECKSUM_ENTER,  GFAL_EVENT_CHECKSUM_EXIT,
                       GFAL_EVENT_OVERWRITE_DESTINATION, GFAL_EVENT_TRANSFER_TYPE};
    gfal_event_side_t sides[] = {GFAL_EVENT_SOURCE, GFAL_EVENT_DESTINATION, GFAL_EVENT_NONE};
    if (stage < 0 || stage >= (int)(sizeof(stages) / sizeof(stages[0])) || side < 0 || side > 2) {
        return;
    }
    plugin_trigger_event(params, lh_domain(), sides[side], stages[stage], "%s", description);
}

/* A line in gfal2's log (level 0 debug, 1 info, 2 warning). */
void lh_shim_log(int level, const char *msg)
{
    GLogLevelFlags l = level >= 2 ? G_LOG_LEVEL_WARNING
                       : level == 1 ? G_LOG_LEVEL_INFO
                                    : G_LOG_LEVEL_DEBUG;
    gfal2_log(l, "[longhaul] %s", msg);
}

/* ---- gfal2's callbacks --------------------------------------------------------------- */

static const char *lh_get_name(void)
{
    return LH_PLUGIN_NAME;
}

static gboolean lh_check_url(plugin_handle h, const char *url, plugin_mode mode, GError **err)
{
    (void)h;
    (void)err;
    switch (mode) {
    case GFAL_PLUGIN_STAT:
    case GFAL_PLUGIN_LSTAT:
    case GFAL_PLUGIN_MKDIR:
    case GFAL_PLUGIN_MKDIR_REC:
    case GFAL_PLUGIN_RMDIR:
    case GFAL_PLUGIN_OPENDIR:
    case GFAL_PLUGIN_UNLINK:
    case GFAL_PLUGIN_CHECKSUM:
        return url != NULL && longhaul_gfal_claims_url(url) ? TRUE : FALSE;
    default:
        return FALSE;
    }
}

static void lh_fill_stat(const struct lh_stat *s, struct stat *buf)
{
    memset(buf, 0, sizeof(*buf));
    buf->st_mode = (mode_t)s->mode;
    buf->st_size = (off_t)s->size;
    buf->st_nlink = 1;
    buf->st_mtim.tv_sec = (time_t)s->mtime_secs;
    buf->st_mtim.tv_nsec = (long)s->mtime_nanos;
    buf->st_atim = buf->st_mtim;
    buf->st_ctim = buf->st_mtim;
    buf->st_blksize = 4096;
    buf->st_blocks = (blkcnt_t)((s->size + 511) / 512);
}

static int lh_stat_cb(plugin_handle h, const char *url, struct stat *buf, GError **err)
{
    struct lh_stat s;
    if (longhaul_gfal_stat((gfal2_context_t)h, url, &s, err) != 0) {
        return -1;
    }
    lh_fill_stat(&s, buf);
    return 0;
}

/* A directory handle: the Rust listing and the dirent that readdir hands out (valid
 * until the next readdir or closedir, as readdir(3)'s). */
struct lh_dir {
    void *listing;
    struct dirent ent;
};

static gfal_file_handle lh_opendir(plugin_handle h, const char *url, GError **err)
{
    void *listing = longhaul_gfal_opendir((gfal2_context_t)h, url, err);
    if (listing == NULL) {
        return NULL;
    }
    struct lh_dir *d = g_new0(struct lh_dir, 1);
    d->listing = listing;
    return gfal_file_handle_new2(lh_get_name(), d, NULL, url);
}

static struct dirent *lh_next(gfal_file_handle fh, struct stat *st)
{
    struct lh_dir *d = gfal_file_handle_get_fdesc(fh);
    struct lh_stat s;
    if (!longhaul_gfal_readdir(d->listing, d->ent.d_name, sizeof(d->ent.d_name), &s)) {
        return NULL;
    }
    switch (s.mode & S_IFMT) {
    case S_IFREG:
        d->ent.d_type = DT_REG;
        break;
    case S_IFDIR:
        d->ent.d_type = DT_DIR;
        break;
    case S_IFLNK:
        d->ent.d_type = DT_LNK;
        break;
    default:
        d->ent.d_type = DT_UNKNOWN;
    }
    d->ent.d_ino = 0;
    d->ent.d_off = 0;
    d->ent.d_reclen = sizeof(d->ent);
    if (st != NULL) {
        lh_fill_stat(&s, st);
    }
    return &d->ent;
}

static struct dirent *lh_readdir(plugin_handle h, gfal_file_handle fh, GError **err)
{
    (void)h;
    (void)err;
    return lh_next(fh, NULL);
}

static struct dirent *lh_readdirpp(plugin_handle h, gfal_file_handle fh, struct stat *st,
                                   GError **err)
{
    (void)h;
    (void)err;
    return lh_next(fh, st);
}

static int lh_closedir(plugin_handle h, gfal_file_handle fh, GError **err)
{
    (void)h;
    (void)err;
    struct lh_dir *d = gfal_file_handle_get_fdesc(fh);
    longhaul_gfal_closedir(d->listing);
    g_free(d);
    gfal_file_handle_delete(fh);
    return 0;
}

static int lh_mkdirp(plugin_handle h, const char *url, mode_t mode, gboolean pflag, GError **err)
{
    return longhaul_gfal_mkdir((gfal2_context_t)h, url, (uint32_t)mode, pflag ? 1 : 0, err);
}

static int lh_rmdir(plugin_handle h, const char *url, GError **err)
{
    return longhaul_gfal_rmdir((gfal2_context_t)h, url, err);
}

static int lh_unlink(plugin_handle h, const char *url, GError **err)
{
    return longhaul_gfal_unlink((gfal2_context_t)h, url, err);
}

static int lh_checksum(plugin_handle h, const char *url, const char *type, char *buf,
                       size_t cap, off_t offset, size_t length, GError **err)
{
    return longhaul_gfal_checksum((gfal2_context_t)h, url, type, buf, cap, (int64_t)offset,
                                  (uint64_t)length, err);
}

static int lh_check_copy(plugin_handle h, gfal2_context_t ctx, const char *src, const char *dst,
                         gfal_url2_check check)
{
    (void)h;
    (void)ctx;
    if (check != GFAL_FILE_COPY || src == NULL || dst == NULL) {
        return FALSE;
    }
    return longhaul_gfal_claims_copy(src, dst) ? TRUE : FALSE;
}

static int lh_copy(plugin_handle h, gfal2_context_t ctx, gfalt_params_t params, const char *src,
                   const char *dst, GError **err)
{
    (void)h;
    struct lh_copy_params p;
    memset(&p, 0, sizeof(p));
    p.replace_existing = gfalt_get_replace_existing_file(params, NULL) ? 1 : 0;
    p.create_parent = gfalt_get_create_parent_dir(params, NULL) ? 1 : 0;
    p.strict = gfalt_get_strict_copy_mode(params, NULL) ? 1 : 0;
    p.checksum_mode = (int)gfalt_get_checksum(params, p.checksum_type, sizeof(p.checksum_type),
                                              p.checksum_value, sizeof(p.checksum_value), NULL);
    p.nbstreams = (uint32_t)gfalt_get_nbstreams(params, NULL);
    p.timeout_secs = (uint64_t)gfalt_get_timeout(params, NULL);
    return longhaul_gfal_copy(ctx, params, &p, src, dst, err);
}

/* gfal2's loader calls `gfal_plugin_init(handle, &err)` and takes the interface it
 * returns BY VALUE (`gfal_plugin_interface (*)(gfal2_context_t, GError**)` in its
 * gfal_module_init, as Debian's file plugin defines it), not the pointer the header's
 * gfal_plugin_init_t typedef names. A cdylib exports only the symbols Rust declares, so
 * the entry point is Rust's: it returns a blob of LH_IFACE_SIZE bytes (measured from this
 * header by build.rs) that this function fills. The asserts stop the build if the Rust
 * blob could differ from the struct in size or alignment. */
#ifndef LH_IFACE_SIZE
#error "build.rs defines LH_IFACE_SIZE, sizeof(gfal_plugin_interface)"
#endif
_Static_assert(sizeof(gfal_plugin_interface) == LH_IFACE_SIZE,
               "build.rs measured another size of gfal_plugin_interface");
_Static_assert(sizeof(gfal_plugin_interface) % sizeof(void *) == 0,
               "the Rust side returns whole pointer-sized words");
_Static_assert(_Alignof(gfal_plugin_interface) == _Alignof(void *),
               "the Rust side's words are pointer-aligned");

void lh_shim_plugin_fill(gfal_plugin_interface *ifce, gfal2_context_t handle, GError **err)
{
    (void)err;
    memset(ifce, 0, sizeof(*ifce));
    ifce->plugin_data = handle;
    ifce->priority = GFAL_PLUGIN_PRIORITY_DATA;
    ifce->getName = lh_get_name;
    ifce->check_plugin_url = lh_check_url;
    ifce->statG = lh_stat_cb;
    ifce->lstatG = lh_stat_cb;
    ifce->opendirG = lh_opendir;
    ifce->readdirG = lh_readdir;
    ifce->readdirppG = lh_readdirpp;
    ifce->closedirG = lh_closedir;
    ifce->mkdirpG = lh_mkdirp;
    ifce->rmdirG = lh_rmdir;
    ifce->unlinkG = lh_unlink;
    ifce->checksum_calcG = lh_checksum;
    ifce->check_plugin_url_transfer = lh_check_copy;
    ifce->copy_file = lh_copy;
}
