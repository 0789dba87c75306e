#define _GNU_SOURCE
// The anchors of the socket benchmark: the fastest simple HTTP/1.1 responders this machine runs.
// Every complete request head (up to its blank line) is answered with one pre-encoded 200
// response, keep-alive, no allocation per request. Two shapes:
//   et  epoll edge-triggered, each connection read to EAGAIN, all answers of those reads in one
//       writev: nothing a real server could do less;
//   lt  epoll level-triggered, one read per readable event, one write per request: the plain loop
//       most servers are (and the daemon's NIO loop is, reading once per event).
// With THREADS > 1, that many such loops share the listener (EPOLLEXCLUSIVE), as the daemon's
// event loops do; the benchmark takes the fastest as the anchor.
//
//   responder SOCKET_PATH BODY_BYTES [THREADS] [et|lt]
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_FDS 65536
#define MAX_IOV 1024

static unsigned char progress[MAX_FDS];  // how much of "\r\n\r\n" each connection has seen

static int listener;
static int level_triggered;
static struct iovec answers[MAX_IOV];
static const char *response;
static size_t response_length;

static void *serve(void *unused);

int main(int argc, char **argv) {
    if (argc < 3 || argc > 5 || (argc == 5 && strcmp(argv[4], "et") != 0 && strcmp(argv[4], "lt") != 0)) {
        fprintf(stderr, "usage: responder SOCKET_PATH BODY_BYTES [THREADS] [et|lt]\n");
        return 64;
    }
    int threads = argc >= 4 ? atoi(argv[3]) : 1;
    level_triggered = argc == 5 && strcmp(argv[4], "lt") == 0;
    signal(SIGPIPE, SIG_IGN);
    long body = atol(argv[2]);
    char *encoded = malloc(body + 256);
    int head = snprintf(encoded, 256, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %ld\r\n\r\n", body);
    memset(encoded + head, 'x', body);
    response = encoded;
    response_length = head + body;
    for (int i = 0; i < MAX_IOV; i++) answers[i] = (struct iovec){.iov_base = encoded, .iov_len = response_length};

    listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    strncpy(address.sun_path, argv[1], sizeof(address.sun_path) - 1);
    unlink(argv[1]);
    if (bind(listener, (struct sockaddr *)&address, sizeof(address)) != 0 || listen(listener, 4096) != 0) {
        perror("bind");
        return 71;
    }
    printf("ready\n");
    fflush(stdout);
    pthread_t others[64];
    for (int i = 1; i < threads && i < 64; i++) pthread_create(&others[i], NULL, serve, NULL);
    serve(NULL);
}

static void *serve(void *unused) {
    (void)unused;
    int poller = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN | EPOLLEXCLUSIVE, .data.fd = listener};
    epoll_ctl(poller, EPOLL_CTL_ADD, listener, &event);
    struct epoll_event events[256];
    char buffer[65536];
    static const char terminator[] = "\r\n\r\n";
    for (;;) {
        int ready = epoll_wait(poller, events, 256, -1);
        for (int i = 0; i < ready; i++) {
            int fd = events[i].data.fd;
            if (fd == listener) {
                int client;
                while ((client = accept4(listener, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    if (client >= MAX_FDS) { close(client); continue; }
                    progress[client] = 0;
                    struct epoll_event added = {.events = level_triggered ? EPOLLIN : EPOLLIN | EPOLLET, .data.fd = client};
                    epoll_ctl(poller, EPOLL_CTL_ADD, client, &added);
                }
                continue;
            }
            int heads = 0, open = 1;
            unsigned char seen = progress[fd];
            if (level_triggered) {  // one read; the next event brings the rest
                ssize_t count = read(fd, buffer, sizeof(buffer));
                if (count < 0 && errno == EAGAIN) continue;
                if (count <= 0) { close(fd); continue; }
                for (ssize_t j = 0; j < count; j++) {
                    seen = buffer[j] == terminator[seen] ? seen + 1 : (buffer[j] == '\r' ? 1 : 0);
                    if (seen == 4 && write(fd, response, response_length) < 0) { open = 0; break; }
                    if (seen == 4) seen = 0;
                }
                progress[fd] = seen;
                if (!open) close(fd);
                continue;
            }
            for (;;) {  // edge-triggered: read until the kernel has nothing more
                ssize_t count = read(fd, buffer, sizeof(buffer));
                if (count < 0 && errno == EAGAIN) break;
                if (count <= 0) { open = 0; break; }
                for (ssize_t j = 0; j < count; j++) {
                    seen = buffer[j] == terminator[seen] ? seen + 1 : (buffer[j] == '\r' ? 1 : 0);
                    if (seen == 4) { heads++; seen = 0; }
                }
            }
            progress[fd] = seen;
            while (open && heads > 0) {
                int batch = heads < MAX_IOV ? heads : MAX_IOV;
                if (writev(fd, answers, batch) < 0) open = 0;
                heads -= batch;
            }
            if (!open) close(fd);
        }
    }
    return NULL;
}
