/* Closed-loop HTTP/1.1 load client for benchmarks/fairness.py (issue 34).
 *
 *   loadgen PORT WARM_UP_S SECONDS REQUESTS_FILE
 *
 * REQUESTS_FILE holds one pre-built request per connection, each as "<length>\n<bytes>" (the
 * Python side did any initialize and put the session header in). One keep-alive connection to
 * 127.0.0.1:PORT per request; each sends its request again the moment the previous answer is
 * complete. Answers are read whole (Content-Length or chunked, JSON or SSE body). A call counts
 * when it was sent after the warm-up; no call is sent after the end, and the calls in flight then
 * are awaited (and counted), as the asyncio client does. Every answer is checked: HTTP 200, a
 * "result" and no "isError":true in the body, else it is an error (the first one is printed).
 * Prints one JSON object: {"clients": [{"latencies": [s...], "answered_at": [s...]}...],
 * "errors": N, "first_error": "...", "cpu_s": its own CPU time, "wall_s": the whole run's}.
 * Exits 1 on a broken connection or a timeout (30 s past the end).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int fd;
    char *req;
    size_t req_len, sent;
    char *buf;
    size_t len, cap;
    double sent_at;
    int busy; /* a request is in flight */
    double *lat, *at;
    size_t n, ncap;
} conn;

static long errors;
static char first_error[256];

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what) {
    fprintf(stderr, "loadgen: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void fail(const char *what) {
    fprintf(stderr, "loadgen: %s\n", what);
    exit(1);
}

static void error_seen(int status, const char *body, size_t body_len) {
    errors++;
    if (!first_error[0]) {
        char text[201];
        size_t k = body_len < 200 ? body_len : 200;
        memcpy(text, body, k);
        text[k] = 0;
        snprintf(first_error, sizeof first_error, "HTTP %d: %s", status, text);
    }
}

/* case-insensitive search for a header's value within the head; returns pointer or NULL */
static const char *header(const char *head, size_t head_len, const char *name) {
    size_t nl = strlen(name);
    for (const char *p = head; p + nl + 3 < head + head_len; p++) {
        if (p[0] == '\n' && strncasecmp(p + 1, name, nl) == 0 && p[1 + nl] == ':') {
            p += 2 + nl;
            while (*p == ' ') p++;
            return p;
        }
    }
    return NULL;
}

/* A whole answer in c->buf? Returns its total length (0: not yet), fills status and body. */
static size_t parse(conn *c, int *status, char **body, size_t *body_len) {
    char *end = memmem(c->buf, c->len, "\r\n\r\n", 4);
    if (!end) return 0;
    size_t head_len = end - c->buf + 2; /* keep the last header's CRLF */
    if (c->len < 12 || memcmp(c->buf, "HTTP/1.1 ", 9) != 0) fail("an answer without HTTP/1.1 status");
    *status = atoi(c->buf + 9);
    char *rest = end + 4;
    size_t rest_len = c->len - (rest - c->buf);
    const char *te = header(c->buf, head_len, "transfer-encoding");
    if (te && strncasecmp(te, "chunked", 7) == 0) {
        /* find the last chunk; the body checked is the raw chunks, sizes included */
        size_t pos = 0;
        for (;;) {
            char *line_end = memmem(rest + pos, rest_len - pos, "\r\n", 2);
            if (!line_end) return 0;
            size_t size = strtoul(rest + pos, NULL, 16);
            size_t data = line_end - rest + 2;
            if (size == 0) {
                if (rest_len < data + 2) return 0; /* no trailers from these servers */
                *body = rest;
                *body_len = data + 2;
                return (rest - c->buf) + data + 2;
            }
            if (rest_len < data + size + 2) return 0;
            pos = data + size + 2;
        }
    }
    const char *cl = header(c->buf, head_len, "content-length");
    size_t length = cl ? strtoul(cl, NULL, 10) : 0;
    if (rest_len < length) return 0;
    *body = rest;
    *body_len = length;
    return (rest - c->buf) + length;
}

static void send_request(conn *c) {
    c->sent = 0;
    c->busy = 1;
    c->sent_at = now();
    while (c->sent < c->req_len) {
        ssize_t w = write(c->fd, c->req + c->sent, c->req_len - c->sent);
        if (w < 0) {
            if (errno == EAGAIN) break; /* the rest goes out on EPOLLOUT */
            die("write");
        }
        c->sent += w;
    }
}

int main(int argc, char **argv) {
    if (argc != 5) fail("usage: loadgen PORT WARM_UP_S SECONDS REQUESTS_FILE");
    int port = atoi(argv[1]);
    double warm_up = atof(argv[2]), seconds = atof(argv[3]);
    FILE *f = fopen(argv[4], "rb");
    if (!f) die(argv[4]);
    conn *conns = NULL;
    size_t count = 0;
    size_t length;
    while (fscanf(f, "%zu", &length) == 1) {
        if (fgetc(f) != '\n') fail("a length without its newline in the requests file");
        conns = realloc(conns, (count + 1) * sizeof *conns);
        conn *c = &conns[count++];
        memset(c, 0, sizeof *c);
        c->req = malloc(length);
        c->req_len = length;
        if (fread(c->req, 1, length, f) != length) fail("a short request in the requests file");
    }
    fclose(f);
    if (!count) fail("no requests in the requests file");

    int ep = epoll_create1(0);
    if (ep < 0) die("epoll_create1");
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (size_t i = 0; i < count; i++) {
        conn *c = &conns[i];
        c->fd = socket(AF_INET, SOCK_STREAM, 0);
        if (c->fd < 0) die("socket");
        if (connect(c->fd, (struct sockaddr *)&addr, sizeof addr) < 0) die("connect");
        int one = 1;
        setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(c->fd, F_SETFL, O_NONBLOCK);
        c->cap = 65536;
        c->buf = malloc(c->cap);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) < 0) die("epoll_ctl");
    }
    double start = now(), measure_from = start + warm_up, end = measure_from + seconds;
    for (size_t i = 0; i < count; i++) send_request(&conns[i]);
    size_t in_flight = count;
    struct epoll_event events[256];
    while (in_flight) {
        if (now() > end + 30) fail("timed out: answers still missing 30 s after the end");
        int n = epoll_wait(ep, events, 256, 1000);
        if (n < 0) {
            if (errno == EINTR) continue;
            die("epoll_wait");
        }
        for (int e = 0; e < n; e++) {
            conn *c = events[e].data.ptr;
            if (c->busy && c->sent < c->req_len) {
                ssize_t w = write(c->fd, c->req + c->sent, c->req_len - c->sent);
                if (w > 0) c->sent += w;
                else if (w < 0 && errno != EAGAIN) die("write");
            }
            for (;;) { /* edge-triggered: read until EAGAIN */
                if (c->len == c->cap) c->buf = realloc(c->buf, c->cap *= 2);
                ssize_t r = read(c->fd, c->buf + c->len, c->cap - c->len);
                if (r < 0) {
                    if (errno == EAGAIN) break;
                    die("read");
                }
                if (r == 0) fail("the server closed a connection");
                c->len += r;
                int status;
                char *body;
                size_t body_len, whole;
                while ((whole = parse(c, &status, &body, &body_len)) > 0) {
                    double t = now();
                    if (!c->busy) fail("an answer nobody asked for");
                    c->busy = 0;
                    if (status != 200 || !memmem(body, body_len, "\"result\"", 8) ||
                        memmem(body, body_len, "\"isError\":true", 14))
                        error_seen(status, body, body_len);
                    if (c->sent_at >= measure_from) {
                        if (c->n == c->ncap) {
                            c->ncap = c->ncap ? c->ncap * 2 : 1024;
                            c->lat = realloc(c->lat, c->ncap * sizeof(double));
                            c->at = realloc(c->at, c->ncap * sizeof(double));
                        }
                        c->lat[c->n] = t - c->sent_at;
                        c->at[c->n++] = t - start;
                    }
                    memmove(c->buf, c->buf + whole, c->len - whole);
                    c->len -= whole;
                    if (t < end) send_request(c);
                    else in_flight--;
                }
            }
        }
    }
    printf("{\"clients\": [");
    for (size_t i = 0; i < count; i++) {
        conn *c = &conns[i];
        printf("%s{\"latencies\": [", i ? ", " : "");
        for (size_t k = 0; k < c->n; k++) printf("%s%.9f", k ? "," : "", c->lat[k]);
        printf("], \"answered_at\": [");
        for (size_t k = 0; k < c->n; k++) printf("%s%.9f", k ? "," : "", c->at[k]);
        printf("]}");
    }
    printf("], \"errors\": %ld, \"first_error\": \"", errors);
    for (const char *p = first_error; *p; p++) {
        if (*p == '"' || *p == '\\') printf("\\%c", *p);
        else if ((unsigned char)*p < 0x20) printf(" ");
        else putchar(*p);
    }
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    printf("\", \"cpu_s\": %.3f, \"wall_s\": %.3f}\n",
           usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec +
               usage.ru_stime.tv_usec / 1e6,
           now() - start);
    return 0;
}
