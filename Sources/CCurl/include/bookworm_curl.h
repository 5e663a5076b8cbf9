#ifndef BOOKWORM_CURL_H
#define BOOKWORM_CURL_H

#include <stddef.h>

/* Non-variadic wrappers over libcurl for SMTP: Swift cannot call curl_easy_setopt. */

typedef struct bw_smtp bw_smtp;

typedef struct {
    /* 0 when the message was accepted. */
    int curl_code;
    /* The last SMTP reply code the server sent (0 if it never answered). */
    long smtp_code;
    /* curl's description of what went wrong (empty when accepted). */
    char error[256];
} bw_smtp_result;

/* One handle per worker batch: libcurl keeps the connection open between messages sent
   through the same handle. `tls_mode`: 0 none (plaintext), 1 STARTTLS required,
   2 implicit TLS (smtps://, taken from the URL). Returns NULL when libcurl cannot start. */
bw_smtp *bw_smtp_open(const char *url, const char *username, const char *password,
                      int tls_mode, long timeout_seconds);

/* Sends `length` bytes of a complete RFC 5322 message (CRLF line ends) from `envelope_from`
   to `recipient`. libcurl performs the SMTP dialogue and the dot-stuffing. */
bw_smtp_result bw_smtp_send(bw_smtp *smtp, const char *envelope_from, const char *recipient,
                            const char *message, size_t length);

void bw_smtp_close(bw_smtp *smtp);

#endif
