// The anchor of the start-up benchmark: the least a systemd service can do between exec and
// READY=1, linked the way the daemon is (dynamically against libsystemd): tell systemd it is ready,
// then wait to be stopped. Without NOTIFY_SOCKET (sd_notify answers 0) it ends at once: the
// exec → exit CPU beside `waf-tokend --version`'s.
#include <signal.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

int main(void) {
    if (sd_notify(0, "READY=1") <= 0) return 0;
    pause();
    return 0;
}
