#include "bookworm_vips.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <vips/vips.h>

static pthread_once_t started = PTHREAD_ONCE_INIT;
static int start_result = -1;

/* libvips' warnings (a damaged tile, a truncated file) would go to stderr outside the server's
   logs; what matters of them reaches the caller as a return code. */
static void quiet(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {
    (void)domain; (void)level; (void)message; (void)data;
}

static void start_once(void) {
    if (VIPS_INIT("bookworm")) return;
    g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO, quiet, NULL);
    /* Memory has a ceiling: no cache of operations or files, one worker thread per image
       (the server decides how many images run at once). */
    vips_cache_set_max(0);
    vips_cache_set_max_mem(0);
    vips_cache_set_max_files(0);
    vips_concurrency_set(1);
    vips_block_untrusted_set(TRUE);
    vips_operation_block_set("VipsForeignLoad", TRUE);
    vips_operation_block_set("VipsForeignLoadJpeg", FALSE);
    vips_operation_block_set("VipsForeignLoadPng", FALSE);
    vips_operation_block_set("VipsForeignLoadWebp", FALSE);
    vips_operation_block_set("VipsForeignLoadHeif", FALSE);
    start_result = 0;
}

int bw_vips_start(void) {
    pthread_once(&started, start_once);
    return start_result;
}

/* CPU time of the calling thread. A photo's deadline counts the work done for it, not the wall
   clock: photo threads run in SCHED_IDLE, so on a busy machine a harmless picture may wait far
   longer than its deadline for a core, and must not be called unreadable for it. */
static double thread_cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct {
    double budget;
    volatile int timed_out;
} cpu_budget;

typedef struct {
    VipsRegion *region;
    double started;
} budget_sequence;

/* Sequences start on the libvips worker that computes them, where the pixels are decoded. */
static void *budget_start(VipsImage *out, void *in, void *budget) {
    (void)out; (void)budget;
    budget_sequence *sequence = g_new0(budget_sequence, 1);
    sequence->region = vips_region_new((VipsImage *)in);
    sequence->started = thread_cpu_seconds();
    if (!sequence->region) {
        g_free(sequence);
        return NULL;
    }
    return sequence;
}

static int budget_generate(VipsRegion *out, void *vsequence, void *in, void *vbudget, gboolean *stop) {
    (void)in; (void)stop;
    budget_sequence *sequence = vsequence;
    cpu_budget *budget = vbudget;
    if (vips_region_prepare(sequence->region, &out->valid)) return -1;
    if (thread_cpu_seconds() - sequence->started > budget->budget) {
        budget->timed_out = 1;
        vips_error("bookworm", "the decode ran out of time");
        return -1;
    }
    return vips_region_region(out, sequence->region, &out->valid, out->valid.left, out->valid.top);
}

static int budget_stop(void *vsequence, void *in, void *budget) {
    (void)in; (void)budget;
    budget_sequence *sequence = vsequence;
    g_object_unref(sequence->region);
    g_free(sequence);
    return 0;
}

static int fail(bw_photo *out, int code) {
    /* The copy clears the buffer under libvips' own lock: other images are made at once. */
    char *message = vips_error_buffer_copy();
    snprintf(out->error, sizeof out->error, "%s", message ? message : "");
    g_free(message);
    return code;
}

static int allowed_loader(const char *loader) {
    /* vips_foreign_find_load_buffer names the loader's class. */
    return loader && (!strcmp(loader, "VipsForeignLoadJpegBuffer") || !strcmp(loader, "VipsForeignLoadPngBuffer") ||
                      !strcmp(loader, "VipsForeignLoadWebpBuffer") || !strcmp(loader, "VipsForeignLoadHeifBuffer"));
}

/* `image` made to fit `edge` (never larger), in memory, as the next size's source. */
static VipsImage *fit(VipsImage *image, int edge) {
    int longest = image->Xsize > image->Ysize ? image->Xsize : image->Ysize;
    if (longest <= edge) {
        g_object_ref(image);
        return image;
    }
    /* Each axis keeps at least a pixel: a 4000 x 3 strip is a picture, not a server error. */
    double scale = (double)edge / longest;
    double across = image->Xsize * scale < 1 ? 1.0 / image->Xsize : scale;
    double down = image->Ysize * scale < 1 ? 1.0 / image->Ysize : scale;
    VipsImage *resized;
    if (vips_resize(image, &resized, across, "vscale", down, NULL)) return NULL;
    VipsImage *kept = vips_image_copy_memory(resized);
    g_object_unref(resized);
    return kept;
}

/* The image without alpha, on white, for JPEG and the blurhash. */
static VipsImage *opaque(VipsImage *image) {
    if (!vips_image_hasalpha(image)) {
        g_object_ref(image);
        return image;
    }
    double white[3] = {255, 255, 255};
    VipsArrayDouble *background = vips_array_double_new(white, 3);
    VipsImage *flat = NULL;
    int failed = vips_flatten(image, &flat, "background", background, NULL);
    vips_area_unref(VIPS_AREA(background));
    if (failed) return NULL;
    VipsImage *kept = vips_image_copy_memory(flat);
    g_object_unref(flat);
    return kept;
}

static int save(VipsImage *image, int index, int jpeg_quality, int webp_quality, bw_photo *out) {
    VipsImage *flat = opaque(image);
    if (!flat) return -1;
    int failed = vips_jpegsave_buffer(flat, &out->jpeg[index], &out->jpeg_length[index], "Q", jpeg_quality,
                                      "strip", TRUE, "optimize_coding", TRUE, NULL);
    g_object_unref(flat);
    if (failed) return -1;
    return vips_webpsave_buffer(image, &out->webp[index], &out->webp_length[index], "Q", webp_quality,
                                "strip", TRUE, NULL);
}

/* `image`'s pipeline run into memory, stopped (between regions) once its worker has spent
   `seconds` of CPU on it; `timed_out` says whether that is why it failed. */
static VipsImage *compute(VipsImage *image, double seconds, int *timed_out) {
    VipsImage *limited = vips_image_new();
    cpu_budget *budget = VIPS_NEW(limited, cpu_budget);
    if (budget) *budget = (cpu_budget){.budget = seconds, .timed_out = 0};
    if (!budget || vips_image_pipelinev(limited, VIPS_DEMAND_STYLE_THINSTRIP, image, NULL) ||
        vips_image_generate(limited, budget_start, budget_generate, budget_stop, image, budget)) {
        g_object_unref(limited);
        return NULL;
    }
    VipsImage *kept = vips_image_copy_memory(limited);
    *timed_out = budget->timed_out;
    g_object_unref(limited);
    return kept;
}

/* The full size decoded once into memory (shrink-on-load, sRGB, 8 bits), then turned upright. */
static VipsImage *decode(const void *data, size_t length, int edge, double seconds, int *timed_out) {
    VipsImage *thumb;
    /* libvips 8.14 ignores thumbnail_buffer's own fail_on (libvips/libvips#5195) and would
       answer a truncated upload with half a picture: the loader is given it as an option
       (LibvipsWorkaroundTests notices when libvips is fixed). no_rotate: thumbnail would
       decode a rotated picture whole, before the deadline could stop it; the small result is
       turned upright below. export_profile: a picture with an ICC profile (an iPhone's
       Display P3, a camera's Adobe RGB) is converted to sRGB, not relabelled. */
    if (vips_thumbnail_buffer((void *)data, length, &thumb, edge, "height", edge, "size", VIPS_SIZE_DOWN,
                              "no_rotate", TRUE, "export_profile", "srgb",
                              "fail_on", VIPS_FAIL_ON_ERROR, "option_string", "fail_on=error", NULL)) return NULL;
    VipsImage *srgb;
    int failed = vips_colourspace(thumb, &srgb, VIPS_INTERPRETATION_sRGB, NULL);
    g_object_unref(thumb);
    if (failed) return NULL;
    VipsImage *bytes;
    failed = vips_cast(srgb, &bytes, VIPS_FORMAT_UCHAR, NULL);
    g_object_unref(srgb);
    if (failed) return NULL;
    VipsImage *decoded = compute(bytes, seconds, timed_out);
    g_object_unref(bytes);
    if (!decoded) return NULL;
    VipsImage *turned, *upright = NULL;
    if (!vips_autorot(decoded, &turned, NULL)) {
        upright = vips_image_copy_memory(turned);
        g_object_unref(turned);
    }
    g_object_unref(decoded);
    if (!upright) return NULL;
    /* A new image of the pixels alone: no field of the upload (EXIF, XMP, IPTC, ICC, text,
       comments) can reach a saver, whatever the saver's own stripping does. */
    VipsImage *pixels = vips_image_new_from_memory_copy(VIPS_IMAGE_ADDR(upright, 0, 0), VIPS_IMAGE_SIZEOF_IMAGE(upright),
                                                        upright->Xsize, upright->Ysize, upright->Bands, VIPS_FORMAT_UCHAR);
    g_object_unref(upright);
    if (pixels) pixels->Type = VIPS_INTERPRETATION_sRGB;
    return pixels;
}

int bw_photo_make(const void *data, size_t length, double max_pixels, double deadline_seconds,
                  const int edges[3], int jpeg_quality, int webp_quality, bw_photo *out) {
    memset(out, 0, sizeof *out);
    if (bw_vips_start()) return fail(out, BW_PHOTO_FAILED);
    if (!allowed_loader(vips_foreign_find_load_buffer(data, length))) return fail(out, BW_PHOTO_UNSUPPORTED);
    /* The header only: no pixel is decoded before the size is known. */
    VipsImage *header = vips_image_new_from_buffer(data, length, "", "fail_on", VIPS_FAIL_ON_ERROR, NULL);
    if (!header) return fail(out, BW_PHOTO_UNREADABLE);
    double pixels = (double)header->Xsize * header->Ysize;
    g_object_unref(header);
    if (pixels > max_pixels) return fail(out, BW_PHOTO_TOO_LARGE);

    VipsImage *sizes[3] = {NULL, NULL, NULL};
    int timed_out = 0;
    sizes[0] = decode(data, length, edges[0], deadline_seconds, &timed_out);
    if (!sizes[0]) return fail(out, timed_out ? BW_PHOTO_TIMED_OUT : BW_PHOTO_UNREADABLE);
    int code = BW_PHOTO_OK;
    for (int i = 1; i < 3 && code == BW_PHOTO_OK; i++) {
        sizes[i] = fit(sizes[i - 1], edges[i]);
        if (!sizes[i]) code = BW_PHOTO_FAILED;
    }
    for (int i = 0; i < 3 && code == BW_PHOTO_OK; i++) {
        if (save(sizes[i], i, jpeg_quality, webp_quality, out)) code = BW_PHOTO_FAILED;
    }
    if (code == BW_PHOTO_OK) {
        out->width = sizes[0]->Xsize;
        out->height = sizes[0]->Ysize;
        VipsImage *flat = opaque(sizes[2]);
        VipsImage *rgb = NULL;
        if (!flat || vips_extract_band(flat, &rgb, 0, "n", 3, NULL)) {
            code = BW_PHOTO_FAILED;
        } else {
            size_t size = 0;
            out->thumb_rgb = vips_image_write_to_memory(rgb, &size);
            out->thumb_width = rgb->Xsize;
            out->thumb_height = rgb->Ysize;
            if (!out->thumb_rgb) code = BW_PHOTO_FAILED;
        }
        if (rgb) g_object_unref(rgb);
        if (flat) g_object_unref(flat);
    }
    for (int i = 0; i < 3; i++) if (sizes[i]) g_object_unref(sizes[i]);
    if (code != BW_PHOTO_OK) {
        fail(out, code);
        char kept[sizeof out->error];
        memcpy(kept, out->error, sizeof kept);
        bw_photo_free(out);
        memset(out, 0, sizeof *out);
        memcpy(out->error, kept, sizeof kept);
    }
    return code;
}

void bw_photo_free(bw_photo *photo) {
    for (int i = 0; i < 3; i++) {
        g_free(photo->jpeg[i]);
        g_free(photo->webp[i]);
        photo->jpeg[i] = photo->webp[i] = NULL;
    }
    g_free(photo->thumb_rgb);
    photo->thumb_rgb = NULL;
}
