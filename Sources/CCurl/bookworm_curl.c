#include "bookworm_curl.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bw_smtp {
    CURL *curl;
    char *url;
};

typedef struct {
    const char *data;
    size_t length;
    size_t offset;
} bw_reader;

static size_t bw_read(char *buffer, size_t size, size_t count, void *context) {
    bw_reader *reader = (bw_reader *)context;
    size_t room = size * count;
    size_t left = reader->length - reader->offset;
    size_t n = left < room ? left : room;
    memcpy(buffer, reader->data + reader->offset, n);
    reader->offset += n;
    return n;
}

static pthread_once_t bw_init_once = PTHREAD_ONCE_INIT;

static void bw_global_init_once(void) {
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* curl_global_init is not thread-safe, and several workers may open their first session at
   once: pthread_once runs it exactly once and makes every other caller wait for it. */
static void bw_global_init(void) {
    pthread_once(&bw_init_once, bw_global_init_once);
}

bw_smtp *bw_smtp_open(const char *url, const char *username, const char *password,
                      int tls_mode, long timeout_seconds) {
    bw_global_init();
    bw_smtp *smtp = calloc(1, sizeof(bw_smtp));
    if (!smtp) return NULL;
    smtp->curl = curl_easy_init();
    smtp->url = strdup(url);
    if (!smtp->curl || !smtp->url) {
        bw_smtp_close(smtp);
        return NULL;
    }
    CURL *c = smtp->curl;
    curl_easy_setopt(c, CURLOPT_URL, smtp->url);
    if (username && *username) curl_easy_setopt(c, CURLOPT_USERNAME, username);
    if (password && *password) curl_easy_setopt(c, CURLOPT_PASSWORD, password);
    if (tls_mode == 1) curl_easy_setopt(c, CURLOPT_USE_SSL, (long)CURLUSESSL_ALL);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_seconds);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, timeout_seconds);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_READFUNCTION, bw_read);
    return smtp;
}

bw_smtp_result bw_smtp_send(bw_smtp *smtp, const char *envelope_from, const char *recipient,
                            const char *message, size_t length) {
    bw_smtp_result result;
    memset(&result, 0, sizeof(result));
    char from[512];
    char to[512];
    snprintf(from, sizeof(from), "<%s>", envelope_from);
    snprintf(to, sizeof(to), "<%s>", recipient);
    struct curl_slist *recipients = curl_slist_append(NULL, to);
    bw_reader reader = { message, length, 0 };
    char error[CURL_ERROR_SIZE];
    error[0] = 0;

    CURL *c = smtp->curl;
    curl_easy_setopt(c, CURLOPT_MAIL_FROM, from);
    curl_easy_setopt(c, CURLOPT_MAIL_RCPT, recipients);
    curl_easy_setopt(c, CURLOPT_READDATA, &reader);
    curl_easy_setopt(c, CURLOPT_INFILESIZE, (long)length);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);

    CURLcode code = curl_easy_perform(c);
    result.curl_code = (int)code;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &result.smtp_code);
    if (code != CURLE_OK) {
        snprintf(result.error, sizeof(result.error), "%s", error[0] ? error : curl_easy_strerror(code));
    }
    curl_easy_setopt(c, CURLOPT_MAIL_RCPT, NULL);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
    curl_slist_free_all(recipients);
    return result;
}

void bw_smtp_close(bw_smtp *smtp) {
    if (!smtp) return;
    if (smtp->curl) curl_easy_cleanup(smtp->curl);
    free(smtp->url);
    free(smtp);
}
