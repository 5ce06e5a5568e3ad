package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// repoRoot is the repository's top, where the Makefile is.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "Makefile")); err != nil {
		t.Fatal(err)
	}
	return root
}

// syncBuffer is the output of a command still running.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// makeRun is `make run` as a user starts it, from the repository's top.
type makeRun struct {
	cmd      *exec.Cmd
	done     chan struct{} // closed when make has exited and been waited for
	out      *syncBuffer
	stackPid int
	jvmPid   int
	apiURL   string
	ports    []int
}

// stackPorts are free ports for a stack, and the environment that gives them.
func stackPorts(t *testing.T) ([]int, []string) {
	t.Helper()
	ports := []int{freePort(t), freePort(t), freePort(t), freePort(t), freePort(t)}
	return ports, []string{
		"API_PORT=" + strconv.Itoa(ports[0]),
		"DYNAMODB_PORT=" + strconv.Itoa(ports[1]),
		"S3_PORT=" + strconv.Itoa(ports[2]),
		"SEARCH_PORT=" + strconv.Itoa(ports[3]),
		"OTLP_PORT=" + strconv.Itoa(ports[4]),
	}
}

// startMakeRun runs `make run` with env and waits for the stack's "ready" line.
func startMakeRun(t *testing.T, env []string) *makeRun {
	t.Helper()
	m := &makeRun{out: &syncBuffer{}, done: make(chan struct{})}
	m.cmd = exec.Command("make", "run")
	m.cmd.Dir = repoRoot(t)
	m.cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	m.cmd.Stdout, m.cmd.Stderr = pw, pw
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("make run: %v", err)
	}
	// A test that fails midway leaves no process behind.
	t.Cleanup(func() {
		for _, pid := range []int{m.cmd.Process.Pid, m.stackPid, m.jvmPid} {
			if pid > 0 && alive(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		pw.Close()
	})
	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			m.out.Write(append(sc.Bytes(), '\n'))
			var line struct {
				Msg              string `json:"msg"`
				Service          string `json:"service"`
				URL              string `json:"url"`
				DynamoDBLocalPid int    `json:"dynamodbLocalPid"`
				Pid              int    `json:"pid"`
			}
			if sent || json.Unmarshal(sc.Bytes(), &line) != nil {
				continue
			}
			switch {
			case line.Msg == "endpoint" && line.Service == "dynamodb":
				m.jvmPid = line.DynamoDBLocalPid
			case line.Msg == "endpoint" && line.Service == "api":
				m.apiURL = line.URL
			case line.Msg == "ready":
				m.stackPid = line.Pid
				ready <- nil
				sent = true
			}
		}
		if !sent {
			ready <- errors.New("make run ended before the stack was ready")
		}
	}()
	select {
	case err := <-ready:
		if err != nil {
			m.cmd.Wait()
			t.Fatalf("%v:\n%s", err, m.out)
		}
	case <-time.After(5 * time.Minute):
		t.Fatalf("stack not ready after 5 min:\n%s", m.out)
	}
	go func() {
		m.cmd.Wait()
		pw.Close()
		close(m.done)
	}()
	return m
}

// alive says whether pid is a process that has not exited (a zombie has).
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return syscall.Kill(pid, 0) == nil
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// waitGone waits up to 30 s for every pid to exit.
func waitGone(t *testing.T, what string, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Errorf("%s: pid %d still running 30s after the stop", what, pid)
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestMakeRunStopsWholeOnOneSignal starts `make run` as the README does and
// stops it by one signal to one process: SIGTERM or SIGINT to make's process
// alone (GNU make passes SIGTERM on to its recipe, not SIGINT), or SIGTERM to
// the stack's pid its "ready" line gives. Nothing is left: not the stack, not
// DynamoDB Local's JVM, no port taken. A second `make run` on the same ports
// while the first runs says which stack holds them and touches nothing.
func TestMakeRunStopsWholeOnOneSignal(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "shopstream-local")
	for _, tc := range []struct {
		name   string
		sig    syscall.Signal
		toMake bool
	}{
		{"SIGTERM to make", syscall.SIGTERM, true},
		{"SIGINT to make", syscall.SIGINT, true},
		{"SIGTERM to the stack", syscall.SIGTERM, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ports, env := stackPorts(t)
			env = append(env, "LOCAL_BIN="+bin)
			m := startMakeRun(t, env)
			if m.stackPid == 0 || m.jvmPid == 0 {
				t.Fatalf("got stack pid %d and DynamoDB Local pid %d, want both logged", m.stackPid, m.jvmPid)
			}

			if tc.sig == syscall.SIGTERM && tc.toMake {
				second := exec.Command("make", "run")
				second.Dir = repoRoot(t)
				second.Env = append(os.Environ(), env...)
				out, err := second.CombinedOutput()
				for _, want := range []string{"a local stack is already running", "pid " + strconv.Itoa(m.stackPid), m.apiURL, "kill " + strconv.Itoa(m.stackPid)} {
					if !strings.Contains(string(out), want) {
						t.Errorf("second make run: got %s, want it to say %q", out, want)
					}
				}
				if err == nil {
					t.Error("second make run: got exit status 0, want a failure")
				}
				if !alive(m.stackPid) || !alive(m.jvmPid) {
					t.Fatal("the first stack died when the second was refused")
				}
			}

			target := m.cmd.Process.Pid
			if !tc.toMake {
				target = m.stackPid
			}
			if err := syscall.Kill(target, tc.sig); err != nil {
				t.Fatal(err)
			}
			waitGone(t, "make", m.cmd.Process.Pid)
			waitGone(t, "the stack", m.stackPid)
			waitGone(t, "DynamoDB Local", m.jvmPid)
			select {
			case <-m.done:
			case <-time.After(30 * time.Second):
				t.Fatal("make not reaped 30s after the stop")
			}
			out := m.out.String()
			ws := m.cmd.ProcessState.Sys().(syscall.WaitStatus)
			if tc.toMake {
				// GNU make ends by the signal it was sent, once its recipe
				// has ended, and says nothing of an error when that recipe
				// exited 0.
				if !ws.Signaled() || ws.Signal() != tc.sig {
					t.Errorf("make: got %v, want ended by %v", m.cmd.ProcessState, tc.sig)
				}
			} else if !ws.Exited() || ws.ExitStatus() != 0 {
				t.Errorf("make: got %v, want exit status 0", m.cmd.ProcessState)
			}
			if strings.Contains(out, "make: ***") && strings.Contains(out, "Error") {
				t.Errorf("make reported an error; the stack must exit 0 on a clean stop:\n%s", out)
			}
			if !strings.Contains(out, `"msg":"stopping"`) {
				t.Errorf("no stopping line:\n%s", out)
			}
			for _, port := range ports {
				l, err := net.Listen("tcp", addr(port))
				if err != nil {
					t.Errorf("port %d after the stop: %v", port, err)
					continue
				}
				l.Close()
			}
		})
	}
}
