#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <ucs/config/types.h>
#include <ucs/debug/log_def.h>

#define LOG_RECORDS 1024
#define LOG_TEXT 512

struct record {
    int level;
    char text[LOG_TEXT];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct record records[LOG_RECORDS];
static unsigned head, count;
static uint64_t dropped;
static uint32_t *notify_flag;
static int notify_fd = -1;

static ucs_log_func_rc_t handler(const char *file, unsigned line, const char *function,
                                 ucs_log_level_t level, const ucs_log_component_config_t *comp,
                                 const char *message, va_list ap) {
    (void)function;
    if (!ucs_log_component_is_enabled(level, comp)) return UCS_LOG_FUNC_RC_STOP;
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    pthread_mutex_lock(&mu);
    if (count == LOG_RECORDS) {
        dropped++;
    } else {
        struct record *r = &records[(head + count) % LOG_RECORDS];
        int n = snprintf(r->text, LOG_TEXT, "%s:%u ", base, line);
        if (n < 0 || n >= LOG_TEXT) n = 0;
        vsnprintf(r->text + n, LOG_TEXT - n, message, ap);
        r->level = (int)level;
        count++;
    }
    /* Under mu: ucxx_log_notify(NULL, -1) returning means nobody touches the flag's
     * memory or the descriptor any more, so the caller may unmap and close them. */
    if (notify_flag) __atomic_store_n(notify_flag, 1, __ATOMIC_SEQ_CST);
    if (notify_fd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(notify_fd, &one, sizeof one); /* non-blocking eventfd */
        (void)w;
    }
    pthread_mutex_unlock(&mu);
    return UCS_LOG_FUNC_RC_STOP;
}

void ucxx_log_capture(void) { ucs_log_push_handler(handler); }

void ucxx_log_notify(uint32_t *flag, int fd) {
    pthread_mutex_lock(&mu);
    notify_flag = flag;
    notify_fd = fd;
    pthread_mutex_unlock(&mu);
}

int ucxx_log_take(char *buf, size_t cap, uint64_t *lost) {
    int level = -1;
    pthread_mutex_lock(&mu);
    *lost = dropped;
    dropped = 0;
    if (count > 0) {
        struct record *r = &records[head];
        snprintf(buf, cap, "%s", r->text);
        level = r->level;
        head = (head + 1) % LOG_RECORDS;
        count--;
    }
    if (count == 0 && notify_flag) __atomic_store_n(notify_flag, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_unlock(&mu);
    return level;
}
