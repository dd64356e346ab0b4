package journal

// SignedEntries returns the entries of s, for the tests.
func SignedEntries(s Signed) [][]byte { return s.entries }
