// Package crashpoint names the durable steps of shredd (root epoch, re-key
// chunk, forget commit, key creation, log append, checkpoint, token
// creation, backup) so that tests can kill the process at each one.
//
// In a release binary Hit does nothing and Enabled is false: the hook is
// compiled in only with the build tag "crashpoints" (crashpoint_on.go). A
// test binary built with that tag reads SHREDD_TEST_CRASH_AT (one step name:
// the process SIGKILLs itself the first time it reaches that step) or
// SHREDD_TEST_CRASH_RANDOM ("P/SEED": at every step, kill with probability
// P, for soak tests) at start-up.
package crashpoint

// Enabled reports whether this binary was built with the crashpoints tag.
const Enabled = enabled
