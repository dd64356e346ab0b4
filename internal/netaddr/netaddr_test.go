package netaddr

import "testing"

func TestIsLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7750": true, "127.8.9.10:1": true, "[::1]:80": true, "localhost:1": true,
		"0.0.0.0:7750": false, "[::]:1": false, "10.0.0.1:80": false, "example.com:80": false,
		"127.0.0.1": false, "": false, "localhost.example.com:1": false,
	} {
		if got := IsLoopback(addr); got != want {
			t.Errorf("IsLoopback(%q) = %v, want %v", addr, got, want)
		}
	}
}
