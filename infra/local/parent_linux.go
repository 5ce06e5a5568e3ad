package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// watchMake calls stop when the make that runs this stack (`make run`, whose
// recipe execs the stack binary) is told to stop. GNU make passes SIGTERM on
// to its recipe but not SIGINT: sent to make's process alone, SIGINT sets
// make's handler back to the default and leaves make waiting for its recipe,
// which would never learn of it. So the stack watches its parent: a make
// that no longer catches SIGINT, SIGTERM or SIGHUP is stopping, and a parent
// that is gone (make killed outright) leaves nobody to stop the stack.
// Another parent (a shell, go run, a test) is not watched.
func watchMake(ctx context.Context, stop func(reason string)) {
	ppid := os.Getppid()
	if !isMake(ppid) {
		return
	}
	caught, ok := caughtStopSignals(ppid)
	if !ok {
		return
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if os.Getppid() != ppid {
			stop("make exited")
			return
		}
		now, ok := caughtStopSignals(ppid)
		if !ok {
			stop("make exited")
			return
		}
		if caught&^now != 0 {
			stop("make was told to stop")
			return
		}
	}
}

func isMake(pid int) bool {
	comm, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return false
	}
	name := strings.TrimSpace(string(comm))
	return name == "make" || name == "gmake"
}

// caughtStopSignals is the subset of SIGHUP, SIGINT and SIGTERM that process
// pid has a handler for (SigCgt in /proc/<pid>/status).
func caughtStopSignals(pid int) (uint64, bool) {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(status), "\n") {
		hex, found := strings.CutPrefix(line, "SigCgt:")
		if !found {
			continue
		}
		mask, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
		if err != nil {
			return 0, false
		}
		var stops uint64
		for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM} {
			stops |= 1 << (uint(sig) - 1)
		}
		return mask & stops, true
	}
	return 0, false
}
