// Package ports finds a free TCP port on 127.0.0.1 for a process started
// later to bind. A port the kernel hands out for ":0" is an ephemeral one,
// which any outgoing connection may take as its source port between the
// pick and the bind (a busy machine running tests does that); Free picks
// below the ephemeral range instead, where only listeners go.
package ports

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// lowest is the first port Free considers.
const lowest = 10000

// Free returns a port nobody listens on now, below the kernel's ephemeral
// range (Linux's ip_local_port_range; 32768 when it cannot be read).
func Free() (int, error) {
	top := ephemeralStart()
	for range 64 {
		p := lowest + rand.IntN(top-lowest)
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue // taken
		}
		_ = l.Close()
		return p, nil
	}
	return 0, fmt.Errorf("find a free port: 64 ports between %d and %d taken", lowest, top)
}

// ephemeralStart is the first port of the kernel's ephemeral range.
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) < 1 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil || n <= lowest+1000 {
		return 32768
	}
	return n
}
