package endpoints

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockName is the lock file at the top of a DATA_DIR.
const lockName = ".lock"

// ErrDataDirInUse is returned by Start when another stack holds the DATA_DIR.
var ErrDataDirInUse = errors.New("DATA_DIR is in use by another local stack")

// lockDataDir takes the DATA_DIR for this stack before anything reads or
// writes in it: a second stack on the same directory would start a second
// DynamoDB Local on the same SQLite files and compact the first stack's TTL
// ledger under it. The lock is the kernel's (flock), so a killed stack
// leaves none behind; the file says which process holds it.
func lockDataDir(dir string) (release func() error, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockName)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data dir %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s (held by pid %s); stop that stack or choose another DATA_DIR", ErrDataDirInUse, dir, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("data dir %s: lock: %w", dir, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() error {
		defer f.Close()
		return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	}, nil
}
