// The anchor of the start-up benchmark: the least a systemd service can do between exec and
// READY=1, linked the way the daemon is (dynamically against libsystemd): tell systemd it is ready,
// then wait to be stopped.
#include <signal.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

int main(void) {
    sd_notify(0, "READY=1");
    pause();
    return 0;
}
