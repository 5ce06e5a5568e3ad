package ports

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeIsBelowTheEphemeralRange: the port is free to listen on, and it
// is not one the kernel would hand an outgoing connection.
func TestFreeIsBelowTheEphemeralRange(t *testing.T) {
	top := ephemeralStart()
	for range 20 {
		p, err := Free()
		if err != nil {
			t.Fatal(err)
		}
		if p < lowest || p >= top {
			t.Fatalf("port %d outside [%d, %d)", p, lowest, top)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		l.Close()
	}
}
