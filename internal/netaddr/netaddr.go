// Package netaddr holds the checks of network addresses the commands
// share.
package netaddr

import "net"

// IsLoopback reports whether addr (host:port) is on the loopback
// interface: "localhost" or a loopback IP.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
