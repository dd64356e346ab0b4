package registry

// AppendFrame is appendFrame, for the benchmarks of package registry_test
// (the plain append loop writes the very bytes the WAL writes).
func AppendFrame(buf, key []byte, first uint64, regs []*Registration) []byte {
	return appendFrame(buf, key, first, regs)
}
