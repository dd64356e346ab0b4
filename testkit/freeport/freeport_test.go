package freeport

import (
	"net"
	"strconv"
	"testing"
)

// TestPorts: the ports picked are below the ephemeral range and free: each
// can be listened on right after.
func TestPorts(t *testing.T) {
	high := ephemeralStart()
	for _, n := range []int{1, 2, 3} {
		p, err := Ports(n)
		if err != nil {
			t.Fatal(err)
		}
		if p < low || p+n > high {
			t.Fatalf("Ports(%d) = %d, want within [%d, %d)", n, p, low, high)
		}
		for i := range n {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+i))
			if err != nil {
				t.Fatalf("port %d of Ports(%d): %v", p+i, n, err)
			}
			l.Close()
		}
	}
	if _, err := Ports(0); err == nil {
		t.Fatal("Ports(0) picked a port")
	}
}

// TestPortsSkipsTaken: a port held by a listener is not free.
func TestPortsSkipsTaken(t *testing.T) {
	p, err := Ports(2)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if free(p, 2) {
		t.Fatalf("ports %d and %d free with a listener on %d", p, p+1, p+1)
	}
	if !free(p, 1) {
		t.Fatalf("port %d not free, with nothing on it", p)
	}
}
