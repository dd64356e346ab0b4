// Package freeport picks TCP ports on 127.0.0.1 for the servers the tests
// start (PostgreSQL, Vault), below the kernel's ephemeral range.
//
// A port the kernel hands out for "127.0.0.1:0" comes from the ephemeral
// range, the same range it takes the source ports of outgoing connections
// from. A server that binds it seconds later (a Vault node binds its
// cluster port, PORT+1, only once it is unsealed and has joined) could
// find it taken by any connection of the test run in the meantime. Below
// that range only servers bind, and a random pick checked free at the time
// collides only with another test's pick of the same port.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// low is the lowest port Ports picks: above the well-known and most
// registered services' ports that a machine may run.
const low = 20000

// Ports returns a port p such that p, p+1, ..., p+n-1 are all free on
// 127.0.0.1 now, picked at random below the ephemeral range.
func Ports(n int) (int, error) {
	if n < 1 {
		return 0, errors.New("freeport: need at least one port")
	}
	high := ephemeralStart()
	if high-n <= low {
		return 0, fmt.Errorf("freeport: no room below the ephemeral range (from %d)", high)
	}
	for range 200 {
		p := low + rand.IntN(high-n-low)
		if free(p, n) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("freeport: no %d free ports in a row below %d", n, high)
}

// free reports whether ports p to p+n-1 can all be bound now.
func free(p, n int) bool {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+i))
		if err != nil {
			return false
		}
		ls = append(ls, l)
	}
	return true
}

// ephemeralStart returns the first port of the kernel's ephemeral range
// (Linux's ip_local_port_range; 32768, its default, elsewhere).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 32768
	}
	p, err := strconv.Atoi(f[0])
	if err != nil || p <= low {
		return 32768
	}
	return p
}
